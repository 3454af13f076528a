"""The round rules tables (src/mlperf_repro/rounds/*.yaml) are complete and consistent.

Each round's benchmark list below is written out from that round's official model table,
so a table that loses or gains a benchmark fails here. The accuracy.txt samples are our
own lines, shaped like the ones the published results hold (values made up to pass).
"""

from __future__ import annotations

import re

import pytest

from mlperf_repro.benchmarks import available_rounds, load_round

ROUND_BENCHMARKS = {
    "v5.1": [
        "resnet",
        "retinanet",
        "bert-99",
        "bert-99.9",
        "dlrm-v2-99",
        "dlrm-v2-99.9",
        "3d-unet-99",
        "3d-unet-99.9",
        "llama3.1-8b",
        "llama3.1-8b-edge",
        "llama2-70b-99",
        "llama2-70b-99.9",
        "stable-diffusion-xl",
        "mixtral-8x7b",
        "llama3.1-405b",
        "rgat",
        "pointpainting",
        "deepseek-r1",
        "whisper",
    ],
    "v6.0": [
        "resnet",
        "retinanet",
        "bert-99",
        "bert-99.9",
        "3d-unet-99",
        "3d-unet-99.9",
        "llama3.1-8b",
        "llama3.1-8b-edge",
        "llama2-70b-99",
        "llama2-70b-99.9",
        "stable-diffusion-xl",
        "mixtral-8x7b",
        "llama3.1-405b",
        "rgat",
        "pointpainting",
        "deepseek-r1",
        "whisper",
        "gpt-oss-120b",
        "wan-2.2-t2v-a14b",
        "qwen3-vl-235b-a22b",
        "dlrm-v3",
        "yolo-95",
        "yolo-99",
    ],
    "v6.1": [
        "resnet",
        "bert-99",
        "bert-99.9",
        "3d-unet-99",
        "3d-unet-99.9",
        "llama3.1-8b",
        "llama3.1-8b-edge",
        "llama2-70b-99.9",
        "stable-diffusion-xl",
        "rgat",
        "deepseek-r1",
        "whisper",
        "gpt-oss-120b",
        "wan-2.2-t2v-a14b",
        "qwen3-vl-235b-a22b",
        "qwen3.6-27b",
        "dlrm-v3",
        "yolo-95",
        "yolo-99",
        "e2e-rag-qna",
        "e2e-rag-db",
    ],
}
# The benchmarks the workflow runs (the table gives them a task).
RUNNABLE = {
    "v5.1": set(),
    "v6.0": {"llama2-70b-99", "llama2-70b-99.9", "gpt-oss-120b", "wan-2.2-t2v-a14b"},
    "v6.1": {"llama2-70b-99.9", "gpt-oss-120b", "wan-2.2-t2v-a14b"},
}
ROUNDS = sorted(ROUND_BENCHMARKS)
PAIRS = [(r, b) for r in ROUNDS for b in ROUND_BENCHMARKS[r]]
REQUIRED_KEYS = [
    "suites",
    "loadgen_model",
    "scenarios",
    "latency_ms",
    "min_query_count",
    "performance_sample_count",
    "accuracy_sample_count",
    "use_token_latencies",
    "result_field",
    "result_unit",
    "accuracy",
    "compliance",
]
SCENARIOS = {"Offline", "Server", "Interactive", "SingleStream", "MultiStream"}
SYSTEM_TYPES = {"datacenter", "edge", "datacenter,edge"}


def facts(round_name: str, benchmark: str) -> dict:
    return load_round(round_name).benchmark(benchmark).facts


def test_every_round_has_a_table():
    assert set(ROUNDS) <= set(available_rounds())


@pytest.mark.parametrize("round_name", ROUNDS)
def test_the_table_holds_exactly_the_rounds_benchmarks(round_name):
    rules = load_round(round_name)
    assert rules.name == round_name
    assert sorted(rules.benchmark_names) == sorted(ROUND_BENCHMARKS[round_name])
    assert {b for b in rules.benchmark_names if rules.benchmark(b).runnable} == RUNNABLE[round_name]


