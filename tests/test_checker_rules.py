"""Each checker rule against a tree that breaks exactly that rule.

The good trees (closed division, full scale; and a test-scale one) pass every rule; each
test copies one, breaks one thing the way real submissions break it, and asserts that
exactly the intended rule fires, naming the file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from tree_factory import (
    BENCH,
    FULL_SCALE_SECONDS,
    GOOD_ACCURACY,
    SERVER_TOO_FEW_QUERIES,
    SUBMITTER,
    SYSTEM,
    build_tree,
    format_accuracy,
    make_runs,
    offline_too_short,
    patch_detail,
)
from tree_factory import RULES as ROUND

from mlperf_repro.benchmarks import load_round
from mlperf_repro.check.tree import RULES, check_tree

RESULTS = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"


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


def errors(root: Path) -> list:
    return [f for f in check_tree(root, ROUND) if f.severity == "error"]


def only_rule(root: Path, rule: str, path_fragment: str = "") -> list:
    found = errors(root)
    assert found, f"{rule} did not fire"
    assert {f.rule for f in found} == {rule}, [f.line() for f in found]
    assert all(path_fragment in f.path for f in found), [f.line() for f in found]
    return found


def test_good_trees_pass(good_tree, runs, tmp_path):
    assert errors(good_tree) == []
    small = build_tree(tmp_path / "small", runs, full_scale=False)
    findings = check_tree(small, ROUND)
    assert [f.rule for f in findings] == ["marking"] and findings[0].severity == "warning"


def test_every_rule_is_covered_below():
    tested = {
        "required-files",
        "scenario-set",
        "system-description",
        "measurements",
        "loadgen-valid",
        "loadgen-errors",
        "seeds",
        "scenario-match",
        "test-mode",
        "token-latencies",
        "latency",
        "run-length",
        "accuracy-log",
        "accuracy-files",
        "accuracy-duplicates",
        "accuracy-target",
        "accuracy-isolation",
        "compliance",
        "hygiene",
        "marking",
        "summary-detail",
        "user-conf",
        "compliance-evidence",
        "accuracy-evidence",
        "structure",
        # tests/test_checker_evidence.py
        "verify-evidence",
        "settings-evidence",
        "validity-evidence",
        "clock-evidence",
        "output-length-evidence",
        # tests/test_checker_provenance.py
        "audit-settings",
        "run-provenance",
        "loadgen-build",
        "round-settings",
        "sut-match",
        "measurements-agree",
        "log-records-once",
        "log-records-present",
        # tests/test_checker_power.py
        "power-evidence",
        # tests/test_checker_harness_records.py
        "harness-records",
    }
    assert set(RULES) == tested


def test_root_files(tree):
    (tree / "notes.txt").write_text("x")
    only_rule(tree, "root-files", "notes.txt")


def test_required_files(tree):
    (tree / RESULTS / "Server" / "user.conf").write_text("")
    only_rule(tree, "required-files", "Server/user.conf")


def test_scenario_set(tree):
    shutil.rmtree(tree / RESULTS / "Offline")
    found = only_rule(tree, "scenario-set", BENCH)
    assert "Offline" in found[0].message


def test_system_description_meaningful_field(tree):
    path = tree / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(path.read_text())
    desc["accelerators_per_node"] = 0  # falsy: the checker counts it as "no answer"
    path.write_text(json.dumps(desc))
    found = only_rule(tree, "system-description", f"systems/{SYSTEM}.json")
    assert "accelerators_per_node" in found[0].message


def test_system_description_is_network_outside_network_division(tree):
    path = tree / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(path.read_text())
    desc["is_network"] = "false"
    path.write_text(json.dumps(desc))
    assert "is_network" in only_rule(tree, "system-description")[0].message


def test_measurements(tree):
    path = tree / RESULTS / "Offline" / "measurements.json"
    data = json.loads(path.read_text())
    data["weight_data_types"] = ""
    path.write_text(json.dumps(data))
    only_rule(tree, "measurements", "Offline/measurements.json")


def test_loadgen_invalid_result_is_caught(tree):
    # The official modular checker accepts this; we do not.
    patch_detail(tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt", offline_too_short(249.7))
    only_rule(tree, "loadgen-valid", "Offline/performance")


def test_an_offline_run_shorter_than_min_duration_names_the_target_qps_to_set(tree):
    detail = tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt"
    patch_detail(detail, offline_too_short(249.7))
    record = {
        "key": "result_invalid_reason",
        "value": "Increase expected QPS so the loadgen pre-generates a larger (coalesced) query. ",
        "time_ms": 1.0,
        "namespace": "mlperf::logging",
        "event_type": "POINT_IN_TIME",
        "metadata": {"is_error": False, "is_warning": False},
    }
    with detail.open("a") as handle:
        handle.write(":::MLLOG " + json.dumps(record) + "\n")
    [finding] = only_rule(tree, "loadgen-valid", "Offline/performance")
    assert "Offline.target_qps) to at least 250" in finding.message and "249.7/s" in finding.message


def test_loadgen_errors_in_the_performance_log(tree):
    detail = tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt"
    record = {
        "key": "error_runtime",
        "value": "QuerySamplesComplete called twice",
        "time_ms": 1.0,
        "namespace": "mlperf::logging",
        "event_type": "POINT_IN_TIME",
        "metadata": {"is_error": True, "is_warning": False},
    }
    with detail.open("a") as handle:
        handle.write(":::MLLOG " + json.dumps(record) + "\n")
    only_rule(tree, "loadgen-errors", "Server/performance")


def test_seeds(tree):
    patch_detail(
        tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt",
        {"effective_qsl_rng_seed": 2085463073848966840},
    )  # v6.1's seed
    assert "qsl_rng_seed" in only_rule(tree, "seeds", "Offline")[0].message


def test_seeds_are_judged_from_the_log_not_the_loadgen_version(tree):
    """Published v6.0 results ran LoadGen 6.0.5-6.0.9, which carry the v6.0 seeds."""
    for scenario in ("Offline", "Server"):
        patch_detail(
            tree / RESULTS / scenario / "performance/run_1/mlperf_log_detail.txt",
            {"loadgen_version": "6.0.5 @ 4d3f2e1"},
        )
    assert errors(tree) == []


def test_seeds_of_another_round_name_that_round_and_the_release_to_install(tree):
    seeds = load_round("v6.1").seeds
    patch_detail(
        tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt",
        {f"effective_{k}": v for k, v in seeds.items()} | {"loadgen_version": "6.0.17"},
    )
    (finding,) = only_rule(tree, "seeds", "Offline")
    assert "6.0.17 ran with the v6.1 seeds" in finding.message and ROUND.loadgen_requirement in finding.message


def test_scenario_folders_are_read_case_insensitively(tree):
    """Some submitters name the folders offline/server, which the official checker accepts."""
    for scenario in ("Offline", "Server"):
        (tree / RESULTS / scenario).rename(tree / RESULTS / scenario.lower())
    assert errors(tree) == []


def test_mixed_node_system_gives_counts_per_kind_of_node(tree):
    """One description for a system of three kinds of node (the heterogeneous case)."""
    path = tree / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(path.read_text())
    desc["number_of_nodes"] = 3
    desc["host_processor_core_count"] = "64(AMD EPYC 9534) and 96(AMD EPYC 9655) and 192(AMD EPYC 9965)"
    desc["host_processor_model_name"] = "AMD EPYC 9534 (MI300X node), AMD EPYC 9655 (MI325X node), AMD EPYC 9965"
    desc["accelerator_model_name"] = (
        "AMD Instinct MI300X (x8) and AMD Instinct MI325X (x8) and AMD Instinct MI355X (x8)"
    )
    path.write_text(json.dumps(desc))
    assert errors(tree) == []
    desc["host_processor_core_count"] = "lots"
    path.write_text(json.dumps(desc))
    assert "host_processor_core_count" in only_rule(tree, "system-description", SYSTEM)[0].message


@pytest.mark.parametrize("placeholder", ["TODO", "tbd", "TBD.", "xxx", "?", "<fill in>", "fill me"])
def test_system_description_placeholder(tree, placeholder):
    path = tree / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(path.read_text())
    desc["operating_system"] = placeholder
    path.write_text(json.dumps(desc))
    found = only_rule(tree, "system-description", SYSTEM)
    assert "operating_system is a placeholder" in found[0].message


@pytest.mark.parametrize(
    ("count", "name", "said"),
    [
        ("0", "AMD Instinct MI350X", "names 'AMD Instinct MI350X'"),
        (0, "AMD Instinct MI350X", "names"),
        ("0 (MI300X), 0 (MI325X)", "AMD Instinct MI300X", "names"),
        ("8", "N/A", "name the accelerator"),
        (8, "", "name the accelerator"),
    ],
)
def test_system_accelerator_count_against_its_name(tree, runs, tmp_path, count, name, said):
    """A named accelerator counted 0 times (or one counted but not named) is an error; in
    the open division a warning (v5.1 open/Lenovo names its SE100's integrated GPU, 0)."""
    path = tree / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(path.read_text())
    desc.update(accelerators_per_node=count, accelerator_model_name=name)
    path.write_text(json.dumps(desc))
    found = [f for f in errors(tree) if f.rule == "system-description" and "accelerators_per_node is" in f.message]
    assert len(found) == 1 and said in found[0].message, [f.line() for f in errors(tree)]
    opened = build_tree(tmp_path / "open", runs, division="open")
    open_path = opened / f"open/{SUBMITTER}/systems/{SYSTEM}.json"
    open_desc = json.loads(open_path.read_text())
    open_desc.update(accelerators_per_node=count, accelerator_model_name=name)
    open_path.write_text(json.dumps(open_desc))
    warned = [f for f in check_tree(opened, ROUND) if "accelerators_per_node is" in f.message]
    assert [f.severity for f in warned] == ["warning"]


def test_a_system_without_accelerators_passes(tree):
    path = tree / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(path.read_text())
    desc.update(accelerators_per_node="0", accelerator_model_name="N/A")
    path.write_text(json.dumps(desc))
    assert errors(tree) == []


def test_edge_system_needs_the_edge_scenarios(tree):
    """Scenario sets depend on the system's system_type."""
    path = tree / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(path.read_text())
    desc["system_type"] = "edge"
    path.write_text(json.dumps(desc))
    found = only_rule(tree, "scenario-set", BENCH)
    assert "edge" in found[0].message


def test_benchmarks_the_workflow_does_not_run_are_judged(tree):
    """A partner's tree may hold any benchmark of the round: no 'not a benchmark' error for
    them, and their own facts apply (here: resnet's accuracy target, read from the line
    the reference accuracy script prints)."""
    facts = ROUND.benchmark("resnet")
    assert not facts.runnable
    resnet = tree / f"closed/{SUBMITTER}/results/{SYSTEM}/resnet/Offline"
    shutil.copytree(tree / RESULTS / "Offline", resnet)
    (resnet / "accuracy/accuracy.txt").write_text("accuracy=75.000%, good=37500, total=50000\nhash=" + "0" * 64 + "\n")
    (found,) = check_tree(tree, ROUND, only=["accuracy-target"])
    assert found.path.endswith("resnet/Offline/accuracy/accuracy.txt") and "75.0 < target 75.69" in found.message
    (resnet / "accuracy/accuracy.txt").write_text("accuracy=76.100%, good=38050, total=50000\nhash=" + "0" * 64 + "\n")
    assert check_tree(tree, ROUND, only=["accuracy-target"]) == []


def test_accuracy_files_the_table_names_must_be_there(tree):
    """wan-2.2's accuracy folder carries the videos of ten named samples."""
    wan = tree / f"closed/{SUBMITTER}/results/{SYSTEM}/wan-2.2-t2v-a14b/Offline"
    shutil.copytree(tree / RESULTS / "Offline", wan)
    stems = ROUND.benchmark("wan-2.2-t2v-a14b").accuracy["extra_files"]["videos"]
    (found,) = check_tree(tree, ROUND, only=["accuracy-files"])
    assert found.path.endswith("wan-2.2-t2v-a14b/Offline/accuracy/videos") and stems[0] in found.message
    (wan / "accuracy/videos").mkdir()
    for stem in stems[1:]:
        (wan / "accuracy/videos" / f"{stem}.mp4").write_bytes(b"x")
    (found,) = check_tree(tree, ROUND, only=["accuracy-files"])
    assert found.message.endswith(f"sample(s) {stems[0]}")
    (wan / "accuracy/videos" / f"{stems[0]}.mp4").write_bytes(b"x")
    assert check_tree(tree, ROUND, only=["accuracy-files"]) == []


def test_a_results_repository_with_many_submitters_is_checked_per_submitter(tree):
    second = tree / "closed" / "OtherOrg"
    shutil.copytree(tree / f"closed/{SUBMITTER}", second)
    for path in (second / "systems").glob("*.json"):
        desc = json.loads(path.read_text())
        desc["submitter"] = "OtherOrg"
        path.write_text(json.dumps(desc))
    assert errors(tree) == []
    (second / "results" / SYSTEM / BENCH / "Offline/user.conf").write_text("")
    (found,) = errors(tree)
    assert found.path.startswith("closed/OtherOrg/")


def test_scenario_match(tree):
    # (An Offline run lasts as long as its longest sample.)
    patch_detail(
        tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt",
        {"effective_scenario": "Offline", "result_max_latency_ns": int(FULL_SCALE_SECONDS * 1e9)},
    )
    # (An Offline log with Server's settings sizes no Offline query: settings-evidence names that.)
    found = errors(tree)
    assert {f.rule for f in found} == {"scenario-match", "settings-evidence"}, [f.line() for f in found]
    assert all("Server/performance" in f.path for f in found)


def test_token_latencies(tree):
    patch_detail(
        tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt", {"requested_use_token_latencies": False}
    )
    only_rule(tree, "token-latencies", "Offline")


def test_interactive_is_judged_against_interactive_limits(tree):
    # 100 ms TPOT passes Server's 200 ms, which is what the official checker applies here.
    patch_detail(
        tree / RESULTS / "Interactive/performance/run_1/mlperf_log_detail.txt",
        # LoadGen was asked for Server's 200 ms, so it judged the run VALID.
        {
            "result_time_per_output_token_99.00_percentile_ns": 100_000_000,
            "result_time_per_output_token_99.90_percentile_ns": 100_000_000,
            "requested_server_tpot_latency": 200_000_000,
        },
    )
    found = only_rule(tree, "latency", "Interactive")
    assert "40 ms" in found[0].message


def test_interactive_run_under_the_server_model_name(tree):
    patch_detail(
        tree / RESULTS / "Interactive/performance/run_1/mlperf_log_detail.txt",
        {"requested_server_ttft_latency": 2_000_000_000, "requested_server_tpot_latency": 200_000_000},
    )
    found = only_rule(tree, "latency", "Interactive")
    assert "llama2-70b-interactive" in found[0].message


def test_run_length(tree):
    patch_detail(
        tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt", {"effective_min_duration_ms": 300000}
    )
    only_rule(tree, "run-length", "Server")


def test_offline_samples_per_query(tree):
    # A run sized below the round's minimum, every record consistent with that size.
    patch_detail(
        tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt",
        {
            "effective_samples_per_query": 2000,
            "generated_samples_per_query": 2000,
            "effective_min_sample_count": 2000,
            "requested_min_query_count": 2000,
            "effective_target_qps": 1.0,
            "requested_offline_expected_qps": 1.0,
            "result_samples_per_second": round(2000 / FULL_SCALE_SECONDS, 4),
        },
    )
    assert "samples_per_query" in only_rule(tree, "run-length", "Offline")[0].message


def test_an_offline_query_size_its_settings_do_not_give(tree):
    patch_detail(
        tree / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt",
        {
            "effective_samples_per_query": 30000,
            "generated_samples_per_query": 30000,
            "effective_min_sample_count": 30000,
        },
    )
    found = [f for f in errors(tree) if f.rule == "settings-evidence"]
    assert found and "LoadGen sizes an Offline query" in found[0].message, [f.line() for f in errors(tree)]


def test_accuracy_log_not_truncated(tree, runs):
    log = tree / RESULTS / "Offline/accuracy/mlperf_log_accuracy.json"
    log.write_text(" " * 20000)
    only_rule(tree, "accuracy-log", "Offline/accuracy/mlperf_log_accuracy.json")


def test_accuracy_txt_without_hash(tree):
    txt = tree / RESULTS / "Server/accuracy/accuracy.txt"
    txt.write_text(format_accuracy(GOOD_ACCURACY))
    only_rule(tree, "accuracy-log", "Server/accuracy/accuracy.txt")


def test_accuracy_numpy_repr_is_unreadable(tree):
    txt = tree / RESULTS / "Server/accuracy/accuracy.txt"
    txt.write_text(txt.read_text().replace("'rouge1': 44.5", "'rouge1': np.float64(44.5)"))
    assert "rouge1" in only_rule(tree, "accuracy-log", "Server")[0].message


def test_accuracy_run_not_covering_the_dataset(tree):
    patch_detail(
        tree / RESULTS / "Offline/accuracy/mlperf_log_detail.txt",
        {"effective_accuracy_sample_count": 1000, "qsl_reported_total_count": 1000},
    )
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"  # scored on those 1000 samples
    txt.write_text(txt.read_text().replace("'gen_num': 24576", "'gen_num': 1000").replace("7249920", "295000"))
    only_rule(tree, "accuracy-log", "Offline/accuracy")


def test_accuracy_below_target(tree):
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    txt.write_text(txt.read_text().replace("'rouge2': 22.1", "'rouge2': 21.5"))
    found = only_rule(tree, "accuracy-target", "Offline")
    assert "rouge2" in found[0].message


def test_tokens_per_sample_upper_bound(tree):
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    text = txt.read_text().replace("'tokens_per_sample': 295.0", "'tokens_per_sample': 330.0")
    txt.write_text(text.replace("'gen_tok_len': 7249920", "'gen_tok_len': 8110080"))  # 330 x 24576
    found = errors(tree)
    assert {f.rule for f in found} == {"accuracy-target", "output-length-evidence"}, [f.line() for f in found]
    assert any("upper bound" in f.message for f in found if f.rule == "accuracy-target")
    # ... and the performance run's answers, 295 tokens long, are no longer the ones scored.
    assert all("Offline" in f.path for f in found)


def test_compliance_missing_in_closed(tree):
    shutil.rmtree(tree / RESULTS / "Interactive" / "TEST06")
    only_rule(tree, "compliance", "Interactive/TEST06")


def test_compliance_failed(tree):
    verify = tree / RESULTS / "Server" / "TEST06" / "verify_accuracy.txt"
    verify.write_text(verify.read_text().replace("EOS check pass: True", "EOS check pass: False"))
    only_rule(tree, "compliance", "Server/TEST06")


def test_compliance_is_optional_in_the_open_division(runs, tmp_path):
    """An open result's unfinished or failed test is a warning (compliance is optional there,
    and the official checker skips it); the same file in the closed division is an error."""
    tree = build_tree(tmp_path / "open", runs, division="open")
    verify = tree / RESULTS.replace("closed/", "open/", 1) / "Server" / "TEST06" / "verify_accuracy.txt"
    verify.write_text("Verifying accuracy.\n")  # cut off before any result line
    assert errors(tree) == []
    warned = {f.rule for f in check_tree(tree, ROUND) if f.severity == "warning" and "Server/TEST06" in f.path}
    assert warned == {"compliance", "verify-evidence"}
    closed = build_tree(tmp_path / "closed", runs)
    (closed / RESULTS / "Server" / "TEST06" / "verify_accuracy.txt").write_text("Verifying accuracy.\n")
    assert {f.rule for f in errors(closed)} == {"compliance", "verify-evidence"}


@pytest.mark.parametrize(
    "breakage, fragment",
    [
        (lambda base: (base / ".DS_Store").write_text("x"), ".DS_Store"),
        (lambda base: (base / "src" / "my notes.md").write_text("x"), "my notes.md"),
        (lambda base: (base / "src" / "__pycache__").mkdir(), "__pycache__"),
        (lambda base: (base / "src" / "empty").mkdir(), "src/empty"),
        (lambda base: os.symlink(base / "nowhere", base / "src" / "link"), "src/link"),
        (lambda base: (base / "src" / "big.bin").write_bytes(b"\0" * (50 * 2**20 + 1)), "big.bin"),
    ],
)
def test_hygiene(tree, breakage, fragment):
    breakage(tree / "closed" / SUBMITTER)
    only_rule(tree, "hygiene", fragment)


def test_open_division_records_accuracy_without_failing(runs, tmp_path):
    low = dict(GOOD_ACCURACY, rouge1=30.0)
    tree = build_tree(tmp_path / "open", runs, division="open", accuracy=low)
    findings = check_tree(tree, ROUND)
    assert errors(tree) == []
    assert {f.rule for f in findings} == {"accuracy-target"} and all(f.severity == "warning" for f in findings)


def test_open_division_may_run_another_of_the_rounds_scenarios(runs, tmp_path):
    """Open results in a scenario the benchmark does not list: a warning when it is one of
    the round's scenarios (the official checker reads no open scenario set), an error
    for a folder that names no scenario at all."""
    tree = build_tree(tmp_path / "open", runs, division="open")
    bench = tree / f"open/{SUBMITTER}/results/{SYSTEM}/{BENCH}"
    shutil.copytree(bench / "Offline", bench / "SingleStream")
    shutil.copytree(bench / "Offline", bench / "Sideways")
    found = {f.path.rsplit("/", 1)[-1]: f for f in check_tree(tree, ROUND) if f.rule == "scenario-set"}
    assert set(found) == {"SingleStream", "Sideways"}
    assert found["SingleStream"].severity == "warning" and found["Sideways"].severity == "error"


def test_failing_closed_result_is_excluded_from_the_package(tree):
    from mlperf_repro.package.tree import apply_failure_policy

    patch_detail(tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt", SERVER_TOO_FEW_QUERIES)
    failed = apply_failure_policy(tree, ROUND, "closed", SUBMITTER, "exclude")
    assert list(failed) == [f"{RESULTS}/Server"] and "loadgen-valid" in failed[f"{RESULTS}/Server"][0]
    assert not (tree / RESULTS / "Server").exists() and (tree / RESULTS / "Offline").is_dir()
    assert errors(tree) == []  # what remains is a clean closed submission (Interactive covers Server's role)


def test_failing_closed_result_kept_only_on_request_and_marked(tree):
    from mlperf_repro.package.tree import apply_failure_policy

    patch_detail(tree / RESULTS / "Server/performance/run_1/mlperf_log_detail.txt", SERVER_TOO_FEW_QUERIES)
    apply_failure_policy(tree, ROUND, "closed", SUBMITTER, "keep")
    assert (tree / RESULTS / "Server").is_dir()
    assert (tree / RESULTS / "Server" / "README.md").read_text().startswith("**FAILED CHECK")
    assert "Server" in (tree / "FAILED_RESULTS.md").read_text()


def test_accuracy_log_with_a_sample_twice(tree):
    """An accuracy run issues each sample once; a log that repeats a qsl_idx is no accuracy
    run's (a published case: a performance run's log in the accuracy folder)."""
    import re

    log = tree / RESULTS / "Offline/accuracy/mlperf_log_accuracy.json"
    lines = log.read_text().splitlines(keepends=True)
    # The same entry twice is how a log truncated to two overlapping ends reads: no duplicate.
    log.write_text("".join(lines[:2] + lines[1:]))
    assert errors(tree) == []
    entry = re.compile(r'"seq_id" : (\d+), "qsl_idx" : (\d+)')
    (seq_a, first), (seq_b, _) = entry.search(lines[1]).groups(), entry.search(lines[2]).groups()
    lines[2] = re.sub(r'"qsl_idx" : \d+', f'"qsl_idx" : {first}', lines[2])
    log.write_text("".join(lines))
    (found,) = only_rule(tree, "accuracy-duplicates", "Offline/accuracy/mlperf_log_accuracy.json")
    seqs = ", ".join(sorted((seq_a, seq_b), key=int))
    assert f"qsl_idx {first} in seq_id {seqs}" in found.message


def test_an_accuracy_scored_without_isolation_is_a_warning(tree):
    """accuracy.txt as the gpt-oss evaluator writes it when the config accepted running the
    model's code unsandboxed: a valid score, flagged."""
    from mlperf_repro.accuracy.gpt_oss import format_gpt_oss_accuracy_txt

    def sandbox_line(mode: str) -> str:  # the line the evaluator adds (the llama2 tree's metrics stay)
        result = {"exact_match": 80.0, "tokens_per_sample": 10.0, "gen_num": 2, "per_dataset": {}}
        return format_gpt_oss_accuracy_txt(dict(result, sandbox={"isolation": {mode: [0, 1]}})).splitlines()[-1]

    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    clean = txt.read_text()
    txt.write_text(clean + sandbox_line("namespaces+seccomp") + "\n")
    assert [f for f in check_tree(tree, ROUND) if f.rule == "accuracy-isolation"] == []
    txt.write_text(clean + sandbox_line("unsandboxed") + "\n")
    assert errors(tree) == []
    (found,) = [f for f in check_tree(tree, ROUND) if f.rule == "accuracy-isolation"]
    assert found.severity == "warning" and "Offline/accuracy/accuracy.txt" in found.path
    assert "WITHOUT ISOLATION" in found.message and "sandbox.allow_unsandboxed" in found.message


def test_an_accuracy_folder_holding_a_performance_run(tree):
    """Seen in a published v6.0 result: accuracy/ held a PerformanceOnly run."""
    patch_detail(tree / RESULTS / "Offline/accuracy/mlperf_log_detail.txt", {"effective_test_mode": "PerformanceOnly"})
    (found,) = only_rule(tree, "test-mode", "Offline/accuracy/mlperf_log_detail.txt")
    assert "needs a run in AccuracyOnly mode" in found.message


def to_older_layout(tree: Path) -> None:
    """Our v6.0 tree in v5.1's shape: code/ for src/, user.conf, README and the measurements
    JSON (named after the system) under measurements/, the TEST0x folders under
    compliance/, and LoadGen run with the v5.1 seeds."""
    base = tree / "closed" / SUBMITTER
    (base / "src").rename(base / "code")
    seeds = {f"effective_{k}": v for k, v in load_round("v5.1").seeds.items()}
    for scenario_dir in sorted((base / "results" / SYSTEM / BENCH).iterdir()):
        where = f"{SYSTEM}/{BENCH}/{scenario_dir.name}"
        measure = base / "measurements" / where
        measure.mkdir(parents=True)
        for name in ("user.conf", "README.md"):
            (scenario_dir / name).rename(measure / name)
        (scenario_dir / "measurements.json").rename(measure / f"{SYSTEM}_vllm_{scenario_dir.name}.json")
        for test_dir in sorted(scenario_dir.glob("TEST*")):
            (base / "compliance" / where).mkdir(parents=True, exist_ok=True)
            test_dir.rename(base / "compliance" / where / test_dir.name)
    for log in sorted(base.rglob("mlperf_log_detail.txt")):  # every run was made with that round's LoadGen
        patch_detail(log, seeds)


def test_a_tree_in_the_older_layout_is_checked_by_that_rounds_table(tree):
    to_older_layout(tree)
    v51 = load_round("v5.1")
    assert [f.line() for f in check_tree(tree, v51) if f.severity == "error"] == []
    # The same tree judged by the v6.0 rules misses its files where v6.0 keeps them.
    assert {f.rule for f in errors(tree)} >= {"seeds", "required-files", "compliance"}
    # And the older layout's files are really read: lose one, and that file is named.
    measurements = tree / f"closed/{SUBMITTER}/measurements/{SYSTEM}/{BENCH}/Offline"
    (measurements / "user.conf").unlink()
    (found,) = [f for f in check_tree(tree, v51) if f.severity == "error"]
    assert found.rule == "required-files" and found.path.endswith(f"measurements/{SYSTEM}/{BENCH}/Offline/user.conf")
    shutil.rmtree(tree / f"closed/{SUBMITTER}/compliance/{SYSTEM}/{BENCH}/Server/TEST06")
    assert any(
        f.rule == "compliance" and f.path.endswith(f"compliance/{SYSTEM}/{BENCH}/Server/TEST06")
        for f in check_tree(tree, v51)
    )


# -- derived verdicts: each record checked against the other record of the same fact ------------


def _scale_summary_line(summary: Path, label: str, factor: float) -> tuple[str, str]:
    """Multiply the value of one "label : value" line; returns (old, new) as printed."""
    text = summary.read_text()
    match = re.search(rf"^({re.escape(label)}\s*:\s*)(\S+)$", text, re.MULTILINE)
    assert match, f"{label} not in {summary}"
    old = match.group(2)
    new = f"{float(old) * factor:.2f}"
    summary.write_text(text[: match.start(2)] + new + text[match.end(2) :])
    return old, new


def test_a_summary_reporting_more_than_its_detail_log(tree):
    """The issue's first example: the summary claims 10% more throughput than the detail
    log of the same run records."""
    summary = tree / RESULTS / "Offline/performance/run_1/mlperf_log_summary.txt"
    old, new = _scale_summary_line(summary, "Samples per second", 1.1)
    _scale_summary_line(summary, "Tokens per second", 1.1)
    (found,) = only_rule(tree, "summary-detail", "Offline/performance/run_1/mlperf_log_summary.txt")
    assert "Offline/performance/run_1/mlperf_log_detail.txt" in found.message
    assert f"Samples per second '{new}'" in found.message and "result_samples_per_second" in found.message
    assert "Tokens per second" in found.message


def test_printing_precision_is_not_a_disagreement():
    from decimal import Decimal

    from mlperf_repro.loadgen_logs import summary_disagreements

    detail = {"effective_scenario": "Server", "result_completed_tokens_per_second": Decimal("1.01638e+06")}
    assert summary_disagreements("Completed tokens per second: 1016375.00\n", detail) == []
    (found,) = summary_disagreements("Completed tokens per second: 1016390.00\n", detail)
    assert found.key == "result_completed_tokens_per_second"


def test_a_summary_counting_errors_its_detail_log_does_not_hold(tree):
    summary = tree / RESULTS / "Server/accuracy/mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("No errors encountered", "1 ERROR encountered"))
    (found,) = only_rule(tree, "summary-detail", "Server/accuracy/mlperf_log_summary.txt")
    assert "errors encountered" in found.message


def test_a_symbolic_link_is_refused_and_never_followed(tree, tmp_path):
    """The issue's second example: a link in a result folder to a file outside the tree.
    Here it stands for accuracy.txt and points at one below the target: were it followed,
    accuracy-target would judge the outside file."""
    outside = tmp_path / "outside.txt"
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    outside.write_text(txt.read_text().replace("'rouge1': 44.5", "'rouge1': 10.0"))
    txt.unlink()
    os.symlink(outside, txt)
    found = errors(tree)
    assert {f.rule for f in found} == {"hygiene", "required-files"}, [f.line() for f in found]
    link = next(f for f in found if f.rule == "hygiene")
    assert link.path.endswith("Offline/accuracy/accuracy.txt") and str(outside) in link.message
    assert "symbolic link" in next(f for f in found if f.rule == "required-files").message


def test_a_fifo_or_a_hard_link_is_refused_and_a_fifo_never_opened(tree):
    conf = tree / RESULTS / "Server/user.conf"
    conf.unlink()
    os.mkfifo(conf)  # opening it for reading without O_NONBLOCK would hang the checker
    readme = tree / RESULTS / "Server/README.md"
    os.link(readme, tree / RESULTS / "Server/README2.md")
    found = errors(tree)
    assert {f.rule for f in found} == {"hygiene", "required-files"}, [f.line() for f in found]
    messages = {f.path.rsplit("/", 1)[-1]: f.message for f in found if f.rule == "hygiene"}
    assert messages["user.conf"].startswith("FIFO") and "hard link" in messages["README2.md"]
    assert "hard link" in messages["README.md"]


def test_a_file_replaced_after_listing_is_not_read(tree, tmp_path):
    from mlperf_repro.check.files import TreeFiles, UnreadableFile

    files = TreeFiles(tree)
    readme = tree / RESULTS / "Offline/README.md"
    assert files.is_file(readme)
    (tmp_path / "elsewhere").write_text("not the tree's")
    readme.unlink()
    os.symlink(tmp_path / "elsewhere", readme)
    with pytest.raises(UnreadableFile, match="README.md"):
        files.read_text(readme)


def test_a_user_conf_the_run_did_not_use(tree):
    conf = tree / RESULTS / "Server/user.conf"
    logged = re.search(r"Server\.target_qps = ([\d.]+)", conf.read_text()).group(1)
    conf.write_text(re.sub(r"(Server\.target_qps = )[\d.]+", r"\g<1>1500", conf.read_text()))
    assert errors(tree) == []  # a warning: harnesses set settings in code too
    (found,) = check_tree(tree, ROUND, only=["user-conf"])
    assert found.severity == "warning" and found.path.endswith("Server/user.conf")
    assert "requested_server_target_qps = 1500" in found.message and f"= {logged}" in found.message
    assert "Server/performance/run_1/mlperf_log_detail.txt" in found.message


def test_loadgen_looks_up_star_scenario_before_model_star():
    from mlperf_repro.published.loadgen_conf import parse_conf, requested_settings

    lines, problems = parse_conf("m.*.min_duration = 3\n*.Server.min_duration = 2\n*.*.min_duration = 1\nbad\n")
    assert problems and requested_settings(lines, "m", "Server")["requested_min_duration_ms"][1] == 2
    assert requested_settings(lines, "m", "Offline")["requested_min_duration_ms"][1] == 3
    ttft = requested_settings(parse_conf("m.Server.ttft_latency = 450\n")[0], "m", "SingleStream")
    assert ttft["requested_server_ttft_latency"][1] == 450_000_000  # looked up under Server, logged in ns


def test_test06_verdict_against_its_samples(tree):
    log = tree / RESULTS / "Server/TEST06/accuracy/mlperf_log_accuracy.json"
    entries = json.loads(log.read_text())
    entries[0]["token_count"] += 1  # the log's own count no longer is the output's length
    log.write_text(json.dumps(entries))
    (found,) = only_rule(tree, "compliance-evidence", "Server/TEST06/verify_accuracy.txt")
    assert "'Sample length check pass: True' where the samples give False" in found.message
    assert str(entries[0]["qsl_idx"]) in found.message


def _resnet_with(tree: Path, test: str) -> Path:
    """A resnet Offline folder (compliance TEST01, TEST04) made of the llama2 one, with a
    TEST folder holding a performance run 0.97x the result's and a verify file that passes."""
    resnet = tree / f"closed/{SUBMITTER}/results/{SYSTEM}/resnet/Offline"
    shutil.copytree(tree / RESULTS / "Offline", resnet)
    perf = resnet / "performance/run_1/mlperf_log_detail.txt"
    rate = json.loads(
        next(line for line in perf.read_text().splitlines() if '"result_samples_per_second"' in line)[8:]
    )["value"]
    audit = resnet / test / "performance/run_1"
    audit.mkdir(parents=True)
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
        shutil.copyfile(resnet / "performance/run_1" / name, audit / name)
    patch_detail(audit / "mlperf_log_detail.txt", {"result_samples_per_second": round(rate * 0.97, 2)})
    # TEST04's script prints "reference score", TEST01's "Reference score".
    reference, audited = ("reference", "test") if test == "TEST04" else ("Reference", "Test")
    (resnet / test / "verify_performance.txt").write_text(
        f"{reference} score = {rate}\n{audited} score = {round(rate * 0.97, 2)}\nTEST PASS\n"
    )
    return resnet


@pytest.mark.parametrize("test", ["TEST04", "TEST01"])
def test_a_performance_verdict_redone_from_the_two_runs(tree, test):
    resnet = _resnet_with(tree, test)
    assert check_tree(tree, ROUND, only=["compliance-evidence"]) == []
    audit = resnet / test / "performance/run_1/mlperf_log_detail.txt"
    rate = float(re.search(r'"result_samples_per_second", "value": ([\d.]+)', audit.read_text()).group(1))
    patch_detail(audit, {"result_samples_per_second": rate * 1.5})  # TEST04: too fast; TEST01: out of band
    found = check_tree(tree, ROUND, only=["compliance-evidence"])
    assert {f.path for f in found} == {
        f"closed/{SUBMITTER}/results/{SYSTEM}/resnet/Offline/{test}/verify_performance.txt"
    }
    assert any("test score" in f.message for f in found) and any("says TEST PASS" in f.message for f in found)


def test_a_verify_file_computed_from_another_performance_run(tree):
    """Seen in published trees: verify_performance.txt copied from another result."""
    resnet = _resnet_with(tree, "TEST04")
    verify = resnet / "TEST04/verify_performance.txt"
    verify.write_text(re.sub(r"reference score = \S+", "reference score = 25200.5", verify.read_text()))
    (found,) = check_tree(tree, ROUND, only=["compliance-evidence"])
    assert "reference score = 25200.5" in found.message and "resnet/Offline/performance/run_1" in found.message


def test_test09_mean_output_length_against_its_samples(tree):
    gpt = tree / f"closed/{SUBMITTER}/results/{SYSTEM}/gpt-oss-120b/Offline"
    shutil.copytree(tree / RESULTS / "Offline", gpt)
    entries = [
        {"seq_id": i, "qsl_idx": i, "data": (b"\x05\x00\x00\x00" * (1200 + i)).hex(), "token_count": 1200 + i}
        for i in range(4)
    ]
    (gpt / "TEST09/accuracy").mkdir(parents=True)
    (gpt / "TEST09/accuracy/mlperf_log_accuracy.json").write_text(json.dumps(entries))
    verify = gpt / "TEST09/verify_output_len.txt"

    def mean_findings():  # (4 answers, not the ~6,400 TEST09 samples: that count has its own test)
        return [f for f in check_tree(tree, ROUND, only=["compliance-evidence"]) if "sampled answer" not in f.message]

    verify.write_text("Mean output tokens: 1201.50\nTEST PASS\n")
    assert mean_findings() == []
    verify.write_text("Mean output tokens: 1301.50\nTEST PASS\n")
    (found,) = mean_findings()
    assert "1301.50" in found.message and "give 1201.50" in found.message


def test_test09_at_test_scale_is_judged_on_the_band_its_verify_file_scaled(runs, tmp_path):
    """A test-scale stand-in answers in tens of tokens: its TEST09 band is the round's scaled to
    its own performance run (stages.compliance), and the band must keep the round's proportions."""
    small = build_tree(tmp_path / "small", runs, full_scale=False)
    gpt = small / f"closed/{SUBMITTER}/results/{SYSTEM}/gpt-oss-120b/Offline"
    shutil.copytree(small / RESULTS / "Offline", gpt)
    entries = [
        {"seq_id": i, "qsl_idx": i, "data": (b"\x05\x00\x00\x00" * 35).hex(), "token_count": 35} for i in range(4)
    ]
    (gpt / "TEST09/accuracy").mkdir(parents=True)
    (gpt / "TEST09/accuracy/mlperf_log_accuracy.json").write_text(json.dumps(entries))
    verify = gpt / "TEST09/verify_output_len.txt"
    band = ROUND.compliance_test("TEST09")
    low, high = band["min_output_tokens"], band["max_output_tokens"]
    factor = 35.3 / band["reference_output_tokens"]

    def write(a: float, b: float, verdict: str = "TEST PASS") -> list:
        verify.write_text(f"Mean output tokens: 35.00\nAllowed range: [{a}, {b}]\n{verdict}\n")
        return check_tree(small, ROUND, only=["compliance-evidence"])

    assert write(round(low * factor, 2), round(high * factor, 2)) == []
    (found,) = write(round(low * factor, 2), round(high * factor * 1.2, 2))
    assert "not the round's band" in found.message
    (found,) = write(round(low * factor * 1.2, 2), round(high * factor * 1.2, 2))  # 35 below the band
    assert "says TEST PASS" in found.message and "average 35.00 tokens" in found.message
    verify.write_text("Mean output tokens: 35.00\nTEST PASS\n")
    (found,) = check_tree(small, ROUND, only=["compliance-evidence"])
    assert "without its 'Allowed range" in found.message


def test_an_accuracy_run_covers_the_qsl_when_the_setting_asks_for_more(tree):
    """gpt-oss-120b's accuracy_sample_count setting is 4,395; a test-scale dataset holds fewer,
    and LoadGen issues each of them once: gen_num is checked against the QSL's total."""
    detail = tree / RESULTS / "Server/accuracy/mlperf_log_detail.txt"
    total = int(re.search(r'"qsl_reported_total_count", "value": (\d+)', detail.read_text()).group(1))
    patch_detail(detail, {"effective_accuracy_sample_count": total + 4395})
    assert errors(tree) == []
    patch_detail(detail, {"qsl_reported_total_count": total - 1})
    found = {f.rule: f for f in errors(tree)}
    assert f"an accuracy run of {total - 1}" in found["accuracy-evidence"].message
    assert f"covered {total - 1} samples" in found["accuracy-log"].message  # and the dataset has more


def test_tokens_per_sample_against_its_own_counts(tree):
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    txt.write_text(txt.read_text().replace("'tokens_per_sample': 295.0", "'tokens_per_sample': 300.0"))
    (found,) = only_rule(tree, "accuracy-evidence", "Offline/accuracy/accuracy.txt")
    assert "gen_tok_len / gen_num = 295.00" in found.message


def test_gen_num_against_the_accuracy_run(tree):
    txt = tree / RESULTS / "Server/accuracy/accuracy.txt"
    text = txt.read_text()
    txt.write_text(
        text.replace("'gen_num': 24576", "'gen_num': 12288").replace("'gen_tok_len': 7249920", "'gen_tok_len': 3624960")
    )
    (found,) = only_rule(tree, "accuracy-evidence", "Server/accuracy/accuracy.txt")
    assert "gen_num 12288" in found.message and "Server/accuracy/mlperf_log_detail.txt" in found.message


def test_a_complete_accuracy_log_against_its_hash_and_token_counts(runs, tmp_path):
    """A test-scale log stays whole: its sha256 is the hash line's, its samples the counts'."""
    small = build_tree(tmp_path / "small", runs, full_scale=False)
    log = small / RESULTS / "Offline/accuracy/mlperf_log_accuracy.json"
    assert json.loads(log.read_text())  # complete
    entries = json.loads(log.read_text())
    log.write_text(json.dumps(entries[:-1]))  # one sample fewer than the run logged
    found = [f for f in check_tree(small, ROUND) if f.severity == "error"]
    assert {f.rule for f in found} == {"accuracy-evidence"}, [f.line() for f in found]
    assert any("sha256" in f.message for f in found) and any("logs 31 samples" in f.message for f in found)


@pytest.mark.parametrize(
    "breakage, fragment",
    [
        (lambda r: shutil.copytree(r / "Offline", r / "offline"), "Offline and offline"),
        (lambda r: shutil.copytree(r / "Offline/performance/run_1", r / "Offline/performance/run_2"), "run_2"),
        (lambda r: shutil.copytree(r / "Server/TEST06", r / "Server/compliance/TEST06"), "compliance/TEST06"),
        (
            lambda r: (
                (r / "Server/measurements").mkdir() or shutil.copy(r / "Server/user.conf", r / "Server/measurements")
            ),
            "measurements/user.conf",
        ),
        (lambda r: (r / "notes.txt").write_text("x"), f"{BENCH}/notes.txt"),
        (lambda r: (r.parent / "out.csv").write_text("x"), f"{SYSTEM}/out.csv"),
    ],
)
def test_an_ambiguous_tree(tree, breakage, fragment):
    breakage(tree / RESULTS)
    found = only_rule(tree, "structure")
    assert any(fragment in f.path or fragment in f.message for f in found), [f.line() for f in found]


def test_what_the_submitter_folder_holds_beyond_the_layout_is_a_warning(tree):
    (tree / f"closed/{SUBMITTER}/Makefile").write_text("all:\n")
    assert errors(tree) == []
    (found,) = check_tree(tree, ROUND, only=["structure"])
    assert found.severity == "warning" and found.path.endswith("/Makefile")


def test_windows_line_ends_read_as_python_text_mode_reads_them(tree):
    """Published v5.1 accuracy.txt files end lines with CR LF; their hash line is read."""
    txt = tree / RESULTS / "Offline/accuracy/accuracy.txt"
    txt.write_bytes(txt.read_bytes().replace(b"\n", b"\r\n"))
    assert errors(tree) == []


def test_a_setting_printed_in_full_is_compared_exactly():
    """Found by the generated mutations: "max_async_queries : 1" against a logged 0 is a
    disagreement (an integer is printed in full), while a double rounded to 6 digits in one
    log and printed with 2 decimals in the other is not."""
    from mlperf_repro.loadgen_logs import values_agree

    assert not values_agree("1", 0) and not values_agree("3651", 3650)
    assert values_agree("123456.79", 123457)
