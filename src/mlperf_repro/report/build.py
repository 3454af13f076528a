"""Rule ``report_plots``: every plot and page of the HTML report (``snakemake --report``),
from the finished run's records. Items: :func:`mlperf_repro.report.items.report_items`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..harness.run import TIMELINE_FILE
from ..loadgen_logs import read_detail
from ..plan import Plan
from . import pages, plots
from .items import Item, report_items


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def _title(where: dict[str, str]) -> str:
    return " / ".join(where.values())


def build_item(plan: Plan, item: Item) -> Path:
    out = Path(item.path)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = item.where
    if item.kind in ("throughput", "latency", "token_latency"):
        run = Path(plan.packaged_run_dir(w["system"], w["benchmark"], w["scenario"]))
        detail = read_detail(run / "mlperf_log_detail.txt")
        limits = plan.facts(w["benchmark"]).latency_limits_ms(w["scenario"]) or {}
        title = _title(w)
        if item.kind == "throughput":
            timeline = run / TIMELINE_FILE  # absent in runs made before it was recorded
            return plots.plot_throughput(
                detail, _json(run / "run_record.json"), out, title, _json(timeline) if timeline.is_file() else None
            )
        if item.kind == "latency":
            return plots.plot_latency(detail, out, title, limits.get("latency"))
        return plots.plot_token_latency(detail, out, title, limits)
    if item.kind == "spread":
        from .summary import repeat_spread

        job = next(
            j for j in plan.jobs if (j.system, j.benchmark, j.scenario) == (w["system"], w["benchmark"], w["scenario"])
        )
        return plots.plot_spread(repeat_spread(plan, job) or {}, out, f"{_title(w)}: run-to-run spread")
    if item.kind == "accuracy":
        record = _json(Path(plan.accuracy_dir(w["system"], w["benchmark"], w["scenario"])) / "accuracy.json")
        return plots.plot_accuracy(record, out, f"{_title(w)}: accuracy")
    if item.kind == "quantization":
        manifest = _json(Path(plan.quantized_dir(w["model"], w["recipe"])) / "quant_manifest.json")
        return plots.plot_quantization(manifest, out, f"{w['model']} quantized with {w['recipe']}")
    if item.kind == "summary":
        summary_csv = Path("results/report/summary.csv")
        summary_md = Path("results/report/summary.md")
        check = _json(Path("results/check/report.json")) or None
        out.write_text(
            pages.summary_page(
                summary_csv.read_text() if summary_csv.is_file() else "",
                summary_md.read_text() if summary_md.is_file() else "",
                check,
            )
        )
        return out
    if item.kind == "compliance":
        verdicts = []
        for job, test in plan.compliance_jobs:
            folder = Path(plan.compliance_dir(job.system, job.benchmark, job.scenario, test))
            verify = folder / "verify_accuracy.txt"
            verdicts.append(
                {
                    "system": job.system,
                    "benchmark": job.benchmark,
                    "scenario": job.scenario,
                    "test": test,
                    "verdict": _json(folder / "verdict.json"),
                    "verify_text": verify.read_text() if verify.is_file() else "",
                }
            )
        out.write_text(pages.compliance_page(verdicts))
        return out
    if item.kind == "provenance":
        records = []
        for job in plan.jobs:
            for mode in ("performance", "accuracy"):
                run = (
                    plan.packaged_run_dir(job.system, job.benchmark, job.scenario)
                    if mode == "performance"
                    else plan.run_dir(job.system, job.benchmark, job.scenario, mode)
                )
                path = Path(run) / "provenance.json"
                records.append(
                    {
                        "system": job.system,
                        "benchmark": job.benchmark,
                        "scenario": job.scenario,
                        "mode": mode,
                        "path": str(path),
                        "provenance": _json(path),
                    }
                )
        out.write_text(pages.provenance_page(records))
        return out
    raise ValueError(f"unknown report item kind {item.kind!r}")


def report_job(plan: Plan, outputs: list[str] | None = None) -> list[Path]:
    """Write every report item (or those whose path is in ``outputs``)."""
    wanted = set(outputs) if outputs is not None else None
    return [build_item(plan, item) for item in report_items(plan) if wanted is None or item.path in wanted]
