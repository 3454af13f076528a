"""Each record belongs to its folder: every log of a result is of the result's scenario, a
compliance folder holds a run with its test's audit.config, and one run is claimed by one
result (or by the results the rules let share it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tree_factory import BENCH, SUBMITTER, SYSTEM, build_tree, make_runs, patch_detail
from tree_factory import RULES as ROUND

from mlperf_repro.check.tree import check_tree

SYSTEM_DIR = f"closed/{SUBMITTER}/results/{SYSTEM}"
RESULTS = f"{SYSTEM_DIR}/{BENCH}"


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


def findings(root: Path, rule: str, severity: str = "error") -> list:
    return [f for f in check_tree(root, ROUND) if f.rule == rule and f.severity == severity]


def errors(root: Path) -> list:
    return [f for f in check_tree(root, ROUND) if f.severity == "error"]


def _with_test06_log(tree: Path, runs, scenario: str = "Server") -> Path:
    """The TEST06 folder keeping its run's detail log, as most published trees do."""
    log = tree / RESULTS / scenario / "TEST06" / "mlperf_log_detail.txt"
    shutil.copyfile(runs[(scenario, "TEST06")] / "mlperf_log_detail.txt", log)
    return log


# -- compliance runs with their test's settings -----------------------------------------------------


def test_a_compliance_run_with_its_tests_audit_config_passes(tree, runs):
    _with_test06_log(tree, runs)
    assert errors(tree) == []


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"effective_accuracy_log_rng_seed": 1}, "effective_accuracy_log_rng_seed = 1"),
        ({"effective_accuracy_log_sampling_target": 10}, "at least that"),
        ({"requested_min_query_count": 5}, "requested_min_query_count = 5"),
        ({"effective_sample_concatenate_permutation": True}, "effective_sample_concatenate_permutation = true"),
        ({"effective_test_mode": "AccuracyOnly"}, "effective_test_mode"),
    ],
)
def test_a_compliance_run_without_its_tests_settings(tree, runs, values, said):
    patch_detail(_with_test06_log(tree, runs), values)
    found = findings(tree, "audit-settings")
    assert len(found) == 1 and said in found[0].message and "not a TEST06 run" in found[0].message, found
    assert found[0].path.endswith("Server/TEST06/mlperf_log_detail.txt")


def test_more_sampled_samples_than_the_test_needs_pass(tree, runs):
    patch_detail(_with_test06_log(tree, runs), {"effective_accuracy_log_sampling_target": 100000})
    assert findings(tree, "audit-settings") == []


def test_the_performance_run_filed_as_the_compliance_run(tree):
    # A TEST folder holding a copy of the result's performance run: not TEST06's settings, and a
    # run claimed twice.
    folder = tree / RESULTS / "Server"
    shutil.copyfile(folder / "performance/run_1/mlperf_log_detail.txt", folder / "TEST06/mlperf_log_detail.txt")
    assert {f.rule for f in errors(tree)} == {"audit-settings", "run-provenance"}
    claimed = findings(tree, "run-provenance")
    assert len(claimed) == 1 and "Server/TEST06" in claimed[0].message


# -- every log of the folder's scenario -------------------------------------------------------------


def test_an_accuracy_folder_copied_from_another_scenario(tree):
    server = tree / RESULTS / "Server"
    shutil.rmtree(server / "accuracy")
    shutil.copytree(tree / RESULTS / "Offline" / "accuracy", server / "accuracy")
    wrong = findings(tree, "scenario-match")
    assert [f.path for f in wrong] == [f"{RESULTS}/Server/accuracy/mlperf_log_detail.txt"]
    assert "LoadGen Offline run" in wrong[0].message
    # ... and the Offline accuracy run is now claimed by two results.
    assert any("Server/accuracy" in f.path for f in findings(tree, "run-provenance"))


def test_a_compliance_run_of_another_scenario(tree, runs):
    shutil.copyfile(
        runs[("Offline", "TEST06")] / "mlperf_log_detail.txt", tree / RESULTS / "Server/TEST06/mlperf_log_detail.txt"
    )
    wrong = findings(tree, "scenario-match")
    assert [f.path for f in wrong] == [f"{RESULTS}/Server/TEST06/mlperf_log_detail.txt"]


# -- one run, one result ------------------------------------------------------------------------------


