"""``target_qps: auto``: the arithmetic and the search of the find-performance pass.

A partner's machine is not the vendor's. An Offline target below the machine's real rate makes
LoadGen issue too few samples, so the run ends before min_duration (INVALID); a Server or
Interactive target above what meets the latency limits is INVALID too. The pass measures the
machine with short LoadGen runs and picks the target with a margin. The searches here take a
``run(qps) -> Probe`` function, so they are tested without LoadGen;
:mod:`mlperf_repro.stages.find_performance` makes the real short runs (one process each).
Foundation layer: no imports from the package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

AUTO = "auto"
# Offline and SingleStream measure a rate; Server and Interactive search the highest valid one.
THROUGHPUT_SCENARIOS = ("Offline", "SingleStream")
LATENCY_SCENARIOS = ("Server", "Interactive")
SCENARIOS = THROUGHPUT_SCENARIOS + LATENCY_SCENARIOS
# The schema's defaults of the config's `find_performance` section (also documented there).
DEFAULTS = {"min_duration_ms": 60000, "margin": 0.1, "max_steps": 6, "min_query_count": 500}
# Without start_qps an Offline or SingleStream search starts here (samples/s) and climbs.
FIRST_QPS = 1.0
# The first Offline/SingleStream short run asks for this much more than the start value, so
# it outlasts its min_duration even on a machine somewhat faster than the start value said.
PROBE_HEADROOM = 1.5
# A short run that ran out of samples before min_duration asks next for this times what it measured.
RAMP = 2.0
# Server/Interactive: up (or down) by this factor until a valid and an invalid rate bracket the answer.
BRACKET = 1.5
# A short run is never packaged: it samples the loaded performance samples at random instead
# of LoadGen covering whole permutations of them (the round's mlperf.conf asks that of the LLMs,
# which made a "30 s" llama2 run issue all 24,576 samples). LoadGen 6.0 reads this key from
# user.conf (TestSettings::FromConfig); the scenario's performance runs keep the round's value.
SHORT_RUN_SAMPLE_CONCATENATE_PERMUTATION = 0


class SearchFailed(Exception):
    """The search ended without an answer (no valid rate, or no run that lasted min_duration)."""


@dataclass
class Probe:
    """One short run's verdict, as the search sees it."""

    qps: float  # the target_qps it asked for
    rate: float | None  # samples/s it measured (SingleStream: 1 / mean latency)
    covered: bool  # it lasted min_duration (LoadGen's result_min_duration_met)
    valid: bool  # Server/Interactive: LoadGen VALID and p99 TTFT/TPOT below the round's limits
    facts: dict[str, Any] = field(default_factory=dict)  # what the record shows of the run


def probe_from_detail(scenario: str, qps: float, detail: dict[str, Any], limits_ms: dict[str, float]) -> Probe:
    """A short run's verdict from its LoadGen detail log (``loadgen_logs.read_detail``) and the
    rules table's latency limits of the scenario (``ttft``/``tpot`` in ms, p99)."""
    validity = str(detail.get("result_validity", "")).upper()
    covered = bool(detail.get("result_min_duration_met"))
    if scenario == "Offline":
        rate = _number(detail.get("result_samples_per_second"))
    elif scenario == "SingleStream":
        # Queries run back to back, so the run lasts queries x mean latency.
        mean_ns = _number(detail.get("result_mean_latency_ns"))
        rate = 1e9 / mean_ns if mean_ns else None
    else:
        rate = _number(detail.get("result_completed_samples_per_sec"))
    facts: dict[str, Any] = {
        "result_validity": validity or None,
        "min_duration_met": covered,
        "min_queries_met": detail.get("result_min_queries_met"),
        "early_stopping_met": detail.get("early_stopping_met"),
        "measured_qps": round(rate, 4) if rate else None,
    }
    within_limits = True
    for name, key in (
        ("ttft", "result_first_token_99.00_percentile_latency_ns"),
        ("tpot", "result_time_per_output_token_99.00_percentile_ns"),
    ):
        if name not in limits_ms:
            continue
        p99_ns = _number(detail.get(key))
        facts[f"{name}_p99_ms"] = round(p99_ns / 1e6, 3) if p99_ns is not None else None
        facts[f"{name}_limit_ms"] = limits_ms[name]
        if p99_ns is None or p99_ns >= limits_ms[name] * 1e6:
            within_limits = False
    valid = validity == "VALID" and within_limits
    facts["valid_for_search"] = valid if scenario in LATENCY_SCENARIOS else None
    return Probe(qps=qps, rate=rate, covered=covered, valid=valid, facts=facts)


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


