"""v6.1 results of the MLCommons endpoints harness in our checker.

The trees are v6.1 submissions whose llama3.1-8b results (Offline and Server) come from
the endpoints harness: per scenario folder the resolved ``config.yaml``,
``performance/result_summary.json`` (with the harness's ``report.txt``) and
``accuracy/accuracy_results.json``, synthetic files in the shapes the harness writes, and
no LoadGen log. The good tree passes every rule that applies; each test breaks one thing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from tree_factory import DESCRIPTION, SUBMITTER, SYSTEM

from mlperf_repro.benchmarks import load_round
from mlperf_repro.check.endpoints_logs import get_path, read_endpoints, score_readings
from mlperf_repro.check.tree import check_tree, load_contexts
from mlperf_repro.package.systems import system_description

ROUND = load_round("v6.1")
BENCH = "llama3.1-8b"
RESULTS = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"
MS = 1_000_000  # ns


def _series(p99_ns: float, avg_ns: float) -> dict:
    """One latency series as result_summary.json holds it (ns)."""
    grid = {"50.0": avg_ns, "90.0": avg_ns * 1.3, "95.0": avg_ns * 1.4, "99.0": p99_ns * 0.98, "99.9": p99_ns * 1.2}
    return {
        "total": 1000,
        "min": avg_ns * 0.2,
        "max": p99_ns * 1.5,
        "avg": avg_ns,
        "std_dev": avg_ns * 0.3,
        "median": avg_ns,
        "percentiles": grid,
        "early_stopping_percentiles": {**grid, "99.0": p99_ns, "99.9": None},
        "histogram": {"buckets": [[0, p99_ns], [p99_ns, p99_ns * 2]], "counts": [990, 10]},
    }


def result_summary(scenario: str, *, ttft_p99_ms: float = 1500.0, failed: int = 0) -> dict:
    issued = 13368 if scenario == "Offline" else 300000
    duration_ns = 660 * 10**9
    return {
        "version": "0.9.3",
        "git_sha": "0123abcd",
        "test_started_at": 1234567890123,
        "n_samples_issued": issued,
        "n_samples_completed": issued - failed,
        "n_samples_failed": failed,
        "duration_ns": duration_ns,
        "state": "complete",
        "complete": True,
        "ttft": _series(ttft_p99_ms * MS, 400 * MS),
        "tpot": _series(60 * MS, 30 * MS),
        "latency": _series(9000 * MS, 4000 * MS),
        "input_sequence_lengths": {"total": issued, "min": 100, "max": 2000, "avg": 870.0},
        "output_sequence_lengths": {"total": issued, "min": 3, "max": 128, "avg": 94.5},
        "legacy_loadgen_window_duration_ns": None if scenario == "Offline" else duration_ns - 10**9,
        "qps": issued / 660,
        "tps": issued * 94.5 / 660,
        "finish_reason_counts": {"stop": issued - failed, "length": 0},
        "run_config": {"load_pattern": "max_throughput" if scenario == "Offline" else "poisson"},
    }


def config_yaml(scenario: str) -> dict:
    seeds = ROUND.seeds
    online = scenario != "Offline"
    return {
        "name": f"submission-llama3.1-8b-{scenario.lower()}",
        "version": "1.0",
        "type": "online" if online else "offline",
        "model_params": {"name": "meta-llama/Llama-3.1-8B-Instruct", "max_new_tokens": 128, "streaming": "on"},
        "datasets": [
            {"name": "cnn_dailymail_perf", "type": "performance", "path": "cnn_eval.json", "samples": 13368},
            {
                "name": "cnn_dailymail",
                "type": "accuracy",
                "path": "cnn_eval.json",
                "samples": 13368,
                "accuracy_config": {"eval_method": "rouge", "ground_truth": "highlights", "num_repeats": 1},
            },
        ],
        "settings": {
            "runtime": {
                "min_duration_ms": 600000,
                "max_duration_ms": 7200000,
                "scheduler_random_seed": seeds["schedule_rng_seed"],
                "dataloader_random_seed": seeds["sample_index_rng_seed"],
                "n_samples_to_issue": 13368 if not online else 300000,
            },
            "load_pattern": {"type": "poisson", "target_qps": 455.0} if online else {"type": "max_throughput"},
            "client": {"num_workers": 8},
        },
        "endpoint_config": {"endpoints": ["http://localhost:8000"], "api_key": None},
    }


GOOD_ROUGE = {
    "rouge1": "38.8383",
    "rouge2": "16.0476",
    "rougeL": "24.5941",
    "rougeLsum": "35.8728",
    "gen_len": "8204099",
    "gen_num": "13368",
}


def accuracy_results(score: dict | float | None = None) -> dict:
    return {
        "accuracy_scores": [
            {
                "dataset_name": "cnn_dailymail",
                "extractor": None,
                "ground_truth_column": "highlights",
                "score": GOOD_ROUGE if score is None else score,
                "unit_samples": 13368,
                "num_repeats": 1,
                "total_samples": 13368,
                "duration_s": 812.4,
                "complete": True,
                "dataset_type": "accuracy",
                "response_counts": {"issued": 13368, "scored": 13368, "failed": 0},
            }
        ]
    }


def write_endpoints_result(folder: Path, scenario: str) -> None:
    (folder / "performance").mkdir(parents=True)
    (folder / "accuracy").mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(config_yaml(scenario), sort_keys=False))
    (folder / "performance" / "result_summary.json").write_text(json.dumps(result_summary(scenario), indent=2))
    (folder / "performance" / "report.txt").write_text("----------------- Summary -----------------\n")
    (folder / "accuracy" / "accuracy_results.json").write_text(json.dumps(accuracy_results(), indent=2))
    (folder / "README.md").write_text("inference-endpoint benchmark from-config config.yaml\n")
    (folder / "measurements.json").write_text(
        json.dumps(
            {
                "input_data_types": "int32",
                "retraining": "No",
                "starting_weights_filename": "Llama-3.1-8B-Instruct",
                "weight_data_types": "fp8",
                "weight_transformations": "quantization",
            }
        )
    )


WAN = "wan-2.2-t2v-a14b"


def write_wan_result(folder: Path, scenario: str) -> None:
    """A wan-2.2-t2v-a14b result: a SingleStream run is a `submission` run at concurrency 1
    (benchmark_mode online), videos of the named samples, the TEST04 audit it must carry."""
    write_endpoints_result(folder, "Offline" if scenario == "Offline" else "Server")
    config = config_yaml("Offline")
    config.update(name=f"submission-wan22-{scenario.lower()}", model_params={"name": "wan22", "streaming": "off"})
    if scenario == "SingleStream":
        config.update(type="submission", benchmark_mode="online")
        config["settings"]["load_pattern"] = {"type": "concurrency", "target_concurrency": 1}
    config["settings"]["runtime"]["n_samples_to_issue"] = 248
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    summary = result_summary("Offline")
    summary.update(n_samples_issued=248, n_samples_completed=248, qps=248 / 660, tps=None, ttft={}, tpot={})
    summary["latency"] = _series(40e9, 26e9)
    (folder / "performance" / "result_summary.json").write_text(json.dumps(summary, indent=2))
    results = accuracy_results(71.2)
    results["accuracy_scores"][0].update(
        dataset_name="wan22_vbench", ground_truth_column="prompt", unit_samples=248, total_samples=248
    )
    results["accuracy_scores"][0]["response_counts"] = {"issued": 248, "scored": 248, "failed": 0}
    (folder / "accuracy" / "accuracy_results.json").write_text(json.dumps(results, indent=2))
    videos = folder / "accuracy" / "videos"
    videos.mkdir()
    for stem in ROUND.benchmark(WAN).accuracy["extra_files"]["videos"]:
        (videos / f"{stem}.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    (folder / "audit").mkdir()
    (folder / "audit" / "audit_output_caching_test.json").write_text(
        json.dumps({"test": "output_caching_test", "passed": True, "threshold": 0.2})
    )


QWEN = "qwen3-vl-235b-a22b"


def write_qwen_result(folder: Path, scenario: str, *, p99_ms: float = 9000.0, f1: float = 0.7911) -> None:
    """A qwen3-vl-235b-a22b result: end-to-end latency against the scenario's target, the
    hierarchical F1 as a plain number (a fraction)."""
    write_endpoints_result(folder, scenario)
    config = config_yaml(scenario)
    config.update(name=f"submission-qwen3-vl-{scenario.lower()}", model_params={"name": "Qwen/Qwen3-VL-235B-A22B"})
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    summary = result_summary(scenario)
    summary["latency"] = _series(p99_ms * MS, 4000 * MS)
    (folder / "performance" / "result_summary.json").write_text(json.dumps(summary, indent=2))
    results = accuracy_results(f1)
    results["accuracy_scores"][0].update(dataset_name="shopify", unit_samples=48289, total_samples=48289)
    results["average_accuracy"] = f1
    (folder / "accuracy" / "accuracy_results.json").write_text(json.dumps(results, indent=2))


def build_endpoints_tree(dest: Path, scenarios: dict[str, str] | None = None, bench: str = BENCH) -> Path:
    """dest/closed/TestOrg/... with endpoints results of llama3.1-8b (Offline, Server) or
    wan-2.2-t2v-a14b (Offline, SingleStream); `scenarios`: folder name -> scenario."""
    base = dest / "closed" / SUBMITTER
    (base / "src").mkdir(parents=True)
    (base / "src" / "README.md").write_text("code\n")
    (base / "systems").mkdir()
    desc = system_description(
        DESCRIPTION, rules=ROUND, division="closed", submitter=SUBMITTER, provenance={}, test_scale=False
    )
    (base / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc, indent=2))
    default = {"Offline": "Offline", "SingleStream": "SingleStream"} if bench == WAN else None
    for folder, scenario in (scenarios or default or {"Offline": "Offline", "Server": "Server"}).items():
        write = {WAN: write_wan_result, QWEN: write_qwen_result}.get(bench, write_endpoints_result)
        write(base / "results" / SYSTEM / bench / folder, scenario)
    return dest


@pytest.fixture(scope="module")
def good_tree(tmp_path_factory):
    return build_endpoints_tree(tmp_path_factory.mktemp("endpoints") / "tree")


@pytest.fixture
def tree(good_tree, tmp_path):
    copy = tmp_path / "tree"
    shutil.copytree(good_tree, copy)
    return copy


def errors(root: Path) -> list:
    return [f for f in check_tree(root, ROUND) if f.severity == "error"]


def only_rule(root: Path, rule: str, path_suffix: str) -> list:
    found = errors(root)
    assert found, f"{rule} did not fire"
    assert {f.rule for f in found} == {rule}, [f.line() for f in found]
    assert all(f.path.endswith(path_suffix) for f in found), [f.line() for f in found]
    return found


def test_good_endpoints_tree_passes(good_tree):
    assert check_tree(good_tree, ROUND) == []


def test_endpoints_folder_reads_as_a_loadgen_log(good_tree):
    (ctx,), _ = load_contexts(good_tree, ROUND)
    server = next(r for r in ctx.results if r.scenario == "Server")
    assert server.is_endpoints
    perf = server.detail("performance/run_1/mlperf_log_detail.txt")
    assert perf["effective_scenario"] == "Server" and perf["endpoints_test_type"] == "online"
    assert perf["result_first_token_99.00_percentile_latency_ns"] == 1500 * MS
    assert perf["result_time_per_output_token_99.00_percentile_ns"] == 60 * MS
    assert perf["result_completed_samples_per_sec"] == pytest.approx(300000 / 660)
    assert perf["effective_min_duration_ms"] == 600000
    assert perf["effective_schedule_rng_seed"] == ROUND.seeds["schedule_rng_seed"]
    assert perf["effective_sample_index_rng_seed"] == ROUND.seeds["sample_index_rng_seed"]
    assert perf["num_errors"] == 0 and perf["errors"] == []
    offline = next(r for r in ctx.results if r.scenario == "Offline")
    perf = offline.detail("performance/run_1/mlperf_log_detail.txt")
    # No rate in the harness's Offline summary's LoadGen terms: issued / duration.
    assert perf["effective_scenario"] == "Offline"
    assert perf["result_samples_per_second"] == pytest.approx(13368 / 660)
    acc = offline.detail("accuracy/mlperf_log_detail.txt")
    assert acc["effective_accuracy_sample_count"] == 13368
    assert acc["accuracy_score"]["rouge1"] == "38.8383"
    assert offline.log_path("accuracy/mlperf_log_detail.txt").name == "accuracy_results.json"


def test_dotted_paths():
    data = {"ttft": {"early_stopping_percentiles": {"99": 5, "99.9": 7}}, "empty": {}}
    assert get_path(data, "ttft.early_stopping_percentiles.99.0") == 5
    assert get_path(data, "ttft.early_stopping_percentiles.99.9") == 7
    assert get_path(data, "ttft.avg") is None and get_path(data, "empty") is None


def test_ttft_over_the_limit(tree):
    path = tree / RESULTS / "Server" / "performance" / "result_summary.json"
    path.write_text(json.dumps(result_summary("Server", ttft_p99_ms=2500.0)))
    found = only_rule(tree, "latency", "Server/performance/result_summary.json")
    assert "TTFT 2500.0 ms" in found[0].message and "2000" in found[0].message


def test_missing_result_summary(tree):
    (tree / RESULTS / "Offline" / "performance" / "result_summary.json").unlink()
    found = only_rule(tree, "required-files", "Offline/performance/result_summary.json")
    assert found[0].message == "missing or empty"


def test_accuracy_below_target(tree):
    path = tree / RESULTS / "Offline" / "accuracy" / "accuracy_results.json"
    path.write_text(json.dumps(accuracy_results({**GOOD_ROUGE, "rouge1": "30.1"})))
    found = only_rule(tree, "accuracy-target", "Offline/accuracy/accuracy_results.json")
    assert found[0].message.startswith("rouge1 30.1 < target 38.39")


def test_missing_accuracy_score(tree):
    path = tree / RESULTS / "Server" / "accuracy" / "accuracy_results.json"
    data = accuracy_results()
    del data["accuracy_scores"][0]["score"]
    path.write_text(json.dumps(data))
    assert "no accuracy score" in only_rule(tree, "accuracy-target", "Server/accuracy/accuracy_results.json")[0].message


def test_accuracy_run_short_of_the_dataset(tree):
    path = tree / RESULTS / "Offline" / "accuracy" / "accuracy_results.json"
    data = accuracy_results()
    data["accuracy_scores"][0]["total_samples"] = 5000
    path.write_text(json.dumps(data))
    found = only_rule(tree, "accuracy-log", "Offline/accuracy/accuracy_results.json")
    assert "covered 5000 samples" in found[0].message


def test_unlisted_benchmark_through_endpoints(tree):
    # llama2-70b-99.9 is a v6.1 benchmark, but not one the endpoints harness may submit.
    results = tree / f"closed/{SUBMITTER}/results/{SYSTEM}"
    (results / BENCH).rename(results / "llama2-70b-99.9")
    found = only_rule(tree, "required-files", "config.yaml")
    assert len(found) == 2
    assert "llama2-70b-99.9 needs LoadGen logs" in found[0].message and "llama3.1-8b" in found[0].message


def test_wrong_seed(tree):
    path = tree / RESULTS / "Offline" / "config.yaml"
    config = config_yaml("Offline")
    config["settings"]["runtime"]["dataloader_random_seed"] = 42
    path.write_text(yaml.safe_dump(config))
    found = only_rule(tree, "seeds", "Offline/performance/result_summary.json")
    assert "sample_index_rng_seed=42" in found[0].message and "dataloader_random_seed" in found[0].message


def test_short_run(tree):
    path = tree / RESULTS / "Server" / "config.yaml"
    config = config_yaml("Server")
    config["settings"]["runtime"]["min_duration_ms"] = 60000
    path.write_text(yaml.safe_dump(config))
    only_rule(tree, "run-length", "Server/performance/result_summary.json")


def test_failed_samples(tree):
    path = tree / RESULTS / "Server" / "performance" / "result_summary.json"
    path.write_text(json.dumps(result_summary("Server", failed=3)))
    found = only_rule(tree, "loadgen-errors", "Server/performance/result_summary.json")
    assert "3 sample(s) failed" in found[0].message


def test_offline_config_in_a_server_folder(tree):
    (tree / RESULTS / "Server" / "config.yaml").write_text(yaml.safe_dump(config_yaml("Offline")))
    found = only_rule(tree, "scenario-match", "Server/performance/result_summary.json")
    assert "Offline run" in found[0].message


def test_failed_audit(tree):
    audit = tree / RESULTS / "Server" / "audit"
    audit.mkdir()
    (audit / "audit_consistency_output_test.json").write_text(
        json.dumps({"test": "consistency_output_test", "passed": False})
    )
    found = only_rule(tree, "compliance", "Server/audit/audit_consistency_output_test.json")
    assert "TEST06" in found[0].message


def test_online_folder_is_not_a_server_folder(tmp_path):
    # The official checker reads an "online" folder as Server when it judges the result,
    # but its scenario-set check reads the folder's name: "online" is unknown and the
    # Server/Interactive result missing. We say the same, and how to fix it.
    root = build_endpoints_tree(tmp_path / "tree", {"Offline": "Offline", "online": "Server"})
    found = errors(root)
    assert {f.rule for f in found} == {"scenario-set"}, [f.line() for f in found]
    assert any("needs at least one of ['Server', 'Interactive']" in f.message for f in found)
    assert any("no scenario online" in f.message and "folder Server" in f.message for f in found)


def test_loadgen_rounds_ignore_endpoints_files(good_tree):
    # v6.0 has no endpoints harness: the same folders lack LoadGen's files there.
    found = [f for f in check_tree(good_tree, load_round("v6.0")) if f.rule == "required-files"]
    assert any(f.path.endswith("Offline/performance/run_1/mlperf_log_detail.txt") for f in found)


def test_read_endpoints_without_summary(tmp_path):
    folder = tmp_path / "Offline"
    write_endpoints_result(folder, "Offline")
    (folder / "performance" / "result_summary.json").unlink()
    assert read_endpoints(folder, "performance", ROUND["endpoints"], "Offline") is None


def test_wan_with_its_audit_passes(tmp_path):
    root = build_endpoints_tree(tmp_path / "tree", bench=WAN)
    (ctx,), _ = load_contexts(root, ROUND)
    single = next(r for r in ctx.results if r.scenario == "SingleStream")
    perf = single.detail("performance/run_1/mlperf_log_detail.txt")
    assert perf["effective_scenario"] == "SingleStream" and perf["endpoints_test_type"] == "submission"
    assert perf["result_mean_latency_ns"] == 26e9
    assert check_tree(root, ROUND) == []


def test_wan_without_its_caching_audit(tmp_path):
    root = build_endpoints_tree(tmp_path / "tree", bench=WAN)
    results = root / f"closed/{SUBMITTER}/results/{SYSTEM}/{WAN}"
    shutil.rmtree(results / "SingleStream" / "audit")
    found = only_rule(root, "compliance", "SingleStream/audit/audit_output_caching_test.json")
    assert "TEST04" in found[0].message
    # Other audits are not demanded: the llama3.1-8b tree carries no TEST06 audit and passes.


def test_score_readings():
    assert score_readings(0.5, {"metric": "f1"}, ["f1"]) == {"f1": 0.5}
    assert score_readings({"F1": "0.8"}, {"metric": "f1"}, ["f1"]) == {"f1": 0.8}
    assert score_readings({"rouge1": "38.9", "gen_len": "10"}, {}, ["rouge1", "rougeL"]) == {"rouge1": 38.9}
    # A benchmark whose scorer's units the table does not know: recorded, not judged.
    assert score_readings(71.2, None, ["vbench_score"]) == {}


def test_cli_tells_the_round_from_endpoints_seeds(good_tree):
    # No LoadGen log carries seeds: the harness's dataloader seed names the round.
    from mlperf_repro.check.cli import check_path

    rules, findings = check_path(good_tree)
    assert rules.name == "v6.1" and findings == []


def test_qwen3_vl_latency_and_f1(tmp_path):
    # Not a token-latency benchmark: its p99 latency against the target; its score a number.
    root = build_endpoints_tree(tmp_path / "tree", bench=QWEN)
    assert check_tree(root, ROUND) == []
    server = root / f"closed/{SUBMITTER}/results/{SYSTEM}/{QWEN}/Server"
    shutil.rmtree(server)
    write_qwen_result(server, "Server", p99_ms=13000.0, f1=0.70)
    found = errors(root)
    assert sorted(f.rule for f in found) == ["accuracy-target", "latency"], [f.line() for f in found]
    by_rule = {f.rule: f for f in found}
    assert by_rule["latency"].path.endswith("Server/performance/result_summary.json")
    assert "p99 latency 13000.0 ms is over the Server target 12000 ms" in by_rule["latency"].message
    assert by_rule["accuracy-target"].path.endswith("Server/accuracy/accuracy_results.json")
    assert by_rule["accuracy-target"].message.startswith("f1 0.7 < target 0.7824")


def test_compare_and_the_official_report_read_endpoints_results(good_tree):
    """The same tables serve compare and the official-style report: an endpoints result's
    metric is the harness's throughput, read under its own result field."""
    from mlperf_repro.compare.records import read_submission
    from mlperf_repro.report.official import official_rows

    records = {r.scenario: r for r in read_submission(good_tree, "partner", ROUND)}
    assert records["Server"].metric == pytest.approx(300000 / 660)
    assert records["Offline"].metric == pytest.approx(13368 / 660)
    assert records["Server"].ttft_p99_ms == pytest.approx(1500)
    rows = {row["Scenario"]: row for row in official_rows(good_tree, ROUND)}
    assert float(rows["Offline"]["Result"]) == pytest.approx(13368 / 660)
