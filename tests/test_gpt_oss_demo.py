"""gpt-oss-120b end to end on the CPU: config/examples/gpt-oss-demo.yaml cut to a small DAG
(Offline and Interactive; the demo's stand-in, the shipped checkpoint it acquires; 40-row
files), through the real workflow: the acquisition verified against the checkpoint's manifest,
the gpt-oss parquet layout with GPQA, AIME and LiveCodeBench rows, vLLM sampling at temperature
1.0, LoadGen, the exact-match evaluation (the LiveCodeBench programs run against their tests in
the sandbox), TEST07 on the GPQA compliance file and TEST09 in both scenarios, packaging and our
check. A few minutes on 2 cores. Training the stand-in (the demo's spec, recorded in its
build_report.json) is test_demo_checkpoints.py's: a rebuild reproduces every shipped file.

Interactive is judged on the round's p99 limits (TTFT 2,000 ms, TPOT 15 ms), never relaxed: a
timing outcome, so the file is ``exclusive`` (./test.sh runs it alone, first). LoadGen's early
stopping needs at least 459 queries all within the TPOT limit for a p99 verdict, so the run
issues 480 at 20 queries/s (24 s): alone on 2 cores p99 TPOT was 3.0 ms, p99 TTFT 18.9 ms
(2026-12-06); beside another busy vLLM job it was 160-263 ms (bench/README.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, run_config

from mlperf_repro.benchmarks import load_round
from mlperf_repro.loadgen_logs import read_detail

pytestmark = [pytest.mark.slow, pytest.mark.exclusive]
SYSTEM, BENCH = "cpu-2c-vllm", "tiny-gpt-oss"
RULES = load_round("v6.0")
FACTS = RULES.benchmark("gpt-oss-120b")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    reuse = os.environ.get("MLPERF_REPRO_GPT_OSS_WORKDIR")  # a finished run, for iterating on assertions
    if reuse:
        return Path(reuse)
    config = yaml.safe_load((REPO / "config/examples/gpt-oss-demo.yaml").read_text())
    # The demo's own model entry: the shipped stand-in (trained 200 steps: with three families,
    # fewer leave the AIME registry half-learnt, about 37% sampled at 120 steps, 97% at 200).
    config["datasets"]["gpt-oss-synthetic"]["builtin"]["samples"] = 40
    config["test_scale"].update(
        min_duration_ms=100, min_query_count={"Offline": 40, "Interactive": 480}, performance_sample_count=40
    )
    # Offline issues 1.1 x target_qps x min_duration samples: a target below the real rate
    # (~400 samples/s on 2 cores, faster on a quiet CI machine) ends the run before min_duration,
    # INVALID. Too high a target only makes the run longer: 220 samples here, VALID at any rate
    # under 2,200 samples/s (with 1 s, the 2,200 samples took 6 s alone but 100-250 s beside
    # ./test.sh's other workers, at 20-30 samples/s).
    demo = config["systems"][SYSTEM]["benchmarks"][BENCH]
    config["systems"][SYSTEM]["benchmarks"][BENCH] = {
        "Offline": {"target_qps": 2000},
        "Interactive": demo["Interactive"],
    }
    return run_config(tmp_path_factory.mktemp("gpt-oss"), "gpt-oss", config)


def scenario_dir(work: Path, scenario: str = "Offline") -> Path:
    return work / "results/package/submission/open/MLPerfRepro/results" / SYSTEM / BENCH / scenario


def metric(text: str, name: str) -> float:
    values = [re.match(".*" + FACTS.accuracy["regex"][name] + ".*", line) for line in text.splitlines()]
    found = [float(m.group(1)) for m in values if m]
    assert len(found) == 1, text
    return found[0]


def test_the_stand_in_is_the_shipped_checkpoint_verified(workdir):
    record = json.loads((workdir / "results/acquire/models" / f"{BENCH}.json").read_text())
    assert record["status"] == "verified" and record["source"] == "file://artifacts/models/tiny-gpt-oss"
    assert record["build"]["source"] == "builtin:tiny-gpt-oss"


def test_stand_in_meets_the_round_target_sampled_at_temperature_one(workdir):
    assert FACTS.facts["generation"]["temperature"] == 1.0 and not FACTS.facts["generation"]["greedy"]
    text = (scenario_dir(workdir) / "accuracy" / "accuracy.txt").read_text()
    assert metric(text, "exact_match") >= FACTS.absolute_targets()["exact_match"]
    assert metric(text, "tokens_per_sample") <= FACTS.accuracy["upper_bound"]["tokens_per_sample"]
    assert re.search(r"^hash=[0-9a-f]{64}$", text, re.M)
    # The accuracy run covered the accuracy file (AIME x 8, GPQA x 5 and LiveCodeBench x 3
    # rows), not the performance file.
    rows = pd.read_parquet(workdir / "resources/datasets/gpt-oss-synthetic" / FACTS.facts["dataset"]["accuracy_file"])
    assert set(rows["dataset"]) == {"aime25", "gpqa_diamond", "livecodebench_v6"}
    detail = read_detail(workdir / "results/runs" / SYSTEM / BENCH / "Offline/accuracy/mlperf_log_detail.txt")
    assert int(detail["qsl_reported_total_count"]) == len(rows)
    # The LiveCodeBench rows were scored by running their programs against their tests in the
    # sandbox: the per-family line counts them, and most passed.
    code = re.search(r"^livecodebench_v6: (\d+)/(\d+) correct, repeats 3$", text, re.M)
    assert code, text
    assert int(code.group(2)) == (rows["dataset"] == "livecodebench_v6").sum()
    assert int(code.group(1)) >= 0.8 * int(code.group(2))


def test_interactive_is_valid_within_the_rounds_p99_limits(workdir):
    limits = FACTS.latency_limits_ms("Interactive")
    assert limits == {"ttft": 2000, "tpot": 15}  # the round's, never relaxed for the stand-in
    detail = read_detail(scenario_dir(workdir, "Interactive") / "performance/run_1/mlperf_log_detail.txt")
    assert detail["result_validity"] == "VALID", {k: v for k, v in detail.items() if "early" in k or "valid" in k}
    assert int(detail["result_first_token_99.00_percentile_latency_ns"]) <= limits["ttft"] * 1e6
    assert int(detail["result_time_per_output_token_99.00_percentile_ns"]) <= limits["tpot"] * 1e6
    assert int(detail["result_query_count"]) >= 459  # early stopping's floor for a p99 verdict


@pytest.mark.parametrize("scenario", ["Offline", "Interactive"])
def test_test07_scores_the_whole_compliance_set(workdir, scenario):
    rules = RULES.compliance_test("TEST07")
    folder = scenario_dir(workdir, scenario) / "TEST07"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "accuracy/mlperf_log_accuracy.json",
        "performance/run_1/mlperf_log_detail.txt",
        "performance/run_1/mlperf_log_summary.txt",
        "verify_accuracy.txt",
    ]
    verify = (folder / "verify_accuracy.txt").read_text()
    assert verify.splitlines()[-1] == "TEST PASS"
    assert metric(verify, "exact_match") >= rules["accuracy_threshold"]
    # performance_issue_unique: every row of the GPQA compliance file issued exactly once, all logged.
    rows = pd.read_parquet(workdir / "resources/datasets/gpt-oss-synthetic" / FACTS.facts["dataset"]["compliance_file"])
    assert set(rows["dataset"]) == {"gpqa_diamond"}
    logged = [e["qsl_idx"] for e in json.loads((folder / "accuracy/mlperf_log_accuracy.json").read_text())]
    assert sorted(logged) == list(range(len(rows)))
    detail = read_detail(folder / "performance/run_1/mlperf_log_detail.txt")
    assert str(detail["effective_performance_issue_unique"]).lower() in ("true", "1")


def test_test09_and_our_check(workdir):
    for scenario in ("Offline", "Interactive"):
        verify = (scenario_dir(workdir, scenario) / "TEST09" / "verify_output_len.txt").read_text()
        assert verify.startswith("TEST SCALE") and verify.splitlines()[-1] == "TEST PASS"
    report = (workdir / "results/check/report.txt").read_text()
    assert "NOT SUBMITTABLE" in report and "result: PASS" in report
    failed = json.loads((workdir / "results/package/failed_results.json").read_text())
    assert failed["failed"] == {}
