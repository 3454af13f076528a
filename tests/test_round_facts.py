"""The round tables' accessors the checker reads: folder names to benchmarks, per-scenario
accuracy rules and sample counts, inherited rounds."""

from __future__ import annotations

import pytest

from mlperf_repro.benchmarks import load_round


@pytest.mark.parametrize(
    ("folder", "mapping", "expected"),
    [
        ("resnet", None, "resnet"),  # the official name
        ("resnet50", None, "resnet"),  # the round's model_mapping
        ("llama3_1-8b", None, "llama3.1-8b"),
        ("my-llama", {"my-llama": "llama2-70b-99"}, "llama2-70b-99"),  # the submitter's model_mapping.json
        ("mobilenet-edgetpu", None, "resnet"),  # the official checker's name guesses
        ("bert-99.9-int8", None, "bert-99.9"),
        ("something-else", None, "something-else"),
    ],
)
def test_folder_names_map_to_benchmarks_as_the_official_checker_reads_them(folder, mapping, expected):
    assert load_round("v6.0").mlperf_benchmark(folder, mapping) == expected


def test_a_scenarios_own_accuracy_reference_applies_to_that_scenario_only():
    qwen = load_round("v6.1").benchmark("qwen3-vl-235b-a22b")
    (offline,) = qwen.absolute_targets("Offline").values()
    (interactive,) = qwen.absolute_targets("Interactive").values()
    assert interactive < offline
    assert qwen.absolute_targets() == qwen.absolute_targets("Offline")


def test_accuracy_sample_count_may_differ_by_scenario():
    v61 = load_round("v6.1")
    qwen = v61.benchmark("qwen3-vl-235b-a22b")
    assert qwen.accuracy_sample_count("Offline") == 48289 and qwen.accuracy_sample_count("Interactive") == 8000
    assert load_round("v6.0").benchmark("gpt-oss-120b").accuracy_sample_count() == 4395


def test_a_newer_round_inherits_and_drops():
    v60, v61 = load_round("v6.0"), load_round("v6.1")
    assert "llama2-70b-99" in v60.benchmark_names and "llama2-70b-99" not in v61.benchmark_names
    assert v61.min_duration_ms == v60.min_duration_ms and v61.seeds != v60.seeds
    assert v61.benchmark("gpt-oss-120b").runnable  # the workflow facts come along


def test_compliance_entries_take_a_benchmarks_own_keys():
    v60 = load_round("v6.0")
    resnet, retinanet = (v60.compliance_test("TEST01", b)["audit_config"] for b in ("resnet", "retinanet"))
    assert resnet["accuracy_log_sampling_target"] != retinanet["accuracy_log_sampling_target"]
    assert "per_benchmark" not in v60.compliance_test("TEST01")
