"""The report's plots: matplotlib PNGs drawn from a run's LoadGen logs, accuracy records and
quantization manifests (``snakemake --report``, rule ``report_plots``).

What the logs hold decides what is drawn. LoadGen's ``mlperf_log_detail.txt`` records each
run's totals and its latency percentiles (50, 90, 95, 97, 99, 99.9 and min, mean, max of the
query latency and, for token-latency benchmarks, of TTFT and TPOT), not per-query timestamps:
those are only in ``mlperf_log_trace.json``, which the harness leaves off (about 1 MB per 700
queries, no part of a submission). So the distributions are drawn as the logged quantiles
(latency against percentile), and the throughput as the run's whole-run rates against its
target; the captions under ``workflow/report/`` say so.

Every function takes plain data (a detail-log dict from :func:`mlperf_repro.loadgen_logs.read_detail`,
a JSON record) and writes one PNG; none needs Snakemake.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")
# The three latencies LoadGen logs percentiles of: (label, key prefix, key suffix).
LATENCIES = {
    "query": ("Query latency", "result_", "_percentile_latency_ns", "result_{}_latency_ns"),
    "ttft": (
        "Time to first token (TTFT)",
        "result_first_token_",
        "_percentile_latency_ns",
        "result_first_token_{}_latency_ns",
    ),
    "tpot": (
        "Time per output token (TPOT)",
        "result_time_per_output_token_",
        "_percentile_ns",
        "result_time_to_output_token_{}",
    ),
}
DPI = 110
LIMIT_STYLE = {"color": "#c0392b", "linestyle": "--", "linewidth": 1.6}


def _ms(value: Any) -> float | None:
    try:
        return float(value) / 1e6
    except (TypeError, ValueError):
        return None


def latency_quantiles(detail: dict[str, Any], kind: str) -> dict[str, Any]:
    """``{"percentiles": {50.0: ms, ...}, "min": ms, "mean": ms, "max": ms}`` of one latency
    (``query``, ``ttft``, ``tpot``) as the detail log records it; empty where it is not logged."""
    _label, prefix, suffix, stat = LATENCIES[kind]
    points = {}
    for p in PERCENTILES:
        value = _ms(detail.get(f"{prefix}{p}{suffix}"))
        if value is not None:
            points[float(p)] = value
    if not points:
        return {}
    return {"percentiles": points, **{s: _ms(detail.get(stat.format(s))) for s in ("min", "mean", "max")}}


def _nines(p: float) -> float:
    """Percentile on a 'nines' axis: 50 -> 0.30, 90 -> 1, 99 -> 2, 99.9 -> 3."""
    return -math.log10(1 - p / 100)


def _save(fig, out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI, metadata={"Software": None})  # no version stamp: same data, same bytes
    plt.close(fig)
    return out


def _quantile_panel(ax, stats: dict[str, Any], label: str, limit_ms: float | None, limit_name: str) -> None:
    points = stats.get("percentiles") or {}
    if not points:
        ax.text(0.5, 0.5, f"{label}:\nnot logged in this run", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    xs = [_nines(p) for p in points]
    ax.plot(xs, list(points.values()), marker="o", color="#1f77b4", label="logged percentiles")
    for x, v in zip(xs, points.values(), strict=True):
        ax.annotate(f"{v:.4g}", (x, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    if stats.get("mean") is not None:
        ax.axhline(stats["mean"], color="#7f7f7f", linestyle=":", linewidth=1.2, label=f"mean {stats['mean']:.4g} ms")
    if stats.get("max") is not None:
        ax.axhline(stats["max"], color="#9467bd", linestyle="-.", linewidth=1.0, label=f"max {stats['max']:.4g} ms")
    if limit_ms is not None:
        ax.axhline(limit_ms, **LIMIT_STYLE, label=f"{limit_name} limit {limit_ms:g} ms (p99)")
        ax.axvline(_nines(99.0), color="#c0392b", linestyle=":", linewidth=0.8)
    ax.set_xticks(xs, [f"p{p:g}" for p in points])
    ax.set_xlabel("percentile of queries")
    ax.set_ylabel("latency (ms)")
    ax.set_title(label)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def plot_latency(detail: dict[str, Any], out: str | Path, title: str, limit_ms: float | None = None) -> Path:
    """The query latency's logged percentiles (ms), with the scenario's latency limit if any."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    _quantile_panel(ax, latency_quantiles(detail, "query"), "Query latency", limit_ms, "latency")
    fig.suptitle(title, fontsize=10)
    return _save(fig, out)


