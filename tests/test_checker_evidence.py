"""The rules that redo a record from the evidence beside it: a verify file's verdict from its
own numbers and the round's thresholds, a detail log's verdict and settings from its own
records, a record LoadGen writes once written once; and the evidence map itself (every
field a parser reads has an entry, docs/checker.md shows the map)."""

from __future__ import annotations

import datetime
import json
import re
import shutil
from pathlib import Path

import pytest
from tree_factory import BENCH, SUBMITTER, SYSTEM, build_tree, make_runs, patch_detail
from tree_factory import RULES as ROUND

from mlperf_repro.check import evidence
from mlperf_repro.check.rules.verdicts import VERIFY_FILES, read_verify
from mlperf_repro.check.tree import check_tree
from mlperf_repro.loadgen_logs import read_detail

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
        ({"entries": 762}, "the result's accuracy run (accuracy/mlperf_log_detail.txt) logged 1525 samples"),
        ({"entries": 1527, "dups": 2}, None),  # (a duplicated entry counted apart)
    ],
)
def test_test01_accuracy_counts_are_redone(change, said):
    from mlperf_repro.check.rules.verdicts import _test01_accuracy

    spec = VERIFY_FILES[("TEST01", "verify_accuracy.txt")]
    record = read_verify(spec, TEST01_ACCURACY.format(**{**TEST01_OK, **change}))

    class _Ctx:
        test_scale = False

        def rel(self, path):
            return str(path)

    class _Result:
        facts = None

        def detail(self, kind):  # the accuracy run's log: 1,525 samples
            return {"qsl_reported_total_count": 1525, "effective_accuracy_sample_count": 1525}

        def log_path(self, kind):
            return "accuracy/mlperf_log_detail.txt"

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
        "`.venv/bin/python -m mlperf_repro.check.evidence_doc --write docs/checker.md`"
    )


# -- mutations generated from the map ------------------------------------------------------------------

PERF_LOG = "performance/run_1/mlperf_log_detail.txt"


def _perturbed(value) -> list:
    """The values a careless or dishonest edit would leave: a number moved up and down, the
    other boolean, other text."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, (int, float)):
        return [value * 3 + 7, value // 3 if isinstance(value, int) else value / 3]
    return [f"{value} (edited)"] if isinstance(value, str) else []


def _records(path: Path) -> dict:
    return {
        json.loads(line[8:])["key"]: json.loads(line[8:])["value"]
        for line in path.read_text().splitlines()
        if line.startswith(":::MLLOG")
    }


def _mapped_detail_fields(records: dict) -> list[str]:
    """The performance log's fields the map says are derived or cross-checked (error), present in the log."""
    return sorted(
        key
        for key in records
        if any(
            e.how != evidence.TRUSTED and e.severity == "error" and e.rule != "user-conf"
            for e in evidence.entries_for("mlperf_log_detail.txt", key)
        )
    )


# Mutations of mapped fields the checker does not catch yet, each with the reason: the map's
# entry holds for another log of the kind or for one direction only. The test fails when one
# of these is caught (shrink the list) and when anything else is missed.
ALL = ("Offline", "Server", "Interactive")
KNOWN_GAPS = {
    "generated_query_duration": (
        ("Offline",),
        "Offline: checked only against min_duration (Server: against the completed rate too)",
    ),
    "qsl_reported_performance_count": (ALL, "checked only where no performance_sample_count override is set"),
    "qsl_reported_total_count": (ALL, "checked in the accuracy run's log; the performance run's is not compared"),
    "result_token_throughput_with_loadgen_overhead": (ALL, "LoadGen 6.0.15's summary of these runs does not print it"),
    # Offline: LoadGen sets these itself (no requested_* twin) and its summary prints no
    # token early-stopping block, so nothing else in the tree records them.
    "early_stopping_ttft_result": (("Offline",), "an Offline summary prints no TTFT early-stopping block"),
    "early_stopping_tpot_result": (("Offline",), "an Offline summary prints no TPOT early-stopping block"),
    "effective_target_latency_ns": (("Offline",), "Offline logs no requested target latency to compare with"),
    "effective_target_latency_percentile": (("Offline",), "Offline logs no requested percentile to compare with"),
}


