"""The "before" check: the config against the round's rules, in seconds, before any
hour-long run starts. Each finding names the config key (or the environment) and the rule.

Rules: the installed LoadGen carries the round's seeds; closed-division scenario sets;
run lengths and sample counts the checker will demand are reachable with the configured
target_qps, durations and dataset; system descriptions are complete; no network-only
fields outside the network division; the benchmark and its compliance tests can be
evaluated by this workflow; a tool: quark recipe finds Quark's environment; a file:// source is
there; the disk can hold the models; no value is still a ``TODO:`` placeholder (a fact an example or an imported config
could not know, such as a checkpoint commit or a container digest).
"""

from __future__ import annotations

import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

from ..config import CONTENT_ADDRESS, PLACEHOLDER, made_up_hex
from ..errors import UserError
from ..plan import Plan
from ..quant.formats import format_for
from ..sysfacts import AUTO_FIELDS
from ..tasks import task_for  # the benchmark tasks the workflow serves (rules table: task)
from .findings import Finding

# The quantized outputs per byte of bf16 weights: the checkpoint (its format's
# bytes_per_param / 2 bytes of bf16; MXFP4: 4.25 of 16 bits) and, when served emulated, a
# dequantized bf16 copy.
BF16_BYTES_PER_PARAM = 2


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
        one_of = (plan.facts(benchmark).scenario_rule() or {}).get("at_least_one_of", [])
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
        if plan.target_is_auto(job.system, job.benchmark, job.scenario):
            # The pass picks the target from this machine's rate, unknown here; start_qps, where
            # given, stands in for it (the checks below need a rate).
            qps = float(plan.scenario_cfg(job.system, job.benchmark, job.scenario).get("start_qps") or 0)
        else:
            qps = float(settings["target_qps"])
        if not plan.test_scale and duration_ms < rules.min_duration_ms:
            findings.append(
                Finding(
                    "run-length",
                    f"{key}.min_duration_ms",
                    f"{duration_ms} ms < the round's {rules.min_duration_ms} ms; the checker rejects the result",
                )
            )
        if not qps:
            continue
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
        if not separate and samples != facts.accuracy_sample_count():
            findings.append(
                Finding(
                    "run-length",
                    where,
                    f"{samples} samples; the checker requires the accuracy run "
                    f"to cover exactly {facts.accuracy_sample_count()}",
                )
            )
    return findings