def plot_token_latency(detail: dict[str, Any], out: str | Path, title: str, limits: dict[str, float] | None) -> Path:
    """TTFT and TPOT percentiles (ms) side by side, each against the round's p99 limit."""
    limits = limits or {}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    _quantile_panel(axes[0], latency_quantiles(detail, "ttft"), LATENCIES["ttft"][0], limits.get("ttft"), "TTFT")
    _quantile_panel(axes[1], latency_quantiles(detail, "tpot"), LATENCIES["tpot"][0], limits.get("tpot"), "TPOT")
    fig.suptitle(title, fontsize=10)
    return _save(fig, out)


def timeline_rates(timeline: dict[str, Any]) -> tuple[list[float], list[float], list[float]]:
    """(mid-interval seconds, queries/s, tokens/s) between consecutive samples of a run's
    throughput timeline (mlperf_repro.harness.run.TIMELINE_FILE)."""
    samples = timeline.get("samples") or []
    times, queries, tokens = [], [], []
    for (t0, q0, k0), (t1, q1, k1) in zip(samples, samples[1:]):
        if t1 > t0:
            times.append((t0 + t1) / 2)
            queries.append((q1 - q0) / (t1 - t0))
            tokens.append((k1 - k0) / (t1 - t0))
    return times, queries, tokens


def _timeline_panel(ax, detail: dict[str, Any], timeline: dict[str, Any]) -> None:
    times, queries, tokens = timeline_rates(timeline)
    ax.plot(times, queries, color="#1f77b4", linewidth=1.2, label="queries/s completed")
    target = detail.get("effective_target_qps")
    if target not in (None, ""):
        ax.axhline(float(target), **LIMIT_STYLE, label=f"target_qps {float(target):g}")
    minimum = _float(detail.get("effective_min_duration_ms"))
    if minimum:
        ax.axvline(
            minimum / 1e3, color="#7f7f7f", linestyle=":", linewidth=1, label=f"min_duration {minimum / 1e3:g} s"
        )
    ax.set_xlabel("seconds since LoadGen started")
    ax.set_ylabel("queries per second")
    ax.grid(True, alpha=0.3)
    if any(tokens):
        twin = ax.twinx()
        twin.plot(times, tokens, color="#2ca02c", linewidth=1.0, alpha=0.8, label="tokens/s generated")
        twin.set_ylabel("tokens per second")
        lines, labels = ax.get_legend_handles_labels()
        more, more_labels = twin.get_legend_handles_labels()
        ax.legend(lines + more, labels + more_labels, fontsize=7, loc="lower center")
    else:
        ax.legend(fontsize=7, loc="lower center")
    interval = timeline.get("interval_s")
    ax.set_title(f"Over the run ({interval:g}-s samples)" if interval else "Over the run")