@pytest.mark.parametrize("scenario", ["Offline", "Server", "Interactive"])
def test_each_mapped_field_of_a_detail_log_changed_alone_is_caught(good_tree, tmp_path, scenario):
    """For every field of the performance log that the map marks derived or cross-checked, the
    value changed in that one record (nothing else edited) is an error naming the log or its
    result folder; and the same record written twice with two values is one too."""
    log = good_tree / RESULTS / scenario / PERF_LOG
    records = _records(log)
    fields = _mapped_detail_fields(records)
    assert len(fields) > 40, fields
    missed = []
    for key in fields:
        for i, value in enumerate(_perturbed(records[key])):
            for duplicate in (False, True):
                if value == records[key]:
                    continue
                copy = tmp_path / f"{key}-{i}-{duplicate}"
                shutil.copytree(good_tree, copy)
                _set_record(copy / RESULTS / scenario / PERF_LOG, key, value, duplicate=duplicate)
                found = [f for f in errors(copy) if f"{RESULTS}/{scenario}" in f.path]
                if not found:
                    missed.append((key, f"{key} = {value!r} ({'written twice' if duplicate else 'changed'})"))
                shutil.rmtree(copy)
    gaps = {key for key, (scenarios, _why) in KNOWN_GAPS.items() if scenario in scenarios}
    unexpected = [shown for key, shown in missed if key not in gaps]
    assert unexpected == [], f"mutations of mapped fields nobody caught: {unexpected}"
    closed = [key for key in gaps if key in fields and key not in {k for k, _ in missed}]
    assert closed == [], f"now caught, take them off KNOWN_GAPS: {closed}"


@pytest.mark.parametrize(
    ("scenario", "relative", "key"),
    [
        ("Server", PERF_LOG, "result_min_duration_met"),
        ("Offline", PERF_LOG, "requested_qsl_rng_seed"),
        ("Interactive", PERF_LOG, "result_first_token_99.00_percentile_latency_ns"),
        ("Offline", PERF_LOG, "effective_test_mode"),
        ("Server", PERF_LOG, "effective_accuracy_sample_count"),  # LoadGen 6.0.6 and later
    ],
)
def test_a_record_loadgen_always_writes_removed(tree, scenario, relative, key):
    path = tree / RESULTS / scenario / relative
    path.write_text("".join(line for line in path.read_text().splitlines(True) if f'"key": "{key}"' not in line))
    found = errors(tree, "log-records-present")
    assert len(found) == 1 and key in found[0].message, [f.line() for f in errors(tree)]


@pytest.mark.parametrize(
    "label",
    [
        "Result is",
        "qsl_rng_seed",
        "99.00 percentile first token latency (ns)",
        "Scheduled samples per second",
        "Performance constraints satisfied",
    ],
)
def test_a_line_loadgens_summary_always_prints_removed(tree, label):
    path = tree / RESULTS / "Server/performance/run_1/mlperf_log_summary.txt"
    path.write_text("".join(line for line in path.read_text().splitlines(True) if not line.strip().startswith(label)))
    found = errors(tree, "log-records-present")
    assert len(found) == 1 and label in found[0].message and found[0].path.endswith("mlperf_log_summary.txt"), [
        f.line() for f in errors(tree)
    ]


# -- any text in a verify file or a detail log (hypothesis) -------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mlperf_repro.check.rules.log_evidence import repeated_records  # noqa: E402

_NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "nan", "-inf", "1e999", "0x10", "１２", "1,000", "True", "None"]),
)
_LINES = st.one_of(
    st.text(max_size=40),
    st.tuples(
        st.sampled_from(
            [
                "Mean output tokens: {}",
                "Min threshold: {}",
                "Max threshold: {}",
                "Total samples: {}",
                "Min output tokens: {}",
                "Accuracy score: {}",
                "Accuracy threshold: {}",
                "'exact_match': {}",
                "Loaded {} log entries",
                "num_perf_log_entries = {}",
                "num_perf_log_qsl_idx_match = {}",
                "num_missing_qsl_idxs = {}",
                "Reference score = {}",
                "Test score = {}",
                "reference score = {}",
                "test score = {}",
                "ratio = {}",
                "Min check pass: {}",
                "Accuracy check pass: {}",
                "tolerance = {}%",
                "num_matched = {}",
            ]
        ),
        _NUMBERS,
    ).map(lambda pair: pair[0].format(pair[1])),
    st.sampled_from(["TEST PASS", "TEST FAIL", "TEST FAIL: Test score invalid"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_LINES, max_size=14), st.sampled_from(sorted(VERIFY_FILES)))
def test_any_verify_file_is_read_or_judged_never_a_fault(good_tree, tmp_path_factory, lines, which):
    """A verify file of any lines, fields of any value: read without raising, and the tree's
    check reports findings, never a checker fault (the rule stopping on a value)."""
    spec = VERIFY_FILES[which]
    text = "\n".join(lines) + "\n"
    record = read_verify(spec, text)
    assert set(record) <= set(spec.fields)
    root = tmp_path_factory.mktemp("verify") / "tree"
    shutil.copytree(good_tree, root)
    result = _gpt_oss_tree(root, {}) if spec.test in ("TEST07", "TEST09") else root / RESULTS / "Offline"
    (result / spec.test).mkdir(exist_ok=True)
    (result / spec.test / spec.name).write_text(text)
    findings = check_tree(root, ROUND)
    assert not [f for f in findings if f.rule == "checker-fault"], [
        f.line() for f in findings if f.rule == "checker-fault"
    ]


_MLLOG_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.sampled_from(["result_validity", "effective_test_mode", "loaded_qsl_set", "x"]), _MLLOG_VALUES
            ).map(lambda kv: ":::MLLOG " + json.dumps({"key": kv[0], "value": kv[1], "metadata": {}})),
            st.text(max_size=30).map(lambda t: ":::MLLOG " + t),
        ),
        max_size=12,
    )
)
def test_repeated_records_reads_any_log(lines):
    found = repeated_records(lines)
    for key, values in found.items():
        assert len(values) > 1 and len(set(values)) == len(values), (key, values)


def test_an_accuracy_run_of_another_sut(tree):
    patch_detail(tree / RESULTS / "Server/accuracy/mlperf_log_detail.txt", {"sut_name": "OtherSUT"})
    found = only_rule(tree, "settings-evidence", "Server/accuracy")
    assert "OtherSUT" in found[0].message


# -- defects a fresh reviewer planted in published trees (issue 50), here on synthetic ones -------------


def test_a_verify_file_stating_both_verdicts(tree):
    lines = TEST09_FILE.format(**TEST09).replace("TEST PASS", "TEST FAIL\nTEST PASS")
    _gpt_oss_tree(tree, {"TEST09/verify_output_len.txt": lines})
    assert any("states both TEST PASS and TEST FAIL" in f.message for f in _verify_findings(tree))


def test_a_first_token_check_skipped_outside_offline(tree):
    path = tree / RESULTS / "Server/TEST06/verify_accuracy.txt"
    path.write_text(path.read_text().replace("First token check pass: True", "First token check pass: Skipped"))
    found = only_rule(tree, "verify-evidence", "Server/TEST06")
    assert "Offline only" in found[0].message


def test_a_test07_final_score_that_is_not_its_accuracy_score(tree):
    text = TEST07_FILE.format(**TEST07) + "FINAL SCORE: 59.60% (118.00/198.00)\n"
    _gpt_oss_tree(tree, {"TEST07/verify_accuracy.txt": text})
    assert any("FINAL SCORE: 59.6%" in f.message for f in _verify_findings(tree))


def test_a_test09_mean_its_own_run_does_not_give(tree):
    result = _gpt_oss_tree(tree, {})
    run = result / "TEST09" / "performance" / "run_1"
    run.mkdir(parents=True)
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
        shutil.copyfile(result / "performance/run_1" / name, run / name)
    records = _records(run / "mlperf_log_detail.txt")
    mean = records["result_tokens_per_second"] / records["result_samples_per_second"]
    good = {**TEST09, "mean": f"{mean:.2f}", "mean2": f"{mean:.2f}", "low": 0, "high": 10**6}
    (result / "TEST09" / "verify_output_len.txt").write_text(TEST09_FILE.format(**good))
    assert not [f for f in _verify_findings(tree) if "tokens per sample" in f.message]
    forged = {**good, "mean": f"{mean * 1.2:.2f}", "mean2": f"{mean * 1.2:.2f}"}
    (result / "TEST09" / "verify_output_len.txt").write_text(TEST09_FILE.format(**forged))
    assert any("tokens per sample" in f.message for f in _verify_findings(tree))


