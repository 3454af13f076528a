"""The scaling study: throughput at 1, 2, ... N endpoints, efficiency, per-endpoint throughput.

Efficiency at n endpoints = throughput(n) / (n / n0 x throughput(n0)), where n0 is the
smallest count run (1 unless configured otherwise): the vendor's "93-98% of linear".
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..loadgen_logs import read_detail


@dataclass
class ScalingPoint:
    scenario: str
    endpoints: int
    throughput: float
    unit: str
    validity: str
    per_endpoint: dict[str, float | None]
    resent: int
    efficiency: float | None = None


def read_point(run_dir: str | Path, scenario: str, endpoints: int, result_field: str, unit: str) -> ScalingPoint:
    run_dir = Path(run_dir)
    detail = read_detail(run_dir / "mlperf_log_detail.txt")
    record = json.loads((run_dir / "run_record.json").read_text())
    stats = record.get("backend_stats") or {}
    return ScalingPoint(
        scenario=scenario,
        endpoints=endpoints,
        throughput=float(detail.get(result_field) or 0.0),
        unit=unit,
        validity=str(detail.get("result_validity", "missing")),
        per_endpoint={name: ep.get("tokens_per_second_busy") for name, ep in (stats.get("endpoints") or {}).items()},
        resent=int(stats.get("resent_queries", 0)),
    )


def with_efficiency(points: list[ScalingPoint]) -> list[ScalingPoint]:
    by_scenario: dict[str, list[ScalingPoint]] = {}
    for point in points:
        by_scenario.setdefault(point.scenario, []).append(point)
    for series in by_scenario.values():
        series.sort(key=lambda p: p.endpoints)
        base = series[0]
        for point in series:
            ideal = base.throughput * point.endpoints / base.endpoints
            point.efficiency = point.throughput / ideal if ideal > 0 else None
    return [p for series in by_scenario.values() for p in series]


def to_csv(points: list[ScalingPoint]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "scenario",
            "endpoints",
            "throughput",
            "unit",
            "scaling_efficiency",
            "loadgen_validity",
            "resent_queries",
            "per_endpoint_tokens_per_s",
        ]
    )
    for p in points:
        writer.writerow(
            [
                p.scenario,
                p.endpoints,
                f"{p.throughput:.2f}",
                p.unit,
                "" if p.efficiency is None else f"{p.efficiency:.4f}",
                p.validity,
                p.resent,
                " ".join(f"{k}={v}" for k, v in p.per_endpoint.items()),
            ]
        )
    return out.getvalue()


def to_markdown(points: list[ScalingPoint], title: str) -> str:
    lines = [
        f"# Scaling study: {title}",
        "",
        "Efficiency = throughput(n) / (n / n0 x throughput(n0)), n0 the smallest endpoint count run.",
        "",
        "| scenario | endpoints | throughput | efficiency | LoadGen | resent | per endpoint (tokens/s while busy) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in points:
        eff = "-" if p.efficiency is None else f"{100 * p.efficiency:.1f}%"
        per = ", ".join(f"{k} {v:.0f}" if v is not None else f"{k} -" for k, v in p.per_endpoint.items())
        lines.append(
            f"| {p.scenario} | {p.endpoints} | {p.throughput:.2f} {p.unit} | {eff} | {p.validity} | "
            f"{p.resent} | {per} |"
        )
    return "\n".join(lines) + "\n"


def to_svg(points: list[ScalingPoint], title: str) -> str:
    """Throughput per scenario against endpoint count, the linear ideal dashed, and the
    scaling efficiency printed at each point."""
    width, height, margin = 640, 360, 56
    series: dict[str, list[ScalingPoint]] = {}
    for p in points:
        series.setdefault(p.scenario, []).append(p)
    max_n = max(p.endpoints for p in points)
    ideal_top = max(s[0].throughput * max_n / s[0].endpoints for s in series.values())
    top = max([ideal_top] + [p.throughput for p in points]) * 1.05 or 1.0

    def x(n: float) -> float:
        return margin + (width - 2 * margin) * (n / max_n)

    def y(value: float) -> float:
        return height - margin - (height - 2 * margin) * (value / top)

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="scaling study">',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
        f'<line x1="{margin}" y1="{height - margin}" x2="{width - margin}" y2="{height - margin}" stroke="#333"/>',
        f'<line x1="{margin}" y1="{margin}" x2="{margin}" y2="{height - margin}" stroke="#333"/>',
        f'<text x="{width / 2}" y="{height - 16}" text-anchor="middle" font-size="12">endpoints</text>',
        f'<text x="14" y="{height / 2}" font-size="12" transform="rotate(-90 14 {height / 2})" '
        f'text-anchor="middle">throughput</text>',
    ]
    for n in sorted({p.endpoints for p in points}):
        parts.append(f'<text x="{x(n):.1f}" y="{height - margin + 16}" text-anchor="middle" font-size="11">{n}</text>')
    for i, (scenario, pts) in enumerate(sorted(series.items())):
        colour = colours[i % len(colours)]
        base = pts[0]
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-dasharray="4 4" points="'
            + " ".join(f"{x(p.endpoints):.1f},{y(base.throughput * p.endpoints / base.endpoints):.1f}" for p in pts)
            + '"/>'
        )
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
            + " ".join(f"{x(p.endpoints):.1f},{y(p.throughput):.1f}" for p in pts)
            + '"/>'
        )
        for p in pts:
            eff = "" if p.efficiency is None else f" ({100 * p.efficiency:.0f}%)"
            parts.append(
                f'<circle cx="{x(p.endpoints):.1f}" cy="{y(p.throughput):.1f}" r="3" fill="{colour}">'
                f"<title>{scenario} n={p.endpoints}: {p.throughput:.1f} {p.unit}{eff}</title></circle>"
            )
            if p.efficiency is not None and p is not base:
                # The scaling efficiency printed at each point, not only in the tooltip.
                parts.append(
                    f'<text x="{x(p.endpoints):.1f}" y="{y(p.throughput) - 7:.1f}" text-anchor="middle" '
                    f'font-size="10" fill="{colour}">{100 * p.efficiency:.1f}%</text>'
                )
        parts.append(
            f'<text x="{width - margin + 4}" y="{margin + 16 * i}" font-size="11" fill="{colour}">{scenario}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def scaling_report_job(
    points: list[dict[str, Any]], title: str, out_csv: str, out_md: str, out_svg: str
) -> list[ScalingPoint]:
    """``points``: per run, its folder, scenario, endpoint count and the round's result field
    and unit (:meth:`mlperf_repro.plan.Plan.scaling_points`)."""
    points = with_efficiency(
        [read_point(p["run_dir"], p["scenario"], p["endpoints"], p["result_field"], p["result_unit"]) for p in points]
    )
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    Path(out_csv).write_text(to_csv(points))
    Path(out_md).write_text(to_markdown(points, title))
    Path(out_svg).write_text(to_svg(points, title))
    return points