def plot_throughput(
    detail: dict[str, Any], record: dict[str, Any], out: str | Path, title: str, timeline: dict[str, Any] | None = None
) -> Path:
    """The run's rates: samples/s asked for (target), scheduled and completed, and tokens/s
    completed; the run's length against min_duration; with the run's ``timeline``, the
    queries/s and tokens/s over the run as well."""
    fig, axes = plt.subplots(1, 3 if timeline else 2, figsize=(16 if timeline else 11, 4.2))
    ax_s, ax_t = axes[0], axes[1]
    if timeline:
        _timeline_panel(axes[2], detail, timeline)
    target = detail.get("effective_target_qps")
    bars = {
        "target": target,
        "scheduled": detail.get("result_scheduled_samples_per_sec"),
        "completed": detail.get("result_completed_samples_per_sec", detail.get("result_samples_per_second")),
    }
    bars = {k: float(v) for k, v in bars.items() if v not in (None, "")}
    colors = {"target": "#bbbbbb", "scheduled": "#8fbbd9", "completed": "#1f77b4"}
    if bars:
        ax_s.bar(list(bars), list(bars.values()), color=[colors[k] for k in bars])
        for i, v in enumerate(bars.values()):
            ax_s.annotate(f"{v:.4g}", (i, v), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
        if target not in (None, ""):
            ax_s.axhline(float(target), **LIMIT_STYLE, label=f"target_qps {float(target):g}")
            ax_s.legend(fontsize=7)
    ax_s.set_ylabel("samples per second")
    ax_s.set_title("Sample rate over the whole run")
    ax_s.grid(True, axis="y", alpha=0.3)

    tokens = {
        "completed": detail.get("result_completed_tokens_per_second"),
        "with LoadGen\noverhead": detail.get("result_token_throughput_with_loadgen_overhead"),
    }
    tokens = {k: float(v) for k, v in tokens.items() if v not in (None, "") and float(v) > 1e-3}
    if tokens:
        ax_t.bar(list(tokens), list(tokens.values()), color=["#2ca02c", "#98df8a"][: len(tokens)])
        for i, v in enumerate(tokens.values()):
            ax_t.annotate(f"{v:.4g}", (i, v), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
        ax_t.set_ylabel("tokens per second")
        ax_t.set_title("Token rate over the whole run")
        ax_t.grid(True, axis="y", alpha=0.3)
    else:
        _duration_panel(ax_t, detail, record)
    seconds = record.get("test_seconds")
    minimum = _float(detail.get("effective_min_duration_ms"))
    note = []
    if seconds is not None:
        note.append(f"run {float(seconds):.1f} s")
    if minimum is not None:
        note.append(f"min_duration {minimum / 1e3:g} s")
    if detail.get("result_query_count") is not None:
        note.append(f"{detail['result_query_count']} queries")
    note.append(f"LoadGen: {detail.get('result_validity', '?')}")
    fig.suptitle(f"{title}\n" + ", ".join(note), fontsize=10)
    return _save(fig, out)


def plot_spread(spread: dict[str, Any], out: str | Path, title: str) -> Path:
    """Each repeat's result (the packaged one marked), their mean and the mean's 95% interval
    (Student t): how much a rerun of the same setup moves the number."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    runs = [r for r in spread.get("runs", []) if r.get("result") is not None]
    unit = spread.get("unit", "")
    if runs:
        xs = [r["repeat"] for r in runs]
        ys = [float(r["result"]) for r in runs]
        colors = ["#1f77b4" if r.get("loadgen_validity") == "VALID" else "#d62728" for r in runs]
        ax.scatter(xs, ys, c=colors, s=60, zorder=3, label="repeat (red: not VALID)")
        packaged = spread.get("packaged_repeat")
        for r, y in zip(runs, ys):
            if r["repeat"] == packaged:
                ax.scatter(
                    [r["repeat"]],
                    [y],
                    s=180,
                    facecolors="none",
                    edgecolors="black",
                    zorder=4,
                    label="packaged into the tree",
                )
        if spread.get("mean") is not None:
            ax.axhline(spread["mean"], color="#2ca02c", label=f"mean {spread['mean']:.4g}")
            if spread.get("ci95_low") is not None and spread.get("n", 0) > 1:
                ax.axhspan(
                    spread["ci95_low"],
                    spread["ci95_high"],
                    color="#2ca02c",
                    alpha=0.15,
                    label=f"95% interval {spread['ci95_low']:.4g}-{spread['ci95_high']:.4g}",
                )
        ax.set_xticks(xs)
        ax.legend(fontsize=7, loc="best")
        rel = spread.get("relative_std")
        note = f"n={spread.get('n', len(runs))}" + (f", relative std {100 * rel:.2f}%" if rel is not None else "")
        ax.set_title(f"{title}\n{note}", fontsize=10)
    else:
        ax.text(0.5, 0.5, "no repeat logged a result", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title, fontsize=10)
    ax.set_xlabel("repeat")
    ax.set_ylabel(unit or "result")
    ax.grid(True, alpha=0.3)
    return _save(fig, out)


def _duration_panel(ax, detail: dict[str, Any], record: dict[str, Any]) -> None:
    seconds = record.get("test_seconds")
    minimum = detail.get("effective_min_duration_ms")
    bars = {}
    if seconds is not None:
        bars["run"] = float(seconds)
    if minimum is not None:
        bars["min_duration"] = float(minimum) / 1e3
    if not bars:
        ax.text(0.5, 0.5, "run length not recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    ax.bar(list(bars), list(bars.values()), color=["#1f77b4", "#bbbbbb"][: len(bars)])
    ax.set_ylabel("seconds")
    ax.set_title("Run length against min_duration")
    ax.grid(True, axis="y", alpha=0.3)


def plot_accuracy(record: dict[str, Any], out: str | Path, title: str) -> Path:
    """Each accuracy metric the verdict judges: this run's value, the unquantized reference
    run's (where measured) and the target drawn as a line."""
    checks = (record.get("verdict") or {}).get("checks") or []
    reference = record.get("reference_metrics") or {}
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 * len(checks) + 2), 4.2))
    if not checks:
        reason = (record.get("verdict") or {}).get("reason") or "no accuracy metric was judged"
        ax.text(
            0.5, 0.5, f"Accuracy not judged:\n{reason}", ha="center", va="center", wrap=True, transform=ax.transAxes
        )
        ax.set_axis_off()
    else:
        width = 0.38
        for i, check in enumerate(checks):
            value = _float(check.get("value"))
            color = "#2ca02c" if check.get("passed") else "#d62728"
            if value is not None:
                ax.bar(i - width / 2, value, width, color=color, label="this run" if i == 0 else None)
                ax.annotate(
                    f"{value:.4g}",
                    (i - width / 2, value),
                    textcoords="offset points",
                    xytext=(0, 3),
                    ha="center",
                    fontsize=8,
                )
            ref = _float(reference.get(check.get("metric")))
            if ref is not None:
                ax.bar(i + width / 2, ref, width, color="#bbbbbb", label="unquantized reference" if i == 0 else None)
            bound = _float(check.get("minimum", check.get("maximum")))
            if bound is not None:
                kind = "target (min)" if "minimum" in check else "bound (max)"
                ax.hlines(bound, i - 0.45, i + 0.45, **LIMIT_STYLE, label=kind if i == 0 else None)
                ax.annotate(
                    f"{bound:.4g}",
                    (i + 0.45, bound),
                    textcoords="offset points",
                    xytext=(2, -3),
                    fontsize=7,
                    color="#c0392b",
                )
        ax.set_xticks(range(len(checks)), [c.get("metric", "?") for c in checks])
        ax.set_xlabel("metric")
        ax.set_ylabel("score (metric's own unit)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        verdict = record.get("verdict") or {}
        title += f"\n{'PASS' if verdict.get('passed') else 'FAIL'} ({verdict.get('kind', 'target')})"
    fig.suptitle(title, fontsize=10)
    return _save(fig, out)


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def layer_errors(manifest: dict[str, Any]) -> tuple[dict[str, float], str]:
    """Per-layer relative error the quantize stage recorded, and its metric; empty where it
    recorded only a whole-model figure. Reads ``layerwise_error`` (LLMs measured layer by
    layer), ``weight_error`` (a Diffusers pipeline, per component) and ``video_error.layers``."""
    layers = manifest.get("layerwise_error") or {}
    if layers.get("layers"):
        return {k: float(v) for k, v in layers["layers"].items()}, layers.get("metric", "relative error")
    errors: dict[str, float] = {}
    metric = ""
    for component, block in (manifest.get("weight_error") or {}).items():
        for module, value in (block.get("layers") or {}).items():
            errors[f"{component}/{module}"] = float(value["rel_error"] if isinstance(value, dict) else value)
        metric = block.get("metric", metric)
    return errors, metric or "relative weight error"


def plot_quantization(manifest: dict[str, Any], out: str | Path, title: str, top: int = 40) -> Path:
    """The quantization error per layer (the ``top`` worst, horizontal bars), or where the
    quantize stage measured the whole model's logits instead, those figures."""
    errors, metric = layer_errors(manifest)
    if errors:
        worst = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        worst.reverse()
        fig, ax = plt.subplots(figsize=(9, max(3.0, 0.22 * len(worst) + 1.5)))
        ax.barh([k for k, _ in worst], [v for _, v in worst], color="#ff7f0e")
        values = list(errors.values())
        ax.axvline(sum(values) / len(values), color="#7f7f7f", linestyle=":", label=f"mean over {len(values)} layers")
        ax.set_xlabel(f"relative error ({metric})" if len(metric) < 60 else "relative error (per quantized layer)")
        ax.set_ylabel("layer")
        ax.tick_params(axis="y", labelsize=7)
        ax.legend(fontsize=7)
        ax.grid(True, axis="x", alpha=0.3)
        shown = f"{len(worst)} worst of {len(errors)} layers" if len(errors) > len(worst) else f"{len(errors)} layers"
        whole = manifest.get("logit_error") or {}
        if whole.get("rel_mean") is not None and whole.get("top1_agreement") is not None:
            shown += (
                f"; whole model: relative logit error {float(whole['rel_mean']):.3g}, "
                f"top-1 agreement {float(whole['top1_agreement']):.3g}"
            )
        fig.suptitle(f"{title}\nper-layer error, {shown}", fontsize=10)
        return _save(fig, out)
    logits = manifest.get("logit_error") or {}
    fig, ax = plt.subplots(figsize=(7, 4.2))
    figures = {
        "relative logit\nerror (mean)": logits.get("rel_mean"),
        "relative logit\nerror (max)": logits.get("rel_max"),
        "1 - cosine": None if logits.get("cosine") is None else 1 - float(logits["cosine"]),
        "1 - top-1\nagreement": None if logits.get("top1_agreement") is None else 1 - float(logits["top1_agreement"]),
        "KL(ref || quant)\n(nats)": logits.get("kl_ref_q_mean"),
    }
    figures = {k: float(v) for k, v in figures.items() if v is not None}
    if figures:
        ax.bar(list(figures), list(figures.values()), color="#ff7f0e")
        for i, v in enumerate(figures.values()):
            ax.annotate(f"{v:.3g}", (i, v), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
        ax.set_ylabel("error against the unquantized model (dimensionless)")
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        subtitle = "whole-model logit error (no per-layer figures recorded: the logits comparison fitted in memory)"
    else:
        ax.text(
            0.5, 0.5, "the quantize stage recorded no error figures", ha="center", va="center", transform=ax.transAxes
        )
        ax.set_axis_off()
        subtitle = "not evaluated"
    fig.suptitle(f"{title}\n{subtitle}", fontsize=9)
    return _save(fig, out)
