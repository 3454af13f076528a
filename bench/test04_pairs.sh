#!/usr/bin/env bash
# The text-to-video SingleStream TEST04 pair, run again and again in a finished workflow
# folder: the performance run and the TEST04 run forced, then verified; prints each ratio
# and the two runs' p90 latencies (ns). Run alone on the machine:
#   bench/test04_pairs.sh <finished workflow folder> <label> <iterations>
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$1"
B=cpu-2c-diffusers/tiny-wan-t2v/SingleStream
for i in $(seq 1 "$3"); do
    "$here/.venv/bin/snakemake" --cores all --forcerun "results/runs/$B/performance" "results/compliance/$B/TEST04" \
        --until compliance_verify >/dev/null 2>&1
    p90() { grep '90.00 percentile' "$1" | head -1 | awk '{print $NF}'; }
    echo "$2 $i $(grep ratio "results/compliance/$B/TEST04/verify_performance.txt")" \
        "$(p90 "results/runs/$B/performance/mlperf_log_summary.txt") $(p90 "results/runs/$B/TEST04/mlperf_log_summary.txt")"
done
