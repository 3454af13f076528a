"""Generate LoadGen ``user.conf`` files from the config.

A partner changes a number in the YAML config and never edits this text by hand. Keys
are fully qualified (``<loadgen model>.<LoadGen scenario>.<key>``) because LoadGen
resolves ``*.Scenario.key`` before ``model.*.key``; full names leave no ambiguity.
"""

from __future__ import annotations

import json
from pathlib import Path
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
    if isinstance(settings.get("target_qps"), (int, float)):
        settings = with_target(settings, scenario, settings["target_qps"])
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


def with_target(settings: dict[str, Any], scenario: str, qps: float) -> dict[str, Any]:
    """``settings`` with target_qps ``qps`` (a number, not ``auto``)."""
    settings = dict(settings, target_qps=qps)
    if scenario == "SingleStream":
        # LoadGen reads SingleStream's expected latency (target_latency, ms), not a rate;
        # target_qps stays for the plan's own arithmetic and is not written (render_user_conf).
        settings["target_latency"] = round(1000.0 / float(qps), 3)
    return settings


def render_user_conf(loadgen_model: str, loadgen_scenario: str, settings: dict[str, Any], header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    if not isinstance(settings.get("target_qps", 0), (int, float)):
        # target_qps: auto has no number until the find-performance pass measured one.
        raise ValueError(f"user.conf for {loadgen_model}.{loadgen_scenario}: target_qps is {settings['target_qps']!r}")
    for key in sorted(settings):
        if key == "target_qps" and loadgen_scenario == "SingleStream":
            continue  # LoadGen ignores it there; target_latency says the same
        value = settings[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        lines.append(f"{loadgen_model}.{loadgen_scenario}.{key} = {value}")
    return "\n".join(lines) + "\n"


def user_conf_from_request(request: dict[str, Any], find_performance: str | Path | None = None) -> str:
    """The user.conf a ``user_conf`` job writes (``Plan.user_conf_request``): the scenario's
    settings, with target_qps ``auto`` replaced by the target the find-performance pass chose
    (its JSON, ``find_performance``); ``target_scale`` scales the target (a scaling study's
    n of N endpoints)."""
    settings = dict(request["settings"])
    header = request["header"]
    target = settings.get("target_qps")
    if not isinstance(target, (int, float)):
        if find_performance is None:
            raise ValueError(f"{request['where']}: target_qps is {target!r} and no find-performance result was given")
        found = json.loads(Path(find_performance).read_text())
        target = found["target_qps"]
        header += (
            f"\ntarget_qps auto: {target} chosen by the find-performance pass of {found['date_utc']} on "
            f"{found['host']['hostname']} ({found['host']['cpu_model']}): measured {found['measured_qps']} "
            f"({found['measured_what']}), margin {found['margin']} ({find_performance})."
        )
    scale = float(request.get("target_scale", 1.0))
    if scale != 1.0:
        target = round(float(target) * scale, 6)
    settings = with_target(settings, request["scenario"], target)
    return render_user_conf(request["loadgen_model"], request["loadgen_scenario"], settings, header)
