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
