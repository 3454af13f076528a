"""Comparison output: Markdown (terminal, pull requests), CSV (one row per comparison),
and a self-contained HTML page with a plot of the ratios (inline SVG, no scripts)."""

from __future__ import annotations

import csv
import html
import io
import json

from .report import Comparison, Row

MAX_EVIDENCE = 6  # evidence lines shown per cause (the rest is counted)
# What a result pair with no cause says: two runs of one config on one machine.
SAME_EXCEPT_TIMINGS = "same except timings"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ({(value - 1) * 100:+.1f}%)"


def _accuracy(row: Row) -> str:
    parts = []
    for metric, target in row.partner.accuracy_targets.items():
        value = row.partner.accuracy.get(metric)
        ref = row.reference.accuracy.get(metric)
        if value is None:
            continue
        parts.append(
            f"{metric} {value:g} (ref {ref if ref is not None else '-'}, target {target:.2f}, "
            f"margin {value - target:+.2f})"
        )
    return "; ".join(parts) or "-"


def _status(row: Row) -> str:
    if row.ratio is None:
        return "no result"
    if row.within_tolerance:
        return "ok"
    return "OUTSIDE (within run noise)" if row.noise else "OUTSIDE"


def _valid(row: Row) -> str:
    def one(record):
        return {True: "VALID", False: "INVALID", None: "?"}[record.valid]

    return f"{one(row.reference)} / {one(row.partner)}"


def lock_overrides(comparison: Comparison) -> list[str]:
    """One sentence per input and override reason: which results ran although their environment
    differed from the lock file, why, and what differed."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for row in comparison.rows:
        for label, record in ((comparison.reference.label, row.reference), (comparison.partner.label, row.partner)):
            reason = record.settings.get("lock.override")
            if reason:
                key = (label, reason, record.settings.get("lock.differences", "[]"))
                found.setdefault(key, []).append(f"{record.system}/{record.benchmark}/{record.scenario}")
    sentences = []
    for (label, reason, differences), results in found.items():
        accepted = "; ".join(json.loads(differences)) or "nothing"
        sentences.append(
            f"{label} ran {len(results)} result(s) ({', '.join(sorted(set(results)))}) with a lock override: "
            f'"{reason}". Accepted differences from the lock: {accepted}.'
        )
    return sentences


def _cosmetic(row: Row) -> str:
    return "; ".join(f"{key}: {_absent(a)} / {_absent(b)}" for key, a, b in row.cosmetic)


def _absent(value: str | None) -> str:
    return "(absent)" if value is None else repr(value)


def serving_summary(row: Row) -> str:
    """Where each side's serving setup was read from and how many of its settings differ."""
    ref, partner = row.reference, row.partner
    known = ["serving.backend" in r.settings for r in (ref, partner)]
    if not any(known):
        return f"Serving setup: stated by neither ({ref.serving_source or '-'} / {partner.serving_source or '-'})."
    if not all(known):
        stated, other = (ref, partner) if known[0] else (partner, ref)
        side = "reference" if known[0] else "partner"
        return f"Serving setup: stated by the {side} only ({stated.serving_source}); the other: {other.serving_source}."
    keys = {k for k in (*ref.settings, *partner.settings) if k.startswith("serving.")}
    differ = sum(1 for k in keys if ref.settings.get(k) != partner.settings.get(k))
    return (
        f"Serving setup ({ref.serving_source} / {partner.serving_source}): {len(keys)} settings compared "
        f"key by key, {differ} differ."
    )