def _second_system(tree: Path, name: str = "sys2") -> Path:
    systems = tree / f"closed/{SUBMITTER}/systems"
    shutil.copyfile(systems / f"{SYSTEM}.json", systems / f"{name}.json")
    shutil.copytree(tree / SYSTEM_DIR, tree / f"closed/{SUBMITTER}/results/{name}")
    return tree / f"closed/{SUBMITTER}/results/{name}"


def test_a_run_filed_under_two_systems(tree):
    _second_system(tree)
    claimed = findings(tree, "run-provenance")
    logs = {f.path for f in claimed if f.path.endswith("mlperf_log_detail.txt")}
    # Every log of every result, each once, named under the second system.
    assert logs == {
        f"closed/{SUBMITTER}/results/sys2/{BENCH}/{scenario}/{part}/mlperf_log_detail.txt"
        for scenario in ("Offline", "Server", "Interactive")
        for part in ("performance/run_1", "accuracy")
    }
    assert all("one run cannot be both" in f.message for f in claimed if f.path in logs)


def test_one_run_for_both_accuracy_targets_of_a_model_is_allowed(tree):
    # llama2-70b-99 and -99.9 are one model to LoadGen: the run meeting 99.9% serves both.
    shutil.copytree(tree / RESULTS, tree / f"{SYSTEM_DIR}/llama2-70b-99.9")
    assert findings(tree, "run-provenance") == []
    assert findings(tree, "run-provenance", "warning") == []


def _power_begin(path: Path) -> str:
    return next(
        json.loads(line[len(":::MLLOG") :])["value"]
        for line in path.read_text().splitlines()
        if '"key": "power_begin"' in line
    )


def test_one_run_filed_twice_with_one_figure_edited(tree):
    """llama2-70b-99 and -99.9 may share a run; the copy whose tokens/s was raised is still
    that run (same power_begin), with another figure: an error."""
    twin = tree / f"{SYSTEM_DIR}/llama2-70b-99.9"
    shutil.copytree(tree / RESULTS, twin)
    patch_detail(twin / "Server/performance/run_1/mlperf_log_detail.txt", {"result_completed_tokens_per_second": 1.0})
    edited = [f for f in findings(tree, "run-provenance") if "figures" in f.message]
    assert len(edited) == 1 and "result_completed_tokens_per_second" in edited[0].message, [
        f.line() for f in findings(tree, "run-provenance")
    ]


@pytest.mark.parametrize(
    "values",
    [{"test_datetime": "2030-01-01T00:00:00Z"}, {"test_datetime": "2030-01-01T00:00:00Z", "result_max_latency_ns": 7}],
    ids=["redated", "redated-and-edited"],
)
def test_a_run_copied_under_another_system_and_redated(tree, values):
    """A copy re-dated (test_datetime) and with a figure changed still began at the other run's
    power_begin, to the millisecond: one run in two systems."""
    other = _second_system(tree)
    for scenario in ("Offline", "Server", "Interactive"):  # the other system's own runs began elsewhere
        for part in ("performance/run_1", "accuracy"):
            log = other / BENCH / scenario / part / "mlperf_log_detail.txt"
            patch_detail(log, {"power_begin": "01-01-2031 00:00:00.000", "test_datetime": "2031-01-01T00:00:00Z"})
    copied = other / BENCH / "Offline/accuracy/mlperf_log_detail.txt"
    shutil.copyfile(tree / RESULTS / "Offline/accuracy/mlperf_log_detail.txt", copied)
    patch_detail(copied, values)
    assert _power_begin(copied) == _power_begin(tree / RESULTS / "Offline/accuracy/mlperf_log_detail.txt")
    claimed = [f for f in findings(tree, "run-provenance") if f.path.endswith("Offline/accuracy/mlperf_log_detail.txt")]
    assert claimed and "one run cannot be both" in claimed[0].message, [
        f.line() for f in findings(tree, "run-provenance")
    ]


def test_a_power_results_ranging_run_is_another_run(tree):
    """performance/ranging and performance/run_1 are two runs: the same log in both is one run twice."""
    perf = tree / RESULTS / "Offline/performance"
    (perf / "ranging").mkdir()
    shutil.copyfile(perf / "run_1/mlperf_log_detail.txt", perf / "ranging/mlperf_log_detail.txt")
    claimed = findings(tree, "run-provenance")
    assert any("performance/ranging" in f.message + f.path for f in claimed), [f.line() for f in claimed]


