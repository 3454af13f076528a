"""A LoadGen detail log against itself: its verdict and the settings it ran with, redone from
its own records as LoadGen computes them (``loadgen/results.cc``, ``test_settings_internal.cc``),
and each record LoadGen writes once, written once.

``result_validity`` is VALID exactly when min duration, min queries, early stopping and (in
Server) the latency constraints are met; each of those is redone from the figures it rests on
(the query count against ``effective_min_query_count``, the run's length against
``effective_min_duration_ms``, the percentile latencies against the targets); the settings
LoadGen copies from the request (``requested_*``) to the run (``effective_*``) are equal. Each
holds in every one of the 1,952 published v6.0 and v5.1 performance logs (bench/README.md).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ...loadgen_logs import MLLOG_PREFIX, finite_number, parse_summary, record_key
from ..evidence import cross_checked, derived, note, trust
from ..findings import Finding
from ..model import (
    ACC,
    DETAIL_LOG,
    PERF,
    SUMMARY_LOG,
    TreeContext,
    power_time,
    result_logs,
    round_percentile,
    rule,
    run_logs,
)

# effective_<key> is LoadGen's copy of requested_<key> (or of the scenario's requested_<scenario>_<key>).
COPIED_SETTINGS = (
    "scenario",
    "test_mode",
    "min_duration_ms",
    "max_duration_ms",
    "max_query_count",
    "qsl_rng_seed",
    "sample_index_rng_seed",
    "schedule_rng_seed",
    "accuracy_log_rng_seed",
    "accuracy_log_probability",
    "accuracy_log_sampling_target",
    "print_timestamps",
    "performance_issue_unique",
    "performance_issue_same",
    "performance_issue_same_index",
    "sample_concatenate_permutation",
    "target_qps",
    "target_latency_ns",
    "target_latency_percentile",
    "max_async_queries",
)
SCENARIO_PREFIX = {
    "Server": "server",
    "Offline": "offline",
    "SingleStream": "single_stream",
    "MultiStream": "multi_stream",
}


def _requested_key(detail: dict, key: str) -> str | None:
    prefix = SCENARIO_PREFIX.get(str(detail.get("effective_scenario")))
    for name in (f"requested_{key}", f"requested_{prefix}_{key}"):
        if name in detail:
            return name
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    x, y = finite_number(a), finite_number(b)
    if x is not None and y is not None:
        return x == y
    return str(a) == str(b)


@rule(
    "settings-evidence",
    evidence=[
        cross_checked(DETAIL_LOG, f"effective_{key}", f"requested_{key} (LoadGen copies it)") for key in COPIED_SETTINGS
    ]
    + [cross_checked(DETAIL_LOG, f"requested_{key}", f"effective_{key}") for key in COPIED_SETTINGS]
    + [
        cross_checked(DETAIL_LOG, f"requested_*_{key}", f"effective_{key}")
        for key in ("target_qps", "target_latency_ns", "target_latency_percentile", "max_async_queries")
    ]
    + [
        cross_checked(
            DETAIL_LOG, "effective_min_sample_count", "effective_min_query_count x effective_samples_per_query"
        ),
        cross_checked(
            DETAIL_LOG,
            "effective_performance_sample_count",
            "requested_performance_sample_count_override, or qsl_reported_performance_count where it is 0",
        ),
        cross_checked(
            DETAIL_LOG, "qsl_reported_performance_count", "effective_performance_sample_count (without an override)"
        ),
        cross_checked(DETAIL_LOG, "requested_performance_sample_count_override", "effective_performance_sample_count"),
        derived(
            DETAIL_LOG,
            "effective_samples_per_query",
            "Offline: max(requested_min_query_count, 1.1 x effective_min_duration_ms x effective_target_qps), "
            "or the sample count with performance_issue_unique (a warning in open)",
        ),
        cross_checked(DETAIL_LOG, "sut_name", "the other run of the result (performance and accuracy name one SUT)"),
    ],
)
def check_settings_evidence(ctx: TreeContext) -> list[Finding]:
    """Each setting LoadGen copies from the request to the run holds one value in both."""
    findings = []
    for result in ctx.results:
        if result.is_endpoints:
            continue
        for relative in (PERF, ACC):
            detail = result.detail(relative)
            if not detail:
                continue
            differ = []
            for key in COPIED_SETTINGS:
                effective = f"effective_{key}"
                requested = _requested_key(detail, key)
                if requested is None or effective not in detail:
                    continue
                if not _same(detail[requested], detail[effective]):
                    differ.append(f"{requested} = {detail[requested]} but {effective} = {detail[effective]}")
            differ += _derived_settings(detail)
            offline = _offline_query_problem(detail)
            if offline:
                findings.append(
                    Finding(
                        "settings-evidence",
                        ctx.rel(result.log_path(relative)),
                        offline,
                        severity="warning" if ctx.division == "open" else "error",
                    )
                )
            if differ:
                findings.append(
                    Finding(
                        "settings-evidence",
                        ctx.rel(result.log_path(relative)),
                        "LoadGen copies these settings from the request to the run, yet they differ: "
                        + "; ".join(differ[:4])
                        + (f" (and {len(differ) - 4} more)" if len(differ) > 4 else ""),
                    )
                )
        performance, accuracy = result.detail(PERF), result.detail(ACC)
        if performance and accuracy and "sut_name" in performance and "sut_name" in accuracy:
            if performance["sut_name"] != accuracy["sut_name"]:
                findings.append(
                    Finding(
                        "settings-evidence",
                        ctx.rel(result.log_path(ACC)),
                        f"the accuracy run's SUT is {accuracy['sut_name']!r}, the performance run's "
                        f"{performance['sut_name']!r} ({ctx.rel(result.log_path(PERF))}): not the runs of one system",
                    )
                )
    return findings


def _derived_settings(detail: dict) -> list[str]:
    """The settings LoadGen computes from others (test_settings_internal.cc): the minimum
    sample count from the query minimum, the performance sample count from the override or
    the sample library's own count (each in all 1,951 published performance logs)."""
    n = finite_number
    differ = []
    queries, per_query, samples = (
        n(detail.get(k))
        for k in ("effective_min_query_count", "effective_samples_per_query", "effective_min_sample_count")
    )
    if None not in (queries, per_query, samples) and samples != queries * per_query:
        differ.append(
            f"effective_min_sample_count = {samples:g} but effective_min_query_count x effective_samples_per_query "
            f"= {queries * per_query:g}"
        )
    count = n(detail.get("effective_performance_sample_count"))
    override, library = (
        n(detail.get("requested_performance_sample_count_override")),
        n(detail.get("qsl_reported_performance_count")),
    )
    if count is not None and library is not None and override is not None and count != (override or library):
        differ.append(
            f"effective_performance_sample_count = {count:g} but the override {override:g} and the sample library's "
            f"qsl_reported_performance_count {library:g} give {override or library:g}"
        )
    return differ