def measure_rate(run: Callable[[float], Probe], start_qps: float | None, max_steps: int) -> tuple[float, list[Probe]]:
    """Offline and SingleStream: the machine's rate, from a short run that lasted its min_duration.

    The first run asks for PROBE_HEADROOM x the start value (FIRST_QPS without one): a target
    above the real rate only makes the run longer, so the run covers min_duration and its
    measured rate is the machine's. A run that ran out of samples first measured more than it
    was asked for; the next asks RAMP x that. At most ``max_steps`` runs."""
    qps = (start_qps or FIRST_QPS) * PROBE_HEADROOM
    probes: list[Probe] = []
    for _ in range(max_steps):
        probe = run(qps)
        probes.append(probe)
        if not probe.rate:
            raise SearchFailed(f"the short run at target_qps {qps:g} measured no rate (see its detail log)")
        if probe.covered:
            return probe.rate, probes
        qps = max(probe.rate, qps) * RAMP
    raise SearchFailed(
        f"{max_steps} short run(s) all ended before their min_duration (last asked {probes[-1].qps:g}/s, "
        f"measured {probes[-1].rate:g}/s); give a start_qps near the machine's rate or raise find_performance.max_steps"
    )


def search_highest_valid(
    run: Callable[[float], Probe], start_qps: float, max_steps: int, resolution: float
) -> tuple[float, list[Probe]]:
    """Server and Interactive: the highest rate whose short run is valid, in at most ``max_steps`` runs.

    From ``start_qps`` it goes up (valid) or down (invalid) by BRACKET (down to the rate an
    invalid run completed, where that is lower) until a valid and an invalid rate bracket the
    answer, then bisects; it stops early once they are within
    ``resolution`` (relative) of each other, since the margin taken off the answer is coarser."""
    low: float | None = None  # the highest valid rate so far
    high: float | None = None  # the lowest invalid rate so far
    qps = start_qps
    probes: list[Probe] = []
    for _ in range(max_steps):
        probe = run(qps)
        probes.append(probe)
        if probe.valid:
            low = qps if low is None else max(low, qps)
        else:
            high = qps if high is None else min(high, qps)
        if low is None:
            # An overloaded run completes about what the machine manages: a closer next guess.
            qps = min(high / BRACKET, probe.rate or high)
        elif high is None:
            qps = low * BRACKET
        elif high - low <= resolution * low:
            break
        else:
            qps = (low + high) / 2
    if low is None:
        raise SearchFailed(
            f"no short run was valid down to target_qps {probes[-1].qps:g} in {len(probes)} run(s); "
            f"give a lower start_qps or raise find_performance.max_steps"
        )
    return low, probes


def chosen_target(scenario: str, found: float, margin: float) -> float:
    """The target_qps written into user.conf for what the pass found.

    Offline and SingleStream go up by the margin: LoadGen issues target x min_duration worth of
    samples (Offline 1.1x; SingleStream min_duration / target_latency queries), so a target above
    the real rate only lengthens the run, while one below it ends the run before min_duration.
    Server and Interactive go down: the found rate is the highest that met the latency limits in
    a short run, and a longer run at it has more chances of a slow tail."""
    if scenario in THROUGHPUT_SCENARIOS:
        return round(found * (1 + margin), 4)
    return round(found * (1 - margin), 4)


def short_run_settings(
    scenario: str, settings: dict[str, Any], qps: float, min_duration_ms: int, min_query_count: int
) -> dict[str, Any]:
    """The user.conf settings (LoadGen keys) of one short run: the scenario's own, at ``qps`` and
    the short min_duration. Offline and SingleStream ask for one sample at least (their length
    follows the target); Server and Interactive for ``min_query_count`` queries (early stopping
    at p99 needs about 460 without a violation, or every short run would be INVALID). Without
    sample_concatenate_permutation, so the run lasts what these say, not a whole pass over the
    performance samples."""
    short = {key: value for key, value in settings.items() if key not in ("target_qps", "target_latency")}
    short["min_duration"] = min_duration_ms
    short["min_query_count"] = min_query_count if scenario in LATENCY_SCENARIOS else 1
    short["sample_concatenate_permutation"] = SHORT_RUN_SAMPLE_CONCATENATE_PERMUTATION
    short["target_qps"] = qps
    return short
