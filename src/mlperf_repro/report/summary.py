"""The summary table printed and written at the end of a run.

One row per system x benchmark x scenario: the result metric, TTFT/TPOT p99 against their
limits where they apply, LoadGen validity, accuracy against its target, and whether the
row is submittable. A scenario with ``repeats: N`` also gets its run-to-run spread: the
mean of its N performance results, min-max, relative standard deviation and the mean's
95% interval (Student t, :mod:`mlperf_repro.stats`), in the CSV's ``repeat_*`` columns,
a Markdown table and ``summary.json`` (for plots).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..accuracy.sandbox import UNSANDBOXED_NOTE
from ..loadgen_logs import read_detail
from ..plan import Job, Plan
from ..stats import summarize

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
    # repeats: N (empty for a scenario that runs once): the N performance results' statistics.
    "repeats",
    "packaged_repeat",
    "repeat_mean",
    "repeat_min",
    "repeat_max",
    "repeat_rel_std_pct",
    "repeat_ci95_low",
    "repeat_ci95_high",
)


def _ms(value: Any) -> str:
    return f"{float(value) / 1e6:.2f}" if value not in (None, "") else ""


def _packaging(plan: Plan) -> tuple[str, dict[str, list[str]]]:
    path = Path(plan.failed_results_path)
    if not path.is_file():
        return "exclude", {}
    data = json.loads(path.read_text())
    return data["policy"], data["failed"]


def _number(value: float | None, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if value is not None else ""


def repeat_spread(plan: Plan, job: Job) -> dict[str, Any] | None:
    """The run-to-run spread of a scenario with ``repeats`` above 1 (None otherwise): each
    repeat's result, validity and TTFT/TPOT p99, and over the results the mean, standard
    deviation, min-max, relative standard deviation and spread, and the mean's 95% interval."""
    repeats = plan.repeats(job.system, job.benchmark, job.scenario)
    if repeats < 2:
        return None
    facts = plan.facts(job.benchmark)
    limits = facts.latency_limits_ms(job.scenario) or {}
    runs = []
    for k, run_dir in enumerate(plan.performance_run_dirs(job.system, job.benchmark, job.scenario), start=1):
        detail = read_detail(Path(run_dir) / "mlperf_log_detail.txt")
        ttft = detail.get("result_first_token_99.00_percentile_latency_ns") if limits else None
        tpot = detail.get("result_time_per_output_token_99.00_percentile_ns") if limits else None
        runs.append(
            {
                "repeat": k,
                "run_dir": run_dir,
                "result": facts.result_value(job.scenario, detail.get(facts.result_field(job.scenario))),
                "loadgen_validity": str(detail.get("result_validity", "missing")),
                "ttft_p99_ms": float(ttft) / 1e6 if ttft not in (None, "") else None,
                "tpot_p99_ms": float(tpot) / 1e6 if tpot not in (None, "") else None,
            }
        )
    stats = summarize([r["result"] for r in runs])
    entry: dict[str, Any] = {
        "system": job.system,
        "benchmark": job.benchmark,
        "scenario": job.scenario,
        "unit": facts.result_unit(job.scenario),
        "repeats": repeats,
        "packaged_repeat": plan.packaged_repeat(job.system, job.benchmark, job.scenario),
        "valid_runs": sum(r["loadgen_validity"] == "VALID" for r in runs),
        "runs": runs,
        "n": 0,
    }
    if stats is None:  # no run logged a result
        return entry
    nearest = min((r for r in runs if r["result"] is not None), key=lambda r: abs(r["result"] - stats.mean))
    return {
        **entry,
        "n": stats.n,
        "mean": stats.mean,
        "stdev": stats.stdev,
        "min": stats.minimum,
        "max": stats.maximum,
        "relative_std": stats.stdev / stats.mean if stats.mean else 0.0,
        "relative_spread": stats.relative_spread,
        "ci95_low": stats.low,
        "ci95_high": stats.high,
        "ci95_method": "Student t, two-sided, n-1 degrees of freedom",
        # The repeat a packaged_repeat that wants a representative result would name.
        "nearest_mean_repeat": nearest["repeat"],
    }


def _repeat_columns(spread: dict[str, Any] | None) -> dict[str, str]:
    if spread is None:
        return {"repeats": "1", "packaged_repeat": "1"} | {c: "" for c in COLUMNS if c.startswith("repeat_")}
    has = spread["n"] > 0
    return {
        "repeats": str(spread["repeats"]),
        "packaged_repeat": str(spread["packaged_repeat"]),
        "repeat_mean": _number(spread.get("mean")),
        "repeat_min": _number(spread.get("min")),
        "repeat_max": _number(spread.get("max")),
        "repeat_rel_std_pct": _number(100 * spread["relative_std"]) if has else "",
        "repeat_ci95_low": _number(spread.get("ci95_low")),
        "repeat_ci95_high": _number(spread.get("ci95_high")),
    }


