"""``import --stand-in``: run an imported config on a machine that lacks the submitter's hardware.

What is bound to the hardware is taken from a stand-in config (by default the workflow's
embedded demo config): per benchmark, the stand-in benchmark of the same official benchmark
(its model, dataset and quantization, the accuracy target it can reach); per system, the
stand-in system that runs it (description, engine, software, GPU screening) and its LoadGen
settings for each scenario the submitter ran; and the division and test scale (a stand-in
model is an open-division, test-scale result). The system ids, scenarios and the import's record
stay. Every substitution is listed under ``imported.stand_in`` with the value it replaced, so a
comparison of the run with the source explains each difference by a substitution or a
measurement.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import UserError
from .yaml_text import Noted, plain


def _referenced(config: dict[str, Any]) -> tuple[set[str], set[str], set[str]]:
    """The models, datasets and quantization recipes the benchmarks use (with what those use)."""
    models, datasets, recipes = set(), set(), set()
    for entry in config["benchmarks"].values():
        models.add(entry["model"])
        datasets.add(entry["dataset"])
        if entry.get("quantization"):
            recipes.add(entry["quantization"])
    for name in recipes:
        recipe = config.get("quantization", {}).get(name) or {}
        if recipe.get("checkpoint"):
            models.add(recipe["checkpoint"])
        if (recipe.get("calibration") or {}).get("dataset"):
            datasets.add(recipe["calibration"]["dataset"])
    for name in list(datasets):
        builtin_model = ((config.get("datasets", {}).get(name) or {}).get("builtin") or {}).get("model")
        if builtin_model:
            models.add(builtin_model)
    return models, datasets, recipes


def apply_stand_in(config: dict[str, Any], stand_in: dict[str, Any], stand_in_name: str) -> list[str]:
    """Substitute in place; returns one line per substitution."""
    substituted: list[str] = []
    note = f"stand-in from {stand_in_name}"

    def swap(where: str, old: Any, new: Any) -> None:
        old, new = plain(old), plain(new)
        if old == new:
            return
        if isinstance(old, dict) and isinstance(new, dict):
            # One line per key that changed, so a comparison's cause can be found in the list.
            for key in [*old, *(k for k in new if k not in old)]:
                if old.get(key) != new.get(key):
                    substituted.append(f"{where}.{key}: {_short(old.get(key))} -> {_short(new.get(key))}")
            return
        substituted.append(f"{where}: {_short(old)} -> {_short(new)}")

    renamed: dict[str, str] = {}
    benchmarks: dict[str, Any] = {}
    for name, entry in config["benchmarks"].items():
        official = entry["mlperf_benchmark"]
        match = next((n for n, b in stand_in["benchmarks"].items() if b["mlperf_benchmark"] == official), None)
        if match is None:
            known = sorted({b["mlperf_benchmark"] for b in stand_in["benchmarks"].values()})
            raise UserError(
                f"--stand-in {stand_in_name}: it has no stand-in for {official} (it stands in for: {', '.join(known)})"
            )
        renamed[name] = match
        swap(
            f"benchmarks.{name}",
            {k: entry[k] for k in ("model", "dataset", "quantization")},
            stand_in["benchmarks"][match],
        )
        benchmarks[match] = Noted(copy.deepcopy(stand_in["benchmarks"][match]), note)
        if match != name:
            substituted.append(f"benchmarks.{name}: renamed {match} (model_mapping.json maps it to {official})")
    config["benchmarks"] = benchmarks
    models, datasets, recipes = _referenced({**stand_in, "benchmarks": {k: plain(v) for k, v in benchmarks.items()}})
    for section, names in (("models", models), ("datasets", datasets), ("quantization", recipes)):
        old = sorted(config.get(section) or {})
        config[section] = {n: Noted(copy.deepcopy(stand_in[section][n]), note) for n in sorted(names)}
        swap(section, old, sorted(names))
    if not config["quantization"]:
        config.pop("quantization")
    for top in ("division", "test_scale"):
        swap(top, config.get(top), stand_in.get(top))
        config[top] = Noted(copy.deepcopy(stand_in.get(top)), note)
    for system_id, system in config["systems"].items():
        first = next(iter(renamed.values()))
        stand_in_system = next((s for s in stand_in["systems"].values() if first in s["benchmarks"]), None)
        if stand_in_system is None:
            raise UserError(f"--stand-in {stand_in_name}: no system runs {first}")
        for key in ("description", "engine", "software", "gpu_screening"):
            if key in system or key in stand_in_system:
                swap(f"systems.{system_id}.{key}", system.get(key), stand_in_system.get(key))
            if key in stand_in_system:
                system[key] = Noted(copy.deepcopy(stand_in_system[key]), note)
            else:
                system.pop(key, None)
        per_benchmark: dict[str, Any] = {}
        for name, scenarios in system["benchmarks"].items():
            target = renamed[name]
            available = stand_in_system["benchmarks"].get(target) or {}
            kept = {}
            for scenario, settings in scenarios.items():
                if scenario not in available:
                    substituted.append(
                        f"systems.{system_id}.benchmarks.{name}.{scenario}: dropped (no stand-in settings)"
                    )
                    continue
                swap(f"systems.{system_id}.benchmarks.{name}.{scenario}", settings, available[scenario])
                kept[scenario] = Noted(copy.deepcopy(available[scenario]), note)
            if not kept:
                raise UserError(
                    f"--stand-in {stand_in_name}: {target} has settings for {', '.join(available) or 'no scenario'}, "
                    f"none of the imported {', '.join(scenarios)}"
                )
            per_benchmark[target] = kept
        system["benchmarks"] = per_benchmark
    return substituted


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."
