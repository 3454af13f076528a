"""Compliance: each test's verdict files (as the official checker reads them), and the
verdicts redone from the compliance runs' logs where the tree holds them."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from ...benchmarks import Benchmark, Round
from ...compliance.verify import test04_score, test06_failures, test06_lines
from ...loadgen_logs import result_is_valid
from ..evidence import cross_checked, record_kind
from ..files import TreeFiles, files_of
from ..findings import Finding
from ..model import (
    ACCURACY_ENTRY,
    DETAIL_LOG,
    ENDPOINTS_RESULT,
    PERF,
    ScenarioResult,
    TreeContext,
    accuracy_entries,
    number,
    plain,
    rule,
    run_logs,
)

# A verify file passes with this line unless the round's table says otherwise.
DEFAULT_PASS_LINES = [["TEST PASS"]]


def compliance_passed(
    test: str, folder: Path, rules: Round, facts: Benchmark | None = None, files: TreeFiles | None = None
) -> tuple[bool, str]:
    """A compliance folder's verdict, from the table's test entry (for this benchmark):
    ``required_files`` exist, one of each ``required_one_of`` group, and each verify file (``verify_files``, or the one
    ``verify_file``) holds, for every group of ``pass_lines``, one of the group's lines. A
    verify_accuracy.txt that fails still passes where the entry has an accuracy fallback
    (TEST01: non-deterministic outputs) and the compliance run's accuracy is within
    ``max_accuracy_delta_percent`` of the baseline's."""
    files = files_of(folder, files)
    entry = rules.compliance_test(test, facts.name if facts else None)
    for relative in entry.get("required_files", []):
        if not files.is_file(folder / relative):
            return False, f"{relative} is missing"
    for group in entry.get("required_one_of", []):
        if not any(files.is_file(folder / relative) for relative in group):
            return False, f"keeps no log of its run ({' or '.join(group)}): the verdict rests on nothing in the tree"
    for name in entry.get("verify_files") or [entry["verify_file"]]:
        verify = folder / name
        if not files.is_file(verify):
            return False, f"{name} is missing"
        lines = {line.strip() for line in files.read_text(verify).splitlines()}
        groups = (entry.get("pass_lines") or {}).get(name, DEFAULT_PASS_LINES)
        for group in groups:
            if lines & set(group):
                continue
            if name == "verify_accuracy.txt" and entry.get("accuracy_fallback_files"):
                ok, why = _accuracy_fallback(folder, entry, facts, files)
                if ok:
                    break
                return False, f"{name} has no {' or '.join(repr(g) for g in group)} line and {why}"
            return False, f"{name} has no {' or '.join(repr(g) for g in group)} line"
    return True, ""


def _accuracy_fallback(folder: Path, entry: dict, facts: Benchmark | None, files: TreeFiles) -> tuple[bool, str]:
    """The compliance run's accuracy against the baseline's, metric by metric."""
    missing = [f for f in entry["accuracy_fallback_files"] if not files.is_file(folder / f)]
    if missing:
        return False, f"the accuracy fallback lacks {', '.join(missing)}"
    if facts is None:
        return False, "the benchmark is unknown, so the accuracy fallback cannot be judged"
    by_name = {Path(f).name: folder / f for f in entry["accuracy_fallback_files"]}
    baseline = facts.accuracy_values(files.read_text(by_name["baseline_accuracy.txt"]))
    compliance = facts.accuracy_values(files.read_text(by_name["compliance_accuracy.txt"]))
    limit = entry.get("max_accuracy_delta_percent", 1)
    for metric in facts.absolute_targets():
        base, seen = baseline.get(metric), compliance.get(metric)
        if not base or not seen:
            return False, f"baseline/compliance accuracy lack {metric}"
        allowed = limit.get(metric, 1) if isinstance(limit, dict) else limit
        delta = abs(1 - base / seen) * 100
        if delta > allowed:
            return False, f"{metric} differs by {delta:.3f}% from the baseline (at most {allowed}%)"
    return True, ""


record_kind(
    ENDPOINTS_RESULT,
    ("config.yaml", "result_summary.json", "accuracy_results.json"),
    "json",
    "an MLCommons endpoints-harness result, read under LoadGen's key names",
    trusted={
        "*": "the harness writes each fact once (no second record to compare); the seeds, run length, score and "
        "audits are judged against the round's table by the LoadGen rules"
    },
)
record_kind(
    "audit/<test>.json",
    "audit/audit_*.json",
    "json",
    "an endpoints result's compliance audit",
    trusted={"passed": "the harness's verdict: the audit's evidence is not in the tree"},
)