@pytest.mark.parametrize(("round_name", "benchmark"), PAIRS)
def test_every_benchmark_has_the_checker_facts(round_name, benchmark):
    f = facts(round_name, benchmark)
    missing = [key for key in REQUIRED_KEYS if key not in f]
    assert not missing, f"{round_name} {benchmark} lacks {missing}"
    allowed = set(f["loadgen_model"])
    assert allowed and allowed <= SCENARIOS
    assert all(isinstance(name, str) and name for name in f["loadgen_model"].values())
    if "Offline" in allowed:
        assert f["offline_min_samples_per_query"] > 0
    assert set(f["suites"]) <= {"datacenter", "edge"}
    assert f["performance_sample_count"] > 0
    counts = f["accuracy_sample_count"]
    assert all(n > 0 for n in (counts.values() if isinstance(counts, dict) else [counts]))
    assert isinstance(f["use_token_latencies"], bool)
    assert set(f["result_field"]) == allowed
    if isinstance(f["result_unit"], dict):
        assert set(f["result_unit"]) == allowed
    assert set(f["min_query_count"]) <= allowed
    assert set(f["latency_ms"]) <= allowed
    for limits in f["latency_ms"].values():
        assert limits and set(limits) <= {"ttft", "tpot", "target"}
    if f["use_token_latencies"]:
        for scenario in allowed & {"Server", "Interactive"}:
            assert {"ttft", "tpot"} <= set(f["latency_ms"][scenario]), (benchmark, scenario)
    assert all(re.fullmatch(r"TEST0\d", test) for test in f["compliance"])


@pytest.mark.parametrize(("round_name", "benchmark"), PAIRS)
def test_every_scenario_of_a_rule_has_a_loadgen_model(round_name, benchmark):
    f = facts(round_name, benchmark)
    rules = f["scenarios"]
    assert rules and set(rules) <= SYSTEM_TYPES
    for suite in f["suites"]:
        assert suite in rules, f"{benchmark} is in the {suite} suite but has no {suite} rule"
    named = set()
    for system_type, rule in rules.items():
        assert set(rule) <= {"required", "optional", "at_least_one_of"}
        required, optional = set(rule.get("required") or []), set(rule.get("optional") or [])
        one_of = set(rule.get("at_least_one_of") or [])
        assert required, (benchmark, system_type)
        assert not required & optional
        assert one_of <= optional
        named |= required | optional
    assert named <= set(f["loadgen_model"])
    assert named == set(f["loadgen_model"]), "loadgen_model names a scenario no rule allows"


@pytest.mark.parametrize(("round_name", "benchmark"), PAIRS)
def test_every_judged_metric_has_a_regex(round_name, benchmark):
    bench = load_round(round_name).benchmark(benchmark)
    acc = bench.accuracy
    assert "reference" in acc and acc.get("regex")
    if acc.get("targets"):
        assert 0 < acc["target_fraction"] <= 1
    judged = (
        set(acc.get("targets", []))
        | set(acc.get("lower_bound_fraction", {}))
        | set(acc.get("minimum", {}))
        | set(acc.get("upper_bound_fraction", {}))
        | set(acc.get("upper_bound", {}))
    )
    assert judged, f"{benchmark} judges no accuracy metric"
    assert judged <= set(acc["regex"]), judged - set(acc["regex"])
    assert set(bench.absolute_targets()) | set(bench.upper_bounds()) == judged
    for metric, pattern in acc["regex"].items():
        assert re.compile(pattern).groups == 1, (benchmark, metric)