def test_a_record_written_again_flagged_as_a_warning(tree):
    # The official checker reads the first record, ours the last: a second one with another value,
    # flagged is_warning, is still a second record of a key LoadGen writes once.
    path = tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt"
    lines = path.read_text().splitlines()
    original = next(line for line in lines if '"key": "effective_qsl_rng_seed"' in line)
    record = json.loads(original[8:])
    record["value"], record["metadata"] = 1, {"is_error": False, "is_warning": True}
    path.write_text("\n".join([*lines, ":::MLLOG " + json.dumps(record)]) + "\n")
    assert [f for f in errors(tree) if f.rule == "log-records-once" and "effective_qsl_rng_seed" in f.message]


def test_an_accuracy_hash_that_is_not_a_sha256(tree):
    path = tree / RESULTS / "Interactive/accuracy/accuracy.txt"
    path.write_text(re.sub(r"hash=\w+", "hash=TODO", path.read_text()))
    found = only_rule(tree, "accuracy-log", "Interactive/accuracy/accuracy.txt")
    assert "not a sha256" in found[0].message


def test_a_classification_score_of_fewer_samples_than_the_run_scored(tree):
    """total= is the samples scored: not the accuracy run's count is another set's score."""
    path = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    detail = (tree / RESULTS / "Offline/accuracy/mlperf_log_detail.txt").read_text()
    issued = int(re.search(r'"key": "qsl_reported_total_count", "value": (\d+)', detail).group(1))
    path.write_text(path.read_text() + f"accuracy=50.000%, good={issued // 2}, total={issued * 2}\n")
    found = only_rule(tree, "accuracy-evidence", "Offline/accuracy/accuracy.txt")
    assert any(f"total={issued * 2} samples" in f.message for f in found), [f.line() for f in found]
    path.write_text(
        re.sub(r"accuracy=50.000%.*", f"accuracy=50.000%, good={issued // 2}, total={issued}", path.read_text())
    )
    assert errors(tree) == []


@pytest.mark.parametrize(("wer", "accuracy", "flagged"), [("3.51", "97.89", True), ("2.1479", "97.8521", False)])
def test_a_word_error_rate_beside_an_accuracy_it_does_not_give(tree, wer, accuracy, flagged):
    path = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    path.write_text(path.read_text() + f"Word Error Rate: {wer}%, accuracy={accuracy}%\n")
    found = [f for f in errors(tree) if f.rule == "accuracy-evidence" and "Word Error Rate" in f.message]
    assert len(found) == (1 if flagged else 0), [f.line() for f in errors(tree)]


def test_a_classification_accuracy_its_counts_do_not_give(tree):
    path = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    path.write_text(path.read_text() + "accuracy=76.078%, good=37000, total=50000\n")
    found = only_rule(tree, "accuracy-evidence", "Offline/accuracy/accuracy.txt")
    assert "good=37000" in found[0].message


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"result_completed_samples_per_sec": 10**9}, "exceeds result_scheduled_samples_per_sec"),
        ({"effective_target_latency_percentile": 0.9}, "judges Server at 0.99"),
    ],
)
def test_server_rates_and_percentile_against_the_schedule_and_the_round(tree, values, said):
    patch_detail(tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt", values)
    found = errors(tree, "validity-evidence")
    assert any(said in f.message for f in found), [f.line() for f in errors(tree)]


def test_an_accuracy_entry_whose_token_count_is_not_its_data(tree):
    path = tree / RESULTS / "Server/accuracy/mlperf_log_accuracy.json"
    text = path.read_text()
    count = re.search(r'"token_count"\s*:\s*(\d+)', text)
    path.write_text(text[: count.start(1)] + str(int(count.group(1)) * 2 + 1) + text[count.end(1) :])
    found = [f for f in errors(tree) if f.rule == "accuracy-duplicates"]
    assert found and "token_count" in found[0].message, [f.line() for f in errors(tree)]


def test_a_verify_file_without_a_line_the_reference_writes(tree):
    text = "\n".join(line for line in TEST07_FILE.format(**TEST07).splitlines() if "Accuracy threshold" not in line)
    _gpt_oss_tree(tree, {"TEST07/verify_accuracy.txt": text + "\n"})
    assert any("lacks the line(s)" in f.message and "accuracy_threshold" in f.message for f in _verify_findings(tree))


def test_a_check_line_false_beside_test_pass(tree):
    _gpt_oss_tree(tree, {"TEST09/verify_output_len.txt": TEST09_FILE.format(**{**TEST09, "max_ok": False})})
    assert any("Max check pass: False" in f.message for f in _verify_findings(tree))


# -- a detail log against its own clock --------------------------------------------------------------


def _logged(path: Path, key: str):
    return read_detail(path)[key]


def test_an_offline_run_shortened_on_paper_keeps_its_clock(tree):
    # The latency and the rate redone for a run 3 s shorter; the power window still says how long it took.
    path = tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt"
    detail = read_detail(path)
    shorter = int(detail["result_max_latency_ns"] - 3e9)
    patch_detail(
        path,
        {
            "result_max_latency_ns": shorter,
            "result_samples_per_second": round(detail["generated_samples_per_query"] / (shorter / 1e9), 4),
            "power_end": detail["power_end"],
        },
    )
    found = only_rule(tree, "clock-evidence", "Offline/performance")
    assert "an Offline run ends with its last sample" in found[0].message


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"generated_query_duration": 10**13}, "generated_query_duration 1e+13 is longer than the run's window"),
        ({"result_max_latency_ns": 10**13, "result_99.90_percentile_latency_ns": 10**13}, "is longer than"),
        ({"power_begin": "yesterday"}, "is not a time as LoadGen writes it"),
        ({"power_begin": "12-07-2099 10:00:00.000"}, "is before power_begin"),
    ],
)
def test_a_server_run_against_its_clock(tree, values, said):
    path = tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt"
    patch_detail(path, {**values, "power_end": _logged(path, "power_end")})
    found = errors(tree, "clock-evidence")
    assert len(found) == 1 and said in found[0].message and "Server/performance" in found[0].path, found


