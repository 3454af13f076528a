"""The settings the round fixes, wherever a tree records them.

LoadGen's mlperf.conf fixes some settings for every submitter: the latency percentile a
scenario is judged at, the token latency limits, the minimum duration, the seeds, the
LLMs' sample_concatenate_permutation; the audit patterns (performance_issue_*) belong to
the compliance tests' audit.config alone. A submitter may not loosen them, in the run or
in the files beside it:

- each run's log (the result's own runs, and each compliance run for the settings its
  test's audit.config leaves alone): the issue patterns off, the minimum duration at least
  the round's;
- the result's performance run: the LLM's sample_concatenate_permutation on;
- the folder's mlperf.conf and user.conf: no line that gives the result's model and
  scenario another value than the round's (a user.conf may repeat the round's value: 8
  published ones set target_latency_percentile or sample_concatenate_permutation to it).

Published v6.0 releases of LoadGen differ in one such line: most carry no
sample_concatenate_permutation for the "-interactive" model names (v6.0 NVIDIA's gpt-oss
Interactive run logs it off), so the permutation is judged for the model names the
benchmark's Offline run uses. The percentile is judged by validity-evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UserError
from ...published.loadgen_conf import conf_number, effective, parse_conf
from ..evidence import cross_checked
from ..findings import Finding
from ..model import ACC, DETAIL_LOG, PERF, ScenarioResult, TreeContext, number, round_percentile, rule, run_logs

_ISSUE_PATTERNS = ("performance_issue_same", "performance_issue_unique")


def _loadgen_model(result: ScenarioResult, scenario: str) -> str | None:
    try:
        return result.facts.loadgen_model(scenario)
    except UserError:
        return None


def _permutation_fixed(result: ScenarioResult) -> bool:
    """The round's mlperf.conf turns sample_concatenate_permutation on for this folder's run."""
    facts = result.facts
    if facts is None or facts.facts.get("sample_concatenate_permutation") is not True:
        return False
    model = _loadgen_model(result, result.scenario)
    return model is not None and model == _loadgen_model(result, "Offline")


def _audit_keys(ctx: TreeContext, result: ScenarioResult, test: str | None) -> set[str]:
    if test is None:
        return set()
    entry = ctx.rules.compliance_test(test, result.facts.name)
    audit = dict(entry.get("audit_config") or {})
    audit.update((entry.get("audit_config_by_scenario") or {}).get(result.scenario) or {})
    return set(audit)


def _log_problems(ctx: TreeContext, result: ScenarioResult, detail: dict, test: str | None) -> list[str]:
    problems = []
    audited = _audit_keys(ctx, result, test)
    for key in _ISSUE_PATTERNS:
        if key not in audited and detail.get(f"effective_{key}") is True:
            owner = f"the {test} run" if test else "a result's own run"
            problems.append(f"effective_{key} is true: the audit pattern is TEST04's, not {owner}'s")
    performance = detail.get("effective_test_mode") == "PerformanceOnly"
    duration = number(detail.get("effective_min_duration_ms"))
    floor = ctx.rules.data.get("min_duration_ms")
    # (Compliance runs only: run-length judges the result's own performance run's duration.)
    if test and performance and "min_duration" not in audited and duration is not None and floor and duration < floor:
        problems.append(
            f"effective_min_duration_ms {duration:g}: {ctx.rules.name} runs last at least {floor} ms "
            f"(mlperf.conf's min_duration; the {test} audit.config sets none)"
        )
    return problems


def _conf_problems(ctx: TreeContext, result: ScenarioResult, path: Path, name: str) -> list[Finding]:
    """The lines of a folder's mlperf.conf or user.conf that give this result's model and
    scenario another value of a setting the round fixes."""
    scenario = ctx.rules.loadgen_scenario(result.scenario) if result.scenario in ctx.rules.scenario_folders else None
    model = _loadgen_model(result, result.scenario)
    if scenario is None or model is None:
        return []
    lines, _problems = parse_conf(ctx.files.read_text(path))
    applied = effective(lines, model, scenario)
    limits = result.facts.latency_limits_ms(result.scenario) or {}
    fixed: dict[str, tuple[str, Any]] = {}  # key -> (how it must compare, the round's value)
    percentile = round_percentile(ctx, result, scenario)
    if percentile is not None:
        fixed["target_latency_percentile"] = ("equal", float(percentile) * 100)
    for key in ("ttft", "tpot"):
        if key in limits:
            fixed[f"{key}_latency"] = ("equal", limits[key])
    if scenario == "Server" and "target" in limits:
        fixed["target_latency"] = ("at most", limits["target"])
    if _permutation_fixed(result):
        fixed["sample_concatenate_permutation"] = ("equal", 1)
    for key in _ISSUE_PATTERNS:
        fixed[key] = ("equal", 0)
    samples = result.facts.facts.get("performance_sample_count")
    if isinstance(samples, int) and not ctx.test_scale:
        # (0 leaves the count to the QSL, which the round's own count then fixes.)
        fixed["performance_sample_count_override"] = ("at least, or 0", samples)
    if name == "mlperf.conf":
        # (Not the seeds: a folder's mlperf.conf is often another release's copy, 263 of 977
        # published ones hash otherwise than the run's LoadGen says, many with the last
        # round's seeds; the seeds rule judges the logs.)
        fixed["min_duration"] = ("at least", ctx.rules.data.get("min_duration_ms") or 0)
    findings = []
    for key, (how, wanted) in fixed.items():
        line = applied.get(key)
        if line is None:
            continue
        value = conf_number(line.value, "float")
        if value is None:
            continue
        loose = {
            "equal": value != wanted,
            "at most": value > wanted,
            "at least": value < wanted,
            "at least, or 0": value != 0 and value < wanted,
        }[how]
        if loose:
            # A user.conf's audit pattern is a compliance run's setting left behind (v6.0
            # Krai's wan user.conf holds TEST04's): a warning; the run's log is judged.
            # So is a sample count below the round's: 18 published v6.0 gpt-oss user.conf files
            # set the accuracy set's 4395 and NVIDIA's wan ones 128, which their runs did not use.
            leftover = name == "user.conf" and (key in _ISSUE_PATTERNS or key == "performance_sample_count_override")
            findings.append(
                Finding(
                    "round-settings",
                    ctx.rel(path),
                    f"line {line.line_no} sets {line.model}.{line.scenario}.{key} = {line.value}; {ctx.rules.name} "
                    f"fixes it for {model} {scenario} ({_bound(how, wanted)}): a submitter may not change it",
                    severity="warning" if leftover else "error",
                )
            )
    return findings


def _bound(how: str, wanted: float) -> str:
    """ "at least 10833, or 0" for ("at least, or 0", 10833); "equal 0" for ("equal", 0)."""
    return how.replace(",", f" {wanted:g},") if "," in how else f"{how} {wanted:g}"


@rule(
    "round-settings",
    evidence=[
        cross_checked(
            DETAIL_LOG,
            "effective_performance_issue_*",
            "off in a result's own runs and in compliance runs whose audit.config leaves them alone",
        ),
        cross_checked(
            DETAIL_LOG,
            "effective_min_duration_ms",
            "the round's min_duration_ms, in each compliance run its audit.config does not shorten (run-length "
            "judges the performance run's)",
        ),
        cross_checked(
            DETAIL_LOG,
            "effective_sample_concatenate_permutation",
            "on in the performance run of an LLM whose table says so (the Offline model name's runs)",
        ),
        cross_checked(
            "mlperf.conf",
            "<model>.<scenario>.<setting>",
            "the round's fixed settings for the result's model and scenario: percentile, token limits, Server "
            "target latency, min_duration, sample_concatenate_permutation, issue patterns, a "
            "performance_sample_count_override of at least the round's performance_sample_count (or 0; not the seeds: a "
            "folder's copy is often another release's; the seeds rule judges the logs)",
        ),
        cross_checked(
            "user.conf",
            "<model>.<scenario>.<fixed setting>",
            "the round's value of each setting mlperf.conf fixes (see mlperf.conf): a user.conf may repeat it only",
        ),
    ],
)
def check_round_settings(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        if result.facts is None or result.is_endpoints:
            continue
        if not ctx.test_scale:  # (a test-scale stand-in runs short on purpose; marking says so)
            for log in run_logs(ctx, result):
                if log.test is None and log.path not in (result.log_path(PERF), result.log_path(ACC)):
                    continue  # (a ranging run, or a stray log: not the result's; structure names strays)
                detail = ctx.detail_at(log.path)
                problems = _log_problems(ctx, result, detail, log.test)
                if log.path == result.log_path(PERF) and _permutation_fixed(result):
                    if detail.get("effective_sample_concatenate_permutation") is False:
                        problems.append(
                            "effective_sample_concatenate_permutation is false: the round's mlperf.conf turns it on "
                            f"for {result.facts.name}"
                        )
                if problems:
                    findings.append(Finding("round-settings", ctx.rel(log.path), "; ".join(problems)))
        for name in ("mlperf.conf", "user.conf"):
            path = result.measure_path / name
            if ctx.files.is_file(path):
                findings.extend(_conf_problems(ctx, result, path, name))
    return findings
