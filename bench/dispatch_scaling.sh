#!/usr/bin/env bash
# The split head's scaling on a machine with cores to spare (issue 40), in one call there.
#
#   bench/dispatch_scaling.sh prepare      here, with the package index: the wheels the bench needs
#                                          (LoadGen, msgspec, httptools, uvloop) for CPython 3.10-3.13
#                                          into bench/.scaling/ (about 20 MB, git-ignored: carry it)
#   bench/dispatch_scaling.sh run [OUT]    there, offline: unpacks the wheels for its python3 (no pip
#                                          or venv needed) and runs bench/dispatch.py --only split with
#                                          the head and the SIMULATED endpoints pinned to their own
#                                          cores; the report goes to OUT (default: bench/.scaling/out)
#
# Environment for run: QPS (default 10000), WORKERS (1,2,4,8), SECONDS_PER_RUN (10), REPEAT (1),
# HEAD_CPUS / ENDPOINT_CPUS (default: all but the last 6 cores / the last 6).
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=bench/.scaling
PACKAGES=(mlcommons-loadgen==6.0.15 msgspec==0.23.0 httptools==0.9.0 uvloop==0.23.0)

case "${1:-run}" in
prepare)
    rm -rf "$HERE/wheels"
    mkdir -p "$HERE/wheels"
    for version in 3.10 3.11 3.12 3.13; do
        # A version a package has no wheel for is skipped; run says so if the machine needs it.
        .venv/bin/python -m pip download --quiet --only-binary=:all: --no-deps --python-version "$version" \
            --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
            -d "$HERE/wheels" "${PACKAGES[@]}" || echo "prepare: no complete wheel set for Python $version"
    done
    du -sh "$HERE/wheels"
    ;;
run)
    OUT=${2:-$HERE/out}
    mkdir -p "$OUT"
    PY=${PYTHON:-python3}
    tag=$("$PY" -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
    site="$HERE/site-$tag"
    rm -rf "$site"
    mkdir -p "$site"
    for package in mlcommons_loadgen msgspec httptools uvloop; do
        wheel=$(ls "$HERE"/wheels/${package}-*-"$tag"-*.whl 2>/dev/null | head -1)
        [ -n "$wheel" ] || { echo "run: no $package wheel for $tag in $HERE/wheels (run prepare for this Python)" >&2; exit 2; }
        "$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$site"
    done
    cores=$(nproc)
    if [ "$cores" -lt 8 ]; then echo "run: $cores cores; the scaling run wants 16 (8 at least)" >&2; fi
    head_cpus=${HEAD_CPUS:-0-$((cores - 7))}
    endpoint_cpus=${ENDPOINT_CPUS:-$((cores - 6))-$((cores - 1))}
    PYTHONPATH="$PWD/$site:$PWD/src" "$PY" bench/dispatch.py --only split --policies capacity \
        --qps "${QPS:-10000}" --workers "${WORKERS:-1,2,4,8}" --seconds "${SECONDS_PER_RUN:-10}" \
        --repeat "${REPEAT:-1}" --kill-qps 0 --placement "head=$head_cpus,endpoints=$endpoint_cpus" \
        | tee "$OUT/dispatch_scaling.txt"
    { nproc; lscpu | grep -E 'Model name|^CPU\(s\)'; "$PY" --version; } > "$OUT/machine.txt" 2>&1 || true
    ;;
*)
    echo "usage: bench/dispatch_scaling.sh prepare | run [OUT]" >&2
    exit 2
    ;;
esac