@pytest.mark.parametrize(
    ("scenario", "key"),
    [("Offline", "result_tokens_per_second"), ("Server", "result_completed_tokens_per_second")],
)
@pytest.mark.parametrize("raised", [1.1, 1.04])
def test_a_token_rate_the_scored_output_length_does_not_give(tree, scenario, key, raised):
    # The benchmark's metric raised 10% (or 4%: the published runs agree within 2.3%) in the log.
    path = tree / RESULTS / f"{scenario}/performance/run_1/mlperf_log_detail.txt"
    patch_detail(path, {key: round(_logged(path, key) * raised, 3)})
    found = only_rule(tree, "output-length-evidence", f"{scenario}/performance")
    assert "tokens_per_sample" in found[0].message


def test_one_scenarios_output_length_raised_with_its_scores(tree):
    """Offline's tokens/s and its accuracy.txt's token counts raised 8% together: they agree,
    but the model's other accuracy runs on the system score the dataset 8% shorter."""
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    text = txt.read_text()
    tokens = float(re.search(r"'tokens_per_sample':\s*'?([\d.]+)", text).group(1))
    count = float(re.search(r"'gen_num':\s*'?([\d.]+)", text).group(1))
    text = re.sub(r"('tokens_per_sample':\s*'?)[\d.]+", rf"\g<1>{tokens * 1.08:.1f}", text)
    text = re.sub(r"('gen_tok_len':\s*'?)[\d.]+", rf"\g<1>{round(tokens * 1.08 * count)}", text)
    txt.write_text(text)
    path = tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt"
    patch_detail(path, {"result_tokens_per_second": round(_logged(path, "result_tokens_per_second") * 1.08, 3)})
    found = [f for f in errors(tree, "output-length-evidence") if "other accuracy runs" in f.message]
    assert [f.path for f in found] == [f"{RESULTS}/Offline/accuracy/accuracy.txt"], [f.line() for f in errors(tree)]


