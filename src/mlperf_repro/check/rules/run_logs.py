"""LoadGen's run logs: validity, errors, seeds, test mode, scenario, token latencies and
run length from the performance log, and the records of the same run the tree holds
twice (its summary; the user.conf it was run with)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...benchmarks import available_rounds, load_round
from ...errors import UserError
from ...loadgen_logs import (
    EARLY_STOPPING_BLOCKS,
    MULTISTREAM_KEYS,
    SUMMARY_KEYS,
    summary_disagreements,
    summary_gaps,
    values_agree,
)
from ...published.loadgen_conf import parse_conf, requested_settings
from ..evidence import cross_checked, record_kind
from ..findings import Finding
from ..model import (
    ACC,
    DETAIL_LOG,
    PERF,
    SUMMARY_LOG,
    ScenarioResult,
    TreeContext,
    as_logged,
    early_stopping,
    number,
    performance_logs,
    plain,
    result_logs,
    rule,
    run_logs,
)

record_kind(
    DETAIL_LOG,
    ("performance/run_1/mlperf_log_detail.txt", "accuracy/mlperf_log_detail.txt", "TEST*/**/mlperf_log_detail.txt"),
    "mllog",
    "a LoadGen run's every setting, figure and verdict",
    trusted={
        "loadgen_version": "names the build only: the seeds are judged from the log, and loadgen-build compares the "
        "source hashes of logs naming one commit, never the string itself",
        "result_invalid_reason": "LoadGen's free-text advice; quoted in messages, the verdict is judged from the flags",
    },
)
SUMMARY = "mlperf_log_summary.txt"
record_kind(
    SUMMARY,
    ("performance/run_1/mlperf_log_summary.txt", "accuracy/mlperf_log_summary.txt", "TEST*/**/mlperf_log_summary.txt"),
    "summary",
    "the run's summary, printed by LoadGen from the same numbers as its detail log",
)
record_kind(
    "user.conf",
    "user.conf",
    "conf",
    "the settings the submitter gave LoadGen for this result",
)

# Every figure the summary prints is the detail log's record of the same run (loadgen_logs.SUMMARY_KEYS).
_PRINTED = [*SUMMARY_KEYS.items(), *MULTISTREAM_KEYS.items()]
_SUMMARY_EVIDENCE = [
    *(cross_checked(DETAIL_LOG, key, f"the summary's '{label}' line") for label, key in _PRINTED),
    *(
        cross_checked(SUMMARY, label, f"the detail log's {' or '.join(k for lab, k in _PRINTED if lab == label)}")
        for label in dict(_PRINTED)
    ),
    *(
        cross_checked(DETAIL_LOG, key, f"the summary's '{header}' block")
        for header, key in EARLY_STOPPING_BLOCKS.items()
    ),
    *(cross_checked(SUMMARY, header, f"the detail log's {key}") for header, key in EARLY_STOPPING_BLOCKS.items()),
    cross_checked(DETAIL_LOG, "result_*_percentile_*", "the summary's percentile lines"),
    cross_checked(DETAIL_LOG, "early_stopping_latency_*", "the summary's early-stopping latency line"),
    cross_checked(SUMMARY, "* percentile *", "the detail log's percentile records"),
    cross_checked(DETAIL_LOG, "num_errors", "the summary's error count; every error record"),
    cross_checked(DETAIL_LOG, "errors", "the summary's error count (loadgen-errors reports each)"),
    cross_checked(SUMMARY, "errors encountered", "the detail log's num_errors and its error records"),
]

# LoadGen's reason when an Offline run's one query was done before min_duration.
OFFLINE_TOO_SHORT = "Increase expected QPS"


def _invalid_message(detail: dict) -> str:
    reason = str(detail.get("result_invalid_reason") or "").strip()
    message = f"LoadGen result is {detail.get('result_validity')}" + (f" ({reason})" if reason else "")
    rate = number(detail.get("result_samples_per_second"))
    if detail.get("effective_scenario") == "Offline" and OFFLINE_TOO_SHORT in reason and rate:
        # Offline issues 1.1 x min_duration x target_qps samples: the fix is a config value.
        message += (
            f": its {detail.get('generated_samples_per_query', '?')} samples ran at {float(rate):.1f}/s and "
            f"took less than min_duration; set this Offline scenario's target_qps "
            f"(systems.<system>.benchmarks.<benchmark>.Offline.target_qps) to at least {float(rate):.0f} "
            f"(a higher value only makes the run longer), or to auto (the find-performance pass measures it), "
            f"and rerun it"
        )
    return message


@rule(
    "loadgen-valid",
    evidence=[
        cross_checked(DETAIL_LOG, "result_validity", "VALID is required (the flags it rests on: validity-evidence)")
    ],
)
def check_validity(ctx: TreeContext) -> list[Finding]:
    return [
        Finding("loadgen-valid", where, _invalid_message(detail))
        for result, detail, where in performance_logs(ctx)
        # The endpoints harness judges no validity (the official checker reads none there).
        if not result.is_endpoints and str(detail.get("result_validity", "")).upper() != "VALID"
    ]


@rule("loadgen-errors")
def check_loadgen_errors(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        for relative in (PERF, ACC):
            detail = result.detail(relative)
            if detail and detail["errors"]:
                findings.append(
                    Finding(
                        "loadgen-errors",
                        ctx.rel(result.log_path(relative)),
                        f"{len(detail['errors'])} LoadGen error(s): " + "; ".join(detail["errors"][:3]),
                    )
                )
    return findings


def _round_of_seeds(seeds: dict[str, Any]) -> str | None:
    """The known round whose seeds these are, if any (for a helpful message)."""
    for name in available_rounds():
        if all(str(seeds.get(k)) == str(v) for k, v in load_round(name).seeds.items()):
            return name
    return None


@rule(
    "seeds",
    evidence=[cross_checked(DETAIL_LOG, "effective_*_rng_seed", "the round's seeds (rules table loadgen.seeds)")],
)
def check_seeds(ctx: TreeContext) -> list[Finding]:
    """The seeds the log shows LoadGen used; the LoadGen version string is not judged
    (a release from before the round's last one may carry the same seeds)."""
    findings = []
    for result, detail, where in result_logs(ctx):
        found = {key: detail.get(f"effective_{key}") for key in ctx.rules.seeds}
        # The endpoints harness logs only its dataloader and scheduler seeds (no QSL seed).
        judged = result.endpoints.get("seeds", []) if result.is_endpoints else list(ctx.rules.seeds)
        wrong = [k for k, v in ctx.rules.seeds.items() if k in judged and (found[k] is None or str(found[k]) != str(v))]
        if not wrong:
            continue
        if detail.get("effective_test_mode") == "AccuracyOnly" and _round_of_seeds(found) is None:
            # An accuracy run scores every sample once whatever their order: a harness may
            # seed it otherwise (v5.1 Google's and NVIDIA's accuracy runs log 0). Another
            # round's seeds, though, are another LoadGen's.
            continue
        if result.is_endpoints:
            fields = result.endpoints.get("fields") or {}
            where_set = ", ".join(str(fields.get(f"effective_{k}", {}).get("config", k)) for k in wrong)
            findings.append(
                Finding(
                    "seeds",
                    where,
                    f"the endpoints harness ran with other seeds ({', '.join(f'{k}={found[k]}' for k in wrong)}); "
                    f"{ctx.rules.name} needs {', '.join(f'{k}={ctx.rules.seeds[k]}' for k in wrong)} "
                    f"(config.yaml {where_set})",
                )
            )
            continue
        other = _round_of_seeds(found)
        version = str(detail.get("loadgen_version", "")).split(" ")[0] or "?"
        test = re.search(r"/(TEST\d\d)/", where)
        run = f"the {test.group(1)} run's " if test else ""
        because = (
            f"{run}LoadGen {version} ran with the {other} seeds"
            if other
            else f"{run}LoadGen {version} ran with other seeds"
        )
        findings.append(
            Finding(
                "seeds",
                where,
                f"{because} ({', '.join(f'{k}={found[k]}' for k in wrong)}); {ctx.rules.name} needs "
                f"{', '.join(f'{k}={ctx.rules.seeds[k]}' for k in wrong)}: install {ctx.rules.loadgen_requirement} "
                "and rerun",
            )
        )
    return findings


# The LoadGen test mode each log of a result folder must come from.
TEST_MODES = {PERF: "PerformanceOnly", ACC: "AccuracyOnly"}


@rule(
    "test-mode",
    evidence=[cross_checked(DETAIL_LOG, "effective_test_mode", "the folder the log is in (performance/ or accuracy/)")],
)
def check_test_mode(ctx: TreeContext) -> list[Finding]:
    """performance/ holds a PerformanceOnly run and accuracy/ an AccuracyOnly one (an
    accuracy folder holding a performance run has not scored every sample once). The
    official checker does not look."""
    findings = []
    for result in ctx.results:
        for relative, mode in TEST_MODES.items():
            detail = result.detail(relative)
            found = (detail or {}).get("effective_test_mode")
            if found is not None and found != mode:
                findings.append(
                    Finding(
                        "test-mode",
                        ctx.rel(result.log_path(relative)),
                        f"the log is of a {found} run; this folder needs a run in {mode} mode",
                    )
                )
    return findings


@rule(
    "scenario-match",
    evidence=[
        cross_checked(DETAIL_LOG, "effective_scenario", "the scenario folder it is in (every log of the result)")
    ],
)
def check_scenario_match(ctx: TreeContext) -> list[Finding]:
    """Every log of a result was produced for its folder's scenario (Interactive = LoadGen
    Server): the performance run, the accuracy run and each compliance run. An accuracy
    folder copied in from another scenario scored that scenario's run."""
    findings = []
    for result in ctx.results:
        if result.scenario not in ctx.rules.scenario_folders:
            continue
        expected = ctx.rules.loadgen_scenario(result.scenario)
        allowed = [expected]
        if "edge" in ctx.system_type(result.system):
            allowed += (ctx.rules.data.get("inferred_scenarios") or {}).get("edge", {}).get(result.scenario, [])
        # An endpoints result's harness files, read under LoadGen's keys, stand for its run.
        logs = [(result.log_path(PERF), result.detail(PERF))] if result.detail(PERF) is not None else []
        logs = logs if result.is_endpoints else []
        logs += [(log.path, ctx.detail_at(log.path)) for log in run_logs(ctx, result) if not result.is_endpoints]
        for path, detail in logs:
            found = detail.get("effective_scenario")
            # (the performance run's log must say: log-records-present leaves it to this rule)
            if found not in allowed and (found is not None or path == result.log_path(PERF)):
                findings.append(
                    Finding(
                        "scenario-match",
                        ctx.rel(path),
                        f"the log is of a LoadGen {found} run; a {result.scenario} folder needs LoadGen {expected}",
                    )
                )
    return findings


@rule(
    "token-latencies",
    evidence=[cross_checked(DETAIL_LOG, "requested_use_token_latencies", "the round's table (use_token_latencies)")],
)
def check_token_latencies(ctx: TreeContext) -> list[Finding]:
    return [
        Finding("token-latencies", where, "use_token_latencies was not requested (LLM results report tokens)")
        for result, detail, where in performance_logs(ctx)
        if result.facts
        and not result.is_endpoints
        and result.facts.facts.get("use_token_latencies")
        and not detail.get("requested_use_token_latencies")
    ]


@rule(
    "run-length",
    evidence=[
        cross_checked(DETAIL_LOG, key, f"the round's table ({table})")
        for key, table in (
            ("effective_min_duration_ms", "min_duration_ms"),
            ("effective_performance_sample_count", "performance_sample_count"),
            ("effective_min_query_count", "min_query_count"),
            ("effective_samples_per_query", "offline_min_samples_per_query; scenarios.MultiStream.samples_per_query"),
        )
    ],
)
def check_run_length(ctx: TreeContext) -> list[Finding]:
    """The round's minimum duration, sample counts and Offline samples per query."""
    if ctx.test_scale:
        return []
    findings = []
    for result, detail, where in performance_logs(ctx):
        duration = number(detail.get("effective_min_duration_ms"))
        # A benchmark may set its own (e2e-rag runs one pass over its dataset: 0).
        minimum = int((result.facts.facts if result.facts else {}).get("min_duration_ms", ctx.rules.min_duration_ms))
        if duration is None or duration < minimum:
            findings.append(Finding("run-length", where, f"min_duration {plain(duration)} ms < {minimum} ms"))
        if result.facts is None or result.is_endpoints:
            # The harness has no performance sample count, query minimum or samples per
            # query (the official checker skips these for endpoints results).
            continue
        needed = result.facts.facts.get(
            "checker_min_performance_sample_count", result.facts.facts["performance_sample_count"]
        )
        found = number(detail.get("effective_performance_sample_count"))
        if found is None or found < needed:
            findings.append(Finding("run-length", where, f"performance_sample_count {plain(found)} < {needed}"))
        minimum_queries = (result.facts.facts.get("min_query_count") or {}).get(result.scenario)
        queries = number(detail.get("effective_min_query_count"))
        if (
            minimum_queries
            and not early_stopping(ctx, result.scenario)
            and queries is not None
            and queries < minimum_queries
        ):
            findings.append(Finding("run-length", where, f"min_query_count {plain(queries)} < {minimum_queries}"))
        if ctx.division != "open" and result.scenario == "Offline" and detail.get("effective_scenario") == "Offline":
            spq = number(detail.get("effective_samples_per_query"))
            minimum = result.facts.facts["offline_min_samples_per_query"]
            if spq is None or spq < minimum:
                findings.append(Finding("run-length", where, f"Offline samples_per_query {plain(spq)} < {minimum}"))
        per_query = (ctx.rules["scenarios"].get(result.scenario) or {}).get("samples_per_query")
        if per_query is not None and detail.get("effective_scenario") == ctx.rules.loadgen_scenario(result.scenario):
            spq = number(detail.get("effective_samples_per_query"))
            if spq != per_query:
                findings.append(
                    Finding(
                        "run-length",
                        where,
                        f"{result.scenario} samples_per_query {plain(spq)}; the round's is {per_query}",
                    )
                )
    return findings


def _run_folders(ctx: TreeContext, result: ScenarioResult) -> list[Path]:
    """Every folder of a result holding a summary and a detail log of one run (the
    performance and accuracy runs, the compliance runs), in the scenario folder and in its
    compliance folders where the layout keeps them elsewhere."""
    roots = [result.path]
    if result.compliance_path != result.path and result.facts is not None:
        roots += [result.compliance_path / test for test in result.facts.compliance_tests]
    found = []
    for root in roots:
        if ctx.files.is_file(root / SUMMARY_LOG) and ctx.files.is_file(root / DETAIL_LOG):
            found.append(root)
        for rel, entry in ctx.files.walk(root):
            if entry.kind == "file" and rel.endswith("/" + SUMMARY_LOG):
                folder = ctx.root / rel.rsplit("/", 1)[0]
                if ctx.files.is_file(folder / DETAIL_LOG):
                    found.append(folder)
    return sorted(set(found))


@rule("summary-detail", evidence=_SUMMARY_EVIDENCE)
def check_summary_detail(ctx: TreeContext) -> list[Finding]:
    """A run's mlperf_log_summary.txt and mlperf_log_detail.txt are written by one LoadGen
    process from the same numbers: every result and setting the summary prints that the
    detail log records too must agree, up to the printing precision of the two."""
    findings = []
    for result in ctx.results:
        for folder in _run_folders(ctx, result):
            summary, detail_path = folder / SUMMARY_LOG, folder / DETAIL_LOG
            detail = ctx.exact_detail(detail_path)
            text = ctx.files.read_text(summary)
            gaps = summary_gaps(text, folder.parent.name == "performance")
            if gaps:
                findings.append(
                    Finding(
                        "summary-detail",
                        ctx.rel(summary),
                        f"does not print {' or '.join(gaps)}: not LoadGen's summary of the run "
                        f"{ctx.rel(detail_path)} logs",
                    )
                )
            found = summary_disagreements(text, detail)
            if not found:
                continue
            shown = "; ".join(
                f"{d.label} {d.summary_value!r} where {DETAIL_LOG} has {d.key} = {as_logged(d.detail_value)!r}"
                for d in found[:4]
            )
            more = f" (and {len(found) - 4} more)" if len(found) > 4 else ""
            findings.append(
                Finding(
                    "summary-detail",
                    ctx.rel(summary),
                    f"disagrees with {ctx.rel(detail_path)}, the other log of the same run: {shown}{more}",
                )
            )
    return findings


@rule(
    "user-conf",
    evidence=[
        cross_checked(
            "user.conf",
            "<model>.<scenario>.<setting>",
            "the performance log's requested_* record of the setting; a warning: 23 of 32 published v6.0 "
            "submitters' harnesses set settings in code as well",
            severity="warning",
        ),
        cross_checked(
            DETAIL_LOG, "requested_*", "the result's user.conf (a warning, see user.conf)", severity="warning"
        ),
    ],
)
def check_user_conf(ctx: TreeContext) -> list[Finding]:
    """Every setting the result's user.conf gives the performance run (for the model name
    the round's mlperf.conf uses for this scenario, as LoadGen looks it up) against the
    value LoadGen logged as requested. A disagreement is a warning: harnesses set settings
    in code as well (23 of the 32 published v6.0 submitters' trees, the vendor's among them,
    hold a user.conf some run disagrees with), so the user.conf does not reproduce the run,
    but the run's own log is what the other rules judge."""
    findings = []
    for result, detail, where in performance_logs(ctx):
        conf = result.measure_path / "user.conf"
        if result.is_endpoints or result.facts is None or not ctx.files.is_file(conf):
            continue
        scenario = detail.get("requested_scenario") or detail.get("effective_scenario")
        if not isinstance(scenario, str):
            continue
        lines, problems = parse_conf(ctx.files.read_text(conf))
        findings.extend(
            Finding("user-conf", ctx.rel(conf), f"line {problem} (not a LoadGen setting line)", "warning")
            for problem in problems[:3]
        )
        model = _conf_model(result, lines)
        exact = ctx.exact_detail(result.log_path(PERF))
        for key, (line, expected) in requested_settings(lines, model, scenario).items():
            if key not in exact:
                continue
            printed = as_logged(expected) if isinstance(expected, bool) else repr(expected)
            if not values_agree(printed, exact[key]):
                findings.append(
                    Finding(
                        "user-conf",
                        ctx.rel(conf),
                        f"line {line.line_no} sets {line.model}.{line.scenario}.{line.key} = {line.value}, so LoadGen "
                        f"would log {key} = {as_logged(expected)}; {where} records {key} = {as_logged(exact[key])}: "
                        "the run did not use this user.conf (the harness set it otherwise)",
                        "warning",
                    )
                )
    return findings


def _conf_model(result: ScenarioResult, lines: list) -> str:
    """The LoadGen model name the run used: the round's for this scenario; where the
    user.conf names one other model only, that one (a harness passing its own name)."""
    try:
        model = result.facts.loadgen_model(result.scenario)
    except UserError:
        model = result.mlperf_benchmark
    named = {line.model for line in lines} - {"*"}
    return next(iter(named)) if model not in named and len(named) == 1 else model
