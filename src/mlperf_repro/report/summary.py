"""The summary table printed and written at the end of a run.

One row per system x benchmark x scenario: the result metric, TTFT/TPOT p99 against their
limits where they apply, LoadGen validity, accuracy against its target, and whether the
row is submittable.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..loadgen_logs import read_detail
from ..plan import Plan

COLUMNS = (
    "system",
    "benchmark",
    "mlperf_benchmark",
    "scenario",
    "result",
    "unit",
    "loadgen_validity",
    "ttft_p99_ms",
    "ttft_limit_ms",
    "tpot_p99_ms",
    "tpot_limit_ms",
    "accuracy",
    "accuracy_target",
    "accuracy_passed",
    "packaged",
    "submittable",
)


def _ms(value: Any) -> str:
    return f"{float(value) / 1e6:.2f}" if value not in (None, "") else ""


def _packaging(plan: Plan) -> tuple[str, dict[str, list[str]]]:
    path = Path(plan.failed_results_path)
    if not path.is_file():
        return "exclude", {}
    data = json.loads(path.read_text())
    return data["policy"], data["failed"]


def summary_rows(plan: Plan) -> list[dict[str, str]]:
    policy, failed = _packaging(plan)
    rows = []
    for job in plan.jobs:
        facts = plan.facts(job.benchmark)
        detail = read_detail(
            Path(plan.run_dir(job.system, job.benchmark, job.scenario, "performance")) / "mlperf_log_detail.txt"
        )
        accuracy = json.loads(
            (Path(plan.accuracy_dir(job.system, job.benchmark, job.scenario)) / "accuracy.json").read_text()
        )
        limits = facts.latency_limits_ms(job.scenario) or {}
        checks = accuracy["verdict"]["checks"]
        result = facts.result_value(job.scenario, detail.get(facts.result_field(job.scenario)))
        rows.append(
            {
                "system": job.system,
                "benchmark": job.benchmark,
                "mlperf_benchmark": plan.benchmark_cfg(job.benchmark)["mlperf_benchmark"],
                "scenario": job.scenario,
                "result": f"{float(result):.2f}" if result is not None else "",
                "unit": facts.result_unit(job.scenario),
                "loadgen_validity": str(detail.get("result_validity", "missing")),
                "ttft_p99_ms": _ms(detail.get("result_first_token_99.00_percentile_latency_ns")) if limits else "",
                "ttft_limit_ms": str(limits.get("ttft", "")),
                "tpot_p99_ms": _ms(detail.get("result_time_per_output_token_99.00_percentile_ns")) if limits else "",
                "tpot_limit_ms": str(limits.get("tpot", "")),
                "accuracy": " ".join(f"{c['metric']}={c['value']}" for c in checks),
                "accuracy_target": " ".join(
                    f"{c['metric']}{'>=' if 'minimum' in c else '<='}{c.get('minimum', c.get('maximum'))}"
                    for c in checks
                )
                + (f" ({accuracy['verdict']['kind']})" if checks else ""),
                "accuracy_passed": "yes" if accuracy["verdict"]["passed"] else "NO",
                "packaged": _packaged(plan, job, policy, failed),
                "submittable": "yes" if plan.submittable else "NO (test scale)",
            }
        )
    return rows


def _packaged(plan: Plan, job, policy: str, failed: dict[str, list[str]]) -> str:
    folder = f"{plan.division}/{plan.submitter}/results/{job.system}/{job.benchmark}/{job.scenario}"
    if folder not in failed:
        return "yes"
    rules = sorted({reason.split(":", 1)[0].split("] ", 1)[-1] for reason in failed[folder]})
    return ("KEPT, FAILED " if policy == "keep" else "NO, failed ") + ", ".join(rules)


def to_csv(rows: list[dict[str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def demo_model_lines(plan: Plan) -> list[str]:
    """For locally built demo models: held-out ROUGE after training vs untrained, same shape."""
    lines = []
    for model in plan.models:
        if not plan.config["models"][model]["source"].startswith("builtin:"):
            continue
        record_path = Path(plan.acquire_record_path("models", model))
        if not record_path.is_file():
            continue
        build = json.loads(record_path.read_text()).get("build", {})
        trained, untrained = build.get("rouge_trained"), build.get("rouge_untrained")
        if trained and untrained:
            lines.append(
                f"Demo model `{model}` (built here, {build.get('parameters', '?')} parameters, "
                f"{build.get('build_seconds', '?')} s): held-out ROUGE-1/2/L "
                f"{trained['rouge1']}/{trained['rouge2']}/{trained['rougeL']} trained vs "
                f"{untrained['rouge1']}/{untrained['rouge2']}/{untrained['rougeL']} untrained "
                f"({build.get('eval_examples', '?')} examples)."
            )
    return lines


def _ratio(value: Any, reference: Any) -> str:
    try:
        return f"{float(value):.4g} ({100 * float(value) / float(reference):.1f}% of {float(reference):.4g})"
    except (TypeError, ValueError, ZeroDivisionError):
        return str(value)


def quantization_lines(plan: Plan) -> list[str]:
    """Per quantized benchmark: the recipe and how far it moved the model from the unquantized
    one - the quantize stage's logit (or per-layer) error and the task accuracy of the accuracy
    run against the unquantized reference run's (benchmarks with a measured target)."""
    rows = []
    for name, bench in plan.config["benchmarks"].items():
        recipe = bench.get("quantization")
        if not recipe:
            continue
        manifest_path = Path(plan.quantized_dir(bench["model"], recipe)) / "quant_manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
        logits, layers = manifest.get("logit_error") or {}, manifest.get("layerwise_error") or {}
        if logits:
            error = (
                f"logits: rel {logits.get('rel_mean')}, top-1 {logits.get('top1_agreement')}, "
                f"KL {logits.get('kl_ref_q_mean')}"
            )
        elif layers:
            error = f"per layer: mean {layers.get('mean')}, max {layers.get('max')}"
        elif manifest.get("weight_error"):  # a Diffusers pipeline: per-layer weight error, one video compared
            weights = manifest["weight_error"].values()
            error = f"weights: max rel {max(w.get('max') or 0 for w in weights)}"
            served = (manifest.get("video_error") or {}).get("served")
            if served:
                error += f"; video: {served['mean_abs_diff']} levels, PSNR {served['psnr_db']} dB"
        else:
            error = "not evaluated"
        accuracy = "-"
        for job in plan.jobs:
            if job.benchmark != name:
                continue
            record_path = Path(plan.accuracy_dir(job.system, job.benchmark, job.scenario)) / "accuracy.json"
            if record_path.is_file():
                record = json.loads(record_path.read_text())
                reference = record.get("reference_metrics") or {}
                accuracy = ", ".join(
                    f"{c['metric']} {_ratio(c['value'], reference[c['metric']])}"
                    if c["metric"] in reference
                    else f"{c['metric']} {c['value']}"
                    for c in record["verdict"]["checks"]
                )
                break
        scheme = manifest.get("scheme") or plan.config["quantization"][recipe]["scheme"]
        layout = manifest.get("layout") or manifest.get("quant_method") or "-"
        rows.append(f"| {name} | {recipe} | {scheme} | {layout} | {error} | {accuracy} |")
    if not rows:
        return []
    return [
        "Quantization against the unquantized model (accuracy: this run's, and % of the unquantized reference run's):",
        "",
        "| benchmark | recipe | scheme | layout | quantize-stage error | accuracy |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def to_markdown(rows: list[dict[str, str]], check: dict[str, Any] | None, plan: Plan) -> str:
    shown = (
        "system",
        "benchmark",
        "scenario",
        "result",
        "unit",
        "loadgen_validity",
        "ttft_p99_ms",
        "tpot_p99_ms",
        "accuracy",
        "accuracy_target",
        "accuracy_passed",
        "packaged",
        "submittable",
    )
    lines = [f"# MLPerf Inference {plan.rules.name} summary ({plan.division}, {plan.submitter})", ""]
    if not plan.submittable:
        lines += ["**NOT SUBMITTABLE: test-scale run (shortened durations, reduced sample counts).**", ""]
    lines.append("| " + " | ".join(shown) + " |")
    lines.append("|" + "---|" * len(shown))
    for row in rows:
        lines.append("| " + " | ".join(row[c] or "-" for c in shown) + " |")
    if check is not None:
        errors = [f for f in check["findings"] if f["severity"] == "error"]
        lines += ["", f"Submission check: **{check['status']}** ({len(errors)} error(s)); see results/check/report.txt"]
    quantization = quantization_lines(plan)
    if quantization:
        lines += [""] + quantization
    demo = demo_model_lines(plan)
    if demo:
        lines += [""] + demo
    lines.append("")
    return "\n".join(lines)


def summary_job(plan: Plan, check_json: str | None, out_csv: str, out_md: str) -> str:
    rows = summary_rows(plan)
    check = json.loads(Path(check_json).read_text()) if check_json else None
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    Path(out_csv).write_text(to_csv(rows))
    markdown = to_markdown(rows, check, plan)
    Path(out_md).write_text(markdown)
    return markdown