# LoadGen sizes an Offline query to last 10% past the minimum at the expected rate
# (test_settings_internal.cc's kSlack): samples_per_query = max(min_query_count,
# floor(1.1 x min_duration x offline_expected_qps)), or the sample count with
# performance_issue_unique. The rate is printed to 6 significant digits. (844 of 847
# published Offline performance logs; the others: Lenovo's 3d-unet TEST01 folders holding
# resnet50's run, and v6.0 open NVIDIA Jetson-Thor's llama3.1-8b-edge.)
_OFFLINE_SLACK = 1.1
_PRINTED_REL = 1e-5


def _offline_query_problem(detail: dict) -> str | None:
    if detail.get("effective_scenario") != "Offline" or detail.get("effective_test_mode") != "PerformanceOnly":
        return None
    n = finite_number
    size, rate, duration_ms, floor_count, library = (
        n(detail.get(k))
        for k in (
            "effective_samples_per_query",
            "effective_target_qps",
            "effective_min_duration_ms",
            "requested_min_query_count",
            "effective_performance_sample_count",
        )
    )
    if None in (size, rate, duration_ms, floor_count):
        return None
    if detail.get("effective_performance_issue_unique") is True:
        wanted, slack = library, 0.0
    else:
        sized = int(_OFFLINE_SLACK * duration_ms / 1000 * rate)
        wanted = max(floor_count, sized)
        slack = 0.0 if wanted == floor_count else _OFFLINE_SLACK * duration_ms / 1000 * rate * _PRINTED_REL + 1
    if wanted is None or abs(size - wanted) <= slack:
        return None
    return (
        f"effective_samples_per_query = {size:g}, but LoadGen sizes an Offline query from the run's own settings "
        f"at {wanted:g} (max(requested_min_query_count {floor_count:g}, 1.1 x effective_min_duration_ms "
        f"{duration_ms:g} ms x effective_target_qps {rate:g})): the query size or the rate was edited"
    )


def _percentile_key(detail: dict, template: str) -> str:
    percentile = finite_number(detail.get("effective_target_latency_percentile"))
    return template.format(p=f"{(percentile if percentile is not None else 0.99) * 100:.2f}")


def _flags(detail: dict) -> dict[str, Any]:
    return {
        key: detail.get(key)
        for key in (
            "result_min_duration_met",
            "result_min_queries_met",
            "early_stopping_met",
            "result_perf_constraints_met",
        )
        if key in detail
    }


def _redone(detail: dict) -> dict[str, tuple[bool, str]]:
    """Each of LoadGen's constraint flags redone from the figures it rests on (flag -> (value,
    from what)); a flag the log lacks the figures for is left out."""
    redone: dict[str, tuple[bool, str]] = {}
    scenario = detail.get("effective_scenario")
    n = finite_number
    queries, minimum = n(detail.get("result_query_count")), n(detail.get("effective_min_query_count"))
    if queries is not None and minimum is not None:
        ok = queries >= minimum
        why = f"result_query_count {queries:g} against effective_min_query_count {minimum:g}"
        samples_min = n(detail.get("effective_min_sample_count"))
        per_query = n(detail.get("effective_samples_per_query"))
        if scenario != "Offline" and samples_min is not None and per_query is not None:
            ok = ok and queries * per_query >= samples_min
            why += f" and {queries * per_query:g} samples against effective_min_sample_count {samples_min:g}"
        redone["result_min_queries_met"] = (ok, why)
    duration = n(detail.get("effective_min_duration_ms"))
    if duration is not None:
        measured = None
        if scenario == "Offline":
            measured = ("result_max_latency_ns", n(detail.get("result_max_latency_ns")))
        elif scenario == "Server":
            measured = ("generated_query_duration", n(detail.get("generated_query_duration")))
        if measured and measured[1] is not None:
            redone["result_min_duration_met"] = (
                measured[1] >= duration * 1e6,
                f"{measured[0]} {measured[1]:g} ns against effective_min_duration_ms {duration:g}",
            )
    if scenario == "Server":
        if detail.get("requested_use_token_latencies") is True:
            first = _percentile_key(detail, "result_first_token_{p}_percentile_latency_ns")
            per_token = _percentile_key(detail, "result_time_per_output_token_{p}_percentile_ns")
            values = [
                n(detail.get(k))
                for k in (first, "requested_server_ttft_latency", per_token, "requested_server_tpot_latency")
            ]
            if None not in values:
                redone["result_perf_constraints_met"] = (
                    values[0] <= values[1] and values[2] <= values[3],
                    f"{first} {values[0]:g} against requested_server_ttft_latency {values[1]:g} and "
                    f"{per_token} {values[2]:g} against requested_server_tpot_latency {values[3]:g}",
                )
        else:
            key = _percentile_key(detail, "result_{p}_percentile_latency_ns")
            latency, target = n(detail.get(key)), n(detail.get("effective_target_latency_ns"))
            if latency is not None and target is not None:
                redone["result_perf_constraints_met"] = (
                    latency <= target,
                    f"{key} {latency:g} against effective_target_latency_ns {target:g}",
                )
    return redone