def test_one_accuracy_log_scored_two_ways(tree):
    """-99.9 holds -99's accuracy run and log; its accuracy.txt raised a score: one log, one score."""
    twin = tree / f"{SYSTEM_DIR}/llama2-70b-99.9"
    shutil.copytree(tree / RESULTS, twin)
    txt = twin / "Offline/accuracy/accuracy.txt"
    txt.write_text(txt.read_text().replace("'rouge1': 44.5", "'rouge1': 44.9"))
    edited = [f for f in findings(tree, "run-provenance") if "otherwise" in f.message]
    assert [f.path for f in edited] == [f"{SYSTEM_DIR}/llama2-70b-99.9/Offline/accuracy/accuracy.txt"], [
        f.line() for f in findings(tree, "run-provenance")
    ]
    assert "rouge1" in edited[0].message


def test_an_accuracy_log_and_scores_copied_from_another_scenario(tree):
    """Server's accuracy folder keeps its own run's detail log but Offline's log and scores: a
    warning (an SUT answering in issue order writes one log in each scenario)."""
    for name in ("mlperf_log_accuracy.json", "accuracy.txt"):
        shutil.copyfile(tree / RESULTS / "Offline/accuracy" / name, tree / RESULTS / "Server/accuracy" / name)
    copied = [f for f in findings(tree, "run-provenance", "warning") if "another scenario's accuracy run" in f.message]
    assert [f.path for f in copied] == [f"{RESULTS}/Server/accuracy/accuracy.txt"], [
        f.line() for f in findings(tree, "run-provenance")
    ]


def test_scores_copied_from_another_result(tree):
    # Offline's accuracy.txt put beside Server's own (truncated) accuracy log.
    shutil.copyfile(tree / RESULTS / "Offline/accuracy/accuracy.txt", tree / RESULTS / "Server/accuracy/accuracy.txt")
    claimed = findings(tree, "run-provenance")
    assert [f.path for f in claimed] == [f"{RESULTS}/Server/accuracy/accuracy.txt"]
    assert "copied from the other result" in claimed[0].message


def test_the_same_accuracy_log_from_two_runs_is_a_warning(tree):
    # Two systems whose deterministic model wrote one log twice: their accuracy runs differ
    # (other start times), the logs and the hash lines do not.
    other = _second_system(tree)
    for hour, scenario in enumerate(("Offline", "Server", "Interactive")):
        for minute, part in enumerate(("performance/run_1", "accuracy")):
            path = other / BENCH / scenario / part / "mlperf_log_detail.txt"
            patch_detail(
                path,
                {
                    "test_datetime": f"2026-01-01T0{hour}:0{minute}:00Z",
                    "power_begin": f"01-01-2026 0{hour}:0{minute}:01.000",
                },
            )
    assert findings(tree, "run-provenance") == []
    warned = findings(tree, "run-provenance", "warning")
    scores = [f for f in warned if f.path.endswith("accuracy/accuracy.txt")]
    assert len(scores) == 3 and all("byte for byte" in f.message for f in scores)
    # ... and so did each TEST06 run: the same answers on two systems (a warning too).
    tests = [f for f in warned if "TEST06" in f.path]
    assert len(tests) == 3 and all("deterministic model" in f.message for f in tests), warned


def test_run_identity_reads_any_log(good_tree):
    from mlperf_repro.check.model import run_identity

    assert run_identity({}) is None
    assert run_identity({"test_datetime": 5}) is None
    a = run_identity({"test_datetime": "t", "result_validity": "VALID", "sut_name": "a"})
    assert a == run_identity({"test_datetime": "t", "result_validity": "VALID", "sut_name": "b"})
    assert a != run_identity({"test_datetime": "t", "result_validity": "INVALID"})
    json.dumps(a)  # plain data


def test_a_scenario_describing_another_model_is_a_warning(tree):
    path = tree / RESULTS / "Server" / "measurements.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "weight_data_types": "fp8"}))
    assert errors(tree) == []
    warned = findings(tree, "measurements-agree", "warning")
    assert [f.path for f in warned] == [f"{RESULTS}/Server/measurements.json"]
    assert '"fp8" against "mxfp4"' in warned[0].message


