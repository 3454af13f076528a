"""user.conf generation and the per-job plan, from the config and the rules table."""

from __future__ import annotations

from conftest import SCHEMA

from mlperf_repro.benchmarks import load_round
from mlperf_repro.config import validate_config
from mlperf_repro.plan import Plan

SYSTEM, BENCH = "cpu-2c-vllm", "tiny-llama-mxfp4"


def plan_of(config) -> Plan:
    return Plan(validate_config(config, SCHEMA))


def parse_conf(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_user_conf_uses_loadgen_names_and_test_scale(default_config):
    # The default's Offline is target_qps auto (tests/test_find_performance.py); a number here.
    default_config["systems"][SYSTEM]["benchmarks"][BENCH]["Offline"] = {"target_qps": 400}
    plan = plan_of(default_config)
    offline = parse_conf(plan.user_conf_text(SYSTEM, BENCH, "Offline"))
    assert offline == {
        "llama2-70b.Offline.target_qps": "400",
        "llama2-70b.Offline.min_duration": "10000",
        "llama2-70b.Offline.min_query_count": "256",
        "llama2-70b.Offline.performance_sample_count_override": "256",
    }
    interactive = parse_conf(plan.user_conf_text(SYSTEM, BENCH, "Interactive"))
    # Interactive is LoadGen Server under the -interactive model name.
    assert interactive["llama2-70b-interactive.Server.target_qps"] == "30"
    assert interactive["llama2-70b-interactive.Server.min_query_count"] == "500"
    assert "NOT SUBMITTABLE" in plan.user_conf_text(SYSTEM, BENCH, "Server")


def test_full_scale_user_conf_keeps_round_durations(default_config):
    default_config["test_scale"]["enabled"] = False
    default_config["systems"][SYSTEM]["benchmarks"][BENCH]["Offline"] = {"target_qps": 400, "min_query_count": 30000}
    plan = plan_of(default_config)
    offline = parse_conf(plan.user_conf_text(SYSTEM, BENCH, "Offline"))
    assert "llama2-70b.Offline.min_duration" not in offline  # mlperf.conf's 600000 applies
    assert offline["llama2-70b.Offline.min_query_count"] == "30000"
    # the demo dataset is smaller than the benchmark's 24576 samples
    assert offline["llama2-70b.Offline.performance_sample_count_override"] == "256"


def test_gpt_oss_offline_gets_min_query_count_from_the_table():
    from mlperf_repro.userconf import user_conf_settings

    rules = load_round("v6.0")
    settings = user_conf_settings(rules, rules.benchmark("gpt-oss-120b"), "Offline", {"target_qps": 10}, None, 6396)
    assert settings["min_query_count"] == 6396


def test_plan_paths_and_serving(default_config):
    plan = plan_of(default_config)
    assert [j.scenario for j in plan.jobs if j.benchmark == BENCH] == ["Offline", "Server", "Interactive"]
    assert plan.serving_dir(SYSTEM, BENCH) == "results/models/tiny-llama-mxfp4-w4a16-emulated"
    default_config["systems"][SYSTEM]["engine"]["serve_quantized_as"] = "native"
    assert Plan(default_config).serving_dir(SYSTEM, BENCH) == "results/models/tiny-llama-mxfp4-w4a16"
    assert plan.model_mapping() == {BENCH: "llama2-70b-99"}
    assert plan.loadgen_scenario("Interactive") == "Server"
    generation = plan.generation(BENCH)
    assert generation.max_new_tokens == 1024 and generation.greedy
    assert plan.accuracy_targets(BENCH) == {
        "kind": "measured",
        "fraction": 0.99,
        "metrics": ["rouge1", "rouge2", "rougeL"],
    }


def test_reference_targets_come_from_the_table():
    rules = load_round("v6.0")
    targets = rules.benchmark("llama2-70b-99").absolute_targets()
    assert round(targets["rouge1"], 4) == 43.9869
    assert round(targets["rouge2"], 4) == 21.8148
    assert round(targets["rougeL"], 4) == 28.33
    assert round(targets["tokens_per_sample"], 3) == 265.005
    strict = rules.benchmark("llama2-70b-99.9").absolute_targets()
    assert round(strict["rouge1"], 4) == 44.3868


def test_a_new_round_is_a_new_table(tmp_path, monkeypatch, default_config):
    """v6.1-style: new seeds and LoadGen pin from a file, no code change."""
    import yaml

    from mlperf_repro import benchmarks

    table = yaml.safe_load((benchmarks.ROUNDS_DIR / "v6.0.yaml").read_text())
    table["round"] = "v6.1"
    table["loadgen"].update(
        pip_requirement="mlcommons-loadgen==6.0.17",
        versions=["6.0.17"],
        seeds={
            "qsl_rng_seed": 2085463073848966840,
            "sample_index_rng_seed": 2747215439041700203,
            "schedule_rng_seed": 16159082839903944936,
        },
    )
    for name in list(benchmarks.ROUNDS_DIR.glob("*.yaml")):
        (tmp_path / name.name).write_text(name.read_text())
    (tmp_path / "v6.1.yaml").write_text(yaml.safe_dump(table))
    monkeypatch.setattr(benchmarks, "ROUNDS_DIR", tmp_path)
    benchmarks.load_round.cache_clear()
    try:
        default_config["round"] = "v6.1"
        plan = plan_of(default_config)
        assert plan.rules.loadgen_requirement == "mlcommons-loadgen==6.0.17"
        assert plan.rules.seeds["qsl_rng_seed"] == 2085463073848966840
        default_config["round"] = "v7.0"
        import pytest

        from mlperf_repro.errors import UserError

        with pytest.raises(UserError, match="known rounds: v5.1, v6.0, v6.1"):
            plan_of(default_config)
    finally:
        benchmarks.load_round.cache_clear()
