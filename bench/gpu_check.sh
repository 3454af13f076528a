#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py) on a lent GPU machine whose image has torch, transformers,
# pandas and safetensors but no Quark and no network. Here, first:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl amd-quark==0.13 onnxslim==0.1.98
# then run this script there with .whl carried. Arguments go to gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
site=/tmp/gpu-check-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
# quark_tool runs the runner with MLPERF_REPRO_QUARK_ENV/bin/python and no PYTHONPATH: a wrapper
# Python that sees the image's packages and the carried wheels.
env_dir=/tmp/gpu-check-quark-env
mkdir -p "$env_dir/bin"
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$site" "$(command -v python3)" >"$env_dir/bin/python"
chmod +x "$env_dir/bin/python"
export MLPERF_REPRO_QUARK_ENV=$env_dir PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
# One architecture for Quark's JIT-built CUDA kernels (Hopper), all cores for the build.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-$(nproc)}
# Eager fake-quantize: inductor's max-autotune compile per shape would spend the lease.
export QUARK_DISABLE_COMPILE=${QUARK_DISABLE_COMPILE:-1}
nvidia-smi -L || true
exec python3 bench/gpu_check.py "$@"