def test_a_compliance_folder_holding_the_accuracy_runs_log(tree):
    folder = tree / RESULTS / "Server"
    shutil.copyfile(folder / "accuracy/mlperf_log_accuracy.json", folder / "TEST06/accuracy/mlperf_log_accuracy.json")
    claimed = findings(tree, "run-provenance")
    assert [f.path for f in claimed] == [f"{RESULTS}/Server/TEST06/accuracy/mlperf_log_accuracy.json"]
    assert "the accuracy run's log, byte for byte" in claimed[0].message


def test_a_test06_verdict_without_its_runs_log(tree):
    shutil.rmtree(tree / RESULTS / "Interactive/TEST06/accuracy")
    found = findings(tree, "compliance")
    assert [f.path for f in found] == [f"{RESULTS}/Interactive/TEST06"]
    assert "keeps no log of its run" in found[0].message


def test_a_test06_log_kept_beside_its_verdict_passes(tree):
    # The layout of some published trees: the run's log one level up.
    folder = tree / RESULTS / "Interactive/TEST06"
    shutil.move(folder / "accuracy/mlperf_log_accuracy.json", folder / "mlperf_log_accuracy.json")
    shutil.rmtree(folder / "accuracy")
    assert findings(tree, "compliance") == []


# -- one unmodified LoadGen ---------------------------------------------------------------------------

PERF_LOG = "performance/run_1/mlperf_log_detail.txt"


def _file_hashes(log: Path) -> dict:
    line = next(x for x in log.read_text().splitlines() if '"key": "loadgen_file_sha1"' in x)
    return json.loads(line.removeprefix(":::MLLOG "))["value"]


def test_a_loadgen_built_from_changed_sources(tree):
    log = tree / RESULTS / "Offline" / PERF_LOG
    patch_detail(log, {"loadgen_git_status_message": " M loadgen.cc\n M results.cc"})
    found = findings(tree, "loadgen-build")
    assert len(found) == 1 and found[0].path.endswith(f"Offline/{PERF_LOG}") and "M loadgen.cc" in found[0].message


@pytest.mark.parametrize("status", ["", "NA", "  "])
def test_a_clean_or_outside_git_status_passes(tree, status):
    patch_detail(tree / RESULTS / "Offline" / PERF_LOG, {"loadgen_git_status_message": status})
    assert findings(tree, "loadgen-build") == []


def test_one_log_whose_loadgen_source_hashes_otherwise(tree):
    """Every log of the tree names one LoadGen commit: one whose loadgen.cc hashes otherwise
    was built from other sources, and it (not the many that agree) is named."""
    log = tree / RESULTS / "Server" / PERF_LOG
    hashes = _file_hashes(log)
    patch_detail(log, {"loadgen_file_sha1": {**hashes, "/loadgen.cc": "0" * 40}})
    found = findings(tree, "loadgen-build")
    assert len(found) == 1 and found[0].path.endswith(f"Server/{PERF_LOG}"), found
    assert "/loadgen.cc" in found[0].message and hashes["/loadgen.cc"][:12] in found[0].message


@pytest.mark.parametrize("bad", ["", "86bc3765", "x" * 40, None])
def test_a_hash_loadgen_cannot_have_written(tree, bad):
    log = tree / RESULTS / "Offline" / PERF_LOG
    patch_detail(log, {"loadgen_file_sha1": {**_file_hashes(log), "/results.cc": bad}})
    found = findings(tree, "loadgen-build")
    assert len(found) == 1 and "/results.cc" in found[0].message and "40 hex digits" in found[0].message


def test_builds_without_a_commit_and_built_packages_are_not_compared(tree):
    """A LoadGen built outside git ("@ NA") names no sources, and a wheel's hash changes
    with each build: neither is compared across logs."""
    offline = tree / RESULTS / "Offline" / PERF_LOG
    server = tree / RESULTS / "Server" / PERF_LOG
    hashes = _file_hashes(offline)
    version = next(x for x in offline.read_text().splitlines() if '"key": "loadgen_version"' in x)
    release = json.loads(version.removeprefix(":::MLLOG "))["value"].split("@")[0].strip()
    patch_detail(offline, {"loadgen_file_sha1": {**hashes, "/mlcommons_loadgen-x.whl": "1" * 40}})
    patch_detail(server, {"loadgen_file_sha1": {**hashes, "/mlcommons_loadgen-x.whl": "2" * 40}})
    assert findings(tree, "loadgen-build") == []
    for log in (offline, server):
        patch_detail(log, {"loadgen_version": f"{release} @ NA"})
    patch_detail(server, {"loadgen_file_sha1": {**hashes, "/mlperf.conf": "3" * 40}})
    assert findings(tree, "loadgen-build") == []