def summary_rows(plan: Plan, spreads: dict[Job, dict[str, Any] | None] | None = None) -> list[dict[str, str]]:
    """One row per scenario; ``spreads`` (from :func:`repeat_spread`) fills the repeat columns,
    computed here when not given."""
    policy, failed = _packaging(plan)
    if spreads is None:
        spreads = {job: repeat_spread(plan, job) for job in plan.jobs}
    rows = []
    for job in plan.jobs:
        facts = plan.facts(job.benchmark)
        # The packaged repeat's result: the one the tree holds.
        detail = read_detail(
            Path(plan.packaged_run_dir(job.system, job.benchmark, job.scenario)) / "mlperf_log_detail.txt"
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
                + (f" ({accuracy['verdict']['kind']})" if checks else "")
                + (f" [{UNSANDBOXED_NOTE}]" if (accuracy.get("sandbox") or {}).get("unsandboxed") else ""),
                "accuracy_passed": "yes" if accuracy["verdict"]["passed"] else "NO",
                "packaged": _packaged(plan, job, policy, failed),
                "submittable": "yes" if plan.submittable else "NO (test scale)",
                **_repeat_columns(spreads.get(job)),
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
    """For demo models (built here, or shipped trained in artifacts/models): held-out ROUGE
    after training vs untrained, same shape."""
    lines = []
    for model in plan.models:
        record_path = Path(plan.acquire_record_path("models", model))
        if not record_path.is_file():
            continue
        record = json.loads(record_path.read_text())
        build = record.get("build") or {}
        trained, untrained = build.get("rouge_trained"), build.get("rouge_untrained")
        if not (isinstance(trained, dict) and isinstance(untrained, dict)):
            continue
        origin = (
            f"built here, {build.get('parameters', '?')} parameters, {build.get('build_seconds', '?')} s"
            if record.get("scheme") == "builtin"
            else f"trained checkpoint from {record.get('source')}, {build.get('parameters', '?')} parameters, "
            "checksums verified; `mlperf-repro demo-checkpoints` rebuilds it"
        )
        lines.append(
            f"Demo model `{model}` ({origin}): held-out ROUGE-1/2/L "
            f"{trained.get('rouge1')}/{trained.get('rouge2')}/{trained.get('rougeL')} trained vs "
            f"{untrained.get('rouge1')}/{untrained.get('rouge2')}/{untrained.get('rougeL')} untrained "
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


def open_accuracy_lines(plan: Plan) -> list[str]:
    """The benchmarks judged by open-division metrics in place of the round's score (open_accuracy)."""
    lines = []
    for name in plan.benchmarks:
        targets = plan.accuracy_targets(name)
        if targets.get("open_metrics"):
            judged = [*targets["metrics"], *targets.get("minimums", {})]
            lines.append(
                f"Open-division accuracy: {name} stands in for {plan.benchmark_cfg(name)['mlperf_benchmark']} and is "
                f"judged by {', '.join(judged)} in place of {', '.join(targets.get('replaces') or [])} (needs "
                "checkpoints this machine does not have), computed without downloaded weights against the "
                "unquantized pipeline's videos (docs/wan.md)."
            )
    return lines


def pair_lines(plan: Plan) -> list[str]:
    """The measurement pairs (a performance run and TEST04) measured more than once: each
    attempt's ratio, so that a reader sees the machine's noise the packaged pair came through."""
    lines = []
    for job, test in plan.pair_jobs:
        record_path = Path(plan.pair_path("pair_attempts", job.system, job.benchmark, job.scenario)) / "attempts.json"
        if not record_path.is_file():
            continue
        record = json.loads(record_path.read_text())
        attempts = record.get("attempts") or []
        if len(attempts) < 2:
            continue
        seen = "; ".join(
            f"attempt {a['attempt']}: ratio {a['speedup']:.4f}"
            if isinstance(a.get("speedup"), float)
            else f"attempt {a['attempt']}"
            for a in attempts
        )
        outcome = "passed" if record.get("passed") else "failed"
        lines.append(
            f"{job.system} / {job.benchmark} / {job.scenario}: the {test} pair was measured {len(attempts)} times "
            f"(both runs VALID, the ratio over the limit but below the noise ceiling: the machine's speed moved "
            f"between the runs) and "
            f"{outcome} on attempt {record.get('packaged_attempt')}, which is packaged ({seen}; "
            f"{record_path.parent})."
        )
    return lines


def spread_lines(spreads: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of the repeated scenarios' run-to-run spread (none without repeats)."""
    if not spreads:
        return []
    lines = [
        "Run-to-run spread of the repeated performance runs (`repeats`; 95% interval of the mean, Student t): "
        "a gap to another result inside the interval is within this machine's run-to-run noise.",
        "",
        "| system | benchmark | scenario | unit | results (run 1..N) | mean | min-max (spread) | rel. std "
        "| 95% interval | valid | packaged |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in spreads:
        results = ", ".join(_number(r["result"]) or "-" for r in s["runs"])
        if s["n"]:
            cells = [
                _number(s["mean"]),
                f"{_number(s['min'])}-{_number(s['max'])} ({100 * s['relative_spread']:.2f}%)",
                f"{100 * s['relative_std']:.2f}%",
                f"{_number(s['ci95_low'])}-{_number(s['ci95_high'])}",
            ]
        else:
            cells = ["-"] * 4
        packaged = f"run {s['packaged_repeat']} (nearest the mean: run {s.get('nearest_mean_repeat', '-')})"
        lines.append(
            f"| {s['system']} | {s['benchmark']} | {s['scenario']} | {s['unit']} | {results} | "
            + " | ".join(cells)
            + f" | {s['valid_runs']}/{s['repeats']} | {packaged} |"
        )
    return lines


def to_markdown(
    rows: list[dict[str, str]], check: dict[str, Any] | None, plan: Plan, spreads: list[dict[str, Any]] | None = None
) -> str:
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
    lines += verdict_lines(rows, check, plan) + [""]
    lines.append("| " + " | ".join(shown) + " |")
    lines.append("|" + "---|" * len(shown))
    for row in rows:
        lines.append("| " + " | ".join(row[c] or "-" for c in shown) + " |")
    declared = open_accuracy_lines(plan)
    if declared:
        lines += [""] + declared
    pairs = pair_lines(plan)
    if pairs:
        lines += [""] + pairs
    spread = spread_lines(spreads or [])
    if spread:
        lines += [""] + spread
    quantization = quantization_lines(plan)
    if quantization:
        lines += [""] + quantization
    demo = demo_model_lines(plan)
    if demo:
        lines += [""] + demo
    lines.append("")
    return "\n".join(lines)


def verdict_lines(rows: list[dict[str, str]], check: dict[str, Any] | None, plan: Plan) -> list[str]:
    """The run's outcome first: the check's verdict, how many results are VALID and met their
    accuracy target, and whether the tree may be submitted (and if not, why)."""
    valid = sum(row.get("loadgen_validity") == "VALID" for row in rows)
    accurate = sum(row.get("accuracy_passed") == "yes" for row in rows)
    counts = f"{valid} of {len(rows)} results VALID, {accurate} of {len(rows)} meet their accuracy target"
    if check is None:
        lines = [f"**Submission check: not run** ({counts})."]
    else:
        errors = sum(f["severity"] == "error" for f in check["findings"])
        lines = [f"**Submission check: {check['status']}** ({errors} error(s); results/check/report.txt): {counts}."]
    if not plan.submittable:
        lines.append("**NOT SUBMITTABLE: test-scale run (shortened durations, reduced sample counts).**")
    return lines


def summary_json(plan: Plan, rows: list[dict[str, str]], spreads: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary for scripts and plots: the CSV's rows, and per repeated scenario its runs and
    statistics as numbers (``repeats``)."""
    return {
        "round": plan.rules.name,
        "division": plan.division,
        "submitter": plan.submitter,
        "submittable": plan.submittable,
        "rows": rows,
        "repeats": spreads,
    }


def summary_job(plan: Plan, check_json: str | None, out_csv: str, out_md: str, out_json: str | None = None) -> str:
    by_job = {job: repeat_spread(plan, job) for job in plan.jobs}
    spreads = [s for s in by_job.values() if s is not None]
    rows = summary_rows(plan, by_job)
    check = json.loads(Path(check_json).read_text()) if check_json else None
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    Path(out_csv).write_text(to_csv(rows))
    markdown = to_markdown(rows, check, plan, spreads)
    Path(out_md).write_text(markdown)
    if out_json:
        Path(out_json).write_text(json.dumps(summary_json(plan, rows, spreads), indent=2) + "\n")
    return markdown
