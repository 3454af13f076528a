#!/usr/bin/env bash
# The text-to-video SingleStream TEST04 measurement pair, run again and again in a finished
# workflow folder: the pair (performance run and TEST04 run, measured again where its ratio
# broke the limit) forced, then verified; prints every attempt's ratio and VALID pair, and the
# packaged runs' p90 latencies (ns). Run alone on the machine:
#   bench/test04_pairs.sh <finished workflow folder> <label> <iterations>
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$1"
B=cpu-2c-diffusers/tiny-wan-t2v/SingleStream
P=results/runs/$B/TEST04_pair
for i in $(seq 1 "$3"); do
    "$here/.venv/bin/snakemake" --cores all --forcerun "$P/attempts" "results/compliance/$B/TEST04" \
        --until compliance_verify >/dev/null 2>&1
    p90() { grep '90.00 percentile' "$1" | head -1 | awk '{print $NF}'; }
    attempts=$("$here/.venv/bin/python" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join(f"{a[\"speedup\"]:.4f}" for a in r["attempts"]))' "$P/attempts/attempts.json")
    echo "$2 $i attempts: $attempts; $(grep ratio "results/compliance/$B/TEST04/verify_performance.txt")" \
        "$(p90 "$P/performance/mlperf_log_summary.txt") $(p90 "$P/TEST04/mlperf_log_summary.txt")"
done