def test_a_mean_outside_its_own_minimum_and_maximum(tree):
    # The mean first-token latency lowered below the fastest first token (summary alike).
    path = tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt"
    fastest = _logged(path, "result_first_token_min_latency_ns")
    patch_detail(path, {"result_first_token_mean_latency_ns": fastest // 2})
    found = only_rule(tree, "validity-evidence", "Server/performance")
    assert "result_first_token_mean_latency_ns" in found[0].message


def test_an_early_stopping_estimate_above_the_longest_latency():
    from mlperf_repro.check.rules.log_evidence import _percentile_problems

    for scenario, estimate, longest in (
        ("SingleStream", "early_stopping_latency_ss", "result_max_latency_ns"),
        ("MultiStream", "early_stopping_latency_ms", "result_max_query_latency_ns"),
    ):
        assert _percentile_problems({"effective_scenario": scenario, estimate: 10, longest: 10}) == []
        (said,) = _percentile_problems({"effective_scenario": scenario, estimate: 11, longest: 10})
        assert estimate in said and "one of the run's latencies" in said


def test_a_compliance_runs_log_is_held_to_its_own_figures(tree, runs):
    # The TEST06 run's log kept in its folder, its percentiles edited out of order.
    log = tree / RESULTS / "Server/TEST06/mlperf_log_detail.txt"
    shutil.copyfile(runs[("Server", "TEST06")] / "mlperf_log_detail.txt", log)
    assert errors(tree) == []
    patch_detail(log, {"result_50.00_percentile_latency_ns": 10**15})
    found = only_rule(tree, "validity-evidence", "Server/TEST06")
    assert "result_50.00_percentile_latency_ns" in found[0].message


# -- the gpt-oss evaluator's report against its own sums ------------------------------------------------


def _score_report(rows: list[tuple[str, int, int, int]], exact_match: str | None = None) -> str:
    """A report as the gpt-oss evaluator prints it, from (dataset, correct, total, repeats)."""
    score = sum(c / r for _, c, _t, r in rows)
    best = sum(t / r for _, _c, t, r in rows)
    correct, total = sum(c for _, c, _t, _r in rows), sum(t for _, _c, t, _r in rows)
    lines = [
        f"Total samples evaluated: {total}",
        f"Overall raw accuracy: {100 * correct / total:.2f}% ({correct}/{total})",
    ]
    lines += ["Dataset                    Correct    Total  Repeats      Score   Accuracy"]
    lines += [f"{n:<26} {c:>7} {t:>8} {r:>8} {c / r:>10.2f} {100 * c / t:>9.2f}%" for n, c, t, r in rows]
    lines += [f"FINAL SCORE: {100 * score / best:.2f}% ({score:.2f}/{best:.2f})", ""]
    lines.append(f"'exact_match': {exact_match or f'{100 * score / best:.3f}'}")
    return "\n".join(lines) + "\n"


_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["aime25", "gpqa_diamond", "livecodebench_v6", "math500"]),
        st.integers(0, 4000),
        st.integers(200, 4000),  # the published sets hold 240 to 3,165 answers
        st.integers(1, 8),
    ).filter(lambda row: row[1] <= row[2]),
    min_size=1,
    max_size=4,
    unique_by=lambda row: row[0],
)


@settings(max_examples=200, deadline=None)
@given(rows=_ROWS)
def test_a_report_that_adds_up_passes(rows):
    from mlperf_repro.check.rules.accuracy import score_report_problems

    assert score_report_problems(_score_report(rows)) == []


@settings(max_examples=200, deadline=None)
@given(rows=_ROWS, raise_by=st.floats(0.1, 40))
def test_a_score_printed_for_the_checker_above_its_report_is_caught(rows, raise_by):
    from mlperf_repro.check.rules.accuracy import score_report_problems

    score = sum(c / r for _, c, _t, r in rows) / sum(t / r for _, _c, t, r in rows)
    found = score_report_problems(_score_report(rows, f"{100 * score + raise_by:.3f}"))
    assert any("exact_match" in p for p in found), found


@settings(max_examples=200, deadline=None)
@given(rows=_ROWS, which=st.integers(0, 3), more=st.integers(1, 500))
def test_a_dataset_row_edited_alone_is_caught(rows, which, more):
    from mlperf_repro.check.rules.accuracy import score_report_problems

    text = _score_report(rows)
    name, correct, total, repeats = rows[which % len(rows)]
    line = next(x for x in text.splitlines() if x.startswith(name))
    edited = line.replace(f" {correct:>7} ", f" {correct + more:>7} ", 1)
    assert score_report_problems(text.replace(line, edited, 1)) != []


@settings(max_examples=100, deadline=None)
@given(
    rows=_ROWS, which=st.sampled_from(["Total samples evaluated: ", "Overall raw accuracy: "]), more=st.integers(1, 99)
)
def test_a_reports_sample_counts_edited_alone_are_caught(rows, which, more):
    from mlperf_repro.check.rules.accuracy import score_report_problems

    text = _score_report(rows)
    line = next(x for x in text.splitlines() if x.startswith(which))
    number = re.search(r"(\d+)\)?$", line).group(1)
    edited = (
        line[: len(line) - len(number) - line.endswith(")")]
        + str(int(number) + more)
        + (")" if line.endswith(")") else "")
    )
    assert score_report_problems(text.replace(line, edited, 1)) != []