def _rate_problems(ctx: TreeContext, result, detail: dict) -> list[str]:
    """Server: the completed rate no higher than the schedule's (1% for rounding), so the queries
    took at least the scheduled time, and the constraints judged at the round's percentile.
    SingleStream and MultiStream: the early-stopping estimate at least the run's own percentile
    (it bounds it from above). Each holds in every published performance log (token-latency
    SingleStream excepted: its estimate is of another figure)."""
    n = finite_number
    problems = []
    scenario = detail.get("effective_scenario")
    if scenario == "Server":
        completed = n(detail.get("result_completed_samples_per_sec"))
        scheduled = n(detail.get("result_scheduled_samples_per_sec"))
        if None not in (completed, scheduled) and completed > scheduled * 1.01:
            problems.append(
                f"result_completed_samples_per_sec {completed:g} exceeds result_scheduled_samples_per_sec {scheduled:g}"
            )
        scheduled_count, qps = n(detail.get("generated_query_count")), n(detail.get("effective_target_qps"))
        span = n(detail.get("generated_query_duration"))
        if None not in (scheduled_count, qps, span) and qps > 0 and span > 0:
            # LoadGen schedules Poisson arrivals at target_qps: over the schedule's span the
            # count is Poisson(target_qps x span), 5 standard deviations wide; each gap is
            # whole nanoseconds, which runs a fast schedule up to 1 ns a query ahead (v5.1
            # ASUSTeK's dlrm at 591,000 queries/s schedules 0.03% more).
            expected = qps * span / 1e9
            if abs(scheduled_count - expected) > 5 * math.sqrt(expected) + 2 + expected * qps / 1e9:
                problems.append(
                    f"generated_query_count {scheduled_count:g} in generated_query_duration {span / 1e9:.1f} s is "
                    f"{scheduled_count / (span / 1e9):.4g} queries/s; a schedule at effective_target_qps {qps:g} "
                    f"gives {expected:.0f} +- {5 * math.sqrt(expected):.0f}"
                )
        queries, duration = n(detail.get("result_query_count")), n(detail.get("generated_query_duration"))
        if (
            None not in (completed, queries, duration)
            and completed > 0
            and queries / completed < duration / 1e9 * 0.999
        ):
            problems.append(
                f"result_query_count {queries:g} at result_completed_samples_per_sec {completed:g} took "
                f"{queries / completed:.1f} s, less than the schedule's generated_query_duration {duration / 1e9:.1f} s"
            )
    wanted = round_percentile(ctx, result, scenario)
    percentile = n(detail.get("effective_target_latency_percentile"))
    if wanted is not None and percentile is not None and percentile != float(wanted):
        problems.append(
            f"effective_target_latency_percentile {percentile:g}; {ctx.rules.name} judges {scenario} at {wanted} "
            "(mlperf.conf's target_latency_percentile)"
        )
    tokens = detail.get("requested_use_token_latencies") is True
    for scene, estimate, template in (
        ("SingleStream", "early_stopping_latency_ss", "result_{p}_percentile_latency_ns"),
        ("MultiStream", "early_stopping_latency_ms", "result_{p}_percentile_per_query_latency_ns"),
    ):
        if scenario == scene and not tokens:
            key = _percentile_key(detail, template)
            bound, observed = n(detail.get(estimate)), n(detail.get(key))
            if None not in (bound, observed) and bound < observed:
                problems.append(
                    f"{estimate} {bound:g} is below the run's own {key} {observed:g} (it bounds it from above)"
                )
    return problems


_PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")
_PERCENTILE_SERIES = (
    ("result_{p}_percentile_latency_ns", "result_min_latency_ns", "result_max_latency_ns"),
    (
        "result_first_token_{p}_percentile_latency_ns",
        "result_first_token_min_latency_ns",
        "result_first_token_max_latency_ns",
    ),
    ("result_time_per_output_token_{p}_percentile_ns", None, None),
    ("result_{p}_percentile_per_query_latency_ns", "result_min_query_latency_ns", "result_max_query_latency_ns"),
)


# Each latency series' minimum, mean and maximum: the mean lies between the other two (in
# every published v6.0 and v5.1 performance log but two Offline ones, below).
_MEAN_SERIES = (
    ("result_min_latency_ns", "result_mean_latency_ns", "result_max_latency_ns"),
    ("result_first_token_min_latency_ns", "result_first_token_mean_latency_ns", "result_first_token_max_latency_ns"),
    ("result_time_to_output_token_min", "result_time_to_output_token_mean", "result_time_to_output_token_max"),
    ("result_min_query_latency_ns", "result_mean_query_latency_ns", "result_max_query_latency_ns"),
)
_SAMPLE_WITHIN_QUERY = (
    ("result_mean_latency_ns", "result_mean_query_latency_ns"),
    ("result_max_latency_ns", "result_max_query_latency_ns"),
    ("result_min_latency_ns", "result_min_query_latency_ns"),
    *((f"result_{p}_percentile_latency_ns", f"result_{p}_percentile_per_query_latency_ns") for p in _PERCENTILES),
)
# LoadGen's early-stopping estimate is one of the run's own latencies (an order statistic of
# them): never above the run's longest.
_ESTIMATE_BOUNDS = (
    ("early_stopping_latency_ss", "result_max_latency_ns"),
    ("early_stopping_latency_ms", "result_max_query_latency_ns"),
)


