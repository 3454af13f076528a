"""The "before" check: the config against the round's rules, in seconds, before any
hour-long run starts. Each finding names the config key (or the environment) and the rule.

Rules: the installed LoadGen carries the round's seeds; closed-division scenario sets;
run lengths and sample counts the checker will demand are reachable with the configured
target_qps, durations and dataset; system descriptions are complete; no network-only
fields outside the network division; the benchmark and its compliance tests can be
evaluated by this workflow; the disk can hold the models.
"""

from __future__ import annotations

import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

from ..accuracy.stage import EVALUATORS  # accuracy evaluators the workflow implements
from ..plan import Plan
from .findings import Finding

SERVED_TASKS = ("llm",)  # benchmark tasks the harness has a SUT for (rules table: task)
VERIFIABLE_COMPLIANCE = ("TEST04", "TEST06", "TEST07", "TEST09")  # compliance tests it runs and verifies end to end
# Bytes of the quantized outputs per byte of bf16 weights: the MXFP4 checkpoint
# (4.25 bits per weight) and, when served emulated, a dequantized bf16 copy.
MXFP4_FRACTION = 0.27


def _loadgen(plan: Plan) -> list[Finding]:
    try:
        version = metadata.version("mlcommons-loadgen")
    except metadata.PackageNotFoundError:
        return [
            Finding(
                "loadgen-version",
                "environment",
                f"mlcommons-loadgen is not installed; install {plan.rules.loadgen_requirement}",
            )
        ]
    if version not in plan.rules.loadgen_versions:
        return [
            Finding(
                "loadgen-version",
                "environment",
                f"mlcommons-loadgen {version} does not carry the "
                f"{plan.rules.name} seeds (the checker would reject every result); install "
                f"{plan.rules.loadgen_requirement}",
            )
        ]
    return []


def _scenarios(plan: Plan) -> list[Finding]:
    findings = []
    if plan.division == "open":
        return findings
    for system, benchmark in plan.system_benchmarks():
        scenarios = set(plan.system_cfg(system)["benchmarks"][benchmark])
        one_of = plan.facts(benchmark).facts["scenarios"].get("at_least_one_of") or []
        if one_of and not scenarios & set(one_of):
            findings.append(
                Finding(
                    "scenario-set",
                    f"systems.{system}.benchmarks.{benchmark}",
                    f"the {plan.division} division needs at least one of {one_of}",
                )
            )
    return findings


def _run_lengths(plan: Plan) -> list[Finding]:
    findings = []
    rules = plan.rules
    early_stopping = int(rules["demo"]["early_stopping_min_queries"])
    for job in plan.jobs:
        key = f"systems.{job.system}.benchmarks.{job.benchmark}.{job.scenario}"
        facts = plan.facts(job.benchmark)
        settings = plan.user_conf_settings(job.system, job.benchmark, job.scenario)
        duration_ms = int(settings.get("min_duration", rules.min_duration_ms))
        qps = float(settings["target_qps"])
        if not plan.test_scale and duration_ms < rules.min_duration_ms:
            findings.append(
                Finding(
                    "run-length",
                    f"{key}.min_duration_ms",
                    f"{duration_ms} ms < the round's {rules.min_duration_ms} ms; the checker rejects the result",
                )
            )
        if job.scenario == "Offline":
            minimum = settings.get("min_query_count", facts.facts["offline_min_samples_per_query"])
            samples = max(int(minimum), int(1.1 * duration_ms / 1000 * qps))
            if (
                not plan.test_scale
                and plan.division != "open"
                and samples < facts.facts["offline_min_samples_per_query"]
            ):
                findings.append(
                    Finding(
                        "run-length",
                        f"{key}.target_qps",
                        f"Offline would issue {samples} samples; "
                        f"the closed division needs >= {facts.facts['offline_min_samples_per_query']}",
                    )
                )
        elif facts.latency_limits_ms(job.scenario):
            expected_queries = max(qps * duration_ms / 1000, float(settings.get("min_query_count", 0)))
            if expected_queries < early_stopping:
                findings.append(
                    Finding(
                        "run-length",
                        f"{key}",
                        f"about {expected_queries:.0f} queries "
                        f"(target_qps x duration, min_query_count): early stopping at p99 needs "
                        f"~{early_stopping}, so LoadGen will report INVALID",
                        "warning",
                    )
                )
    for benchmark in plan.benchmarks:
        facts = plan.facts(benchmark)
        samples = plan.dataset_samples(benchmark)
        where = f"datasets.{plan.benchmark_cfg(benchmark)['dataset']}"
        if plan.test_scale:
            continue
        if samples < facts.facts.get("checker_min_performance_sample_count", facts.facts["performance_sample_count"]):
            findings.append(
                Finding(
                    "run-length",
                    where,
                    f"{samples} samples; {facts.name} performance runs need a "
                    f"performance_sample_count of {facts.facts['performance_sample_count']}",
                )
            )
        # A benchmark with its own accuracy file (gpt-oss-120b) is counted after the run, from
        # the LoadGen log; a builtin stand-in writes that file at exactly the round's count.
        separate = "accuracy_file" in facts.facts.get("dataset", {})
        if not separate and samples != facts.facts["accuracy_sample_count"]:
            findings.append(
                Finding(
                    "run-length",
                    where,
                    f"{samples} samples; the checker requires the accuracy run "
                    f"to cover exactly {facts.facts['accuracy_sample_count']}",
                )
            )
    return findings


