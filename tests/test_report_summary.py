"""The summary's first lines: the outcome of the run, before any table."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from mlperf_repro.report.summary import verdict_lines

ROW = st.fixed_dictionaries(
    {
        "loadgen_validity": st.sampled_from(["VALID", "INVALID", "", "-"]),
        "accuracy_passed": st.sampled_from(["yes", "NO", ""]),
    }
)


def _check(status: str, errors: int) -> dict:
    finding = {"rule": "r", "path": "p", "message": "m"}
    return {
        "status": status,
        "findings": [dict(finding, severity="error")] * errors + [dict(finding, severity="warning")],
    }


def test_a_passing_test_scale_run_says_so_and_why_it_is_not_submittable():
    rows = [{"loadgen_validity": "VALID", "accuracy_passed": "yes"}] * 5
    lines = verdict_lines(rows, _check("PASS", 0), SimpleNamespace(submittable=False))
    assert lines == [
        "**Submission check: PASS** (0 error(s); results/check/report.txt): "
        "5 of 5 results VALID, 5 of 5 meet their accuracy target.",
        "**NOT SUBMITTABLE: test-scale run (shortened durations, reduced sample counts).**",
    ]


def test_a_failing_check_is_the_first_thing_said():
    rows = [{"loadgen_validity": "VALID", "accuracy_passed": "NO"}, {"loadgen_validity": "INVALID"}]
    lines = verdict_lines(rows, _check("FAIL", 2), SimpleNamespace(submittable=True))
    assert lines == [
        "**Submission check: FAIL** (2 error(s); results/check/report.txt): "
        "1 of 2 results VALID, 0 of 2 meet their accuracy target."
    ]


@given(st.lists(ROW, max_size=12), st.booleans(), st.sampled_from([None, "PASS", "FAIL"]), st.integers(0, 5))
def test_the_counts_are_the_rows(rows, submittable, status, errors):
    check = None if status is None else _check(status, errors)
    lines = verdict_lines(rows, check, SimpleNamespace(submittable=submittable))
    valid = sum(r["loadgen_validity"] == "VALID" for r in rows)
    accurate = sum(r["accuracy_passed"] == "yes" for r in rows)
    assert f"{valid} of {len(rows)} results VALID, {accurate} of {len(rows)} meet" in lines[0]
    assert ("NOT SUBMITTABLE" in lines[-1]) is (not submittable)
    assert lines[0].startswith("**Submission check: " + (status or "not run"))


def test_a_pair_measured_again_is_named_with_every_attempts_ratio(tmp_path, monkeypatch, demo_config):
    """The measurement pairs (stages/pair.py): one measured once says nothing; one measured
    again says so, with each attempt's ratio and which attempt is packaged."""
    import json

    from mlperf_repro.plan import Plan
    from mlperf_repro.report.summary import pair_lines

    monkeypatch.chdir(tmp_path)
    plan = Plan(demo_config)
    (job, test), (other, _) = plan.pair_jobs
    assert test == "TEST04"
    for j, ratios in ((job, [1.1744, 1.0234]), (other, [1.01])):
        record = tmp_path / plan.pair_path("pair_attempts", j.system, j.benchmark, j.scenario) / "attempts.json"
        record.parent.mkdir(parents=True)
        attempts = [{"attempt": k, "speedup": r, "passed": r < 1.1} for k, r in enumerate(ratios, start=1)]
        record.write_text(json.dumps({"attempts": attempts, "passed": True, "packaged_attempt": len(ratios)}))
    (line,) = pair_lines(plan)
    assert line.startswith(f"{job.system} / {job.benchmark} / {job.scenario}: the TEST04 pair was measured 2 times")
    assert "passed on attempt 2" in line and "attempt 1: ratio 1.1744; attempt 2: ratio 1.0234" in line