# -- a compliance run's sampled answers ---------------------------------------------------------------


def _test06_answers(tree: Path, scenario: str = "Server") -> Path:
    return tree / RESULTS / scenario / "TEST06" / "accuracy" / "mlperf_log_accuracy.json"


@pytest.mark.parametrize("kept", [0, 10, 49])
def test_a_compliance_log_cut_below_its_sampling_target(tree, kept):
    """TEST06 samples 100 answers (its audit.config): a log of far fewer was cut, or its run
    returned none, and the verdict rests on too few."""
    log = _test06_answers(tree)
    log.write_text(json.dumps(json.loads(log.read_text())[:kept]))
    found = findings(tree, "compliance-evidence")
    assert len(found) == 1 and f"holds {kept} sampled answer(s)" in found[0].message, found
    assert found[0].path.endswith("Server/TEST06/accuracy/mlperf_log_accuracy.json")


def test_a_sampling_shortfall_within_chance_passes(tree):
    """LoadGen samples each answer at random: 80 of 100 (as published logs hold) is chance."""
    log = _test06_answers(tree)
    log.write_text(json.dumps(json.loads(log.read_text())[:80]))
    assert findings(tree, "compliance-evidence") == []


def test_a_compliance_log_with_more_answers_or_other_samples_than_its_run(tree, runs):
    """With the run's detail log beside it: no more answers than the run issued, and no
    qsl_idx outside the sample library it loaded."""
    _with_test06_log(tree, runs)
    log = _test06_answers(tree)
    entries = json.loads(log.read_text())
    log.write_text(json.dumps(entries + entries[:5]))
    found = findings(tree, "compliance-evidence")
    assert len(found) == 1 and "the TEST06 run issued 100 samples" in found[0].message, found
    log.write_text(json.dumps([{**entries[0], "qsl_idx": 4000}, *entries[1:]]))
    found = findings(tree, "compliance-evidence")
    assert len(found) == 1 and "qsl_idx 4000" in found[0].message and "library of 32" in found[0].message, found


# -- the settings the round fixes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "values", "said"),
    [
        ("Offline", {"effective_performance_issue_same": True}, "effective_performance_issue_same is true"),
        ("Server", {"effective_performance_issue_unique": True}, "effective_performance_issue_unique is true"),
        ("Offline", {"effective_sample_concatenate_permutation": False}, "sample_concatenate_permutation is false"),
    ],
)
def test_a_run_with_a_setting_the_round_fixes_changed(tree, scenario, values, said):
    patch_detail(tree / RESULTS / scenario / PERF_LOG, values)
    found = findings(tree, "round-settings")
    assert len(found) == 1 and said in found[0].message and found[0].path.endswith(f"{scenario}/{PERF_LOG}"), found


def test_a_compliance_run_keeps_the_settings_its_audit_config_leaves_alone(tree, runs):
    """TEST06's audit.config shortens the run (min_duration 0) but sets no issue pattern."""
    log = _with_test06_log(tree, runs)
    patch_detail(log, {"effective_min_duration_ms": 0})
    assert findings(tree, "round-settings") == []
    # A round whose TEST06 leaves the duration alone: the run must then last the round's.
    tests = {**ROUND.data["compliance_tests"], "TEST06": {**ROUND.data["compliance_tests"]["TEST06"]}}
    tests["TEST06"]["audit_config"] = {k: v for k, v in tests["TEST06"]["audit_config"].items() if k != "min_duration"}
    shortened = ROUND.__class__({**ROUND.data, "compliance_tests": tests})
    found = [f for f in check_tree(tree, shortened) if f.rule == "round-settings"]
    assert len(found) == 1 and "effective_min_duration_ms 0" in found[0].message, found
    patch_detail(log, {"effective_performance_issue_same": True})
    found = findings(tree, "round-settings")
    assert len(found) == 1 and "not the TEST06 run's" in found[0].message, found


