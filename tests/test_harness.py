"""The LoadGen side of the harness with real LoadGen (one test per process) and a
scripted engine: what reaches LoadGen's logs is what the token-latency contract needs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlperf_repro.loadgen_logs import read_detail, read_summary

CHILD = Path(__file__).with_name("harness_child.py")


def run_child(tmp_path: Path, scenario: str, mode: str, tokens: int = 5) -> tuple[dict, Path]:
    out = tmp_path / f"{scenario}-{mode}"
    result = subprocess.run(
        [sys.executable, str(CHILD), str(out), scenario, mode, str(tokens)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("RECORD "))
    return json.loads(line[7:]), out


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_accuracy_run_reports_full_token_lists(tmp_path, scenario):
    record, out = run_child(tmp_path, scenario, "accuracy")
    assert record["completed_samples"] == 32 and record["loadgen_errors"] == []
    entries = json.loads((out / "mlperf_log_accuracy.json").read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(32))
    for entry in entries:
        data = np.frombuffer(bytes.fromhex(entry["data"]), np.int32)
        assert entry["token_count"] == len(data) == 5
        expected_first = (sum([1, 2, entry["qsl_idx"], entry["qsl_idx"] + 1])) % 1000 + 3
        assert data[0] == expected_first
        if scenario == "Server":
            assert np.frombuffer(bytes.fromhex(entry["token_data"]), np.int32)[0] == data[0]


def test_server_performance_run_is_valid_with_token_latencies(tmp_path):
    record, out = run_child(tmp_path, "Server", "performance")
    detail = read_detail(out / "mlperf_log_detail.txt")
    assert detail["errors"] == []
    assert detail["requested_use_token_latencies"] is True
    assert detail["result_first_token_99.00_percentile_latency_ns"] > 0
    assert read_summary(out / "mlperf_log_summary.txt")["Scenario"] == "Server"
    assert not (out / "audit.config").exists()
    assert (out / "mlperf_log_trace.json").stat().st_size == 0  # tracing off: LoadGen leaves it empty
    # The harness's own samples of the run: it ends with every query and token counted.
    timeline = json.loads((out / "throughput_timeline.json").read_text())
    assert timeline["columns"] == ["seconds", "queries", "tokens"] and timeline["interval_s"] == 0.5
    seconds, queries, tokens = zip(*timeline["samples"])
    assert list(seconds) == sorted(seconds) and list(queries) == sorted(queries)
    assert queries[-1] == record["completed_samples"] and tokens[-1] == record["generated_tokens"]


def test_single_token_answers_are_counted_and_logged_by_loadgen(tmp_path):
    record, out = run_child(tmp_path, "Offline", "accuracy", tokens=1)
    assert record["single_token_outputs"] == 32
    assert record["loadgen_errors"], "LoadGen flags n_tokens <= 1"


def test_a_stray_audit_config_elsewhere_does_not_turn_the_run_into_an_audit(tmp_path):
    (tmp_path / "audit.config").write_text("*.*.mode = 2\n*.*.accuracy_log_sampling_target = 5\n")
    record, out = run_child(tmp_path, "Offline", "accuracy")
    detail = read_detail(out / "mlperf_log_detail.txt")
    assert record["compliance_audit"] is False
    assert detail["effective_test_mode"] == "AccuracyOnly"


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_an_engine_failure_ends_the_test_instead_of_hanging(tmp_path, scenario):
    out = tmp_path / "crash"
    result = subprocess.run(
        [sys.executable, str(CHILD), str(out), scenario, "performance", "5", "fail"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "CRASHED scripted engine failure" in result.stdout
    assert (out / "mlperf_log_summary.txt").is_file()  # LoadGen finished and wrote its logs