def to_markdown(comparison: Comparison) -> str:
    ref, partner = comparison.reference, comparison.partner
    outside = [r for r in comparison.rows if not r.within_tolerance]
    lines = [
        f"# {partner.label} vs {ref.label}",
        "",
        f"Tolerance ±{comparison.tolerance * 100:g}%: {len(comparison.rows)} result(s) compared, "
        f"{len(outside)} outside." + ("" if comparison.ok else " **Status: FAIL**"),
        "",
    ]
    for note in ref.notes + partner.notes:
        lines += [f"> note: {note}", ""]
    for sentence in lock_overrides(comparison):
        lines += [f"> lock override: {sentence}", ""]
    lines += [
        "| benchmark | scenario | system (reference / partner) | reference | partner | ratio | per accelerator "
        "| TTFT p99 ms | TPOT p99 ms | LoadGen | accuracy | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in comparison.rows:
        unit = row.partner.unit
        lines.append(
            f"| {row.partner.mlperf_benchmark} | {row.partner.scenario} | {row.reference.system} / {row.partner.system} "
            f"| {row.reference_metric.text() if row.reference_metric else '-'} {unit} "
            f"| {row.partner_metric.text() if row.partner_metric else '-'} {unit} | {_ratio(row.ratio)} "
            f"| {_ratio(row.per_accelerator_ratio)} "
            f"| {_fmt(row.reference.ttft_p99_ms)} / {_fmt(row.partner.ttft_p99_ms)} "
            f"| {_fmt(row.reference.tpot_p99_ms)} / {_fmt(row.partner.tpot_p99_ms)} | {_valid(row)} "
            f"| {_accuracy(row)} | {_status(row)} |"
        )
    for row in comparison.rows:
        lines += ["", f"## Why: {row.label} ({row.reference.system} / {row.partner.system})", ""]
        cosmetic = [
            "",
            "Cosmetic differences (spelling only, not causes): "
            + "; ".join(f"`{k}`: {_absent(a)} / {_absent(b)}" for k, a, b in row.cosmetic),
        ]
        measured = (
            [
                "",
                "Measured on each side, not causes (target_qps: auto, chosen by a find-performance pass): "
                + "; ".join(f"`{k}`: {_absent(a)} / {_absent(b)}" for k, a, b in row.measured),
            ]
            if row.measured
            else []
        )
        if not row.causes:
            lines.append(
                f"**{SAME_EXCEPT_TIMINGS}**: no setting, system, software or code differs"
                f"{' but in spelling' if row.cosmetic else ''} ({row.identical_settings} compared); only the "
                "measured numbers differ."
            )
            lines += (cosmetic if row.cosmetic else []) + measured
            continue
        first = row.causes[0]
        lines += [f"First real difference: **{first.name}** ({first.kind}: {first.category}).", ""]
        for rank, cause in enumerate(row.causes, 1):
            evidence = cause.evidence[:MAX_EVIDENCE]
            more = len(cause.evidence) - len(evidence)
            shown = "; ".join(
                f"`{k}`: {a if a is not None else '(absent)'} -> {b if b is not None else '(absent)'}"
                for k, a, b in evidence
            )
            lines.append(
                f"{rank}. **{cause.name}** ({cause.kind}: {cause.category}): {shown}"
                + (f"; and {more} more" if more else "")
                + (f" - {cause.note}" if cause.note else "")
            )
        lines += (cosmetic if row.cosmetic else []) + measured
        kinds: dict[str, int] = {}
        for cause in row.causes:
            kinds[cause.kind] = kinds.get(cause.kind, 0) + 1
        lines += [
            "",
            "Differences by kind: "
            + ", ".join(f"{kind} {count}" for kind, count in kinds.items())
            + "; the rest of the gap is measured.",
            serving_summary(row),
            f"Identical: {row.identical_settings} settings and files.",
        ]
    if comparison.unmatched:
        lines += [
            "",
            "Partner results with no reference counterpart: "
            + ", ".join(f"{r.system}/{r.benchmark}/{r.scenario}" for r in comparison.unmatched),
        ]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = (
    "reference",
    "partner",
    "mlperf_benchmark",
    "scenario",
    "reference_system",
    "partner_system",
    "unit",
    "reference_result",
    "partner_result",
    "ratio",
    "per_accelerator_ratio",
    "within_tolerance",
    "tolerance",
    "reference_runs",
    "partner_runs",
    "reference_ci95",
    "partner_ci95",
    "reference_valid",
    "partner_valid",
    "reference_ttft_p99_ms",
    "partner_ttft_p99_ms",
    "reference_tpot_p99_ms",
    "partner_tpot_p99_ms",
    "accuracy",
    "causes",
    "cosmetic_differences",
)


def to_csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in comparison.rows:
        ref_m, part_m = row.reference_metric, row.partner_metric
        writer.writerow(
            {
                "reference": comparison.reference.label,
                "partner": comparison.partner.label,
                "mlperf_benchmark": row.partner.mlperf_benchmark,
                "scenario": row.partner.scenario,
                "reference_system": row.reference.system,
                "partner_system": row.partner.system,
                "unit": row.partner.unit,
                "reference_result": _fmt(ref_m.mean if ref_m else None, 4),
                "partner_result": _fmt(part_m.mean if part_m else None, 4),
                "ratio": _fmt(row.ratio, 4),
                "per_accelerator_ratio": _fmt(row.per_accelerator_ratio, 4),
                "within_tolerance": row.within_tolerance,
                "tolerance": comparison.tolerance,
                "reference_runs": ref_m.n if ref_m else 0,
                "partner_runs": part_m.n if part_m else 0,
                "reference_ci95": f"{ref_m.low:.4f}-{ref_m.high:.4f}" if ref_m and ref_m.n > 1 else "",
                "partner_ci95": f"{part_m.low:.4f}-{part_m.high:.4f}" if part_m and part_m.n > 1 else "",
                "reference_valid": row.reference.valid,
                "partner_valid": row.partner.valid,
                "reference_ttft_p99_ms": _fmt(row.reference.ttft_p99_ms),
                "partner_ttft_p99_ms": _fmt(row.partner.ttft_p99_ms),
                "reference_tpot_p99_ms": _fmt(row.reference.tpot_p99_ms),
                "partner_tpot_p99_ms": _fmt(row.partner.tpot_p99_ms),
                "accuracy": _accuracy(row),
                "causes": " | ".join(f"{c.name} ({c.category}): {c.describe()}" for c in row.causes),
                "cosmetic_differences": _cosmetic(row),
            }
        )
    return buffer.getvalue()


def _svg(comparison: Comparison) -> str:
    """Horizontal bars of partner/reference per result, with the tolerance band."""
    rows = [r for r in comparison.rows if r.ratio is not None]
    width, label_w, bar_h, pad = 760, 300, 22, 6
    height = max(1, len(rows)) * (bar_h + pad) + 40
    lo = min([0.8] + [r.ratio for r in rows]) - 0.02
    hi = max([1.2] + [r.ratio for r in rows]) + 0.02

    def x(value: float) -> float:
        return label_w + (value - lo) / (hi - lo) * (width - label_w - 20)

    tol = comparison.tolerance
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="ratio partner/reference per result">',
        f'<rect x="{x(1 - tol):.1f}" y="0" width="{x(1 + tol) - x(1 - tol):.1f}" height="{height - 30}" '
        'fill="#e8f5e9"/>',
        f'<line x1="{x(1):.1f}" y1="0" x2="{x(1):.1f}" y2="{height - 30}" stroke="#555" stroke-dasharray="4"/>',
    ]
    for i, row in enumerate(rows):
        y = i * (bar_h + pad) + 4
        color = "#43a047" if row.within_tolerance else ("#fb8c00" if row.noise else "#e53935")
        x0, x1 = sorted((x(1.0), x(row.ratio)))
        parts.append(
            f'<text x="{label_w - 8}" y="{y + bar_h * 0.7:.1f}" text-anchor="end" font-size="12">'
            f"{html.escape(row.label)} ({html.escape(row.partner.system)})</text>"
        )
        parts.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(1.0, x1 - x0):.1f}" height="{bar_h}" fill="{color}"/>')
        parts.append(
            f'<text x="{x(row.ratio) + (4 if row.ratio >= 1 else -4):.1f}" y="{y + bar_h * 0.7:.1f}" '
            f'font-size="11" text-anchor="{"start" if row.ratio >= 1 else "end"}">{row.ratio:.3f}</text>'
        )
    for tick in (lo, 1 - tol, 1.0, 1 + tol, hi):
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 12}" font-size="11" text-anchor="middle">{tick:.2f}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def to_html(comparison: Comparison) -> str:
    title = f"{comparison.partner.label} vs {comparison.reference.label}"
    table_rows = []
    for row in comparison.rows:
        causes = (
            "".join(
                f"<li><b>{html.escape(c.name)}</b> <i>({html.escape(c.category)})</i>: {html.escape(c.describe())}</li>"
                for c in row.causes
            )
            or f"<li>{SAME_EXCEPT_TIMINGS}</li>"
        )
        table_rows.append(
            f"<tr class='{'ok' if row.within_tolerance else 'bad'}'><td>{html.escape(row.partner.mlperf_benchmark)}</td>"
            f"<td>{html.escape(row.partner.scenario)}</td><td>{html.escape(row.reference.system)} / "
            f"{html.escape(row.partner.system)}</td>"
            f"<td>{html.escape(row.reference_metric.text() if row.reference_metric else '-')}</td>"
            f"<td>{html.escape(row.partner_metric.text() if row.partner_metric else '-')}</td>"
            f"<td>{html.escape(_ratio(row.ratio))}</td><td>{html.escape(_ratio(row.per_accelerator_ratio))}</td>"
            f"<td>{html.escape(_valid(row))}</td><td>{html.escape(_status(row))}</td>"
            f"<td><ol>{causes}</ol></td><td>{html.escape(_cosmetic(row)) or '-'}</td></tr>"
        )
    overrides = "".join(
        f"<p class='override'><b>lock override:</b> {html.escape(sentence)}</p>\n"
        for sentence in lock_overrides(comparison)
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }}
td, th {{ border: 1px solid #ccc; padding: 4px 6px; vertical-align: top; }}
tr.bad td {{ background: #ffebee; }}
p.override {{ background: #fff3e0; padding: 4px 6px; }}
ol {{ margin: 0; padding-left: 1.2em; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Tolerance ±{comparison.tolerance * 100:g}%. Green: within tolerance; orange: outside but within the runs'
95% confidence intervals; red: outside.</p>
{overrides}{_svg(comparison)}
<table><tr><th>benchmark</th><th>scenario</th><th>system (reference / partner)</th><th>reference</th>
<th>partner</th><th>ratio</th><th>per accelerator</th><th>LoadGen</th><th>status</th><th>ranked causes</th>
<th>cosmetic differences (spelling only, not causes)</th></tr>
{"".join(table_rows)}
</table></body></html>
"""
