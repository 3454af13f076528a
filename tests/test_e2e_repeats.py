"""repeats: N for real (issue 19): the demo at test scale, one scenario (Offline) run twice with
the second run packaged (reusing the end-to-end run's model); the summary and the report show
the spread of the two real LoadGen results, and the two runs' provenance differs only in
timings, which compare says."""

from __future__ import annotations

import csv
import json
import statistics

import pytest
import yaml
from conftest import REPO, run_reusing_e2e

from mlperf_repro.loadgen_logs import read_detail

pytestmark = pytest.mark.slow
SYSTEM, BENCH, SUBMITTER = "cpu-2c-vllm", "tiny-llama-mxfp4", "E2ETest"
RUNS = f"results/runs/{SYSTEM}/{BENCH}/Offline"


def test_offline_twice_shows_its_spread(e2e_workdir, tmp_path):
    config = yaml.safe_load((REPO / "tests/configs/e2e.yaml").read_text())
    scenarios = config["systems"][SYSTEM]["benchmarks"][BENCH]
    config["systems"][SYSTEM]["benchmarks"][BENCH] = {
        "Offline": {**scenarios["Offline"], "repeats": 2, "packaged_repeat": 2}
    }
    work = run_reusing_e2e(e2e_workdir, tmp_path / "run", "repeats", config)

    details = [
        read_detail(work / RUNS / name / "mlperf_log_detail.txt") for name in ("performance", "performance_run_2")
    ]
    results = [float(d["result_tokens_per_second"]) for d in details]
    assert all(d["result_validity"] == "VALID" for d in details) and all(r > 0 for r in results)
    # two LoadGen processes, two measurements (the same queries: the same user.conf and seeds)
    assert details[0]["effective_min_query_count"] == details[1]["effective_min_query_count"]

    (row,) = list(csv.DictReader((work / "results/report/summary.csv").open()))
    assert (row["repeats"], row["packaged_repeat"]) == ("2", "2")
    assert row["result"] == f"{results[1]:.2f}"  # the packaged repeat's result
    assert float(row["repeat_mean"]) == pytest.approx(statistics.fmean(results), abs=0.01)
    assert (row["repeat_min"], row["repeat_max"]) == (f"{min(results):.2f}", f"{max(results):.2f}")
    rel_std = 100 * statistics.stdev(results) / statistics.fmean(results)
    assert float(row["repeat_rel_std_pct"]) == pytest.approx(rel_std, abs=0.01)
    assert float(row["repeat_ci95_low"]) <= float(row["repeat_mean"]) <= float(row["repeat_ci95_high"])

    summary = (work / "results/report/summary.md").read_text()
    assert "Run-to-run spread of the repeated performance runs" in summary
    assert f"| {SYSTEM} | {BENCH} | Offline | Tokens/s | {results[0]:.2f}, {results[1]:.2f} |" in summary
    assert "| 2/2 | run 2 (nearest the mean: run " in summary

    data = json.loads((work / "results/report/summary.json").read_text())
    (spread,) = data["repeats"]
    assert [r["result"] for r in spread["runs"]] == pytest.approx(results)
    assert spread["n"] == 2 and spread["ci95_method"].startswith("Student t")

    # The tree holds the packaged repeat as its performance/run_1, and passes the check.
    packaged = work / f"results/package/submission/open/{SUBMITTER}/results/{SYSTEM}/{BENCH}/Offline"
    assert (packaged / "performance/run_1/mlperf_log_detail.txt").read_bytes() == (
        work / RUNS / "performance_run_2/mlperf_log_detail.txt"
    ).read_bytes()
    assert sorted(p.name for p in (packaged / "performance").iterdir()) == ["run_1"]
    provenance = json.loads((packaged / "provenance.json").read_text())
    assert provenance["performance_repeat"] == {"packaged": 2, "of": 2}
    assert "result: PASS" in (work / "results/check/report.txt").read_text()

    # The report's spread plot is a real image.
    from test_report_html import assert_real_plot

    assert_real_plot((work / f"results/report/html/{SYSTEM}/{BENCH}/Offline/spread.png").read_bytes(), "spread")

    # Two runs of the same config on the same machine: a copy of the tree holding the other repeat
    # (its logs and its own provenance record) compares as the same except timings.
    import shutil

    from mlperf_repro.compare.render import to_markdown
    from mlperf_repro.compare.report import compare_paths

    other = tmp_path / "other"
    shutil.copytree(work / "results/package", other)
    scenario = other / f"submission/open/{SUBMITTER}/results/{SYSTEM}/{BENCH}/Offline"
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
        shutil.copy2(work / RUNS / "performance" / name, scenario / "performance/run_1" / name)
    record = json.loads((scenario / "provenance.json").read_text())
    record["performance"] = json.loads((work / RUNS / "performance/provenance.json").read_text())
    (scenario / "provenance.json").write_text(json.dumps(record, indent=2))
    (comparison,) = compare_paths(str(work / "results/package"), [str(other)])
    assert [c.describe() for row in comparison.rows for c in row.causes] == []
    assert "same except timings" in to_markdown(comparison)
