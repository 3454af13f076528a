"""Speed and memory of ``compare`` on synthetic submission trees.

Builds (in a temporary folder), with LoadGen-format logs and realistic file sizes:
1. two full submission trees: 4 benchmarks x 3 scenarios, with TEST0x folders and a
   `src/` of a few hundred files - compared with each other (target: under 5 s);
2. a published results repository with thousands of results from many submitters, one
   of whose detail logs is very large - compared against a partner tree (target: under
   60 s, memory bounded: the large log is streamed, never loaded whole).
Each timing is reported with the same run's baseline: reading every byte of the inputs
once (the I/O floor), as a ratio.

    .venv/bin/python bench/compare.py [--submitters 25] [--systems 10] [--big-log-mb 200]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mlperf_repro.compare.report import compare_paths

BENCHMARKS = {  # name -> (LoadGen model, scenarios, result field)
    "llama2-70b-99": ("llama2-70b", ("Offline", "Server", "Interactive"), "TEST06"),
    "llama2-70b-99.9": ("llama2-70b", ("Offline", "Server", "Interactive"), "TEST06"),
    "gpt-oss-120b": ("gpt-oss-120b", ("Offline", "Server", "Interactive"), "TEST07"),
    "deepseek-r1": ("deepseek-r1", ("Offline", "Server", "Interactive"), "TEST06"),
}
SEEDS = {
    "qsl_rng_seed": 2465351861681999779,
    "sample_index_rng_seed": 14276810075590677512,
    "schedule_rng_seed": 3936089224930324775,
}


def detail_log(rng: random.Random, scenario: str, model: str) -> str:
    records = [
        ("loadgen_version", "6.0.15 @ 3546c66b9e"),
        ("test_datetime", "2026-02-01T10:00:00Z"),
        ("sut_name", "PySUT"),
        ("effective_scenario", "Offline" if scenario == "Offline" else "Server"),
        ("effective_test_mode", "PerformanceOnly"),
        ("effective_target_qps", 360 + rng.randint(-5, 5)),
        ("effective_min_duration_ms", 600000),
        ("effective_min_query_count", 24576),
        ("effective_samples_per_query", 24576),
        ("effective_performance_sample_count", 24576),
        ("effective_accuracy_sample_count", 24576),
        ("requested_use_token_latencies", True),
        ("result_validity", "VALID"),
        ("result_tokens_per_second", 100000 * rng.uniform(0.95, 1.05)),
        ("result_completed_tokens_per_second", 98000 * rng.uniform(0.95, 1.05)),
        ("result_first_token_99.00_percentile_latency_ns", int(1.2e9 * rng.uniform(0.9, 1.1))),
        ("result_time_per_output_token_99.00_percentile_ns", int(90e6 * rng.uniform(0.9, 1.1))),
    ]
    records += [(f"effective_{k}", v) for k, v in SEEDS.items()]
    # The bulk of a real detail log: bookkeeping records, percentiles, the loaded sample set.
    records += [(f"result_{p:.2f}_percentile_latency_ns", rng.randint(1, 10**9)) for p in range(1, 100)]
    records += [("loaded_qsl_set", [rng.randint(0, 24575) for _ in range(2000)])]
    lines = [
        ":::MLLOG "
        + json.dumps(
            {
                "key": k,
                "value": v,
                "time_ms": 1.0,
                "namespace": "mlperf::logging",
                "event_type": "POINT_IN_TIME",
                "metadata": {"is_error": False, "is_warning": False},
            }
        )
        for k, v in records
    ]
    return "\n".join(lines) + "\n"


FILLER = ":::MLLOG " + json.dumps({"key": "logger_tls_total_log_cas_fail_count", "value": 0, "time_ms": 1.0}) + "\n"


def append_filler(path: Path, megabytes: int) -> None:
    """Grow a detail log to ``megabytes`` without holding it in memory."""
    block = FILLER * (2**20 // len(FILLER))
    with open(path, "a") as handle:
        for _ in range(megabytes):
            handle.write(block)


def write_submission(base: Path, rng: random.Random, systems: int, code_files: int, big_log_mb: int = 0) -> None:
    (base / "src").mkdir(parents=True)
    for i in range(code_files):
        path = base / "src" / f"pkg{i % 10}" / f"module_{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# module {i}\n" + "x = 1\n" * 200)
    (base / "systems").mkdir()
    for s in range(systems):
        system = f"sys{s}"
        (base / "systems" / f"{system}.json").write_text(
            json.dumps(
                {
                    "system_name": system,
                    "number_of_nodes": 1,
                    "accelerators_per_node": 8,
                    "accelerator_model_name": "MI355X",
                    "status": "available",
                    "system_type": "datacenter",
                }
            )
        )
        for bench, (model, scenarios, test) in BENCHMARKS.items():
            for scenario in scenarios:
                folder = base / "results" / system / bench / scenario
                (folder / "performance" / "run_1").mkdir(parents=True)
                (folder / "accuracy").mkdir()
                (folder / test).mkdir()
                (folder / "performance/run_1/mlperf_log_detail.txt").write_text(detail_log(rng, scenario, model))
                if big_log_mb and s == 0 and bench == "llama2-70b-99" and scenario == "Offline":
                    append_filler(folder / "performance/run_1/mlperf_log_detail.txt", big_log_mb)
                (folder / "performance/run_1/mlperf_log_summary.txt").write_text("Result is : VALID\n" * 40)
                (folder / "accuracy/mlperf_log_detail.txt").write_text(detail_log(rng, scenario, model))
                (folder / "accuracy/accuracy.txt").write_text(
                    "{'rouge1': 44.5, 'rouge2': 22.1, 'rougeL': 28.7, 'tokens_per_sample': 295.0}\nhash=ab\n"
                )
                (folder / "user.conf").write_text(f"{model}.{scenario}.target_qps = {rng.randint(300, 380)}\n")
                (folder / "README.md").write_text("reproduce\n")
                (folder / "measurements.json").write_text(json.dumps({"weight_data_types": "mxfp4"}))
                (folder / test / "verify_accuracy.txt").write_text("TEST PASS\n")


def read_all_bytes(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    total += len(chunk)
    return total


def timed(function):
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def compare_in_child(reference: Path, partner: Path) -> tuple[float, int, int]:
    """(seconds, pairs, peak RSS in KiB) of one compare in a fresh process."""
    code = (
        "import json, resource, sys, time\n"
        "from mlperf_repro.compare.report import compare_paths\n"
        "t = time.perf_counter(); (c,) = compare_paths(sys.argv[1], [sys.argv[2]]); t = time.perf_counter() - t\n"
        "print(json.dumps([t, len(c.rows), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(reference), str(partner)], capture_output=True, text=True, check=True
    )
    seconds, pairs, rss = json.loads(out.stdout.strip().splitlines()[-1])
    return seconds, pairs, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submitters", type=int, default=25)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--big-log-mb", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        tmp = Path(tmp)
        for name in ("vendor", "partner"):
            write_submission(tmp / name / "closed" / name.title(), rng, systems=1, code_files=300)
        (comparison,), seconds = timed(lambda: compare_paths(str(tmp / "vendor"), [str(tmp / "partner")]))
        _, floor = timed(lambda: [read_all_bytes(tmp / n) for n in ("vendor", "partner")])
        print(
            f"two trees, 4 benchmarks x 3 scenarios with compliance folders ({len(comparison.rows)} results "
            f"compared): {seconds:.2f} s (target < 5 s); reading every byte once: {floor:.2f} s; "
            f"ratio {seconds / floor:.1f}x"
        )

        repo = tmp / "inference_results_v6.0" / "closed"
        started = time.perf_counter()
        for s in range(args.submitters):
            write_submission(
                repo / f"Org{s}", rng, systems=args.systems, code_files=100, big_log_mb=args.big_log_mb if s == 0 else 0
            )
        built = time.perf_counter() - started
        results = sum(1 for _ in repo.glob("*/results/*/*/*"))
        size = sum(p.stat().st_size for p in repo.rglob("*") if p.is_file())
        seconds, pairs, rss = compare_in_child(repo.parent, tmp / "partner")
        _, floor = timed(lambda: read_all_bytes(repo.parent))
        small_seconds, _, small_rss = compare_in_child(tmp / "vendor", tmp / "partner")
        print(
            f"published repository: {results} results, {size / 2**20:.0f} MiB including one detail log of "
            f"{args.big_log_mb} MiB (built in {built:.0f} s)"
        )
        print(
            f"  compare against a partner: {seconds:.2f} s (target < 60 s); reading every byte once: {floor:.2f} s; "
            f"ratio {seconds / floor:.1f}x; {pairs} pairs"
        )
        print(
            f"  peak RSS of the compare process: {rss / 1024:.0f} MiB, vs {small_rss / 1024:.0f} MiB comparing the "
            f"two small trees: the {args.big_log_mb} MiB log is streamed, not loaded"
        )
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