@pytest.mark.parametrize(("round_name", "benchmark"), PAIRS)
def test_every_named_compliance_test_exists(round_name, benchmark):
    rules = load_round(round_name)
    for test in facts(round_name, benchmark)["compliance"]:
        entry = rules.compliance_test(test, benchmark)
        assert entry["verify_file"] in entry["required_files"]
        assert set(entry.get("verify_files") or [entry["verify_file"]]) <= set(entry["required_files"])
        assert "audit_config" in entry


@pytest.mark.parametrize("round_name", ROUNDS)
def test_round_level_facts(round_name):
    rules = load_round(round_name)
    assert set(rules.seeds) == {"qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed"}
    assert rules.loadgen_requirement.split("==")[1] in rules.loadgen_versions
    assert set(rules["layout"]) >= {"results", "measurements", "compliance", "src"}
    for folder, benchmark in rules["model_mapping"].items():
        assert folder not in rules.benchmark_names and isinstance(benchmark, str)


def test_each_release_carries_one_rounds_seeds():
    seeds = {r: tuple(sorted(load_round(r).seeds.items())) for r in ROUNDS}
    assert len(set(seeds.values())) == len(ROUNDS)
    assert load_round("v6.1").seeds != load_round("v6.0").seeds
    releases = [v for r in ROUNDS for v in load_round(r).loadgen_versions]
    assert len(releases) == len(set(releases)), "a LoadGen release listed for two rounds"
    assert "6.0.15" in load_round("v6.0").loadgen_versions
    assert "6.0.16" in load_round("v6.1").loadgen_versions
    assert load_round("v6.1").loadgen_requirement == "mlcommons-loadgen==6.0.17"


def test_v61_is_v60_with_its_changes():
    v60, v61 = load_round("v6.0"), load_round("v6.1")
    assert "llama2-70b-99" not in v61.benchmark_names
    assert v61["demo"]["stands_in_for"] in v61.benchmark_names
    # Inherited unchanged where v6.1 says nothing.
    assert v61.benchmark("gpt-oss-120b").facts == v60.benchmark("gpt-oss-120b").facts
    assert v61["system_description"] == v60["system_description"]
    # Changed where it does.
    qwen = v61.benchmark("qwen3-vl-235b-a22b")
    assert qwen.scenario_rule("datacenter")["at_least_one_of"] == ["Server", "Interactive"]
    assert v60.benchmark("qwen3-vl-235b-a22b").scenario_rule("datacenter")["required"] == ["Server", "Offline"]
    assert qwen.latency_limits_ms("Interactive") == {"target": 1500}
    assert qwen.latency_limits_ms("Server") == {"target": 12000}
    assert v61.benchmark("wan-2.2-t2v-a14b").accuracy["extra_files"]["videos"][5] == "123"


def test_v51_layout_and_scenarios():
    v51 = load_round("v5.1")
    assert "/compliance/" in v51["layout"]["compliance"] and "/measurements/" in v51["layout"]["measurements"]
    deepseek = v51.benchmark("deepseek-r1")
    assert "Interactive" not in deepseek.scenarios
    assert deepseek.scenario_rule("datacenter")["required"] == ["Server", "Offline"]
    assert deepseek.scenario_rule("edge,datacenter")["required"] == ["SingleStream", "Server", "Offline"]
    assert deepseek.scenario_rule("edge") is None


# -- accuracy.txt readings -------------------------------------------------------------------

