"""The rules that redo a record from the evidence beside it: a verify file's verdict from its
own numbers and the round's thresholds, a detail log's verdict and settings from its own
records, a record LoadGen writes once written once; and the evidence map itself (every
field a parser reads has an entry, docs/checker.md shows the map)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tree_factory import BENCH, SUBMITTER, SYSTEM, build_tree, make_runs, patch_detail
from tree_factory import RULES as ROUND

from mlperf_repro.check import evidence
from mlperf_repro.check.rules.verdicts import VERIFY_FILES, read_verify
from mlperf_repro.check.tree import check_tree

RESULTS = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "checker.md"


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("loadgen-runs"))


@pytest.fixture(scope="session")
def good_tree(runs, tmp_path_factory):
    return build_tree(tmp_path_factory.mktemp("good") / "tree", runs)


@pytest.fixture
def tree(good_tree, tmp_path):
    copy = tmp_path / "tree"
    shutil.copytree(good_tree, copy)
    return copy


def errors(root: Path, rule: str | None = None) -> list:
    return [f for f in check_tree(root, ROUND) if f.severity == "error" and (rule is None or f.rule == rule)]


def only_rule(root: Path, rule: str, fragment: str = "") -> list:
    found = errors(root)
    assert found and {f.rule for f in found} == {rule}, [f.line() for f in found]
    assert all(fragment in f.path for f in found), [f.line() for f in found]
    return found


# -- a detail log against itself ----------------------------------------------------------------


def test_a_verdict_the_flags_do_not_give(tree):
    # VALID although LoadGen's own flags say min duration was not met.
    patch_detail(tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt", {"result_min_duration_met": False})
    found = only_rule(tree, "validity-evidence", "Server/performance")
    assert "result_min_duration_met" in found[0].message


@pytest.mark.parametrize(
    ("scenario", "values", "flag"),
    [
        ("Server", {"result_query_count": 3}, "result_min_queries_met"),
        ("Server", {"generated_query_duration": 5_000_000_000}, "result_min_duration_met"),
        (
            "Offline",
            {"result_max_latency_ns": 5_000_000_000, "result_samples_per_second": 4915.2},
            "result_min_duration_met",
        ),
        (
            "Interactive",
            {
                "result_first_token_99.00_percentile_latency_ns": 460_000_000,
                "result_first_token_99.90_percentile_latency_ns": 460_000_000,
                "result_first_token_max_latency_ns": 460_000_000,
            },
            "result_perf_constraints_met",
        ),
    ],
)
def test_a_flag_its_figures_do_not_give(tree, scenario, values, flag):
    patch_detail(tree / RESULTS / f"{scenario}/performance/run_1/mlperf_log_detail.txt", values)
    found = errors(tree, "validity-evidence")
    assert len(found) == 1 and flag in found[0].message and f"{scenario}/performance" in found[0].path, found


def test_an_offline_rate_its_samples_and_duration_do_not_give(tree):
    patch_detail(
        tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt", {"result_samples_per_second": 99999.0}
    )
    found = only_rule(tree, "validity-evidence", "Offline/performance")
    assert "result_samples_per_second" in found[0].message


def test_percentiles_out_of_order(tree):
    patch_detail(
        tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt",
        {"result_50.00_percentile_latency_ns": 10**15},
    )
    found = only_rule(tree, "validity-evidence", "Server/performance")
    assert "result_50.00_percentile_latency_ns" in found[0].message


def _set_record(path: Path, key: str, value, *, duplicate: bool = False) -> None:
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(":::MLLOG") and json.loads(line[8:])["key"] == key:
            record = json.loads(line[8:])
            record["value"] = value
            new = ":::MLLOG " + json.dumps(record)
            if duplicate:
                lines.insert(i + 1, new)
            else:
                lines[i] = new
            break
    path.write_text("\n".join(lines) + "\n")


def test_a_requested_setting_the_run_did_not_use(tree):
    # Only the effective record edited: LoadGen would have logged the request as well.
    _set_record(tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt", "requested_server_target_qps", 5000)
    found = only_rule(tree, "settings-evidence", "Server/performance")
    assert "requested_server_target_qps = 5000" in found[0].message


def test_a_record_written_twice_with_another_value(tree):
    _set_record(
        tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt", "result_validity", "INVALID", duplicate=True
    )
    found = errors(tree, "log-records-once")
    assert len(found) == 1 and "result_validity" in found[0].message


def test_an_accuracy_run_writes_its_per_set_records_once_per_set(tree):
    # LoadGen's accuracy mode loads the QSL set by set: loaded_qsl_set and the query counts repeat.
    path = tree / RESULTS / "Offline/accuracy/mlperf_log_detail.txt"
    _set_record(path, "loaded_qsl_set", [0, 1], duplicate=True)
    _set_record(path, "generated_query_count", 2, duplicate=True)
    assert errors(tree) == []


# -- verify files against their own numbers and the round -------------------------------------------


TEST09_FILE = """================================================================================
TEST09: Verify Output Token Length in Performance Mode
================================================================================
Total samples: {total}
Mean output tokens: {mean}
Min output tokens: 566
Max output tokens: 2777
Verification Results
Mean output tokens: {mean2}
Min threshold: {low}
Max threshold: {high}
Min check pass: {min_ok}
Max check pass: {max_ok}