def _systems(plan: Plan) -> list[Finding]:
    fields = plan.rules["system_description"]
    filled_by_us = {"division", "submitter"}
    findings = []
    for system in plan.systems:
        desc = plan.system_cfg(system)["description"]
        for key, value in desc.items():
            if value == "auto" and key not in AUTO_FIELDS:
                findings.append(
                    Finding(
                        "system-description",
                        f"systems.{system}.description.{key}",
                        f'"auto" cannot be detected for this field (it fills {", ".join(AUTO_FIELDS)}); give the value',
                    )
                )
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
    """The benchmark's task is registered (mlperf_repro.tasks) and implements its evaluator
    and compliance tests, and each system's backend can serve it."""
    findings = []
    for benchmark in plan.benchmarks:
        facts = plan.facts(benchmark)
        where = f"benchmarks.{benchmark}.mlperf_benchmark"
        try:
            task = task_for(facts)
        except UserError as exc:
            findings.append(Finding("support", where, str(exc)))
            continue
        evaluator = facts.accuracy["evaluator"]
        if evaluator not in task.evaluator_names:
            findings.append(
                Finding(
                    "support",
                    where,
                    f"{facts.name} needs the '{evaluator}' accuracy evaluator, which this workflow's "
                    f"{task.name} task does not implement yet (implemented: {', '.join(task.evaluator_names)})",
                )
            )
        for test in facts.compliance_tests:
            if test not in task.compliance:
                findings.append(
                    Finding(
                        "support",
                        where,
                        f"compliance {test} for {facts.name} is not run by this "
                        f"workflow yet (runs for {task.name} benchmarks: {', '.join(task.compliance)})",
                    )
                )
        for system, bench in plan.system_benchmarks():
            backend = plan.engine(system).get("backend")
            if bench == benchmark and backend not in task.backends:
                findings.append(
                    Finding(
                        "support",
                        f"systems.{system}.engine.backend",
                        f"backend '{backend}' cannot serve {facts.name} ({task.name} benchmarks run "
                        f"on: {', '.join(task.backends)})",
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
        local = plan.local_checkpoint(model, workdir)
        if local is not None:  # a file:// source: its own size, not the benchmark's
            model_bytes = sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
        else:
            model_bytes = max(
                (
                    plan.facts(b).facts.get("model_bytes", 0)
                    for b in plan.benchmarks
                    if plan.benchmark_cfg(b)["model"] == model
                ),
                default=0,
            )
            # A published quantized checkpoint (a tool: prequantized recipe's models entry): the
            # benchmark model's bytes at the recipe format's size per parameter.
            for b in plan.benchmarks:
                recipe = (plan.config.get("quantization") or {}).get(plan.benchmark_cfg(b).get("quantization") or "")
                if recipe and recipe.get("tool") == "prequantized" and recipe.get("checkpoint") == model:
                    fraction = format_for(recipe["scheme"]).bytes_per_param / BF16_BYTES_PER_PARAM
                    model_bytes = max(model_bytes, int(plan.facts(b).facts.get("model_bytes", 0) * fraction))
                    break
        total += model_bytes
        for m, recipe in plan.quantized_models:
            if m == model and not (workdir / plan.quantized_dir(m, recipe)).exists():
                emulated = any(plan.engine(s).get("serve_quantized_as") == "emulated" for s in plan.systems)
                fmt = format_for(plan.config["quantization"][recipe]["scheme"])
                fraction = fmt.bytes_per_param / BF16_BYTES_PER_PARAM
                total += int(model_bytes * (fraction + (1.0 if emulated else 0.0)))
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


def _quantize_device(plan: Plan) -> list[Finding]:
    """A recipe whose tool runs it on a GPU: refused when no system that serves its checkpoint
    has an accelerator (a CPU-only config: the job would fail in the tool after the model was
    acquired); set to ``device: cpu``, a warning that a GPU kernel is emulated there."""
    findings = []
    for model, recipe in plan.quantized_models:
        where = plan.quantize_device(recipe)
        why = where["needs_gpu"]
        if why is None:
            continue
        if where["device"] == "cpu":
            message = (
                f"the recipe runs on a CPU (device: cpu) with an emulated GPU kernel: {why}; "
                "the plan view prices the job; device: gpu where a GPU is"
            )
            findings.append(Finding("quantize-device", f"quantization.{recipe}.device", message, severity="warning"))
            continue
        systems = plan.systems_serving(model, recipe)
        if systems and not any(plan.system_accelerators(s) for s in systems):
            message = (
                f"the recipe runs on a GPU ({why}), and no system serving {model} with it "
                f"({', '.join(systems)}) has an accelerator: quantize where one is (a system with "
                "accelerators), set device: cpu to run it on the CPU, or use a recipe without the algorithm"
            )
            findings.append(Finding("quantize-device", f"quantization.{recipe}", message))
    return findings


def _quark_env(plan: Plan, workdir: Path) -> list[Finding]:
    """A tool: quark recipe still to quantize (outside a container) needs Quark's own environment."""
    from ..quant.quark_tool import quark_env, quark_python

    findings = []
    for model, recipe in plan.quantized_models:
        entry = (plan.config.get("quantization") or {}).get(recipe) or {}
        if entry.get("tool") != "quark" or plan.quantize_image(model, recipe):
            continue
        if quark_python() is None and not (workdir / plan.quantized_dir(model, recipe)).is_dir():
            findings.append(
                Finding(
                    "quark-env",
                    f"quantization.{recipe}.tool",
                    f"AMD Quark's environment {quark_env()} is not built: run ./install.sh --quark",
                )
            )
    return findings


def placeholders(config: Any, where: str = "") -> list[Finding]:
    """Every string value that holds a ``TODO:`` placeholder, named by its key path; the text
    after ``TODO:`` says what to put there (hyphens read as spaces); and every digest or commit
    in a value that was made up rather than looked up (:func:`made_up_hex`: an all-zero
    "PLACEHOLDER" digest). The schema lets them through (so the plan view still prices such a
    config); only a run is refused."""
    if isinstance(config, dict):
        return [f for k, v in config.items() for f in placeholders(v, f"{where}.{k}" if where else str(k))]
    if isinstance(config, list):
        return [f for i, v in enumerate(config) for f in placeholders(v, f"{where}[{i}]")]
    if isinstance(config, str) and PLACEHOLDER in config:
        # Inside URLs the text after TODO: is hyphenated (no whitespace in a container URL).
        what = config.split(PLACEHOLDER, 1)[1].strip()
        what = what if " " in what else what.replace("-", " ")
        return [Finding("placeholder", where, f"{config!r} is a placeholder; put {what} there")]
    if isinstance(config, str):
        for match in CONTENT_ADDRESS.finditer(config):
            digits = match.group(1) or match.group(2)
            if made_up_hex(digits):
                kind, what = (
                    ("digest", "the digest of the image you run (docker inspect --format '{{.RepoDigests}}' IMAGE)")
                    if len(digits) == 64
                    else ("commit", "the commit you verified")
                )
                message = f"{config!r} holds a made-up {kind} ({digits[:12]}...{digits[-4:]}); put {what} there"
                return [Finding("placeholder", where, message)]
    return []


def _local_sources(plan: Plan, workdir: Path) -> list[Finding]:
    """A file:// source (model or dataset) that is not there. A relative path is read from the
    workflow's folder, on the submit host as in every job: missing, it is an error. An absolute
    one may lie on the compute nodes only (a cluster's shared data mount): a warning."""
    findings = []
    for kind in ("models", "datasets"):
        for name, entry in (plan.config.get(kind) or {}).items():
            source = str(entry.get("source", ""))
            raw = source[len("file://") :]
            if not source.startswith("file://") or PLACEHOLDER in raw or not raw:
                continue
            path = Path(raw)
            if (path if path.is_absolute() else workdir / path).exists():
                continue
            if path.is_absolute():
                message = f"{source}: not on this host; the acquire job must find it where it runs"
                findings.append(Finding("source-missing", f"{kind}.{name}.source", message, severity="warning"))
            else:
                message = (
                    f"{source}: no such file or folder under the workflow's folder {workdir.resolve()} "
                    "or the project's (relative file:// paths are read from there); run from the folder "
                    "that holds it, or give an absolute path"
                )
                findings.append(Finding("source-missing", f"{kind}.{name}.source", message))
    return findings


def _imported_notes(config: dict[str, Any]) -> list[Finding]:
    """What an import mapped with a difference worth seeing, or could not map as the source ran
    it (e.g. the harness ran 87 engines on 11 nodes of 8: 7 on the last): a warning each before
    any run, so the difference is seen before the results differ."""
    notes = (config.get("imported") or {}).get("notes") if isinstance(config.get("imported"), dict) else None
    return [
        Finding("imported-note", f"imported.notes[{i}]", str(note), severity="warning")
        for i, note in enumerate(notes or [])
    ]


def preflight(config: dict[str, Any], workdir: str | Path = ".") -> list[Finding]:
    plan = Plan(config)
    # imported: the import's record of the source (values it replaced may hold TODO: texts); never read.
    findings: list[Finding] = placeholders({k: v for k, v in config.items() if k != "imported"})
    for part in (_loadgen, _scenarios, _run_lengths, _systems, _support):
        findings.extend(part(plan))
    findings.extend(_imported_notes(config))
    findings.extend(_quantize_device(plan))
    findings.extend(_quark_env(plan, Path(workdir)))
    findings.extend(_local_sources(plan, Path(workdir)))
    findings.extend(_disk(plan, Path(workdir)))
    return findings