HASH = "\nhash=0f3a9c7e5b1d2a4c6e8f0a1b3c5d7e9f1a2b3c4d5e6f708192a3b4c5d6e7f809\n"
LLAMA2 = (
    "\nResults\n\n{'rouge1': 44.6211, 'rouge2': 22.1034, 'rougeL': 28.9412, 'rougeLsum': 42.1003, "
    "'gen_len': 27000111, 'gen_num': 24576, 'gen_tok_len': 6900222, 'tokens_per_sample': 281.7}\n"
)
LLAMA31 = (
    "\nResults\n\n{{'rouge1': '{0}', 'rouge2': '{1}', 'rougeL': '{2}', 'rougeLsum': '{3}', "
    "'gen_len': {4}, 'gen_num': {5}}}\n"
)
EXACT_TPS = (
    "Evaluating 1...\n1.0\nResults\n\n{'exact_match': 81.5012, 'tokens_per_sample': 3790.25, 'num-samples': 4388}\n"
)
VISION_AP = " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.532\n"
# benchmark -> (accuracy.txt text, the value each metric must read)
SAMPLES = {
    "resnet": ("accuracy=76.201%, good=38100, total=50000\n", {"accuracy": 76.201}),
    "retinanet": ("loading annotations into memory...\nmAP=37.612%\nfound 24781 results\n", {"map": 37.612}),
    "bert-99": ('{"exact_match": 83.102, "f1": 90.511}\n', {"f1": 90.511}),
    "bert-99.9": ('{"exact_match": 83.511, "f1": 90.802}\n', {"f1": 90.802}),
    "dlrm-v2-99": ("AUC=80.292%, accuracy=96.612%, good=1, total=2, queries=3\n", {"auc": 80.292}),
    "dlrm-v2-99.9": ("AUC=80.305%, accuracy=96.612%, good=1, total=2, queries=3\n", {"auc": 80.305}),
    "3d-unet-99": (
        "Running postprocessing...\nAccuracy: mean = 0.86201, threshold = 0.85308 (Passed)\n  - Kidney: 0.93101\n",
        {"dice": 0.86201},
    ),
    "3d-unet-99.9": ("Accuracy: mean = 0.86170, threshold = 0.86084 (Passed)\n  - Tumor: 0.79239\n", {"dice": 0.8617}),
    "llama3.1-8b": (
        LLAMA31.format(38.9012, 15.9901, 24.5102, 35.8803, 8200111, 13368),
        {"rouge1": 38.9012, "rouge2": 15.9901, "rougeL": 24.5102, "rougeLsum": 35.8803, "gen_len": 8200111},
    ),
    "llama3.1-8b-edge": (
        "Loading dataset...\n" + LLAMA31.format(39.1102, 16.2003, 24.7004, 36.2005, 3100123, 5000),
        {"rouge1": 39.1102, "rouge2": 16.2003, "rougeL": 24.7004, "rougeLsum": 36.2005, "gen_len": 3100123},
    ),
    "llama2-70b-99": (LLAMA2, {"rouge1": 44.6211, "rouge2": 22.1034, "rougeL": 28.9412, "tokens_per_sample": 281.7}),
    "llama2-70b-99.9": (LLAMA2, {"rouge1": 44.6211, "rouge2": 22.1034, "rougeL": 28.9412, "tokens_per_sample": 281.7}),
    "stable-diffusion-xl": (
        "Accuracy Results: {'FID_SCORE': '23.4521', 'CLIP_SCORE': '31.7512'}\n",
        {"fid_score": 23.4521, "clip_score": 31.7512},
    ),
    "mixtral-8x7b": (
        " 60.40% pass@1\n{'php': 811, 'ruby': 402} {'php': 846, 'ruby': 846}\n\nResults\n\n"
        "{'rouge1': 45.5011, 'rouge2': 23.3012, 'rougeL': 30.4013, 'rougeLsum': 42.5014, 'gsm8k': 73.5, "
        "'mbxp': 60.4, 'gen_len': 4250000, 'gen_num': 15000, 'gen_tok_len': 2170000, 'tokens_per_sample': 144.9}\n",
        {
            "rouge1": 45.5011,
            "rouge2": 23.3012,
            "rougeL": 30.4013,
            "gsm8k": 73.5,
            "mbxp": 60.4,
            "tokens_per_sample": 144.9,
        },
    ),
    "llama3.1-405b": (
        "\nResults\n\n{'exact_match': 90.2011, 'rougeL': 21.8012, 'gen_len': 22300000, 'gen_num': 8313, "
        "'gen_tok_len': 5280000, 'tokens_per_sample': 640.1}\n",
        {"exact_match": 90.2011, "rougeL": 21.8012, "tokens_per_sample": 640.1},
    ),
    "rgat": ("accuracy=72.611%, good=572450, total=788379\n", {"accuracy": 72.611}),
    "pointpainting": (
        "{'Car': 0.6102, 'Pedestrian': 0.5203, 'Cyclist': 0.5004, 'Total': np.float64(0.5436)}\nfound 39987 results\n",
        {"map": 0.5436},
    ),
    "deepseek-r1": (EXACT_TPS, {"exact_match": 81.5012, "tokens_per_sample": 3790.25}),
    "whisper": ("Word Error Rate: 2.0912345%, accuracy=97.9087655%\n", {"accuracy": 97.9087655}),
    "gpt-oss-120b": (
        "Total samples evaluated: 4395\nOverall raw accuracy: 82.51% (3626/4395)\n"
        "aime25                         202      240        8      25.25     84.17%\n"
        "FINAL SCORE: 83.21% (1067.60/1283.00)\n\nPrinting for submission_checker:\n\n'exact_match': 83.211\n",
        {"exact_match": 83.211},
    ),
    "wan-2.2-t2v-a14b": (
        "Dimension Scores:\n  scene                         : 0.3101\n{'vbench_score': 70.3012}\n"
        "  Overall Average               : 0.7030 (70.30%)\n\nThreshold: 69.7752%\nPass: Yes\n",
        {"vbench_score": 70.3012},
    ),
    "qwen3-vl-235b-a22b": ('Results\n\n{"f1": 0.788912345}\n', {"f1": 0.788912345}),
    "qwen3.6-27b": ("mAP=86.512\n", {"accuracy": 86.512}),
    "dlrm-v3": (
        "WARNING:main:results have 349823 entries\n"
        "WARNING:main:metric/lifetime_ne/rating: 0.8671234\nWARNING:main:metric/window_ne/rating: 0.7412345\n"
        "WARNING:main:metric/lifetime_accuracy/rating: 0.6971234\nWARNING:main:metric/window_accuracy/rating: 0.7312\n"
        "WARNING:main:metric/lifetime_gauc/rating: 0.7871234\n"
        "WARNING:main:metric/lifetime_gauc_num_samples/rating: 349823.0\n",
        {"lifetime_ne": 0.8671234, "lifetime_accuracy": 0.6971234, "lifetime_gauc": 0.7871234},
    ),
    "yolo-95": (VISION_AP + "mAP=53.201%\nfound 1525 results\n", {"map": 53.201}),
    "yolo-99": (VISION_AP + "mAP=53.301%\nfound 1525 results\n", {"map": 53.301}),
    "e2e-rag-qna": ("  LLM Judge Accuracy: 0.352\nAccuracy: 35.2012\n", {"accuracy": 35.2012}),
    "e2e-rag-db": (
        "RAG-DB Accuracy Report\nTotal files: 2515\nSuccess rate: 99.52%\nRequired rate: 99.00%\nStatus: PASS\n",
        {"accuracy": 99.52},
    ),
}


def test_every_benchmark_has_a_sample():
    assert {b for _, b in PAIRS} == set(SAMPLES)


@pytest.mark.parametrize(("round_name", "benchmark"), PAIRS)
def test_the_regexes_read_accuracy_txt_lines(round_name, benchmark):
    bench = load_round(round_name).benchmark(benchmark)
    text, expected = SAMPLES[benchmark]
    readings = bench.accuracy_readings(text + HASH)
    assert readings == {metric: [value] for metric, value in expected.items()}
    for metric, minimum in bench.absolute_targets().items():
        assert readings[metric][0] >= minimum, (metric, minimum)
    for metric, maximum in bench.upper_bounds().items():
        if metric in readings:
            assert readings[metric][0] <= maximum, (metric, maximum)
