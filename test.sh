#!/usr/bin/env bash
# The whole test suite (the README's test command; `./install.sh --test --quark --vbench` first).
# Two pytest runs:
#   1. the tests judged on latency or on comparing two runs' performance (marker `exclusive`:
#      Server/Interactive VALID, TEST04) or needing the cores to themselves (the trainer's
#      bit-exact rebuild), one at a time on an otherwise idle machine; they
#      build the end-to-end run (tests/conftest.py e2e_workdir) the second run reads;
#   2. everything else on three pytest-xdist workers: 2 cores, and the SLURM tests' worker
#      mostly waits on jobs that sleep.
# Both run even if the first fails; the exit status is the first failure's. Arguments go to
# both pytest runs (e.g. ./test.sh -x).
set -uo pipefail
cd "$(dirname "$0")"

home=$(mktemp -d "${TMPDIR:-/tmp}/mlperf-repro-e2e.XXXXXX")
trap 'rm -rf "$home"' EXIT
export MLPERF_REPRO_E2E_HOME=$home

status=0
run() {
    .venv/bin/python -m pytest "$@"
    local rc=$?
    # 5: no test selected (arguments that select none in one of the two runs)
    if [ "$rc" != 0 ] && [ "$rc" != 5 ] && [ "$status" = 0 ]; then status=$rc; fi
}
run -m exclusive "$@"
run -m "not exclusive" -n 3 --dist loadfile "$@"
exit "$status"