def _systems(plan: Plan) -> list[Finding]:
    fields = plan.rules["system_description"]
    filled_by_us = {"division", "submitter"}
    findings = []
    for system in plan.systems:
        desc = plan.system_cfg(system)["description"]
        for key in fields["meaningful"]:
            if key in filled_by_us:
                continue
            value = desc.get(key)
            if value is None or value == "":
                findings.append(
                    Finding(
                        "system-description",
                        f"systems.{system}.description.{key}",
                        'needs a meaningful value (or "auto" where the host can tell)',
                    )
                )
        if plan.division != "network":
            for key in fields["network_only"]:
                if key in desc:
                    findings.append(
                        Finding(
                            "system-description",
                            f"systems.{system}.description.{key}",
                            "network-division field outside the network division",
                        )
                    )
    return findings


def _support(plan: Plan) -> list[Finding]:
    findings = []
    for benchmark in plan.benchmarks:
        facts = plan.facts(benchmark)
        evaluator = facts.accuracy["evaluator"]
        where = f"benchmarks.{benchmark}.mlperf_benchmark"
        if facts.facts["task"] not in SERVED_TASKS:
            findings.append(
                Finding(
                    "support",
                    where,
                    f"{facts.name} is a {facts.facts['task']} benchmark; the "
                    f"harness has a system under test for {', '.join(SERVED_TASKS)} benchmarks only",
                )
            )
        if evaluator not in EVALUATORS:
            findings.append(
                Finding(
                    "support",
                    where,
                    f"{facts.name} needs the '{evaluator}' accuracy evaluator, "
                    f"which this workflow does not implement yet (implemented: {', '.join(EVALUATORS)})",
                )
            )
        for test in facts.compliance_tests:
            if test not in VERIFIABLE_COMPLIANCE:
                findings.append(
                    Finding(
                        "support",
                        where,
                        f"compliance {test} for {facts.name} is not run by this "
                        f"workflow yet (runs: {', '.join(VERIFIABLE_COMPLIANCE)})",
                    )
                )
    return findings


def estimated_bytes(plan: Plan, workdir: Path) -> int:
    """Disk the acquire and quantize stages still need (already acquired models count 0)."""
    total = 0
    for model in plan.models:
        entry = plan.config["models"][model]
        if (workdir / plan.model_dir(model) / "ACQUIRED.json").is_file() or entry["source"].startswith("builtin:"):
            continue
        sizes = [
            plan.facts(b).facts.get("model_bytes", 0)
            for b in plan.benchmarks
            if plan.benchmark_cfg(b)["model"] == model
        ]
        model_bytes = max(sizes, default=0)
        total += model_bytes
        for m, recipe in plan.quantized_models:
            if m == model and not (workdir / plan.quantized_dir(m, recipe)).exists():
                emulated = any(plan.engine(s).get("serve_quantized_as") == "emulated" for s in plan.systems)
                total += int(model_bytes * (MXFP4_FRACTION + (1.0 if emulated else 0.0)))
    return total


def _disk(plan: Plan, workdir: Path) -> list[Finding]:
    needed = estimated_bytes(plan, workdir)
    free = shutil.disk_usage(workdir).free
    if needed > free:
        return [
            Finding(
                "disk-space",
                str(workdir),
                f"the models need about {needed / 1e9:.0f} GB more; {free / 1e9:.0f} GB are free",
            )
        ]
    return []


def preflight(config: dict[str, Any], workdir: str | Path = ".") -> list[Finding]:
    plan = Plan(config)
    findings: list[Finding] = []
    for part in (_loadgen, _scenarios, _run_lengths, _systems, _support):
        findings.extend(part(plan))
    findings.extend(_disk(plan, Path(workdir)))
    return findings
