"""Per-scenario README.md: what ran, its result, and how to reproduce it."""

from __future__ import annotations

from typing import Any

from ..accuracy.sandbox import UNSANDBOXED_CONFIG_KEY, UNSANDBOXED_NOTE
from ..plan import Job, Plan


def _ms(ns: Any) -> str:
    try:
        return f"{float(ns) / 1e6:.1f} ms"
    except (TypeError, ValueError):
        return "n/a"


def scenario_readme(plan: Plan, job: Job, detail: dict[str, Any], accuracy: dict[str, Any]) -> str:
    facts = plan.facts(job.benchmark)
    bench = plan.benchmark_cfg(job.benchmark)
    field = facts.result_field(job.scenario)
    limits = facts.latency_limits_ms(job.scenario)
    lines = [f"# {job.benchmark} / {job.scenario} on {job.system}", ""]
    if not plan.submittable:
        lines += [
            "**TEST SCALE - NOT SUBMITTABLE.** Shortened run on reduced sample counts "
            "(`test_scale.enabled` in the config).",
            "",
        ]
    lines += [
        f"- Benchmark: `{bench['mlperf_benchmark']}` (LoadGen model `{plan.loadgen_model(job.benchmark, job.scenario)}`, "
        f"LoadGen scenario `{plan.loadgen_scenario(job.scenario)}`)",
        f"- Model: `{bench['model']}`"
        + (f", quantized with recipe `{bench['quantization']}`" if bench.get("quantization") else ""),
        f"- Dataset: `{bench['dataset']}`",
        f"- LoadGen: {detail.get('loadgen_version', '?')}; result {detail.get('result_validity', '?')}",
        f"- Result ({field}): {facts.result_value(job.scenario, detail.get(field)) or 'n/a'} "
        f"{facts.result_unit(job.scenario)}",
    ]
    if limits:
        lines.append(
            f"- TTFT p99: {_ms(detail.get('result_first_token_99.00_percentile_latency_ns'))} (limit {limits['ttft']} ms); "
            f"TPOT p99: {_ms(detail.get('result_time_per_output_token_99.00_percentile_ns'))} (limit {limits['tpot']} ms)"
        )
    metrics = accuracy.get("metrics", {})
    checks = accuracy.get("verdict", {}).get("checks", [])
    verdicts = "; ".join(
        f"{c['metric']} {c['value']} {'>=' if 'minimum' in c else '<='} {c.get('minimum', c.get('maximum'))}"
        f" {'PASS' if c['passed'] else 'FAIL'}"
        for c in checks
    )
    lines += [f"- Accuracy: {', '.join(f'{k}={v}' for k, v in metrics.items())}", f"- Accuracy targets: {verdicts}"]
    targets = plan.accuracy_targets(job.benchmark)
    if targets.get("open_metrics"):
        lines.append(
            f"- Accuracy metric (open division): {', '.join(targets['open_metrics'])}, computed without downloaded "
            f"weights and judged in place of {', '.join(targets.get('replaces') or [])} (not computable here); the "
            "fidelity ones against the unquantized pipeline's videos of the same prompts (accuracy/unquantized_videos/ "
            "holds those of the packaged samples). accuracy/accuracy.txt declares them (`open_accuracy` lines); "
            "their definitions: `../../../../src/src/mlperf_repro/accuracy/video_quality.py`."
        )
    sandbox = accuracy.get("sandbox") or {}
    if sandbox.get("isolation"):
        modes = ", ".join(f"{mode} ({len(entries)} samples)" for mode, entries in sandbox["isolation"].items())
        lines.append(f"- Model-written code ran in the sandbox: {modes}")
    if sandbox.get("unsandboxed"):
        lines.append(
            f"- **Accuracy {UNSANDBOXED_NOTE}**: model-written code ran without namespaces or a system-call "
            f"filter (`{UNSANDBOXED_CONFIG_KEY}` in the config)"
        )
    lines.append("")
    target = f"results/runs/{job.system}/{job.benchmark}/{job.scenario}"
    lines += [
        "## Reproduce",
        "",
        "This result was produced by the mlperf-repro Snakemake workflow in `../../../../src` from the config",
        "`../../../../src/config_used.yaml` (the generated `user.conf` here comes from it).",
        "",
        "```bash",
        "cd src            # the <submitter>/src folder of this submission",
        "./install.sh      # pinned environment in .venv",
        f".venv/bin/snakemake --cores all --configfile config_used.yaml {target}/performance {target}/accuracy",
        "```",
        "",
        "The workflow acquires and verifies the model and dataset, quantizes, writes `user.conf`,",
        "runs LoadGen once per process (performance, then accuracy) and scores the accuracy log.",
        "",
    ]
    return "\n".join(lines)
