"""Our LiveCodeBench scorer agrees with the reference (MLCommons' parse_code + lcb_runner's
check_correctness) on every entry of tests/lcb_corpus.py: the reference's verdicts were recorded
by ``bench/accuracy_reference.py --record`` into tests/data/lcb_reference_corpus.json, so this
runs without the reference code. Entries in lcb_corpus.JUSTIFIED may differ (documented)."""

from __future__ import annotations

import json
from pathlib import Path

import lcb_corpus
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlperf_repro.accuracy.livecodebench import TestSuite, extract_code, grade, grade_many, parse_tests

RECORD = Path(__file__).parent / "data" / "lcb_reference_corpus.json"


def test_the_record_covers_the_corpus():
    record = json.loads(RECORD.read_text())
    ids = [e["id"] for e in lcb_corpus.corpus()]
    assert len(ids) >= 300
    assert sorted(record["verdicts"]) == sorted(ids), "re-record: bench/accuracy_reference.py --record"
    assert record["reference"]["timeout_s"] == lcb_corpus.TIMEOUT_S


def test_our_verdicts_are_the_reference_verdicts():
    recorded = json.loads(RECORD.read_text())["verdicts"]
    entries = lcb_corpus.corpus()
    suites = {name: parse_tests(lcb_corpus.problem_columns(name), name) for name in lcb_corpus.PROBLEMS}
    items = [(extract_code(e["output"]), suites[e["problem"]]) for e in entries]
    verdicts = grade_many(items, timeout_s=lcb_corpus.TIMEOUT_S)
    differ = [
        f"{e['id']}: ours {v.passed} ({v.reason}), reference {recorded[e['id']]['passed']} ({recorded[e['id']]['why']})"
        for e, v in zip(entries, verdicts)
        if v.passed != recorded[e["id"]]["passed"] and e["id"] not in lcb_corpus.JUSTIFIED
    ]
    assert not differ, "\n".join(differ)


@settings(max_examples=20, deadline=None)
@given(
    st.integers(-(10**6), 10**6),
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from(["", " ", "  \n", "\n\n", "\t \n"]),
)
def test_numbers_compare_as_decimals_and_trailing_blanks_do_not_count(value, scale, form, tail):
    """A line is compared as text, else as a list of Decimals, after stripping the whole text and
    each line: any exact form of the expected number passes, with any trailing blanks; the next
    number fails."""
    number = value / 10**scale
    printed = [repr(number), f"{number:.{scale + 3}f}", f"{number:e}", f"{number:E}"][form]
    suite = TestSuite(["\n"], [repr(number) + "\n"])
    assert grade(f"print({printed + tail!r})", suite, timeout_s=lcb_corpus.TIMEOUT_S).passed
    off = repr((value + 1) / 10**scale)
    assert not grade(f"print({off!r})", suite, timeout_s=lcb_corpus.TIMEOUT_S).passed


@pytest.mark.parametrize("output", ["", "no code here", "<|channel|>final<|message|>```python\n```<|return|>"])
def test_outputs_without_a_program_fail_without_running(output):
    code = extract_code(output)
    assert not code
    assert grade(code, TestSuite(["1\n"], ["1\n"])).reason == "no code extracted from the output"
