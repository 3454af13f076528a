"""The measurement pair (stages/pair.py): a performance run and TEST04 measured as one job, and
measured again where both runs were VALID but the ratio broke the limit.

The LoadGen runs here are written by a stand-in for the child process (``Runs``), which writes
the two detail-log values TEST04 reads: what is under test is the attempt logic and its record,
not LoadGen (tests/test_compliance_test04.py runs the pair with real LoadGen processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlperf_repro.benchmarks import load_round
from mlperf_repro.errors import UserError
from mlperf_repro.stages.pair import measurement_pair_job

TEST04 = load_round("v6.0").compliance_test("TEST04", "wan-2.2-t2v-a14b")
LIMIT = TEST04["max_speedup"]["Offline"]


class Runs:
    """Writes each run's detail log from a script of attempts: (reference samples/s, audited
    samples/s, reference validity, audited validity) per attempt."""

    def __init__(self, script: list[tuple[float, float, str, str]]):
        self.script = script
        self.calls: list[dict] = []

    def __call__(self, job: dict, request: Path) -> None:
        self.calls.append(job)
        attempt = (len(self.calls) - 1) // 2
        reference, audited, ref_valid, audit_valid = self.script[attempt]
        is_audit = "audit_config" in job
        out = Path(job["out_dir"])
        out.mkdir(parents=True)
        records = [
            {"key": "result_samples_per_second", "value": audited if is_audit else reference},
            {"key": "result_validity", "value": audit_valid if is_audit else ref_valid},
        ]
        (out / "mlperf_log_detail.txt").write_text("".join(f":::MLLOG {json.dumps(r)}\n" for r in records))
        assert request.parent.is_dir()


CEILING = 1.5


def pair(tmp_path: Path, runs: Runs, attempts: int = 3) -> dict:
    base = tmp_path / "Offline" / "TEST04_pair"
    return measurement_pair_job(
        run={"model_dir": str(tmp_path / "model"), "user_conf": "user.conf"},
        performance={"dataset_file": "perf.txt"},
        audited={"dataset_file": "perf.txt", "audit_config": "*.*.performance_issue_same = 1\n"},
        test="TEST04",
        scenario="Offline",
        rules_test=TEST04,
        attempts=attempts,
        noise_ceiling=CEILING,
        performance_out=str(base / "performance"),
        audited_out=str(base / "TEST04"),
        attempts_out=str(base / "attempts"),
        run_child=runs,
    )


def test_a_pair_that_passes_is_measured_once(tmp_path):
    runs = Runs([(20.0, 20.5, "VALID", "VALID")])
    result = pair(tmp_path, runs)
    assert result["passed"] and result["packaged_attempt"] == 1 and len(runs.calls) == 2
    # The performance run first, then the audited run (with the audit.config), back to back.
    assert "audit_config" not in runs.calls[0] and "audit_config" in runs.calls[1]
    assert runs.calls[0]["mode"] == runs.calls[1]["mode"] == "performance"
    record = json.loads((tmp_path / "Offline/TEST04_pair/attempts/attempts.json").read_text())
    assert record == result and not list((tmp_path / "Offline/TEST04_pair/attempts").glob("attempt*/"))


def test_the_machines_drift_is_measured_again_and_every_attempt_is_kept(tmp_path):
    """The failure of the default run on 2026-12-05: the performance run at 18.69 videos/s,
    the audited one at 21.95 (1.1743x): measured again, the pair passes."""
    runs = Runs([(18.69, 21.95, "VALID", "VALID"), (21.4, 21.9, "VALID", "VALID")])
    result = pair(tmp_path, runs)
    assert result["passed"] and result["packaged_attempt"] == 2
    assert [round(a["speedup"], 4) for a in result["attempts"]] == [1.1744, 1.0234]
    kept = tmp_path / "Offline/TEST04_pair/attempts/attempt1"
    assert sorted(p.name for p in kept.iterdir()) == ["TEST04", "performance"]
    assert "18.69" in (kept / "performance" / "mlperf_log_detail.txt").read_text()
    assert "21.4" in (tmp_path / "Offline/TEST04_pair/performance/mlperf_log_detail.txt").read_text()


def test_a_caching_sut_fails_at_once(tmp_path):
    """20x is no machine's noise; and a cache that outlived the attempt would serve the next
    attempt's performance run too (it would pass), so there is no next attempt."""
    runs = Runs([(20.0, 400.0, "VALID", "VALID"), (400.0, 400.0, "VALID", "VALID")])
    result = pair(tmp_path, runs)
    assert not result["passed"] and len(result["attempts"]) == 1 and len(runs.calls) == 2
    assert result["noise_ceiling"] == CEILING


def test_a_sut_faster_every_time_within_the_noise_band_fails_every_attempt(tmp_path):
    runs = Runs([(20.0, 25.0, "VALID", "VALID")] * 3)
    result = pair(tmp_path, runs)
    assert not result["passed"] and len(result["attempts"]) == 3 and len(runs.calls) == 6


def test_a_pair_whose_runs_are_not_both_valid_is_not_measured_again(tmp_path):
    """An INVALID run is not the machine's noise (a caching SUT's audited run runs out of queries)."""
    runs = Runs([(20.0, 40.0, "VALID", "INVALID")] * 3)
    result = pair(tmp_path, runs)
    assert not result["passed"] and len(result["attempts"]) == 1


def test_no_attempt_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="measurement_attempts is 0"):
        pair(tmp_path, Runs([]), attempts=0)


outcome = st.tuples(
    st.floats(min_value=1.0, max_value=100.0),
    st.floats(min_value=0.5, max_value=3.0),  # the audited run's speed, relative to the reference
    st.sampled_from(["VALID", "INVALID"]),
    st.sampled_from(["VALID", "INVALID"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(outcome, min_size=1, max_size=5), attempts=st.integers(min_value=1, max_value=5))
def test_the_pair_stops_at_the_first_pass_or_invalid_run_and_packages_the_last(tmp_path_factory, script, attempts):
    """Any sequence of outcomes: the job measures until a pair passes, fails beyond the noise
    band (a run not VALID, or a ratio at the ceiling), or the attempts are spent; it packages the
    last attempt and keeps every earlier one."""
    script = [(ref, ref * rel, a, b) for ref, rel, a, b in script]
    script += [script[-1]] * attempts  # the machine goes on as it was last seen
    tmp = tmp_path_factory.mktemp("pair")
    result = pair(tmp, Runs(script), attempts)
    n = len(result["attempts"])
    assert 1 <= n <= attempts
    for k, (ref, audited, ref_valid, audit_valid) in enumerate(script[:n], start=1):
        seen = result["attempts"][k - 1]
        passed = audited / ref < LIMIT and ref_valid == audit_valid == "VALID"
        assert seen["passed"] == passed and seen["attempt"] == k
        last = k == n
        # Measured again exactly when it failed within the noise band, both runs VALID, and
        # attempts were left.
        noise = audited / ref < CEILING and ref_valid == audit_valid == "VALID"
        assert last == (passed or not noise or k == attempts)
        assert (tmp / f"Offline/TEST04_pair/attempts/attempt{k}").is_dir() == (not last)
    assert result["packaged_attempt"] == n and result["passed"] == result["attempts"][-1]["passed"]