@pytest.mark.parametrize(
    ("name", "line", "said"),
    [
        ("mlperf.conf", "llama2-70b.Server.ttft_latency = 4000", "ttft_latency = 4000"),
        ("mlperf.conf", "llama2-70b.*.sample_concatenate_permutation = 0", "sample_concatenate_permutation = 0"),
        ("mlperf.conf", "*.Server.min_duration = 60000", "min_duration = 60000"),
        ("user.conf", "llama2-70b.Server.tpot_latency = 400", "tpot_latency = 400"),
        ("user.conf", "*.Server.target_latency_percentile = 90", "target_latency_percentile = 90"),
        ("user.conf", "llama2-70b.Server.target_latency = 30000", "target_latency = 30000"),
    ],
)
def test_a_conf_file_that_loosens_a_setting_the_round_fixes(tree, name, line, said):
    conf = tree / RESULTS / "Server" / name
    conf.write_text((conf.read_text() if conf.is_file() else "") + line + "\n")
    found = findings(tree, "round-settings")
    assert len(found) == 1 and said in found[0].message and found[0].path.endswith(f"Server/{name}"), found


@pytest.mark.parametrize(
    "line",
    [
        "*.Server.target_latency_percentile = 99",  # the round's own value, repeated (published)
        "llama2-70b.*.sample_concatenate_permutation = 1",
        "llama2-70b.Server.target_latency = 0",  # tighter than the round's (mlperf.conf's LLM value)
        "*.Server.min_duration = 1200000",  # longer
        "*.*.qsl_rng_seed = 1",  # (a folder's mlperf.conf copy may be another release's: seeds are judged in logs)
        "resnet50.Server.ttft_latency = 1",  # another model's line
        "*.Server.performance_sample_count_override = 0",  # the QSL's own count
        "*.Server.performance_sample_count_override = 30000",
    ],
)
def test_a_conf_file_repeating_or_tightening_the_rounds_settings_passes(tree, line):
    conf = tree / RESULTS / "Server" / "mlperf.conf"
    conf.write_text((conf.read_text() if conf.is_file() else "") + line + "\n")
    assert findings(tree, "round-settings") == []


@pytest.mark.parametrize(
    "line",
    ["llama2-70b.Offline.performance_issue_same = 1", "llama2-70b.Offline.performance_sample_count_override = 2048"],
)
def test_a_leftover_in_a_results_user_conf_is_a_warning(tree, line):
    """An audit pattern, or a sample count below the round's, that the run's log shows unused."""
    conf = tree / RESULTS / "Offline" / "user.conf"
    conf.write_text(conf.read_text() + line + "\n")
    assert findings(tree, "round-settings") == []
    assert len(findings(tree, "round-settings", "warning")) == 1


def test_every_run_of_a_result_has_the_rounds_seeds(tree, runs):
    """The compliance and accuracy runs too: another round's seeds are another LoadGen's; an
    accuracy run seeded 0 by its harness scores the same samples (published) and passes."""
    log = _with_test06_log(tree, runs)
    old = {"effective_qsl_rng_seed": 1780908523862526354, "effective_sample_index_rng_seed": 14771362308971278857}
    patch_detail(log, {**old, "effective_schedule_rng_seed": 18209322760996052031})
    found = findings(tree, "seeds")
    assert len(found) == 1 and "the TEST06 run's LoadGen" in found[0].message and "v5.1 seeds" in found[0].message
    accuracy = tree / RESULTS / "Offline" / "accuracy" / "mlperf_log_detail.txt"
    patch_detail(accuracy, {"effective_qsl_rng_seed": 0, "effective_sample_index_rng_seed": 0})
    assert len(findings(tree, "seeds")) == 1
    patch_detail(accuracy, {**old, "effective_schedule_rng_seed": 18209322760996052031})
    assert len(findings(tree, "seeds")) == 2


@pytest.mark.parametrize(
    ("benchmark", "folder", "logged", "wanted"),
    [
        ("resnet", "SingleStream", "SingleStream", 0.9),
        ("resnet", "MultiStream", "MultiStream", 0.99),
        ("resnet", "MultiStream", "SingleStream", 0.9),  # an edge MultiStream result inferred from SingleStream
        ("pointpainting", "SingleStream", "SingleStream", 0.999),  # its own mlperf.conf line
        (BENCH, "Interactive", "Server", 0.99),
        (BENCH, "Offline", "Offline", None),
    ],
)
def test_the_percentile_a_run_is_judged_at(benchmark, folder, logged, wanted):
    from types import SimpleNamespace

    from mlperf_repro.check.model import round_percentile

    result = SimpleNamespace(scenario=folder, facts=ROUND.benchmark(benchmark))
    assert round_percentile(SimpleNamespace(rules=ROUND), result, logged) == wanted


