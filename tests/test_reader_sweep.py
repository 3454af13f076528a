"""Every field of every structured record of a good tree, given each value of an odd type in
turn: the check answers with findings (never a traceback, never a ``checker-fault``) and
``compare`` with records or a clear error.

The hypothesis tests in test_reader_properties.py draw random corruptions; this sweep is
exhaustive over one axis, so "a field of the wrong type" is covered for every field the
trees hold, at every depth, not for the ones a random draw happened to reach (CI once drew
``accuracy_scores: true`` that no local run had).
"""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_check_endpoints import ROUND as ENDPOINTS_ROUND
from test_check_endpoints import build_endpoints_tree
from tree_factory import BENCH, RULES, SUBMITTER, SYSTEM, build_tree, make_runs, patch_detail

from mlperf_repro.check.tree import CHECKER_FAULT, check_tree
from mlperf_repro.compare.records import read_submission
from mlperf_repro.errors import UserError

pytestmark = pytest.mark.slow

# One value of each kind a reader may not expect: absent, boolean, negative, huge, not
# finite, text, an empty list and a non-empty object (the other containers read alike).
# (10**400: a JSON integer that float() cannot hold.)
ODD_VALUES = [None, True, -1, 10**400, math.inf, math.nan, "x", [], {"": None}]

RESULT = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"
ENDPOINTS = f"closed/{SUBMITTER}/results/{SYSTEM}/llama3.1-8b/Server"
ENDPOINTS_FILES = [
    f"{ENDPOINTS}/config.yaml",
    f"{ENDPOINTS}/performance/result_summary.json",
    f"{ENDPOINTS}/accuracy/accuracy_results.json",
]
LOADGEN_JSON_FILES = [
    f"{RESULT}/Offline/measurements.json",
    f"{RESULT}/Server/provenance.json",
    f"closed/{SUBMITTER}/systems/{SYSTEM}.json",
]
SERVER_LOG = f"{RESULT}/Server/performance/run_1/mlperf_log_detail.txt"
# The Offline performance log's records that the Server log also has are swept there once
# (the same readers take them); the accuracy log's all (its own rules read them).
DETAIL_LOGS = [SERVER_LOG, f"{RESULT}/Offline/performance/run_1/mlperf_log_detail.txt"]
DETAIL_LOGS.append(f"{RESULT}/Interactive/accuracy/mlperf_log_detail.txt")


def node_paths(value, prefix=()) -> Iterator[tuple]:
    """The path (keys and indices) of every node below the root."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield (*prefix, key)
        yield from node_paths(child, (*prefix, key))


def replaced(value, path: tuple, new):
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], tuple(rest), new)}
    return [*value[:head], replaced(value[head], tuple(rest), new), *value[head + 1 :]]


def _faults(tree: Path, rules) -> list[str]:
    """What went wrong reading the tree: a traceback or a checker-fault finding."""
    try:
        findings = check_tree(tree, rules)
    except Exception:  # noqa: BLE001
        return [traceback.format_exc(limit=-3)]
    problems = [f.message for f in findings if f.rule == CHECKER_FAULT]
    problems += [
        f"finding without rule, path or message: {f}" for f in findings if not (f.rule and f.path and f.message)
    ]
    try:
        read_submission(tree, "swept")
    except UserError as exc:
        if not str(exc):
            problems.append("compare: an empty error")
    except Exception:  # noqa: BLE001
        problems.append("compare: " + traceback.format_exc(limit=-3))
    return problems


def _sweep_structured(tree: Path, relative: str, rules) -> list[str]:
    path = tree / relative
    original = path.read_bytes()
    as_yaml = path.suffix == ".yaml"
    loaded = yaml.safe_load(original) if as_yaml else json.loads(original)
    failures = []
    try:
        for where in node_paths(loaded):
            for value in ODD_VALUES:
                changed = replaced(loaded, where, value)
                path.write_text(yaml.safe_dump(changed) if as_yaml else json.dumps(changed))
                failures += [f"{'/'.join(map(str, where))} = {value!r}: {p}" for p in _faults(tree, rules)]
    finally:
        path.write_bytes(original)
    return failures


@pytest.fixture(scope="module")
def endpoints_tree(tmp_path_factory):
    return build_endpoints_tree(tmp_path_factory.mktemp("endpoints") / "tree")


@pytest.fixture(scope="module")
def loadgen_tree(tmp_path_factory):
    runs = make_runs(tmp_path_factory.mktemp("loadgen-runs"))
    return build_tree(tmp_path_factory.mktemp("good") / "tree", runs)


def test_the_good_trees_have_no_faults(endpoints_tree, loadgen_tree):
    """The sweep's baseline: both trees read cleanly before anything is changed."""
    assert _faults(endpoints_tree, ENDPOINTS_ROUND) == []
    assert _faults(loadgen_tree, RULES) == []


@pytest.mark.parametrize("relative", ENDPOINTS_FILES)
def test_every_field_of_an_endpoints_file_of_any_type(endpoints_tree, relative):
    failures = _sweep_structured(endpoints_tree, relative, ENDPOINTS_ROUND)
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("relative", LOADGEN_JSON_FILES)
def test_every_field_of_a_loadgen_trees_json_of_any_type(loadgen_tree, relative):
    failures = _sweep_structured(loadgen_tree, relative, RULES)
    assert not failures, "\n".join(failures[:40])


def _record_keys(path: Path) -> set[str]:
    return {json.loads(line[8:])["key"] for line in path.read_text().splitlines() if line.startswith(":::MLLOG")}


@pytest.mark.parametrize("relative", DETAIL_LOGS)
def test_every_record_of_a_detail_log_of_any_type(loadgen_tree, relative):
    """Each MLLOG record's value (and the summary line that prints it) in turn."""
    path = loadgen_tree / relative
    summary = path.with_name("mlperf_log_summary.txt")
    originals = {p: p.read_bytes() for p in (path, summary) if p.is_file()}
    keys = sorted(_record_keys(path))
    if relative == DETAIL_LOGS[1]:
        keys = sorted(set(keys) - _record_keys(loadgen_tree / SERVER_LOG) | {"effective_scenario"})
    failures = []
    try:
        for key in keys:
            for value in ODD_VALUES:
                patch_detail(path, {key: value})
                failures += [f"{key} = {value!r}: {p}" for p in _faults(loadgen_tree, RULES)]
                for p, data in originals.items():
                    p.write_bytes(data)
    finally:
        for p, data in originals.items():
            p.write_bytes(data)
    assert not failures, "\n".join(failures[:40])


def test_a_rule_that_stops_is_an_error_finding_and_the_others_still_run(loadgen_tree, monkeypatch):
    """Outside the test suite a fault is a finding: the tree fails, naming the rule."""
    from mlperf_repro.check.model import RULES as REGISTERED
    from mlperf_repro.check.tree import RAISE_FAULTS_ENV

    def stops(ctx):
        raise KeyError("a value nobody planned for")

    baseline = {(f.rule, f.path, f.message) for f in check_tree(loadgen_tree, RULES)}
    monkeypatch.delenv(RAISE_FAULTS_ENV)
    monkeypatch.setitem(REGISTERED, "stops-on-a-value", stops)
    findings = check_tree(loadgen_tree, RULES)
    faults = [f for f in findings if f.rule == CHECKER_FAULT]
    assert len(faults) == 1 and faults[0].severity == "error"
    assert "'stops-on-a-value' stopped on KeyError" in faults[0].message
    assert faults[0].path == f"closed/{SUBMITTER}"
    assert {(f.rule, f.path, f.message) for f in findings if f.rule != CHECKER_FAULT} == baseline