def _percentile_problems(detail: dict) -> list[str]:
    """Percentiles rise with the percentile, between the minimum and the maximum; each mean
    lies between its minimum and maximum; an early-stopping estimate is at most the maximum."""
    problems = []
    n = finite_number
    # (Offline excepted: LoadGen's Offline mean of dlrm-v2's aggregated samples falls below
    # the minimum in two published v5.1 logs.)
    for low, mean, high in _MEAN_SERIES if detail.get("effective_scenario") != "Offline" else ():
        a, m, b = n(detail.get(low)), n(detail.get(mean)), n(detail.get(high))
        if None not in (a, m) and m < a:
            problems.append(f"{mean} {m:g} < {low} {a:g}")
        if None not in (m, b) and m > b:
            problems.append(f"{mean} {m:g} > {high} {b:g}")
    for estimate, high in _ESTIMATE_BOUNDS:
        e, b = n(detail.get(estimate)), n(detail.get(high))
        if None not in (e, b) and e > b:
            problems.append(f"{estimate} {e:g} > {high} {b:g} (the estimate is one of the run's latencies)")
    # A MultiStream query ends with its last sample: no share of samples is slower than the
    # same share of queries, so each per-sample figure is at most its per-query twin.
    for sample, query in _SAMPLE_WITHIN_QUERY:
        a, b = n(detail.get(sample)), n(detail.get(query))
        if None not in (a, b) and a > b:
            problems.append(f"{sample} {a:g} > {query} {b:g} (a query lasts as long as its slowest sample)")
    for template, low, high in _PERCENTILE_SERIES:
        series = [(low, finite_number(detail.get(low)))] if low else []
        series += [(template.format(p=p), finite_number(detail.get(template.format(p=p)))) for p in _PERCENTILES]
        series += [(high, finite_number(detail.get(high)))] if high else []
        series = [(k, v) for k, v in series if v is not None]
        for (k1, v1), (k2, v2) in zip(series, series[1:]):
            if v1 > v2:
                problems.append(f"{k1} {v1:g} > {k2} {v2:g}")
                break
    return problems


_FLAG_EVIDENCE = [
    derived(
        DETAIL_LOG, "result_validity", "the four constraint flags (VALID exactly when each is met), each redone below"
    ),
    derived(
        DETAIL_LOG,
        "result_min_queries_met",
        "result_query_count against effective_min_query_count (and effective_min_sample_count)",
    ),
    derived(
        DETAIL_LOG,
        "result_min_duration_met",
        "result_max_latency_ns (Offline) or generated_query_duration (Server) against effective_min_duration_ms",
    ),
    derived(
        DETAIL_LOG,
        "result_perf_constraints_met",
        "the target percentile's latency (TTFT and TPOT with token latencies) against the run's targets",
    ),
    cross_checked(DETAIL_LOG, "early_stopping_met", "result_validity (with the other flags); the summary"),
    derived(
        DETAIL_LOG,
        "result_samples_per_second",
        "Offline: generated_samples_per_query / result_max_latency_ns; the summary",
    ),
    cross_checked(DETAIL_LOG, "result_query_count", "result_min_queries_met; generated_query_count (Offline, Server)"),
    cross_checked(
        DETAIL_LOG,
        "result_completed_samples_per_sec",
        "Server: at most the scheduled rate; result_query_count in no less than generated_query_duration",
    ),
    cross_checked(DETAIL_LOG, "result_scheduled_samples_per_sec", "Server: at least the completed rate"),
    cross_checked(DETAIL_LOG, "early_stopping_latency_ss", "at least the run's own target percentile (SingleStream)"),
    cross_checked(
        DETAIL_LOG, "early_stopping_latency_ms", "at least the run's own per-query target percentile (MultiStream)"
    ),
    cross_checked(
        DETAIL_LOG,
        "effective_target_latency_percentile",
        "the round's percentile for the scenario (mlperf.conf's: Server, Interactive, SingleStream, MultiStream)",
    ),
    cross_checked(
        DETAIL_LOG,
        "generated_query_count",
        "result_query_count (Offline, Server: LoadGen issues every query); Server: effective_target_qps x "
        "generated_query_duration, a Poisson count",
    ),
    cross_checked(DETAIL_LOG, "generated_query_duration", "result_min_duration_met"),
    cross_checked(
        DETAIL_LOG,
        "generated_samples_per_query",
        "result_samples_per_second (Offline); effective_samples_per_query (others)",
    ),
    cross_checked(DETAIL_LOG, "effective_min_sample_count", "result_min_queries_met"),
    cross_checked(
        DETAIL_LOG,
        "effective_target_latency_percentile",
        "requested_*_target_latency_percentile; which percentile the constraints read",
    ),
    cross_checked(
        DETAIL_LOG,
        "result_*_percentile_*",
        "the neighbouring percentiles, the minimum and the maximum (they rise in order); the summary; "
        "MultiStream: each per-sample percentile at most its per-query one",
    ),
    cross_checked(
        DETAIL_LOG,
        "result_mean_query_latency_ns",
        "MultiStream: at least result_mean_latency_ns (a query lasts as long as its slowest sample)",
    ),
]