@rule(
    "compliance",
    evidence=[
        *(
            cross_checked(
                "TEST06/verify_accuracy.txt",
                check,
                "the round's pass lines; the samples of TEST06's accuracy log (compliance-evidence)",
            )
            for check in ("first_token_check", "eos_check", "sample_length_check")
        ),
        cross_checked("audit/<test>.json", "test", "the test its file name names"),
    ],
)
def check_compliance(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        if result.facts is None or (result.endpoints and not result.is_endpoints):
            continue  # (an endpoints result the round does not accept: required-files says so)
        if result.is_endpoints:
            findings.extend(_endpoints_compliance(ctx, result))
            continue
        for test in result.facts.compliance_tests:
            folder = result.compliance_path / test
            if not ctx.files.is_dir(folder):
                if ctx.enforces_compliance:
                    findings.append(
                        Finding("compliance", ctx.rel(folder), f"{test} is required in the {ctx.division} division")
                    )
                continue
            ok, why = compliance_passed(test, folder, ctx.rules, result.facts, ctx.files)
            if not ok:
                # Where compliance is optional (the open division) a failed test is
                # reported, but the result does not rest on it.
                severity = "error" if ctx.enforces_compliance else "warning"
                findings.append(Finding("compliance", ctx.rel(folder), f"{test} failed: {why}", severity=severity))
    return findings


def _endpoints_compliance(ctx: TreeContext, result: ScenarioResult) -> list[Finding]:
    """An endpoints result's audits: audit/audit_<name>.json for each of the benchmark's
    tests the harness audits, naming its test and passed; demanded only for the table's
    ``required_audits`` (in the divisions that enforce compliance). TEST09 is judged on
    the performance run's mean output length."""
    table = result.endpoints
    findings = []
    for test in result.facts.compliance_tests:
        name = (table.get("audit_files") or {}).get(test)
        if name:
            path = result.compliance_path / table.get("audit_folder", "audit") / name
            expected = name.removeprefix("audit_").removesuffix(".json")
            if not ctx.files.is_file(path):
                if test in table.get("required_audits", []) and ctx.enforces_compliance:
                    findings.append(Finding("compliance", ctx.rel(path), f"{test} ({expected}) is missing"))
                continue
            try:
                audit = ctx.read_json(path)
            except ValueError as exc:
                findings.append(Finding("compliance", ctx.rel(path), f"{test}: not valid JSON: {exc}"))
                continue
            if not isinstance(audit, dict) or audit.get("test") != expected:
                found = audit.get("test") if isinstance(audit, dict) else None
                findings.append(Finding("compliance", ctx.rel(path), f"{test}: names test {found!r}, not {expected!r}"))
            elif audit.get("passed") is not True:
                findings.append(Finding("compliance", ctx.rel(path), f"{test} ({expected}) did not pass"))
        entry = ctx.rules.compliance_test(test, result.facts.name)
        low, high = entry.get("min_output_tokens"), entry.get("max_output_tokens")
        detail = result.detail(PERF)
        if test == "TEST09" and low is not None and high is not None and detail is not None:
            mean = number(detail.get("mean_output_tokens"))
            if mean is None or not low <= mean <= high:
                findings.append(
                    Finding(
                        "compliance",
                        ctx.rel(result.log_path(PERF)),
                        f"TEST09: mean output length {plain(mean)} tokens is outside [{low}, {high}]",
                    )
                )
    return findings


ACCURACY_LOG = "mlperf_log_accuracy.json"
_SCORE_LINE = re.compile(r"^\s*(reference|test) score\s*=\s*(\S+)", re.IGNORECASE | re.MULTILINE)


_CHECK_LINE = re.compile(
    r"^\s*(First token check pass|EOS check pass|Sample length check pass)\s*:\s*(\S+)", re.MULTILINE
)


_MEAN_TOKENS = re.compile(r"^\s*Mean output tokens\s*:\s*([-+\d.eE]+)", re.MULTILINE)


# The dtypes the reference TEST06 script can decode outputs as (its --dtype): which one a
# submitter used is not recorded, so a verdict stands if one of them gives it.
TEST06_DTYPES = ("int32", "int64", "int16", "float32")


def _first_file(ctx: TreeContext, folder: Path, names: list[str]) -> Path | None:
    return next((folder / n for n in names if ctx.files.is_file(folder / n)), None)


def _compliance_detail(ctx: TreeContext, folder: Path) -> tuple[Path, dict] | None:
    path = _first_file(ctx, folder, [f"performance/run_1/{DETAIL_LOG}", DETAIL_LOG])
    return None if path is None else (path, ctx.detail_at(path))


def _verdict(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines()]
    if any(line.startswith("TEST FAIL") for line in lines):
        return "TEST FAIL"
    return "TEST PASS" if "TEST PASS" in lines else None


def _relative_gap(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


@rule(
    "compliance-evidence",
    evidence=[
        cross_checked(
            "TEST09/verify_output_len.txt", "allowed_range", "the round's band scaled by one factor (test scale)"
        ),
        cross_checked(DETAIL_LOG, "result_samples_per_second", "TEST01's and TEST04's verify files (Offline score)"),
        cross_checked(
            DETAIL_LOG, "result_completed_samples_per_sec", "TEST01's and TEST04's verify files (Server score)"
        ),
        cross_checked(
            DETAIL_LOG, "early_stopping_latency_*", "TEST01's and TEST04's verify files (SingleStream, MultiStream)"
        ),
        cross_checked(
            ACCURACY_LOG,
            "<entries>",
            "a compliance run's sampled answers: as many as its test's accuracy_log_sampling_target (the rules "
            "tables' audit.config) gives, less 5 standard deviations of LoadGen's sampling; no more than the run "
            "issued; each qsl_idx below its run's qsl_reported_total_count",
        ),
    ],
)
def check_compliance_evidence(ctx: TreeContext) -> list[Finding]:
    """Each compliance verdict redone from the logs in the tree, where they are there:
    TEST01's and TEST04's performance comparisons from the two runs' detail logs, TEST06's
    three checks and TEST09's mean output length from the compliance run's accuracy log.
    A verdict or a number the logs do not give is an error naming both files."""
    findings = []
    for result in ctx.results:
        if result.facts is None or result.is_endpoints:
            continue
        reference = result.detail(PERF)
        for test in result.facts.compliance_tests:
            folder = result.compliance_path / test
            if not ctx.files.is_dir(folder):
                continue
            entry = ctx.rules.compliance_test(test, result.facts.name)
            findings.extend(_sampled_log(ctx, folder, test, entry))
            redo = COMPLIANCE_EVIDENCE.get(test)
            if redo is not None:
                findings.extend(redo(ctx, result, folder, entry, reference))
    return findings


def _sampled_log(ctx: TreeContext, folder: Path, test: str, entry: dict) -> list[Finding]:
    """A compliance run's accuracy log against what LoadGen samples. With
    accuracy_log_sampling_target T, LoadGen logs each issued sample with probability T over
    the samples it expects (at least the audit.config's min_query_count), so a run logs
    about min(T, min_query_count) answers or more (binomially: published TEST06 logs hold 80
    to 109 for T = 100). Fewer than 5 standard deviations below that is a log cut short (or
    a run that returned no answers: the verdict rests on none); more than the run issued,
    or a qsl_idx outside its sample library, is the log of another run."""
    audit = entry.get("audit_config") or {}
    target = number(audit.get("accuracy_log_sampling_target"))
    log = _first_file(ctx, folder, ["accuracy/mlperf_log_accuracy.json", "mlperf_log_accuracy.json"])
    if not target or log is None or ctx.test_scale:
        return []  # (a test-scale stand-in samples from its own short runs)
    where = ctx.rel(log)
    run = _compliance_detail(ctx, folder)
    detail = run[1] if run else {}
    findings = []
    total = number(detail.get("qsl_reported_total_count"))
    if total is not None:
        outside = sorted(
            {int(q) for line in ctx.files.lines(log) for _seq, q in ACCURACY_ENTRY.findall(line) if int(q) >= total}
        )
        if outside:
            findings.append(
                Finding(
                    "compliance-evidence",
                    where,
                    f"logs qsl_idx {', '.join(map(str, outside[:5]))}, but the {test} run ({ctx.rel(run[0])}) "
                    f"loaded a sample library of {plain(total)}: the log is not of this run",
                )
            )
    entries = accuracy_entries(ctx, log)
    if entries is None:
        return findings  # (truncated: its count is not known)
    floor_queries = number(audit.get("min_query_count"))
    expected = min(target, floor_queries) if floor_queries else target
    issued = None
    queries, per_query = number(detail.get("generated_query_count")), number(detail.get("generated_samples_per_query"))
    if queries is not None and per_query is not None:
        issued = queries * per_query
        expected = min(expected, issued)
    least = math.floor(expected - 5 * math.sqrt(expected))
    if len(entries) < least:
        findings.append(
            Finding(
                "compliance-evidence",
                where,
                f"holds {len(entries)} sampled answer(s); a {test} run logs about {plain(expected)} "
                f"(accuracy_log_sampling_target {plain(target)}), and fewer than {least} is a log cut short or a run "
                "that returned no answers: its verdict rests on too few",
            )
        )
    elif issued is not None and len(entries) > issued:
        findings.append(
            Finding(
                "compliance-evidence",
                where,
                f"holds {len(entries)} answers, but the {test} run issued {plain(issued)} samples: it is not this "
                "run's log",
            )
        )
    return findings


def _performance_comparison(ctx, result, folder, reference, verify_name, check) -> list[Finding]:
    """A verify file comparing the compliance run's performance with the result's:
    its printed scores against the two detail logs, its verdict against ``check``."""
    verify = folder / verify_name
    audit = _compliance_detail(ctx, folder)
    if reference is None or audit is None or not ctx.files.is_file(verify):
        return []
    audit_path, audit_detail = audit
    scenario = reference.get("effective_scenario")
    text = ctx.files.read_text(verify)
    scores, passed, why = check(reference, audit_detail, scenario)
    if scores is None:
        return []
    where, reference_path = ctx.rel(verify), ctx.rel(result.log_path(PERF))
    findings = []
    for name, printed in _SCORE_LINE.findall(text):
        name = name.lower()
        source = reference_path if name == "reference" else ctx.rel(audit_path)
        try:
            value = float(printed)
        except ValueError:
            continue
        if _relative_gap(value, scores[name]) > 1e-4:
            findings.append(
                Finding(
                    "compliance-evidence",
                    where,
                    f"says {name} score = {printed}; {source} gives {scores[name]:.6g}",
                )
            )
    recorded = _verdict(text)
    if recorded == "TEST PASS" and not passed:
        findings.append(
            Finding(
                "compliance-evidence",
                where,
                f"says TEST PASS, but {reference_path} and {ctx.rel(audit_path)} give a fail: {why}",
            )
        )
    return findings


def _test04(ctx, result, folder, entry, reference) -> list[Finding]:
    limits = entry.get("max_speedup") or {}

    def check(ref, audit, scenario):
        ref_score, audit_score = test04_score(ref, str(scenario)), test04_score(audit, str(scenario))
        if ref_score is None or audit_score is None or scenario not in limits:
            return None, False, ""
        limit = float(limits[scenario])
        invalid = [n for n, d in (("the performance run", ref), ("the TEST04 run", audit)) if not result_is_valid(d)]
        ratio = audit_score / ref_score
        why = "; ".join(
            [f"{n} is not VALID" for n in invalid]
            + ([f"the TEST04 run is {ratio:.4f}x the performance run (at most {limit})"] if ratio >= limit else [])
        )
        return {"reference": ref_score, "test": audit_score}, not why, why

    return _performance_comparison(ctx, result, folder, reference, entry["verify_file"], check)


def _test01(ctx, result, folder, entry, reference) -> list[Finding]:
    band = entry.get("performance_band") or {}

    def check(ref, audit, scenario):
        key = (band.get("score_field") or {}).get(scenario)
        try:
            ref_score, audit_score = float(ref[key]), float(audit[key])
        except (KeyError, TypeError, ValueError):
            return None, False, ""
        relaxed = (band.get("relaxed") or {}).get(scenario) or {}
        width = float(relaxed["band"]) if relaxed and ref_score <= float(relaxed["at_most"]) else float(band["band"])
        invalid = [n for n, d in (("the performance run", ref), ("the TEST01 run", audit)) if not result_is_valid(d)]
        inside = ref_score * (1 - width) <= audit_score <= ref_score * (1 + width)
        why = "; ".join(
            [f"{n} is not VALID" for n in invalid]
            + (
                []
                if inside
                else [f"the TEST01 run's {key} {audit_score:.6g} is outside {ref_score:.6g} +/- {width:.0%}"]
            )
        )
        return {"reference": ref_score, "test": audit_score}, not why, why

    if not band:
        return []
    return _performance_comparison(ctx, result, folder, reference, "verify_performance.txt", check)


def _test06(ctx, result, folder, entry, reference) -> list[Finding]:
    verify = folder / entry["verify_file"]
    log = _first_file(ctx, folder, ["accuracy/mlperf_log_accuracy.json", "mlperf_log_accuracy.json"])
    if log is None or not ctx.files.is_file(verify):
        return []
    entries = accuracy_entries(ctx, log)
    recorded = dict(_CHECK_LINE.findall(ctx.files.read_text(verify)))
    if entries is None or not recorded:
        return []
    scenario = (
        ctx.rules.loadgen_scenario(result.scenario)
        if result.scenario in ctx.rules.scenario_folders
        else result.scenario
    )
    eos = result.facts.facts.get("eos_token_id")
    outcomes = []
    for dtype in TEST06_DTYPES:
        failures = test06_failures(entries, scenario, eos, getattr(np, dtype))
        derived = test06_lines(failures)
        # A check the verify file passes that the samples fail (a failed one fails `compliance`).
        differing = {k: (v, derived[k]) for k, v in recorded.items() if v == "True" and derived.get(k) == "False"}
        if not differing:
            return []
        outcomes.append((dtype, differing, failures))
    dtype, differing, failures = outcomes[0]
    shown = "; ".join(f"'{k}: {v}' where the samples give {d}" for k, (v, d) in differing.items())
    failing = {"First token check pass": "first_token", "EOS check pass": "eos", "Sample length check pass": "length"}
    samples = sorted({q for k in differing for q in (failures[failing[k]] or [])}, key=str)[:5]
    return [
        Finding(
            "compliance-evidence",
            ctx.rel(verify),
            f"{shown} (checked again on the {len(entries)} samples of {ctx.rel(log)}, decoded as {dtype} or any "
            f"dtype the reference script takes; qsl_idx {samples})",
        )
    ]


def _test09(ctx, result, folder, entry, reference) -> list[Finding]:
    verify = folder / entry["verify_file"]
    log = _first_file(ctx, folder, ["accuracy/mlperf_log_accuracy.json", "mlperf_log_accuracy.json"])
    if log is None or not ctx.files.is_file(verify):
        return []
    entries = accuracy_entries(ctx, log)
    if not entries:
        return []
    try:
        lengths = [len(bytes.fromhex(str(e["data"]))) // 4 for e in entries]
    except (KeyError, ValueError):
        return []
    mean = sum(lengths) / len(lengths)
    text = ctx.files.read_text(verify)
    findings = []
    for printed in _MEAN_TOKENS.findall(text)[:1]:
        try:
            if abs(float(printed) - mean) > 0.006:
                findings.append(
                    Finding(
                        "compliance-evidence",
                        ctx.rel(verify),
                        f"says mean output tokens {printed}; the {len(entries)} samples of {ctx.rel(log)} give {mean:.2f}",
                    )
                )
        except ValueError:
            pass
    low, high = entry.get("min_output_tokens"), entry.get("max_output_tokens")
    if ctx.test_scale and low is not None and high is not None:
        # A test-scale stand-in is judged on the round's band scaled to its own performance
        # run's mean length (stages.compliance); that mean is in no file of the tree, but the
        # scaled band must keep the round's proportions.
        scaled = _scaled_band(text, low, high)
        if isinstance(scaled, str):
            return [*findings, Finding("compliance-evidence", ctx.rel(verify), scaled)]
        low, high = scaled
    if _verdict(text) == "TEST PASS" and low is not None and high is not None and not low <= mean <= high:
        findings.append(
            Finding(
                "compliance-evidence",
                ctx.rel(verify),
                f"says TEST PASS, but the samples of {ctx.rel(log)} average {mean:.2f} tokens, outside [{low}, {high}]",
            )
        )
    return findings


_ALLOWED_RANGE = re.compile(r"^\s*Allowed range\s*:\s*\[\s*([-+\d.eE]+)\s*,\s*([-+\d.eE]+)\s*\]", re.MULTILINE)


def _scaled_band(text: str, low: float, high: float) -> tuple[float, float] | str:
    """The band a test-scale TEST09 verify file states (``Allowed range: [a, b]``), if it is
    the round's band [low, high] scaled by one factor (each bound printed to 2 decimals);
    otherwise what is wrong with it."""
    found = _ALLOWED_RANGE.search(text)
    if found is None:
        return "a test-scale TEST09 verify file without its 'Allowed range: [low, high]' line"
    try:
        a, b = float(found.group(1)), float(found.group(2))
    except ValueError:
        return f"unreadable allowed range [{found.group(1)}, {found.group(2)}]"
    factor = b / high if high else 0.0
    finite = math.isfinite(a) and math.isfinite(b)
    if not finite or not 0 < a <= b or factor <= 0 or abs(a - low * factor) > 0.011:
        return f"allowed range [{a}, {b}] is not the round's band [{low}, {high}] scaled by one factor"
    return a, b


# The compliance tests whose verdict the tree holds the evidence for.
COMPLIANCE_EVIDENCE = {"TEST01": _test01, "TEST04": _test04, "TEST06": _test06, "TEST09": _test09}


# How a compliance run's log shows each key of its test's audit.config (LoadGen logs what it
# ran with as effective_*), and what the log must then hold: the mode a test runs in, the
# seed that picks the samples it logs and the issue pattern it audits exactly; at least the
# samples and queries the test needs (more only audits more); a min_duration of 0 is the
# floor lifted, which a longer run does not undo. The thresholds (test07_*, test09_*) are
# the verifier's, not LoadGen's, and are not logged.
_TEST_MODES = {0: "SubmissionRun", 1: "AccuracyOnly", 2: "PerformanceOnly", 3: "FindPeakPerformance"}
AUDIT_RECORDS = {
    "mode": ("effective_test_mode", "equal"),
    "accuracy_log_rng_seed": ("effective_accuracy_log_rng_seed", "equal"),
    "accuracy_log_sampling_target": ("effective_accuracy_log_sampling_target", "at_least"),
    # requested_: in Offline LoadGen runs one query (effective_min_query_count 1) of at least
    # the requested count of samples.
    "min_query_count": ("requested_min_query_count", "at_least"),
    "performance_issue_same": ("effective_performance_issue_same", "equal"),
    "performance_issue_same_index": ("effective_performance_issue_same_index", "equal"),
    "performance_issue_unique": ("effective_performance_issue_unique", "equal"),
    "sample_concatenate_permutation": ("effective_sample_concatenate_permutation", "equal"),
}


_FLAGS = ("performance_issue_same", "performance_issue_unique", "sample_concatenate_permutation")


def _as_logged(key: str, value):
    if key == "mode":
        return _TEST_MODES.get(value, value)
    return bool(value) if key in _FLAGS and isinstance(value, int) else value


@rule(
    "audit-settings",
    evidence=[
        cross_checked(DETAIL_LOG, record, f"a compliance run's: its test's audit.config ({key}, {how})")
        for key, (record, how) in AUDIT_RECORDS.items()
        # (requested_min_query_count is held in compliance runs only: its map entry is trusted,
        # as a performance run's request may be raised by LoadGen)
        if record not in ("effective_test_mode", "requested_min_query_count")
    ]
    + [cross_checked(DETAIL_LOG, "effective_test_mode", "a compliance run's: PerformanceOnly (audit.config mode 2)")],
)
def check_audit_settings(ctx: TreeContext) -> list[Finding]:
    """Each compliance run's log shows the audit.config of its test, as the round's table
    holds it: a TEST04 folder holding a copy of the performance run, or TEST09's folder
    holding TEST07's run, has the settings of another run."""
    findings = []
    for result in ctx.results:
        if result.facts is None or result.is_endpoints:
            continue
        for log in run_logs(ctx, result):
            if log.test not in result.facts.compliance_tests:
                continue
            entry = ctx.rules.compliance_test(log.test, result.facts.name)
            unchecked = set(entry.get("audit_config_unchecked") or ())
            detail = ctx.detail_at(log.path)
            wrong = []
            for key, wanted in (entry.get("audit_config") or {}).items():
                if key not in AUDIT_RECORDS or key in unchecked:
                    continue
                record, how = AUDIT_RECORDS[key]
                if record not in detail:
                    continue  # an old LoadGen's log; log-records-present judges the result's own runs
                found, want = detail[record], _as_logged(key, wanted)
                value = number(found) if how == "at_least" else None
                if how == "at_least" and (value is None or value < want):
                    wrong.append(f"{record} = {json.dumps(found)} (audit.config {key} = {wanted}: at least that)")
                elif how == "equal" and found != want:
                    wrong.append(f"{record} = {json.dumps(found)} (audit.config {key} = {wanted})")
            if wrong:
                findings.append(
                    Finding(
                        "audit-settings",
                        ctx.rel(log.path),
                        f"is not a {log.test} run: " + "; ".join(wrong[:4]) + f" ({ctx.rules.name}'s {log.test})",
                    )
                )
    return findings
