"""Every reader the checker and ``compare`` use, fed broken files: the check answers with
findings and ``compare`` with findings or a clear error (a UserError naming the file), never
a traceback.

A good tree (LoadGen runs, see tree_factory; and an endpoints-harness tree) gets one of its
files replaced by a broken version of itself: cut short, its lines reordered or repeated, a
value of another type, bytes that are not UTF-8, or grown huge. A result whose file cannot
be read is an error of the check, never a silent skip.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_check_endpoints import ROUND as ENDPOINTS_ROUND
from test_check_endpoints import build_endpoints_tree
from tree_factory import BENCH, RULES, SUBMITTER, SYSTEM, build_tree, make_runs

from mlperf_repro.check.rules.compliance import _scaled_band
from mlperf_repro.check.tree import CHECKER_FAULT, check_tree
from mlperf_repro.compare.records import read_submission
from mlperf_repro.errors import UserError
from mlperf_repro.loadgen_logs import parse_summary, read_detail, summary_disagreements
from mlperf_repro.published.loadgen_conf import parse_conf, requested_settings

RESULT = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"
# The files of a LoadGen tree whose readers the rules use.
LOADGEN_FILES = [
    f"{RESULT}/Offline/performance/run_1/mlperf_log_detail.txt",
    f"{RESULT}/Server/performance/run_1/mlperf_log_summary.txt",
    f"{RESULT}/Offline/accuracy/mlperf_log_detail.txt",
    f"{RESULT}/Offline/accuracy/mlperf_log_summary.txt",
    f"{RESULT}/Interactive/accuracy/mlperf_log_accuracy.json",
    f"{RESULT}/Offline/accuracy/accuracy.txt",
    f"{RESULT}/Server/user.conf",
    f"{RESULT}/Offline/measurements.json",
    f"{RESULT}/Server/provenance.json",
    f"{RESULT}/Server/TEST06/verify_accuracy.txt",
    f"{RESULT}/Server/TEST06/accuracy/mlperf_log_accuracy.json",
    f"closed/{SUBMITTER}/systems/{SYSTEM}.json",
]
ENDPOINTS = f"closed/{SUBMITTER}/results/{SYSTEM}/llama3.1-8b/Server"
ENDPOINTS_FILES = [
    f"{ENDPOINTS}/config.yaml",
    f"{ENDPOINTS}/performance/result_summary.json",
    f"{ENDPOINTS}/accuracy/accuracy_results.json",
]
# Random JSON of any type (a value of the wrong type where a reader expects another).
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _retyped(value, draw):
    """``value`` with one node (chosen by the draws) replaced by random JSON."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: _retyped(value[key], draw)}
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], _retyped(value[index], draw), *value[index + 1 :]]
    return draw(JSON_VALUES)


@st.composite
def broken(draw, original: bytes) -> bytes:
    lines = original.splitlines(keepends=True) or [original]
    how = draw(st.sampled_from(["truncate", "reorder", "duplicate", "retype", "not-utf8", "huge", "empty"]))
    if how == "truncate":
        return original[: draw(st.integers(0, max(0, len(original) - 1)))]
    if how == "reorder":
        return b"".join(draw(st.permutations(lines)))
    if how == "duplicate":
        index = draw(st.integers(0, len(lines) - 1))
        return b"".join(lines[: index + 1] + [lines[index]] * draw(st.integers(1, 5)) + lines[index:])
    if how == "retype":
        try:
            return json.dumps(_retyped(json.loads(original), draw)).encode()
        except ValueError:  # a log of JSON lines: retype one record's value
            index = draw(st.integers(0, len(lines) - 1))
            prefix, _, body = lines[index].partition(b"{")
            try:
                record = json.loads(b"{" + body)
            except ValueError:
                return original
            if isinstance(record, dict):
                record["value"] = draw(JSON_VALUES)
            lines[index] = prefix + json.dumps(_retyped(record, draw)).encode() + b"\n"
            return b"".join(lines)
    if how == "not-utf8":
        at = draw(st.integers(0, len(original)))
        return (
            original[:at] + draw(st.sampled_from([b"\xff\xfe", b"\xc3", b"\x80\x80", b"\xed\xa0\x80"])) + original[at:]
        )
    if how == "huge":
        return original + draw(st.sampled_from([b"x" * 3_000_000, (lines[-1] or b"x\n") * 20_000]))
    return b""


@pytest.fixture(scope="module")
def loadgen_tree(tmp_path_factory):
    runs = make_runs(tmp_path_factory.mktemp("loadgen-runs"))
    return build_tree(tmp_path_factory.mktemp("good") / "tree", runs)


@pytest.fixture(scope="module")
def endpoints_tree(tmp_path_factory):
    return build_endpoints_tree(tmp_path_factory.mktemp("endpoints") / "tree")


def _break_one(good: Path, work: Path, relative: str, data) -> Path:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(good, work)
    target = work / relative
    target.write_bytes(data.draw(broken(target.read_bytes())))
    return work


def _assert_findings_only(findings) -> None:
    """Every finding names its rule, file and problem, and none says a rule stopped on a value."""
    assert all(f.rule and f.path and f.message for f in findings)
    assert not [f for f in findings if f.rule == CHECKER_FAULT], [f for f in findings if f.rule == CHECKER_FAULT]


