"""The rules of an MLPerf Inference round, read from ``rounds/<round>.yaml``.

This is the single place benchmark facts come from (LoadGen model names, scenarios,
latency limits, sample counts, accuracy targets, compliance tests, seeds). Adding a round
means adding a YAML file; no code change. A round may say ``based_on: <round>``: it then
holds only what changed (mappings merge key by key, lists and values replace, and
``drop_benchmarks`` removes benchmarks the newer round no longer has).

A benchmark with a ``task`` is one the workflow can run; every other one is there so the
checker can judge a partner's or a published tree that holds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from . import yamlio
from .errors import UserError

#: Latency units of the official summary and the nanoseconds of the detail log per unit.
NS_PER_LATENCY_UNIT = {"Latency (ms)": 1e6, "Latency (s)": 1e9}

ROUNDS_DIR = Path(__file__).with_name("rounds")


def available_rounds() -> list[str]:
    return sorted(p.stem for p in ROUNDS_DIR.glob("*.yaml"))


@cache
def load_round(round_name: str) -> Round:
    path = ROUNDS_DIR / f"{round_name}.yaml"
    if not path.is_file():
        raise UserError(
            f"round '{round_name}' has no rules table; known rounds: {', '.join(available_rounds())} "
            f"(add {path} to support it)"
        )
    data = yamlio.safe_load(path.read_text())
    base = data.pop("based_on", None)
    if base is not None:
        if base == round_name:
            raise UserError(f"{path}: based_on names the round itself")
        dropped = data.pop("drop_benchmarks", [])
        data = _merged(load_round(base).data, data)
        for name in dropped:
            data["benchmarks"].pop(name, None)
    return Round(data)


def _merged(base: dict, override: dict) -> dict:
    """``override`` on top of ``base``: mappings merge recursively, everything else replaces."""
    out = dict(base)
    for key, value in override.items():
        out[key] = _merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


# The system_type values of a system description; the rules tables key scenario sets by them.
DEFAULT_SYSTEM_TYPE = "datacenter"


@dataclass(frozen=True)
class Benchmark:
    name: str
    facts: dict[str, Any]

    def loadgen_model(self, scenario: str) -> str:
        try:
            return self.facts["loadgen_model"][scenario]
        except KeyError:
            raise UserError(f"benchmark {self.name} has no scenario {scenario}; allowed: {self.scenarios}") from None

    @property
    def scenarios(self) -> list[str]:
        return list(self.facts["loadgen_model"])

    def scenario_rule(self, system_type: str = DEFAULT_SYSTEM_TYPE) -> dict[str, list[str]] | None:
        """{required, optional, at_least_one_of} for a system type ("datacenter", "edge",
        "datacenter,edge"; "edge,datacenter" reads as the latter), or None where the
        benchmark is not part of that suite."""
        by_type = self.facts["scenarios"]
        key = ",".join(sorted(str(system_type).replace(" ", "").split(","))) if system_type else DEFAULT_SYSTEM_TYPE
        rule = by_type.get(key)
        if rule is None:
            return None
        return {k: list(rule.get(k) or []) for k in ("required", "optional", "at_least_one_of")}

    @property
    def required_scenarios(self) -> list[str]:
        """The datacenter suite's required scenarios (the workflow runs datacenter systems)."""
        return (self.scenario_rule() or {}).get("required", [])

    def latency_limits_ms(self, scenario: str) -> dict[str, float] | None:
        return self.facts.get("latency_ms", {}).get(scenario)

    @property
    def runnable(self) -> bool:
        """Whether the workflow can run it (the table names its task)."""
        return "task" in self.facts

    @property
    def is_llm(self) -> bool:
        return bool(self.facts.get("use_token_latencies"))

    @property
    def accuracy(self) -> dict[str, Any]:
        return self.facts["accuracy"]

    def result_field(self, scenario: str) -> str:
        return self.facts["result_field"][scenario]

    def result_unit(self, scenario: str) -> str:
        unit = self.facts["result_unit"]
        return unit[scenario] if isinstance(unit, dict) else unit

    def result_value(self, scenario: str, raw: Any) -> float | None:
        """The result in its unit, as the official checker reports it: a latency result is
        logged in nanoseconds and reported in ms, or in seconds where the unit says so
        (wan-2.2's SingleStream, "Latency (s)"); rates are reported as logged."""
        if raw in (None, ""):
            return None
        return float(raw) / NS_PER_LATENCY_UNIT.get(self.result_unit(scenario), 1)

    @property
    def compliance_tests(self) -> list[str]:
        return list(self.facts.get("compliance", []))

    def accuracy_rules(self, scenario: str | None = None) -> dict[str, Any]:
        """The accuracy entry, with a scenario's own keys (``accuracy.by_scenario``) on top."""
        acc = dict(self.accuracy)
        override = (acc.pop("by_scenario", None) or {}).get(scenario) or {}
        for key, value in override.items():
            acc[key] = {**acc[key], **value} if isinstance(value, dict) and isinstance(acc.get(key), dict) else value
        return acc

    def accuracy_sample_count(self, scenario: str | None = None) -> int:
        """Samples an accuracy run must cover (a number, or one per scenario)."""
        count = self.facts["accuracy_sample_count"]
        return int(count[scenario] if isinstance(count, dict) else count)

    def absolute_targets(self, scenario: str | None = None) -> dict[str, float]:
        """Metric -> minimum value from the published reference and the target fraction."""
        acc = self.accuracy_rules(scenario)
        targets = {m: acc["reference"][m] * acc["target_fraction"] for m in acc.get("targets", [])}
        for metric, fraction in acc.get("lower_bound_fraction", {}).items():
            targets[metric] = acc["reference"][metric] * fraction
        targets.update(acc.get("minimum", {}))
        return targets

    def accuracy_readings(self, text: str) -> dict[str, list[float]]:
        """Every value each metric's pattern reads from accuracy.txt, line by line (as the
        official checker reads it: a script may print a metric more than once, and every
        line is judged)."""
        readings: dict[str, list[float]] = {}
        patterns = {metric: re.compile(pattern) for metric, pattern in self.accuracy.get("regex", {}).items()}
        for line in text.splitlines():
            for metric, pattern in patterns.items():
                match = pattern.search(line)
                if match:
                    try:
                        readings.setdefault(metric, []).append(float(match.group(1)))
                    except ValueError:
                        pass
        return readings

    def accuracy_values(self, text: str) -> dict[str, float]:
        """Each metric's last reading from accuracy.txt."""
        return {metric: values[-1] for metric, values in self.accuracy_readings(text).items()}

    def upper_bounds(self, scenario: str | None = None) -> dict[str, float]:
        """Metric -> maximum value (fractions of the reference, or absolute)."""
        acc = self.accuracy_rules(scenario)
        bounds = {m: acc["reference"][m] * f for m, f in acc.get("upper_bound_fraction", {}).items()}
        bounds.update(acc.get("upper_bound", {}))
        return bounds