def _performance_mode_logs(ctx: TreeContext):
    """(result, detail, where) of every PerformanceOnly LoadGen log a result holds."""
    for result in ctx.results:
        if result.is_endpoints:
            continue
        for log in run_logs(ctx, result):
            detail = ctx.detail_at(log.path)
            if detail.get("effective_test_mode") == "PerformanceOnly":
                yield result, detail, ctx.rel(log.path)


@rule("validity-evidence", evidence=_FLAG_EVIDENCE)
def check_validity_evidence(ctx: TreeContext) -> list[Finding]:
    """A performance-mode log's verdict and constraint flags against the figures they rest
    on: the result's own run and each compliance run (LoadGen computes them alike)."""
    findings = []
    for result, detail, where in _performance_mode_logs(ctx):
        if "result_validity" not in detail:
            continue
        problems = []
        flags = _flags(detail)
        for flag, (value, why) in _redone(detail).items():
            if flag in flags and flags[flag] is not value:
                problems.append(f"{flag} = {json.dumps(flags[flag])}, but {why} gives {json.dumps(value)}")
        valid = str(detail.get("result_validity")).upper() == "VALID"
        met = bool(flags) and all(v is True for v in flags.values())
        if valid != met:
            shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in flags.items()) or "no constraint flags"
            problems.append(f"result_validity = {detail.get('result_validity')}, but {shown}")
        if detail.get("effective_scenario") == "Offline":
            count, longest = (
                finite_number(detail.get("generated_samples_per_query")),
                finite_number(detail.get("result_max_latency_ns")),
            )
            rate = finite_number(detail.get("result_samples_per_second"))
            if count and longest and rate is not None and abs(count / (longest / 1e9) - rate) > 1e-3 * max(rate, 1e-9):
                problems.append(
                    f"result_samples_per_second = {rate:g}, but generated_samples_per_query {count:g} in "
                    f"result_max_latency_ns {longest:g} is {count / (longest / 1e9):.6g}/s"
                )
        scenario = detail.get("effective_scenario")
        issued, generated = (
            finite_number(detail.get("result_query_count")),
            finite_number(detail.get("generated_query_count")),
        )
        if scenario in ("Offline", "Server") and None not in (issued, generated) and issued != generated:
            problems.append(
                f"result_query_count = {issued:g}, but the run generated {generated:g} queries (LoadGen issues them all)"
            )
        per_query = finite_number(detail.get("generated_samples_per_query"))
        in_effect = finite_number(detail.get("effective_samples_per_query"))
        if scenario != "Offline" and None not in (per_query, in_effect) and per_query != in_effect:
            problems.append(
                f"generated_samples_per_query = {per_query:g}, but effective_samples_per_query = {in_effect:g}"
            )
        problems += _rate_problems(ctx, result, detail)
        problems += _percentile_problems(detail)
        if problems:
            findings.append(
                Finding("validity-evidence", where, "the log contradicts itself: " + "; ".join(problems[:4]))
            )
    return findings


# Records LoadGen writes any number of times (messages, errors and warnings); every other
# key is written once per run.
REPEATED_KEYS = re.compile(r"^(generic_message|error_.*|warning_.*)$")
# An accuracy run loads the QSL set by set and generates the queries of each: these
# (and the power window and the logger's counters of each) are written once per set, as in
# 961 published accuracy logs; in no performance log.
PER_LOADED_SET = frozenset(
    {
        "loaded_qsl_set",
        "generated_query_count",
        "generated_query_duration",
        "generated_samples_per_query",
        "power_begin",
        "power_end",
    }
)


def repeated_records(lines) -> dict[str, list[str]]:
    """Each key LoadGen writes once that a log holds with more than one value (key -> values
    as written); an AccuracyOnly run's per-set records are left out."""
    seen: dict[str, list[str]] = {}
    accuracy_run = False
    for line in lines:
        if not line.startswith(MLLOG_PREFIX):
            continue
        try:
            record = json.loads(line[len(MLLOG_PREFIX) :])
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict) or not isinstance(record.get("key"), str):
            continue
        key = record["key"]
        if key == "effective_test_mode":
            accuracy_run = record.get("value") == "AccuracyOnly"
        if REPEATED_KEYS.match(key):
            continue  # (a record flagged as a warning or an error is still the one record of its key)
        value = json.dumps(record.get("value"), sort_keys=True)
        values = seen.setdefault(key, [])
        if value not in values:
            values.append(value)
    return {
        key: values
        for key, values in seen.items()
        if len(values) > 1 and not (accuracy_run and (key in PER_LOADED_SET or key.startswith("logger_")))
    }


@rule(
    "log-records-once",
    evidence=[
        cross_checked(DETAIL_LOG, "<every key LoadGen writes once>", "its other records in the same log: one value"),
    ],
)
def check_records_once(ctx: TreeContext) -> list[Finding]:
    """A key LoadGen writes once per run, written twice with another value: the log was edited
    or two runs were joined, and which value the other rules read is an accident."""
    findings = []
    for result in ctx.results:
        if result.is_endpoints:
            continue
        for path in _detail_logs(ctx, result.path):
            repeated = repeated_records(ctx.files.lines(path))
            if repeated:
                shown = "; ".join(f"{k} = {' and '.join(v[:3])}" for k, v in list(repeated.items())[:3])
                findings.append(
                    Finding(
                        "log-records-once",
                        ctx.rel(path),
                        f"{len(repeated)} record(s) LoadGen writes once appear with more than one value ({shown})",
                    )
                )
    return findings


def _detail_logs(ctx: TreeContext, folder: Path) -> list[Path]:
    return sorted(
        ctx.root / rel
        for rel, entry in ctx.files.walk(folder)
        if entry.kind == "file" and rel.endswith("/" + DETAIL_LOG)
    )