def _compare_reads(tree: Path) -> None:
    try:
        read_submission(tree, "broken")
    except UserError as exc:
        assert str(exc)  # a clear error, never a traceback


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relative=st.sampled_from(LOADGEN_FILES), data=st.data())
def test_a_broken_file_of_a_loadgen_tree_is_a_finding(loadgen_tree, tmp_path, relative, data):
    tree = _break_one(loadgen_tree, tmp_path / "tree", relative, data)
    findings = check_tree(tree, RULES)
    _assert_findings_only(findings)
    _compare_reads(tree)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relative=st.sampled_from(ENDPOINTS_FILES), data=st.data())
def test_a_broken_file_of_an_endpoints_tree_is_a_finding(endpoints_tree, tmp_path, relative, data):
    tree = _break_one(endpoints_tree, tmp_path / "tree", relative, data)
    findings = check_tree(tree, ENDPOINTS_ROUND)
    _assert_findings_only(findings)
    _compare_reads(tree)


def _records(path: Path) -> list[str]:
    return [json.loads(line[8:])["key"] for line in path.read_text().splitlines() if line.startswith(":::MLLOG")]


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_values_in_the_run_logs_are_findings(loadgen_tree, tmp_path, data):
    """Many records of the performance and accuracy logs of a result at once given values
    of any type (the rules read dozens of them)."""
    from tree_factory import patch_detail

    tree = tmp_path / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(loadgen_tree, tree)
    scenario = data.draw(st.sampled_from(["Offline", "Server", "Interactive"]))
    for log in ("performance/run_1/mlperf_log_detail.txt", "accuracy/mlperf_log_detail.txt"):
        path = tree / RESULT / scenario / log
        keys = data.draw(st.lists(st.sampled_from(sorted(set(_records(path)))), max_size=25, unique=True))
        patch_detail(path, {key: data.draw(JSON_VALUES) for key in keys})
    findings = check_tree(tree, RULES)
    _assert_findings_only(findings)
    _compare_reads(tree)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relative=st.sampled_from(ENDPOINTS_FILES), data=st.data())
def test_any_values_in_the_endpoints_files_are_findings(endpoints_tree, tmp_path, relative, data):
    """Several values of one endpoints-harness file at once of any type."""
    import yaml

    tree = tmp_path / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(endpoints_tree, tree)
    path = tree / relative
    loaded = yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())
    for _ in range(data.draw(st.integers(1, 6))):
        loaded = _retyped(loaded, data.draw)
    path.write_text(yaml.safe_dump(loaded) if path.suffix == ".yaml" else json.dumps(loaded))
    findings = check_tree(tree, ENDPOINTS_ROUND)
    _assert_findings_only(findings)
    _compare_reads(tree)


@pytest.mark.parametrize(
    "relative, rule",
    [
        (f"{RESULT}/Offline/performance/run_1/mlperf_log_detail.txt", "loadgen-valid"),
        (f"{RESULT}/Offline/performance/run_1/mlperf_log_summary.txt", "summary-detail"),
        (f"{RESULT}/Offline/accuracy/accuracy.txt", "accuracy-log"),
        (f"{RESULT}/Offline/measurements.json", "measurements"),
        (f"closed/{SUBMITTER}/systems/{SYSTEM}.json", "system-description"),
    ],
)
def test_a_file_that_is_no_longer_text_is_an_error(loadgen_tree, tmp_path, relative, rule):
    """Binary garbage where a record was: the result it belongs to fails, naming the file."""
    tree = tmp_path / "tree"
    shutil.copytree(loadgen_tree, tree)
    (tree / relative).write_bytes(bytes(range(256)) * 8)
    found = [f for f in check_tree(tree, RULES) if f.severity == "error" and f.rule == rule]
    assert any(f.path == relative or f.path.startswith(relative.rsplit("/", 1)[0]) for f in found), found


@given(st.lists(st.text(max_size=80) | st.binary(max_size=80).map(lambda b: b.decode("latin-1")), max_size=30))
def test_log_readers_take_any_lines(lines):
    detail = read_detail([f":::MLLOG {line}\n" if i % 2 else f"{line}\n" for i, line in enumerate(lines)])
    assert isinstance(detail["errors"], list)
    exact = read_detail([f":::MLLOG {line}\n" for line in lines], exact=True)
    summary = "\n".join(lines)
    assert isinstance(parse_summary(summary), dict)
    assert isinstance(summary_disagreements(summary, exact), list)


@given(st.text(max_size=400), st.sampled_from(["Offline", "Server", "SingleStream", "MultiStream", "?"]))
def test_conf_readers_take_any_text(text, scenario):
    lines, problems = parse_conf(text)
    assert all(isinstance(p, str) for p in problems)
    for key, (line, value) in requested_settings(lines, "m", scenario).items():
        assert key.startswith("requested_") and line in lines and value is not None


_NUMBERS = st.floats(allow_nan=True, allow_infinity=True).map(repr) | st.sampled_from(
    ["1e999", "-0", ".", "e", "1.2.3"]
)


@given(
    st.text(max_size=200)
    | st.tuples(_NUMBERS, _NUMBERS).map(lambda ab: f"Mean output tokens: 35.00\nAllowed range: [{ab[0]}, {ab[1]}]\n"),
    st.floats(min_value=1, max_value=1e4),
    st.floats(min_value=1, max_value=1e4),
)
def test_a_test_scale_test09_band_reads_any_text(text, low, high):
    """The band a test-scale TEST09 verify file states: any text gives a finding's message or
    a finite band, never an exception or a band of inf/nan."""
    low, high = min(low, high), max(low, high)
    band = _scaled_band(text, low, high)
    if not isinstance(band, str):
        a, b = band
        assert math.isfinite(a) and math.isfinite(b) and 0 < a <= b
