"""Latency: early stopping, the target LoadGen judged against and the p99 token
latencies against the folder's own limits (Interactive's, not Server's)."""

from __future__ import annotations

from ..evidence import cross_checked
from ..findings import Finding
from ..model import (
    DETAIL_LOG,
    TreeContext,
    early_stopping,
    number,
    performance_logs,
    rule,
)


@rule(
    "latency",
    evidence=[
        cross_checked(DETAIL_LOG, "requested_server_ttft_latency", "the folder's TTFT limit in the round's table"),
        cross_checked(DETAIL_LOG, "requested_server_tpot_latency", "the folder's TPOT limit in the round's table"),
        cross_checked(DETAIL_LOG, "effective_target_latency_ns", "the folder's latency target in the round's table"),
        cross_checked(DETAIL_LOG, "result_*_percentile_*", "the folder's limits in the round's table (p99)"),
        cross_checked(DETAIL_LOG, "early_stopping_met", "met, where the scenario is judged by early stopping"),
    ],
)
def check_latency(ctx: TreeContext) -> list[Finding]:
    """Early stopping met where the scenario uses it; the target latency LoadGen judged
    against no looser than the table's; p99 TTFT/TPOT against this folder's limits
    (Interactive's own, not Server's), and the token limits LoadGen was asked to enforce
    must be this scenario's (else an Interactive run was made under the Server model name)."""
    findings = []
    for result, detail, where in performance_logs(ctx):
        if result.facts is None:
            continue
        if early_stopping(ctx, result.scenario) and detail.get("early_stopping_met") is False:
            findings.append(Finding("latency", where, "early stopping was not met"))
        limits = result.facts.latency_limits_ms(result.scenario) or {}
        target = limits.get("target")
        judged = number(detail.get("effective_target_latency_ns"))
        p99 = number(detail.get("result_99.00_percentile_latency_ns"))
        if result.is_endpoints and not result.facts.is_llm and target is not None and p99 is not None:
            # No early-stopping verdict from the harness: its p99 estimate against the target.
            if float(p99) > target * 1_000_000:
                findings.append(
                    Finding(
                        "latency",
                        where,
                        f"p99 latency {float(p99) / 1e6:.1f} ms is over the {result.scenario} target {target:g} ms",
                    )
                )
        if target is not None and judged is not None and int(judged) > target * 1_000_000:
            findings.append(
                Finding(
                    "latency",
                    where,
                    f"LoadGen judged latency against {int(judged) / 1e6:g} ms; "
                    f"{result.facts.name} {result.scenario} allows at most {target:g} ms",
                )
            )
        for name, requested_key, measured_key in (
            ("ttft", "requested_server_ttft_latency", "result_first_token_99.00_percentile_latency_ns"),
            ("tpot", "requested_server_tpot_latency", "result_time_per_output_token_99.00_percentile_ns"),
        ):
            if name not in limits:
                continue
            limit_ns = limits[name] * 1_000_000
            requested = number(detail.get(requested_key))
            if requested is not None and int(requested) != limit_ns:
                findings.append(
                    Finding(
                        "latency",
                        where,
                        f"LoadGen enforced a {name.upper()} limit of "
                        f"{int(requested) / 1e6:g} ms; {result.scenario} requires {limits[name]} ms "
                        f"(run it under the model name {result.facts.loadgen_model(result.scenario)})",
                    )
                )
            measured = number(detail.get(measured_key))
            if measured is None:
                findings.append(Finding("latency", where, f"no p99 {name.upper()} in the log"))
            elif float(measured) >= limit_ns:
                findings.append(
                    Finding(
                        "latency",
                        where,
                        f"p99 {name.upper()} {float(measured) / 1e6:.1f} ms is not "
                        f"below the {result.scenario} limit {limits[name]} ms",
                    )
                )
    return findings