{verdict}
"""


def _gpt_oss_tree(tree: Path, verify_text: dict[str, str]) -> Path:
    """The llama2 tree's Offline result as a gpt-oss-120b result (its compliance tests are
    TEST07 and TEST09), holding only the verify files given."""
    old = tree / RESULTS
    new = old.parent / "gpt-oss-120b"
    shutil.move(old, new)
    for scenario in ("Server", "Interactive"):
        shutil.rmtree(new / scenario)
    for relative, text in verify_text.items():
        (new / "Offline" / relative).parent.mkdir(parents=True, exist_ok=True)
        (new / "Offline" / relative).write_text(text)
    return new / "Offline"


def _verify_findings(tree: Path) -> list:
    return [f for f in check_tree(tree, ROUND) if f.rule == "verify-evidence"]


TEST09 = dict(
    total=6396,
    mean="1373.08",
    mean2="1373.08",
    low=1150.38,
    high=1406.02,
    min_ok=True,
    max_ok=True,
    verdict="TEST PASS",
)


def test_a_verify_file_consistent_with_the_round_passes(tree):
    _gpt_oss_tree(tree, {"TEST09/verify_output_len.txt": TEST09_FILE.format(**TEST09)})
    assert _verify_findings(tree) == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"mean": "1500.00", "mean2": "1500.00"}, "says TEST PASS, but its own numbers give a fail"),
        ({"high": 1600.0}, "states Max threshold: 1600; v6.0 sets it at 1406.02"),
        ({"low": 1000.0}, "states Min threshold: 1000"),
        ({"mean2": "1380.00"}, "prints Mean output tokens"),
        ({"total": 990}, "Total samples: 990"),
        ({"mean": "3000.00", "mean2": "3000.00", "high": 4000}, "outside its own Min/Max output tokens"),
    ],
)
def test_test09_verdicts_and_thresholds_are_redone(tree, change, said):
    _gpt_oss_tree(tree, {"TEST09/verify_output_len.txt": TEST09_FILE.format(**{**TEST09, **change})})
    found = _verify_findings(tree)
    assert found and any(said in f.message for f in found), [f.line() for f in found]
    assert all(f.path.endswith("TEST09/verify_output_len.txt") for f in found)


TEST07_FILE = """2026-02-18 19:30:22,906 - INFO - Loaded {logged} log entries
'exact_match': {printed}