@dataclass(frozen=True)
class Round:
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return self.data["round"]

    @property
    def seeds(self) -> dict[str, int]:
        return dict(self.data["loadgen"]["seeds"])

    @property
    def loadgen_versions(self) -> list[str]:
        return list(self.data["loadgen"]["versions"])

    @property
    def loadgen_requirement(self) -> str:
        return self.data["loadgen"]["pip_requirement"]

    @property
    def min_duration_ms(self) -> int:
        return int(self.data["min_duration_ms"])

    @property
    def benchmark_names(self) -> list[str]:
        return list(self.data["benchmarks"])

    def benchmark(self, name: str) -> Benchmark:
        try:
            return Benchmark(name, self.data["benchmarks"][name])
        except KeyError:
            raise UserError(
                f"'{name}' is not a {self.name} benchmark; allowed: {', '.join(self.benchmark_names)}"
            ) from None

    def mlperf_benchmark(self, folder: str, submitter_mapping: dict[str, str] | None = None) -> str:
        """The benchmark a results folder name stands for, as the official checker reads it:
        the name itself, the round's model_mapping, the submitter's model_mapping.json, then
        the round's ``model_mapping_contains`` guesses (mapped once more)."""
        mapping = self.data.get("model_mapping") or {}
        if folder in self.data["benchmarks"]:
            return folder
        if folder in mapping:
            return mapping[folder]
        if submitter_mapping and folder in submitter_mapping:
            return submitter_mapping[folder]
        guess = next(
            (g["benchmark"] for g in self.data.get("model_mapping_contains") or [] if g["contains"] in folder), folder
        )
        return mapping.get(guess, guess)

    def loadgen_scenario(self, scenario_folder: str) -> str:
        return self.data["scenarios"][scenario_folder]["loadgen_scenario"]

    @property
    def scenario_folders(self) -> list[str]:
        return list(self.data["scenarios"])

    def compliance_test(self, name: str, benchmark: str | None = None) -> dict[str, Any]:
        """A compliance test's entry; with ``benchmark``, its ``per_benchmark`` keys replace
        the test's own (e.g. TEST01's sampling target differs by benchmark)."""
        entry = dict(self.data["compliance_tests"][name])
        overrides = (entry.pop("per_benchmark", None) or {}).get(benchmark) or {}
        entry.update(overrides)
        return entry

    def __getitem__(self, key: str) -> Any:
        return self.data[key]