# The records LoadGen writes in every performance run of a scenario, and the lines its
# summary prints for every one: each is in all 1,951 published v6.0 and v5.1 performance
# logs (525 Server, 544 Offline, 857 SingleStream, 25 MultiStream) and their summaries. A
# run's record missing is a log edited or cut; the rules that read it would judge nothing.
_PERCENTILE_KEYS = tuple(f"result_{p}_percentile_latency_ns" for p in _PERCENTILES)
WRITTEN_RECORDS = {
    "*": (
        *(f"effective_{key}" for key in COPIED_SETTINGS if key not in ("target_qps", "target_latency_ns")),
        *(f"requested_{key}" for key in COPIED_SETTINGS[:16]),
        "effective_target_qps",
        "effective_target_latency_ns",
        "effective_min_query_count",
        "effective_min_sample_count",
        "effective_performance_sample_count",
        "effective_samples_per_query",
        "effective_target_duration_ms",
        "requested_min_query_count",
        "requested_performance_sample_count_override",
        "generated_query_count",
        "generated_query_duration",
        "generated_samples_per_query",
        "qsl_reported_performance_count",
        "qsl_reported_total_count",
        "sut_name",
        "qsl_name",
        "test_datetime",
        "power_begin",
        "power_end",
        "loadgen_version",
        "loadgen_git_status_message",
        "loadgen_file_sha1",
        "result_validity",
        "result_min_duration_met",
        "result_min_queries_met",
        "early_stopping_met",
        "result_query_count",
        "result_min_latency_ns",
        "result_max_latency_ns",
        "result_mean_latency_ns",
        *_PERCENTILE_KEYS,
    ),
    "Server": (
        "requested_server_target_qps",
        "requested_server_target_latency_ns",
        "requested_server_target_latency_percentile",
        "requested_server_max_async_queries",
        "result_completed_samples_per_sec",
        "result_scheduled_samples_per_sec",
        "result_perf_constraints_met",
    ),
    "Offline": ("requested_offline_expected_qps", "result_samples_per_second"),
    "SingleStream": (
        "requested_single_stream_expected_latency_ns",
        "requested_single_stream_target_latency_percentile",
        "early_stopping_latency_ss",
        "result_qps_with_loadgen_overhead",
        "result_qps_without_loadgen_overhead",
    ),
    "MultiStream": (
        "requested_multi_stream_expected_latency_ns",
        "requested_multi_stream_samples_per_query",
        "requested_multi_stream_target_latency_percentile",
        "early_stopping_latency_ms",
        "result_min_query_latency_ns",
        "result_max_query_latency_ns",
        "result_mean_query_latency_ns",
        *(f"result_{p}_percentile_per_query_latency_ns" for p in _PERCENTILES),
    ),
}
_TOKEN_PERCENTILES = (
    *(f"result_first_token_{p}_percentile_latency_ns" for p in _PERCENTILES),
    *(f"result_time_per_output_token_{p}_percentile_ns" for p in _PERCENTILES),
)
# ... and with token latencies requested (449 Server and 423 Offline published logs).
WRITTEN_TOKEN_RECORDS = {
    "Server": (
        "early_stopping_ttft_result",
        "early_stopping_tpot_result",
        "requested_server_ttft_latency",
        "requested_server_tpot_latency",
        "result_completed_tokens_per_second",
        "result_first_token_min_latency_ns",
        "result_first_token_max_latency_ns",
        "result_first_token_mean_latency_ns",
        "result_time_to_output_token_min",
        "result_time_to_output_token_max",
        "result_time_to_output_token_mean",
        "result_token_throughput",
        "result_token_throughput_with_loadgen_overhead",
        *_TOKEN_PERCENTILES,
    ),
    "Offline": ("early_stopping_ttft_result", "early_stopping_tpot_result", "result_tokens_per_second"),
}
PRINTED_TOKEN_LABELS = {
    "Server": (
        "Completed tokens per second",
        "Min First Token latency (ns)",
        "Max First Token latency (ns)",
        "Mean First Token latency (ns)",
        "TTFT Early Stopping Result",
        "TPOT Early Stopping Result",
        "ttft_latency (ns)",
        "tpot_latency (ns)",
        *(f"{p} percentile first token latency (ns)" for p in _PERCENTILES),
        *(f"{p} percentile time to output token (ns)" for p in _PERCENTILES),
    ),
    "Offline": ("Samples per second", "Tokens per second", "ttft_latency (ns)", "tpot_latency (ns)"),
}
# ... and in every run of a scenario (Interactive runs are LoadGen Server runs), with or
# without token latencies (all 1,951 published performance summaries).
PRINTED_SCENARIO_LABELS = {
    "Server": ("Completed samples per second", "Scheduled samples per second", "Performance constraints satisfied"),
    "SingleStream": ("QPS w/ loadgen overhead", "QPS w/o loadgen overhead"),
}
PRINTED_LABELS = (
    "SUT name",
    "Scenario",
    "Mode",
    "Result is",
    "Min duration satisfied",
    "Min queries satisfied",
    "Early stopping satisfied",
    "Min latency (ns)",
    "Max latency (ns)",
    "Mean latency (ns)",
    *(f"{p} percentile latency (ns)" for p in _PERCENTILES),
    "samples_per_query",
    "target_qps",
    "max_async_queries",
    "min_duration (ms)",
    "max_duration (ms)",
    "min_query_count",
    "max_query_count",
    "qsl_rng_seed",
    "sample_index_rng_seed",
    "schedule_rng_seed",
    "accuracy_log_rng_seed",
    "accuracy_log_probability",
    "accuracy_log_sampling_target",
    "print_timestamps",
    "performance_issue_unique",
    "performance_issue_same",
    "performance_issue_same_index",
    "performance_sample_count",
)


