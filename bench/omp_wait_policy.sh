#!/usr/bin/env bash
# Two multi-threaded jobs on the cores at once, as the suite's xdist workers run them: the
# shipped tiny-llama's bit-exact rebuild (2 threads) and the gpt-oss demo's tests (a vLLM
# engine), with libgomp's default wait policy and with OMP_WAIT_POLICY=PASSIVE, one pair after the other.
# Prints each job's wall seconds and exit status. Run alone on the machine, from the checkout:
#   bench/omp_wait_policy.sh
set -uo pipefail
cd "$(dirname "$0")/.."

pair() {
    local label=$1 start now
    start=$(date +%s.%N)
    (
        t0=$(date +%s.%N)
        .venv/bin/python -m mlperf_repro demo-checkpoints --check tiny-llama >/dev/null 2>&1
        echo "$label trainer rc=$? $(echo "$(date +%s.%N) - $t0" | bc) s"
    ) &
    (
        t0=$(date +%s.%N)
        .venv/bin/python -m pytest -q -p no:randomly -m "slow or not slow" tests/test_gpt_oss_demo.py >/dev/null 2>&1
        echo "$label gpt-oss demo rc=$? $(echo "$(date +%s.%N) - $t0" | bc) s"
    ) &
    wait
    now=$(date +%s.%N)
    echo "$label pair $(echo "$now - $start" | bc) s"
}

# Empty, not unset: tests/conftest.py sets PASSIVE where the variable is absent; libgomp reads
# an empty value as its default (spin a while, then sleep), with a warning on stderr.
OMP_WAIT_POLICY= bash -c "$(declare -f pair); pair default"
OMP_WAIT_POLICY=PASSIVE bash -c "$(declare -f pair); pair PASSIVE"