TEST07 Verification Summary
Accuracy score: {score}
Accuracy threshold: {threshold}
Accuracy check pass: {ok}
{verdict}
"""
TEST07 = dict(logged=990, printed=62.727, score=62.727, threshold=60.698, ok=True, verdict="TEST PASS")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({}, None),
        ({"score": 55.0, "printed": 55.0}, "says TEST PASS, but its own numbers give a fail"),
        ({"score": 55.0, "printed": 55.0, "threshold": 50.0}, "sets TEST07's at 60.698"),
        ({"printed": 70.1}, "for the checker"),
        ({"logged": 6396}, "scored 6396 logged entries"),
    ],
)
def test_test07_verdicts_and_thresholds_are_redone(tree, change, said):
    _gpt_oss_tree(tree, {"TEST07/verify_accuracy.txt": TEST07_FILE.format(**{**TEST07, **change})})
    found = _verify_findings(tree)
    if said is None:
        assert found == []
    else:
        assert any(said in f.message for f in found), [f.line() for f in found]


TEST01_ACCURACY = """num_acc_log_entries = {entries}
num_acc_log_duplicate_keys = {dups}
num_acc_log_data_mismatch = {acc_mismatch}
num_perf_log_entries = {perf}
num_perf_log_qsl_idx_match = {match}
num_perf_log_data_mismatch = {mismatch}
num_missing_qsl_idxs = {missing}
{verdict}
"""
TEST01_OK = dict(entries=1525, dups=0, acc_mismatch=0, perf=64, match=64, mismatch=0, missing=0, verdict="TEST PASS")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({}, None),
        ({"mismatch": 3}, "num_perf_log_data_mismatch = 3"),
        ({"match": 0, "missing": 64}, "num_perf_log_qsl_idx_match = 0"),
        ({"missing": 5}, "each performance-log entry is either matched or missing"),
        ({"acc_mismatch": 2}, "exceeds num_acc_log_duplicate_keys"),
    ],
)
def test_test01_accuracy_counts_are_redone(change, said):
    from mlperf_repro.check.rules.verdicts import _test01_accuracy

    spec = VERIFY_FILES[("TEST01", "verify_accuracy.txt")]
    record = read_verify(spec, TEST01_ACCURACY.format(**{**TEST01_OK, **change}))

    class _Ctx:
        test_scale = False

    class _Result:
        facts = None

    check = _test01_accuracy(record, _Ctx(), _Result(), {})
    said_all = "; ".join(check.failures + check.problems)
    assert (said is None and not said_all) or (said and said in said_all), said_all


# -- the evidence map ------------------------------------------------------------------------------


def test_every_field_the_checker_reads_has_an_entry_in_the_map(tree, runs, tmp_path):
    """The checker over the full-scale tree, a test-scale tree and trees whose every verify file
    is present: each (record, field) a parser read is in the evidence map."""
    small = build_tree(tmp_path / "small", runs, full_scale=False)
    with evidence.reading() as reads:
        check_tree(tree, ROUND)
        check_tree(small, ROUND)
        for spec in VERIFY_FILES.values():
            text = "\n".join(f"{field} = 1" for field in spec.fields)
            read_verify(spec, text)
            for field in spec.fields:
                evidence.note(spec.kind, field)
    assert reads, "the reads were not noted"
    assert evidence.unmapped(reads) == []


def test_the_map_names_a_known_record_and_rule_for_each_entry():
    from mlperf_repro.check.tree import RULES

    for entry in evidence.EVIDENCE:
        assert entry.record in evidence.RECORDS, entry
        assert (entry.rule is None) == (entry.how == evidence.TRUSTED), entry
        assert entry.rule is None or entry.rule in RULES, entry
        assert entry.basis.strip(), entry


def test_docs_show_the_map_as_the_registry_holds_it():
    text = DOCS.read_text()
    start, end = "<!-- evidence-map:start -->", "<!-- evidence-map:end -->"
    assert start in text and end in text, "docs/checker.md lacks the evidence map's markers"
    shown = text.split(start, 1)[1].split(end, 1)[0].strip()
    assert shown == evidence.markdown_table().strip(), (
        "docs/checker.md's evidence map is not the registry's: run "
        "`.venv/bin/python -m mlperf_repro.check.evidence --write docs/checker.md`"
    )