# Records whose presence only is checked: nothing else in the tree states their value.
trust(
    DETAIL_LOG,
    {
        "effective_target_duration_ms": "LoadGen's planned duration, stated once; present (log-records-present)",
        "qsl_name": "the harness's name for its sample library, stated once; present (log-records-present)",
        "test_datetime": "when the run started, stated once; present (log-records-present); with the run's records, "
        "what tells it from another run (run-provenance)",
        "requested_min_query_count": "LoadGen raises the query minimum to what the scenario needs, so the request "
        "need not be effective_min_query_count; present (log-records-present); in a compliance run, at least its "
        "audit.config's (audit-settings)",
        "requested_offline_expected_qps": "sizes the Offline query with min_duration (generated_samples_per_query "
        "is at least their product, not equal to it); present (log-records-present)",
        "result_token_throughput": "LoadGen divides by nanoseconds here, and no summary line prints it; present "
        "(log-records-present)",
    },
)


# Records a LoadGen release writes in every run from that release on (in all 1,143 published
# logs of 6.0.6 and later; in none of the 3,362 of earlier releases).
WRITTEN_SINCE = {"effective_accuracy_sample_count": (6, 0, 6)}


def _release(version) -> tuple[int, ...]:
    """ "6.0.9 @ fb1d0c0948" -> (6, 0, 9); () where it names no release."""
    found = re.match(r"\s*(\d+(?:\.\d+)*)", str(version or ""))
    return tuple(int(part) for part in found.group(1).split(".")) if found else ()


@rule("log-records-present")
def check_records_present(ctx: TreeContext) -> list[Finding]:
    """A result's performance log holds every record LoadGen writes in a run of its scenario,
    and its summary every line LoadGen prints: a record removed leaves the rules that read it
    nothing to judge."""
    findings = []
    for result, detail, where in result_logs(ctx, compliance_only=True):
        if result.is_endpoints or detail.get("effective_test_mode", "PerformanceOnly") != "PerformanceOnly":
            continue  # (an accuracy run in performance/: test-mode names it)
        scenario = detail.get("effective_scenario")
        folder = ctx.rules.loadgen_scenario(result.scenario) if result.scenario in ctx.rules.scenario_folders else None
        if not isinstance(scenario, str) or scenario not in WRITTEN_RECORDS or scenario != folder:
            continue  # scenario-match names it
        tokens = detail.get("requested_use_token_latencies") is True
        wanted = (
            *WRITTEN_RECORDS["*"],
            *WRITTEN_RECORDS[scenario],
            *(WRITTEN_TOKEN_RECORDS.get(scenario, ()) if tokens else ()),
            *(key for key, since in WRITTEN_SINCE.items() if _release(detail.get("loadgen_version")) >= since),
        )
        missing = [key for key in wanted if key not in detail]
        if missing:
            findings.append(
                Finding(
                    "log-records-present",
                    where,
                    f"lacks {len(missing)} record(s) LoadGen writes in every {scenario} run: {', '.join(missing[:6])}"
                    + (" ..." if len(missing) > 6 else ""),
                )
            )
        summary = result.path / "performance" / "run_1" / SUMMARY_LOG
        if where == ctx.rel(result.log_path(PERF)) and ctx.files.is_file(summary):
            printed = parse_summary(ctx.files.read_text(summary))
            labels = (
                *PRINTED_LABELS,
                *PRINTED_SCENARIO_LABELS.get(scenario, ()),
                *(PRINTED_TOKEN_LABELS.get(scenario, ()) if tokens else ()),
            )
            absent = [label for label in labels if label not in printed]
            if absent:
                findings.append(
                    Finding(
                        "log-records-present",
                        ctx.rel(summary),
                        f"does not print {', '.join(absent[:6])}{' ...' if len(absent) > 6 else ''}: LoadGen's "
                        "summary of every performance run does",
                    )
                )
    return findings


# LoadGen logs the wall clock when the performance run starts issuing and when its last
# sample completes (power_begin, power_end: "%m-%d-%Y %H:%M:%S.mmm", for power meters). That
# window is a clock the latencies cannot move: no sample takes longer than the run; an
# Offline run's one query is issued at the start and its last sample ends the run, so its
# max latency is the window; serial queries (SingleStream, MultiStream) take no more than it
# together; a Server run lasts at least its schedule. Each holds in every published v6.0 and
# v5.1 performance log (2,253 with results, compliance runs included), Offline to the ms.
def clock_problems(detail: dict) -> list[str]:
    """The run's figures against its power window (empty where the log lacks either: the
    records' presence is log-records-present's)."""
    n = finite_number
    longest = n(detail.get("result_max_latency_ns"))
    stamps = {key: detail[key] for key in ("power_begin", "power_end") if key in detail}
    if len(stamps) < 2 or longest is None:
        return []
    unreadable = [f"{k} {json.dumps(v)}" for k, v in stamps.items() if power_time(v) is None]
    if unreadable:
        return [f"{' and '.join(unreadable)} is not a time as LoadGen writes it (MM-DD-YYYY HH:MM:SS.mmm)"]
    window = (power_time(stamps["power_end"]) - power_time(stamps["power_begin"])).total_seconds()
    if window < 0:
        return [f"power_end {detail.get('power_end')} is before power_begin {detail.get('power_begin')}"]
    # The window is printed to the ms, and LoadGen logs power_begin just after the run's clock
    # starts (tens of ms on a busy 2-core test machine): 50 ms or a tenth of a per mille.
    slack = max(0.05, 1e-4 * window)
    shown = f"the run's window power_begin {detail.get('power_begin')} to power_end {detail.get('power_end')} ({window:.3f} s)"
    problems = []
    scenario = detail.get("effective_scenario")
    if longest / 1e9 > window + slack:
        problems.append(f"result_max_latency_ns {longest:g} is longer than {shown}")
    elif scenario == "Offline" and abs(longest / 1e9 - window) > slack:
        problems.append(f"result_max_latency_ns {longest:g} is not {shown}: an Offline run ends with its last sample")
    queries, mean = n(detail.get("result_query_count")), n(detail.get("result_mean_latency_ns"))
    if scenario in ("SingleStream", "MultiStream") and None not in (queries, mean):
        busy = queries * mean / 1e9
        if busy > window * (1 + 1e-3) + slack:
            problems.append(
                f"result_query_count {queries:g} queries of result_mean_latency_ns {mean:g} take {busy:.3f} s, "
                f"longer than {shown} (the queries run one after another)"
            )
    floor = n(detail.get("effective_min_duration_ms"))
    if detail.get("result_min_duration_met") is True and floor is not None and floor / 1e3 > window + max(0.5, slack):
        # LoadGen times the run from its start to its last completion, which the window
        # holds (less the moment before power_begin is logged).
        problems.append(
            f"result_min_duration_met is true, but {shown} is shorter than effective_min_duration_ms {floor:g}"
        )
    if scenario == "Server":
        scheduled = n(detail.get("generated_query_duration"))
        # The schedule is timed from the run's start, before power_begin is logged: half a
        # second or a per mille (a 2.3 s test-scale run's window was 14 ms short of it).
        if scheduled is not None and scheduled / 1e9 > window + max(0.5, 1e-3 * window):
            problems.append(f"generated_query_duration {scheduled:g} is longer than {shown}")
    return problems


