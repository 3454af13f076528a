"""Generate LoadGen ``user.conf`` files from the config.

A partner changes a number in the YAML config and never edits this text by hand. Keys
are fully qualified (``<loadgen model>.<LoadGen scenario>.<key>``) because LoadGen
resolves ``*.Scenario.key`` before ``model.*.key``; full names leave no ambiguity.
"""

from __future__ import annotations

from typing import Any

from .benchmarks import Benchmark, Round

# Config key (systems.<s>.benchmarks.<b>.<Scenario>.<key>) -> LoadGen key.
SCENARIO_KEYS = {
    "target_qps": "target_qps",
    "min_duration_ms": "min_duration",
    "min_query_count": "min_query_count",
    "max_query_count": "max_query_count",
    "max_duration_ms": "max_duration",
}


def user_conf_settings(
    rules: Round,
    benchmark: Benchmark,
    scenario: str,
    scenario_cfg: dict[str, Any],
    test_scale: dict[str, Any] | None,
    dataset_samples: int,
) -> dict[str, Any]:
    """The LoadGen settings (LoadGen key -> value) for one system x benchmark x scenario."""
    settings: dict[str, Any] = {}
    for cfg_key, lg_key in SCENARIO_KEYS.items():
        if cfg_key in scenario_cfg:
            settings[lg_key] = scenario_cfg[cfg_key]
    if scenario == "SingleStream" and "target_qps" in settings:
        # LoadGen reads SingleStream's expected latency (target_latency, ms), not a rate;
        # target_qps stays for the plan's own arithmetic and is not written (render_user_conf).
        settings["target_latency"] = round(1000.0 / float(settings["target_qps"]), 3)
    gpt_min = benchmark.facts.get("offline_min_query_count_in_user_conf")
    # A test-scale run takes its own min_query_count (below) unless the scenario sets one.
    if scenario == "Offline" and gpt_min and "min_query_count" not in settings and not test_scale:
        settings["min_query_count"] = gpt_min
    if test_scale:
        # Short runs on a subset: the result is marked not submittable everywhere.
        settings["min_duration"] = test_scale["min_duration_ms"]
        settings.setdefault("min_query_count", test_scale["min_query_count"][scenario])
        settings["performance_sample_count_override"] = min(
            test_scale.get("performance_sample_count", dataset_samples), dataset_samples
        )
    elif dataset_samples < benchmark.facts["performance_sample_count"]:
        settings["performance_sample_count_override"] = dataset_samples
    return settings


def render_user_conf(loadgen_model: str, loadgen_scenario: str, settings: dict[str, Any], header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for key in sorted(settings):
        if key == "target_qps" and loadgen_scenario == "SingleStream":
            continue  # LoadGen ignores it there; target_latency says the same
        value = settings[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        lines.append(f"{loadgen_model}.{loadgen_scenario}.{key} = {value}")
    return "\n".join(lines) + "\n"
