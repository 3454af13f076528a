"""Compliance verification (TEST06, TEST07, TEST09, TEST04) and the audit.config text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlperf_repro.benchmarks import load_round
from mlperf_repro.compliance import audit_config_text
from mlperf_repro.compliance.verify import (
    trailing_eos,
    verify_test04,
    verify_test06,
    verify_test07,
    verify_test09,
    write_verdict,
)
from mlperf_repro.errors import UserError

ROUND = load_round("v6.0")


def write_log(path, outputs, first_tokens=None, counts=None):
    entries = []
    for i, tokens in enumerate(outputs):
        data = np.asarray(tokens, dtype=np.int32)
        entry = {
            "seq_id": i,
            "qsl_idx": i,
            "data": data.tobytes().hex().upper(),
            "token_count": len(tokens) if counts is None else counts[i],
        }
        first = tokens[:1] if first_tokens is None else [first_tokens[i]]
        entry["token_data"] = np.asarray(first, dtype=np.int32).tobytes().hex().upper()
        entries.append(entry)
    path.write_text(json.dumps(entries))
    return path


def test_audit_config_uses_wildcard_keys_from_the_table():
    text = audit_config_text("TEST06", ROUND.compliance_test("TEST06")["audit_config"])
    lines = [l for l in text.splitlines() if not l.startswith("#")]
    assert lines == [
        "*.*.mode = 2",
        "*.*.accuracy_log_sampling_target = 100",
        "*.*.min_query_count = 100",
        "*.*.min_duration = 0",
        "*.*.sample_concatenate_permutation = 0",
        "*.*.accuracy_log_rng_seed = 720381539243781796",
    ]


def test_test06_passes_and_writes_the_checker_files(tmp_path):
    log = write_log(tmp_path / "log.json", [[5, 6, 7, 2], [9, 8, 2], [4, 4]])
    verdict = verify_test06(log, "Server", eos_token_id=2)
    assert verdict.passed
    write_verdict(verdict, tmp_path / "TEST06", "verify_accuracy.txt", log)
    assert (tmp_path / "TEST06" / "verify_accuracy.txt").read_text().splitlines() == [
        "First token check pass: True",
        "EOS check pass: True",
        "Sample length check pass: True",
        "TEST06 verification complete",
    ]
    assert (tmp_path / "TEST06" / "accuracy" / "mlperf_log_accuracy.json").read_bytes() == log.read_bytes()


def test_test06_offline_skips_the_first_token_check(tmp_path):
    log = write_log(tmp_path / "log.json", [[5, 6, 2]], first_tokens=[99])
    verdict = verify_test06(log, "Offline", eos_token_id=2)
    assert verdict.passed and verdict.lines[0] == "First token check pass: Skipped"
    assert not verify_test06(log, "Interactive", eos_token_id=2).passed


@pytest.mark.parametrize(
    "outputs, counts, failing_line",
    [
        ([[5, 6, 2, 2]], None, "EOS check pass: False"),  # the EOS exploit: padding with EOS
        ([[5, 6, 7]], [4], "Sample length check pass: False"),  # n_tokens does not match the data
    ],
)
def test_test06_failures(tmp_path, outputs, counts, failing_line):
    verdict = verify_test06(write_log(tmp_path / "log.json", outputs, counts=counts), "Server", eos_token_id=2)
    assert not verdict.passed
    assert failing_line in verdict.lines and verdict.lines[-1] == "TEST06 verification failed"


def test_trailing_eos():
    assert trailing_eos([1, 2, 2], 2) == 2 and trailing_eos([2, 1], 2) == 0 and trailing_eos([], 2) == 0


def test_test07_uses_the_benchmark_evaluator_and_threshold(tmp_path):
    log = write_log(tmp_path / "log.json", [[1, 2]])
    threshold = ROUND.compliance_test("TEST07")["accuracy_threshold"]
    assert verify_test07(log, threshold, lambda path: ({"exact_match": 63.737}, "")).lines[-1] == "TEST PASS"
    assert not verify_test07(log, threshold, lambda path: ({"exact_match": 59.0}, "")).passed


def test_test09_output_length_bounds(tmp_path):
    rules = ROUND.compliance_test("TEST09")
    ok = write_log(tmp_path / "ok.json", [[1] * 1200, [1] * 1300])
    short = write_log(tmp_path / "short.json", [[1] * 900, [1] * 1000])
    assert verify_test09(ok, rules["min_output_tokens"], rules["max_output_tokens"]).passed
    verdict = verify_test09(short, rules["min_output_tokens"], rules["max_output_tokens"])
    assert not verdict.passed and verdict.lines[-1] == "TEST FAIL"


def _detail(path, key, value, validity="VALID"):
    records = [{"key": key, "value": value}, {"key": "result_validity", "value": validity}]
    path.write_text("".join(":::MLLOG " + json.dumps(r) + "\n" for r in records))
    return path


def test_test04_rejects_a_cached_speedup(tmp_path):
    limits = ROUND.compliance_test("TEST04")["max_speedup"]
    key = "result_samples_per_second"
    reference = _detail(tmp_path / "ref.txt", key, 10.0)
    assert verify_test04(reference, _detail(tmp_path / "same.txt", key, 10.5), "Offline", limits["Offline"]).passed
    verdict = verify_test04(reference, _detail(tmp_path / "cached.txt", key, 12.0), "Offline", limits["Offline"])
    assert not verdict.passed and verdict.lines[-1].startswith("TEST FAIL: the test run is 1.2000x")
    invalid = verify_test04(reference, _detail(tmp_path / "inv.txt", key, 10.0, "INVALID"), "Offline", 1.1)
    assert not invalid.passed and "Test results are INVALID" in invalid.lines[-1]


def test_test04_compares_single_stream_as_inverse_latency_with_its_wider_limit(tmp_path):
    limit = ROUND.compliance_test("TEST04")["max_speedup"]["SingleStream"]
    key = "early_stopping_latency_ss"
    reference = _detail(tmp_path / "ref.txt", key, 2_000_000_000)  # 2 s per video
    # 1.7 s is 1.18x faster: inside SingleStream's 20%, outside Offline's 10%.
    verdict = verify_test04(reference, _detail(tmp_path / "t.txt", key, 1_700_000_000), "SingleStream", limit)
    assert verdict.passed and abs(verdict.details["speedup"] - 2 / 1.7) < 1e-9
    assert not verify_test04(reference, _detail(tmp_path / "c.txt", key, 1_500_000_000), "SingleStream", limit).passed
    with pytest.raises(UserError, match="no result_samples_per_second"):
        verify_test04(reference, reference, "Offline", 1.1)


def test_test09_at_test_scale_scales_the_band_to_the_models_own_performance_run(tmp_path):
    from mlperf_repro.stages.compliance import verify_job

    rules = ROUND.compliance_test("TEST09")
    run = tmp_path / "TEST09_run"
    run.mkdir()
    write_log(run / "mlperf_log_accuracy.json", [[1] * 20, [1] * 24])  # mean 22 tokens
    (run / "mlperf_log_detail.txt").write_text(
        ":::MLLOG "
        + json.dumps(
            {
                "key": "effective_accuracy_log_sampling_target",
                "value": rules["audit_config"]["accuracy_log_sampling_target"],
            }
        )
    )
    perf = tmp_path / "performance"
    perf.mkdir()
    # The normal run averaged 21 tokens: the band is 0.9 x 21 .. 1.1 x 21 (scaled from 1278.2).
    (perf / "run_record.json").write_text(json.dumps({"generated_tokens": 2100, "completed_samples": 100}))
    assert verify_job(
        "TEST09", str(run), "Offline", str(tmp_path), rules, str(tmp_path / "ok"), performance_run=str(perf)
    )
    text = (tmp_path / "ok" / rules["verify_file"]).read_text()
    assert text.startswith("TEST SCALE") and "NOT SUBMITTABLE" in text and text.splitlines()[-1] == "TEST PASS"
    # Without the scaling (a submission) the same short outputs fail the reference band.
    assert not verify_job("TEST09", str(run), "Offline", str(tmp_path), rules, str(tmp_path / "full"))
    (perf / "run_record.json").write_text(json.dumps({"generated_tokens": 3000, "completed_samples": 100}))
    assert not verify_job(
        "TEST09", str(run), "Offline", str(tmp_path), rules, str(tmp_path / "long"), performance_run=str(perf)
    )