# Every record carries the logger's own clock (time_ms, from the logger's start). LoadGen logs
# the schedule (generated_query_count) just before the run begins, and the power window when
# it ends: between the two the logger's clock runs the window, and a few seconds more while
# LoadGen waits and tidies (in all 2,557 published performance-mode logs: never less, and at
# most 8.5 s more). A window shortened or lengthened on paper leaves the logger's clock as it ran.
LOGGER_CLOCK_BEHIND_S = 0.05
LOGGER_CLOCK_AHEAD_S, LOGGER_CLOCK_AHEAD = 10.0, 0.01
_CLOCK_RECORDS = frozenset({"generated_query_count", "power_end"})


def record_times(lines, keys: frozenset[str] = _CLOCK_RECORDS) -> dict[str, float]:
    """The logger's time_ms of the first record of each key (the others are not parsed)."""
    found: dict[str, float] = {}
    for line in lines:
        if not line.startswith(MLLOG_PREFIX) or record_key(line) not in keys:
            continue
        try:
            record = json.loads(line[len(MLLOG_PREFIX) :])
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and record.get("key") not in found:
            moment = finite_number(record.get("time_ms"))
            if moment is not None:
                found[record["key"]] = moment
        if len(found) == len(keys):
            break
    return found


def _logger_clock_problems(ctx: TreeContext, path, detail: dict) -> list[str]:
    begin, end = (power_time(detail.get(k)) for k in ("power_begin", "power_end"))
    if begin is None or end is None:
        return []
    window = (end - begin).total_seconds()
    note(DETAIL_LOG, "time_ms")
    times = record_times(ctx.files.lines(path))
    if set(times) != _CLOCK_RECORDS:
        return []
    ran = (times["power_end"] - times["generated_query_count"]) / 1000
    if ran < window - LOGGER_CLOCK_BEHIND_S:
        return [
            f"its power window lasts {window:.3f} s, but its logger's clock (time_ms) ran {ran:.3f} s from the "
            "schedule to the window's end: the run was lengthened on paper"
        ]
    if ran > window + LOGGER_CLOCK_AHEAD_S + LOGGER_CLOCK_AHEAD * window:
        return [
            f"its power window lasts {window:.3f} s, but its logger's clock (time_ms) ran {ran:.3f} s from the "
            "schedule to the window's end: the run was shortened on paper"
        ]
    return []


@rule(
    "clock-evidence",
    evidence=[
        cross_checked(
            DETAIL_LOG,
            "power_begin",
            "with power_end, the run's wall-clock window: the latencies, the query count and the schedule fit in it",
        ),
        cross_checked(DETAIL_LOG, "power_end", "with power_begin, the run's wall-clock window (see power_begin)"),
        cross_checked(
            DETAIL_LOG,
            "time_ms",
            "the logger's clock from the schedule (generated_query_count) to power_end: the power window, and at "
            "most 10 s + 1% more (performance-mode logs)",
        ),
        cross_checked(
            DETAIL_LOG, "result_min_duration_met", "the power window: at least effective_min_duration_ms when true"
        ),
        cross_checked(
            DETAIL_LOG,
            "result_max_latency_ns",
            "the power window (no longer; in Offline, equal to the ms); result_samples_per_second (Offline)",
        ),
        cross_checked(
            DETAIL_LOG,
            "result_mean_latency_ns",
            "min and max latency; the power window (SingleStream, MultiStream: queries x mean fit in it)",
        ),
    ],
)
def check_clock_evidence(ctx: TreeContext) -> list[Finding]:
    """Every performance-mode log of a result (compliance runs included) against its own
    wall clock: a run shortened on paper keeps the window it really took."""
    findings = []
    for _result, detail, where in _performance_mode_logs(ctx):
        problems = clock_problems(detail) + _logger_clock_problems(ctx, ctx.root / where, detail)
        if problems:
            findings.append(
                Finding("clock-evidence", where, "the log contradicts its clock: " + "; ".join(problems[:3]))
            )
    return findings