def test_a_compliance_run_of_another_system_under_test(tree, runs):
    log = _with_test06_log(tree, runs)
    patch_detail(log, {"sut_name": "Another_SUT"})
    found = findings(tree, "sut-match")
    assert len(found) == 1 and "'Another_SUT'" in found[0].message
    assert found[0].path.endswith("Server/TEST06/mlperf_log_detail.txt")


def test_a_compliance_run_missing_records_loadgen_writes(tree, runs):
    """A compliance run is a performance-mode run: it writes every record one does."""
    log = _with_test06_log(tree, runs)
    log.write_text(
        "".join(x for x in log.read_text().splitlines(True) if '"key": "effective_performance_issue_same"' not in x)
    )
    found = findings(tree, "log-records-present")
    assert len(found) == 1 and "effective_performance_issue_same" in found[0].message and "TEST06" in found[0].path


def test_a_run_said_to_meet_its_minimum_duration_that_its_clock_denies(tree):
    patch_detail(tree / RESULTS / "Server" / PERF_LOG, {"effective_min_duration_ms": 3_600_000})
    found = [f for f in findings(tree, "clock-evidence") if "result_min_duration_met is true" in f.message]
    assert len(found) == 1 and "shorter than effective_min_duration_ms 3.6e+06" in found[0].message, found


def test_a_test07_or_test09_verdict_without_its_runs_log(tree):
    """Every published TEST07 and TEST09 folder keeps its run's detail log."""
    gpt = tree / f"{SYSTEM_DIR}/gpt-oss-120b/Offline"
    shutil.copytree(tree / RESULTS / "Offline", gpt)
    for test, verify in (("TEST07", "verify_accuracy.txt"), ("TEST09", "verify_output_len.txt")):
        (gpt / test).mkdir()
        (gpt / test / verify).write_text("TEST PASS\n")
    found = [f for f in findings(tree, "compliance") if "keeps no log of its run" in f.message]
    assert {f.path.rsplit("/", 1)[-1] for f in found} == {"TEST07", "TEST09"}, [f.line() for f in errors(tree)]


def test_a_compliance_log_copied_from_another_scenario(tree):
    """Server's TEST06 log is Interactive's, byte for byte: another scenario's run."""
    shutil.copyfile(_test06_answers(tree, "Interactive"), _test06_answers(tree, "Server"))
    found = [f for f in findings(tree, "run-provenance") if "byte for byte" in f.message]
    assert len(found) == 1 and "Server/TEST06" in found[0].path and "Interactive" in found[0].message, found


def test_a_compliance_log_copied_from_another_system_is_a_warning(tree):
    """Two systems may run one deterministic model to the same bytes (published): a warning."""
    system_dir = tree / SYSTEM_DIR
    twin = system_dir.parent / "sys2"
    shutil.copytree(system_dir, twin)
    systems = tree / f"closed/{SUBMITTER}/systems"
    shutil.copyfile(systems / f"{SYSTEM}.json", systems / "sys2.json")
    for log in twin.rglob("mlperf_log_detail.txt"):  # (other runs, but the same TEST06 answers)
        patch_detail(log, {"test_datetime": "2026-01-02T03:04:05Z"})
    warned = [f for f in findings(tree, "run-provenance", "warning") if "TEST06" in f.path]
    assert warned and all("deterministic model" in f.message for f in warned), warned
    assert [f for f in findings(tree, "run-provenance") if "TEST06" in f.path] == []


def test_one_run_filed_twice_describing_two_models_is_an_error(tree):
    """llama2-70b-99 and -99.9 may hold one run; their measurements then describe one model."""
    shutil.copytree(tree / RESULTS, tree / f"{SYSTEM_DIR}/llama2-70b-99.9")
    path = tree / f"{SYSTEM_DIR}/llama2-70b-99.9/Offline/measurements.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "weight_data_types": "fp8"}))
    shared = [f for f in errors(tree) if f.rule == "measurements-agree"]
    assert sorted(f.path for f in shared) == [
        f"{SYSTEM_DIR}/llama2-70b-99.9/Offline/measurements.json",
        f"{SYSTEM_DIR}/llama2-70b-99/Offline/measurements.json",
    ], [f.line() for f in errors(tree)]
    assert all("performance run" in f.message for f in shared)