def test_a_report_of_fewer_samples_than_the_accuracy_run(tree):
    """A dataset dropped from the report, every sum redone: the accuracy run scored more."""
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    detail = (tree / RESULTS / "Offline/accuracy/mlperf_log_detail.txt").read_text()
    issued = int(re.search(r'"key": "qsl_reported_total_count", "value": (\d+)', detail).group(1))
    original = txt.read_text()
    txt.write_text(_score_report([("aime25", issued // 2, issued, 8)]) + original)
    assert [f for f in errors(tree) if f.rule == "accuracy-evidence"] == []
    txt.write_text(_score_report([("aime25", issued // 2, issued - 1, 8)]) + original)
    found = only_rule(tree, "accuracy-evidence", "Offline/accuracy/accuracy.txt")
    assert any(f"scores {issued - 1} samples" in f.message for f in found), [f.line() for f in found]


def test_an_accuracy_txt_printing_another_score_than_its_report(tree):
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    rows = [("aime25", 204, 240, 8), ("gpqa_diamond", 749, 990, 5)]
    txt.write_text(_score_report(rows, "90.000") + txt.read_text())
    found = only_rule(tree, "accuracy-evidence", "Offline/accuracy/accuracy.txt")
    assert "exact_match" in found[0].message


def test_rouge_scores_without_the_count_they_were_scored_on(tree):
    """Every published ROUGE evaluator prints gen_num beside its scores: a report without it
    scored an unknown set."""
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    text = txt.read_text()
    assert "'gen_num'" in text
    txt.write_text(re.sub(r"'gen_num':\s*'?\d+'?,?\s*", "", text))
    found = [f for f in errors(tree, "accuracy-evidence") if "without gen_num" in f.message]
    assert [f.path for f in found] == [f"{RESULTS}/Offline/accuracy/accuracy.txt"], [f.line() for f in errors(tree)]


COCO = """ Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.37319
 Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.52211
 Average Precision  (AP) @[ IoU=0.75      | area=   all | maxDets=100 ] = 0.40293
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.41818
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = 0.59687
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.62570
mAP=37.319%
"""


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda t: t, None),
        (lambda t: t.replace("mAP=37.319%", "mAP=37.619%"), "mAP=37.619%"),
        (lambda t: t.replace("0.37319", "0.52319").replace("mAP=37.319%", "mAP=52.319%"), "above AP @[ IoU=0.50 ]"),
        (lambda t: t.replace("0.40293", "0.60293"), "IoU=0.75"),
        (lambda t: t.replace("0.59687", "0.69687"), "recall falls"),
        # yolo's evaluator prints three digits: 0.531 and 53.110 agree to what it prints
        (lambda t: t.replace("0.37319", "0.373").replace("mAP=37.319%", "mAP=37.340%"), None),
    ],
)
def test_a_coco_table_against_itself(edit, said):
    from mlperf_repro.check.rules.accuracy import coco_problems

    problems = coco_problems(edit(COCO))
    assert problems == [] if said is None else any(said in p for p in problems), problems


@pytest.mark.parametrize(
    "text, ok",
    [
        ("Accuracy: mean = 0.86018, kidney = 0.9342, tumor = 0.7861", True),
        ("Accuracy: mean = 0.86612, kidney = 0.9346, tumor = 0.7877", False),
        ("Accuracy: mean = 0.90862, threshold = 0.90679 (Passed)\n  - Kidney: 0.94862\n  - Tumor: 0.86862", True),
        ("Accuracy: mean = 0.91862, threshold = 0.90679 (Passed)\n  - Kidney: 0.94862\n  - Tumor: 0.86862", False),
    ],
)
def test_a_kits_mean_is_its_classes_mean(text, ok):
    from mlperf_repro.check.rules.accuracy import kits_problems

    assert (kits_problems(text) == []) == ok


def test_a_multistream_sample_slower_than_its_query():
    from mlperf_repro.check.rules.log_evidence import _percentile_problems

    good = {
        "effective_scenario": "MultiStream",
        "result_mean_latency_ns": 700,
        "result_mean_query_latency_ns": 750,
        "result_99.00_percentile_latency_ns": 900,
        "result_99.00_percentile_per_query_latency_ns": 950,
    }
    assert _percentile_problems(good) == []
    assert any("slowest sample" in p for p in _percentile_problems({**good, "result_mean_query_latency_ns": 650}))
    assert any(
        "slowest sample" in p
        for p in _percentile_problems({**good, "result_99.00_percentile_per_query_latency_ns": 800})
    )


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("AveragePrcisonRl()@[]IoU=0.5:9|ar ml\nmAP%kidneytumor,=-")), max_size=300)
)
def test_any_evaluator_report_is_read_never_a_fault(text):
    from mlperf_repro.check.rules.accuracy import coco_problems, kits_problems

    assert isinstance(coco_problems(text), list) and isinstance(kits_problems(text), list)


def _power_end(path: Path) -> datetime.datetime:
    return datetime.datetime.strptime(_logged(path, "power_end"), "%m-%d-%Y %H:%M:%S.%f")


@pytest.mark.parametrize(
    "line, said",
    [
        ("Sucessfully loaded MLPerf log from /x/llama2-70b-99/Server/TEST06/mlperf_log_accuracy.json.", None),
        ("Loading MLPerf log from /x/llama2-70b-99.9/Server/TEST06/mlperf_log_accuracy.json", None),
        ("Sucessfully loaded MLPerf log from /x/llama2-70b-99/Offline/TEST06/mlperf_log_accuracy.json.", "scenario"),
        ("Loading MLPerf log from /x/resnet/Server/TEST06/mlperf_log_accuracy.json", "another benchmark"),
    ],
    ids=["own", "twin-benchmark", "other-scenario", "other-benchmark"],
)
def test_a_verify_file_names_the_logs_it_loaded(tree, line, said):
    verify = tree / RESULTS / "Server/TEST06/verify_accuracy.txt"
    verify.write_text(line + "\n" + verify.read_text())
    found = [f for f in errors(tree, "verify-evidence") if "says it loaded" in f.message]
    if said is None:
        assert found == [], [f.line() for f in found]
    else:
        assert len(found) == 1 and said in found[0].message, [f.line() for f in found]


@pytest.mark.parametrize("hours_before, flagged", [(8, False), (30, True)])
def test_a_verify_file_logged_before_its_run_ended(tree, runs, hours_before, flagged):
    """A verify file's clock may be another time zone's (published: 8 hours apart), not a day off."""
    run = tree / RESULTS / "Server/TEST06/mlperf_log_detail.txt"
    shutil.copyfile(runs[("Server", "TEST06")] / "mlperf_log_detail.txt", run)
    ended = _power_end(run) - datetime.timedelta(hours=hours_before)
    verify = tree / RESULTS / "Server/TEST06/verify_accuracy.txt"
    verify.write_text(f"[{ended:%Y-%m-%d %H:%M:%S},000 verify.py:10 INFO] Verifying\n" + verify.read_text())
    found = [f for f in errors(tree, "verify-evidence") if "before its TEST06 run ended" in f.message]
    assert bool(found) == flagged, [f.line() for f in errors(tree)]


@pytest.mark.parametrize("factor, said", [(0.95, "shortened on paper"), (1.02, "lengthened on paper")])
def test_a_power_window_its_logger_clock_did_not_run(tree, factor, said):
    """The Offline window (and its max latency, its rate) edited on paper; the logger's own
    clock (each record's time_ms) still runs the real window."""
    path = tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt"
    begin = datetime.datetime.strptime(_logged(path, "power_begin"), "%m-%d-%Y %H:%M:%S.%f")
    longest = _logged(path, "result_max_latency_ns")
    shorter = int(longest * factor)
    end = begin + datetime.timedelta(seconds=shorter / 1e9)
    samples = _logged(path, "generated_samples_per_query")
    patch_detail(
        path,
        {
            "result_max_latency_ns": shorter,
            "power_end": end.strftime("%m-%d-%Y %H:%M:%S.%f")[:-3],
            "result_samples_per_second": round(samples / (shorter / 1e9), 4),
        },
        logger_clock=False,
    )
    found = [f for f in errors(tree, "clock-evidence") if "logger's clock" in f.message]
    assert len(found) == 1 and said in found[0].message, [f.line() for f in errors(tree)]


def test_a_record_an_older_loadgen_does_not_write_is_not_required(tree):
    path = tree / RESULTS / "Server" / PERF_LOG
    patch_detail(path, {"loadgen_version": "5.1.0 @ 0123456789"})
    path.write_text(
        "".join(
            line for line in path.read_text().splitlines(True) if '"key": "effective_accuracy_sample_count"' not in line
        )
    )
    assert [f for f in errors(tree, "log-records-present") if "effective_accuracy_sample_count" in f.message] == []
