"""Compliance verify files against their own numbers and the round's thresholds.

Every verify file states a verdict beside the numbers it was computed from (the scores of
TEST01's and TEST04's two runs, TEST01's match counts, TEST07's score and threshold,
TEST08's counts, TEST09's mean output length and bounds). Published trees hold the
compliance runs' logs truncated or not at all, so ``compliance-evidence`` cannot always redo
a verdict from the logs; this module redoes it from the file's own numbers, as the
reference scripts (mlcommons/inference ``compliance/TEST0x``) compute it, and takes every
threshold from the round's table: a stated verdict its numbers contradict, a threshold that
is not the round's, or one figure printed twice with two values is an error.

The fields of each verify file are the patterns of :data:`VERIFY_FILES`; a field is read only
through :func:`read_verify` (which notes it for the evidence map).
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import UserError
from ..evidence import Record, cross_checked, derived, record_kind
from ..findings import Finding
from ..model import (
    ACC,
    PERF,
    TOKEN_RATES,
    ScenarioResult,
    TreeContext,
    issued_accuracy_samples,
    power_time,
    rule,
    run_logs,
)

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)"
_BOOL = r"(True|False|Skipped)"


@dataclass(frozen=True)
class VerifyFile:
    """A verify file's fields (name -> a pattern whose one group is the value; every line
    that matches is kept, in order) and how its verdict follows from them."""

    test: str
    name: str
    fields: dict[str, re.Pattern]

    @property
    def kind(self) -> str:
        return f"{self.test}/{self.name}"


def _fields(**patterns: str) -> dict[str, re.Pattern]:
    return {name: re.compile(rf"^\s*{pattern}\s*$", re.MULTILINE | re.IGNORECASE) for name, pattern in patterns.items()}


# "TEST PASS" / "TEST FAIL" (TEST FAIL may carry its reason after a colon).
_VERDICT = r"(TEST PASS|TEST FAIL)\b.*"

VERIFY_FILES = {
    ("TEST01", "verify_accuracy.txt"): VerifyFile(
        "TEST01",
        "verify_accuracy.txt",
        _fields(
            verdict=_VERDICT,
            num_acc_log_entries=rf"num_acc_log_entries\s*=\s*{_NUMBER}",
            num_acc_log_duplicate_keys=rf"num_acc_log_duplicate_keys\s*=\s*{_NUMBER}",
            num_acc_log_data_mismatch=rf"num_acc_log_data_mismatch\s*=\s*{_NUMBER}",
            num_perf_log_entries=rf"num_perf_log_entries\s*=\s*{_NUMBER}",
            num_perf_log_qsl_idx_match=rf"num_perf_log_qsl_idx_match\s*=\s*{_NUMBER}",
            num_perf_log_data_mismatch=rf"num_perf_log_data_mismatch\s*=\s*{_NUMBER}",
            num_missing_qsl_idxs=rf"num_missing_qsl_idxs\s*=\s*{_NUMBER}",
        ),
    ),
    ("TEST01", "verify_performance.txt"): VerifyFile(
        "TEST01",
        "verify_performance.txt",
        _fields(
            verdict=_VERDICT,
            reference_score=rf"Reference score\s*=\s*{_NUMBER}",
            test_score=rf"Test score\s*=\s*{_NUMBER}",
        ),
    ),
    ("TEST04", "verify_performance.txt"): VerifyFile(
        "TEST04",
        "verify_performance.txt",
        _fields(
            verdict=_VERDICT,
            reference_score=rf"reference score\s*=\s*{_NUMBER}",
            test_score=rf"test score\s*=\s*{_NUMBER}",
            ratio=rf"ratio\s*=\s*{_NUMBER}.*",
        ),
    ),
    ("TEST06", "verify_accuracy.txt"): VerifyFile(
        "TEST06",
        "verify_accuracy.txt",
        _fields(
            first_token_check=rf"First token check pass\s*:\s*{_BOOL}",
            eos_check=rf"EOS check pass\s*:\s*{_BOOL}",
            sample_length_check=rf"Sample length check pass\s*:\s*{_BOOL}",
        ),
    ),
    ("TEST07", "verify_accuracy.txt"): VerifyFile(
        "TEST07",
        "verify_accuracy.txt",
        _fields(
            verdict=_VERDICT,
            accuracy_score=rf"Accuracy score\s*:\s*{_NUMBER}",
            accuracy_threshold=rf"Accuracy threshold\s*:\s*{_NUMBER}",
            accuracy_check=rf"Accuracy check pass\s*:\s*{_BOOL}",
            printed_for_checker=rf"'exact_match'\s*:\s*{_NUMBER}",
            logged_entries=rf".*Loaded {_NUMBER} log entries",
            final_score=rf"FINAL SCORE\s*:\s*{_NUMBER}\s*%.*",
        ),
    ),
    ("TEST08", "verify_accuracy.txt"): VerifyFile(
        "TEST08",
        "verify_accuracy.txt",
        _fields(
            verdict=_VERDICT,
            num_acc_log_entries=rf"num_acc_log_entries\s*=\s*{_NUMBER}",
            num_perf_log_entries=rf"num_perf_log_entries\s*=\s*{_NUMBER}",
            num_matched=rf"num_matched\s*=\s*{_NUMBER}",
            num_unmatched=rf"num_unmatched\s*=\s*{_NUMBER}",
            num_ne_mismatch=rf"num_ne_mismatch\s*=\s*{_NUMBER}",
            tolerance=rf"tolerance\s*=\s*{_NUMBER}\s*%",
        ),
    ),
    ("TEST09", "verify_output_len.txt"): VerifyFile(
        "TEST09",
        "verify_output_len.txt",
        _fields(
            verdict=_VERDICT,
            total_samples=rf"Total samples\s*:\s*{_NUMBER}",
            mean_output_tokens=rf"Mean output tokens\s*:\s*{_NUMBER}",
            min_output_tokens=rf"Min output tokens\s*:\s*{_NUMBER}",
            max_output_tokens=rf"Max output tokens\s*:\s*{_NUMBER}",
            min_threshold=rf"Min threshold\s*:\s*{_NUMBER}.*",
            max_threshold=rf"Max threshold\s*:\s*{_NUMBER}.*",
            min_check=rf"Min check pass\s*:\s*{_BOOL}",
            max_check=rf"Max check pass\s*:\s*{_BOOL}",
            allowed_range=r"Allowed range\s*:\s*(\[.*\])",
        ),
    ),
}


# Lines every verify script prints besides its own numbers: the logs it loaded ("Sucessfully
# loaded MLPerf log from <path>.", "Loading MLPerf log from <path>") and its log lines' times.
_COMMON_FIELDS = _fields(
    loaded_log=r".*\bload(?:ed|ing)? MLPerf log from\s+(\S+?)\.?",
    logged_at=r"\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\b.*",
)
for _spec in VERIFY_FILES.values():
    _spec.fields.update(_COMMON_FIELDS)


def read_verify(spec: VerifyFile, text: str) -> Record:
    """The verify file's fields: name -> every value its pattern finds, in order."""
    values = {}
    for name, pattern in spec.fields.items():
        found = pattern.findall(text)
        if found:
            values[name] = found
    return Record(spec.kind, values)


def _float(value: str) -> float | None:
    try:
        result = float(value)
    except ValueError:
        return None
    return result if math.isfinite(result) else None


def _one(record: Record, name: str) -> float | None:
    """A numeric field printed once (or printed alike each time); None where absent or unreadable."""
    values = record.get(name) or []
    numbers = {_float(v) for v in values}
    return next(iter(numbers)) if len(numbers) == 1 else None


@dataclass
class _Check:
    """What one verify file's own numbers say: the failures they imply (why each), and the
    figures that disagree with the round's table or with themselves."""

    failures: list[str]
    problems: list[str]


def _close(a: float, b: float, digits: int = 2) -> bool:
    """Two printings of one figure agree to the digits the cruder one shows."""
    return abs(a - b) <= 0.5 * 10 ** (-digits) + 1e-9 * max(abs(a), abs(b))


def _test01_accuracy(record: Record, ctx: TreeContext, result: ScenarioResult, entry: dict) -> _Check:
    counts = {
        name: _one(record, name)
        for name in VERIFY_FILES[("TEST01", "verify_accuracy.txt")].fields
        if name != "verdict" and name not in _COMMON_FIELDS
    }
    failures, problems = [], []
    mismatch, match = counts["num_perf_log_data_mismatch"], counts["num_perf_log_qsl_idx_match"]
    if mismatch is not None and mismatch != 0:
        failures.append(f"num_perf_log_data_mismatch = {mismatch:g} (a pass needs 0)")
    if match is not None and match <= 0:
        failures.append(f"num_perf_log_qsl_idx_match = {match:g} (a pass needs at least one match)")
    entries, missing = counts["num_perf_log_entries"], counts["num_missing_qsl_idxs"]
    if None not in (entries, match, missing) and match + missing != entries:
        problems.append(
            f"num_perf_log_qsl_idx_match {match:g} + num_missing_qsl_idxs {missing:g} is not num_perf_log_entries "
            f"{entries:g} (each performance-log entry is either matched or missing)"
        )
    if None not in (match, mismatch) and mismatch > match:
        problems.append(f"num_perf_log_data_mismatch {mismatch:g} exceeds num_perf_log_qsl_idx_match {match:g}")
    duplicates, data_mismatch = counts["num_acc_log_duplicate_keys"], counts["num_acc_log_data_mismatch"]
    if None not in (duplicates, data_mismatch) and data_mismatch > duplicates:
        problems.append(
            f"num_acc_log_data_mismatch {data_mismatch:g} exceeds num_acc_log_duplicate_keys {duplicates:g}"
        )
    samples = result.facts.accuracy_sample_count(result.scenario) if result.facts else None
    total = counts["num_acc_log_entries"]
    if samples and total is not None and not ctx.test_scale and total - (duplicates or 0) > samples:
        problems.append(
            f"num_acc_log_entries {total:g} ({duplicates or 0:g} duplicates) is more than the {samples} samples of "
            f"{result.mlperf_benchmark}'s accuracy set"
        )
    # The script reads the result's accuracy log: its entries are the accuracy run's samples.
    issued = issued_accuracy_samples(result.detail(ACC))
    if isinstance(issued, int) and not isinstance(issued, bool) and total is not None and not ctx.test_scale:
        if total - (duplicates or 0) != issued:
            problems.append(
                f"num_acc_log_entries {total:g} ({duplicates or 0:g} duplicates), but the result's accuracy run "
                f"({ctx.rel(result.log_path(ACC))}) logged {issued} samples: it was checked against another log"
            )
    return _Check(failures, problems)


def _band_check(record: Record, ctx, result, entry, *, two_sided: bool) -> _Check:
    """TEST01's verify_performance.txt (the test run within the band around the reference) and
    TEST04's (the test run no faster than max_speedup times the reference)."""
    reference, test = _one(record, "reference_score"), _one(record, "test_score")
    if reference is None or test is None or reference <= 0:
        return _Check([], [])
    failures, problems = [], []
    scenario = (
        ctx.rules.loadgen_scenario(result.scenario)
        if result.scenario in ctx.rules.scenario_folders
        else result.scenario
    )
    if two_sided:
        band = entry.get("performance_band") or {}
        if not band:
            return _Check([], [])
        relaxed = (band.get("relaxed") or {}).get(scenario) or {}
        width = float(relaxed["band"]) if relaxed and reference <= float(relaxed["at_most"]) else float(band["band"])
        if not reference * (1 - width) <= test <= reference * (1 + width):
            failures.append(f"test score {test:g} is outside reference score {reference:g} +/- {width:.0%}")
    else:
        limit = (entry.get("max_speedup") or {}).get(scenario)
        if limit is None:
            return _Check([], [])
        if test >= reference * float(limit):
            failures.append(
                f"test score {test:g} is {test / reference:.4f}x reference score {reference:g} (below {limit})"
            )
        ratio = _one(record, "ratio")
        if ratio is not None and abs(ratio - test / reference) > 5e-5 + 1e-6 * ratio:
            problems.append(f"ratio = {ratio:g}, but test score / reference score = {test / reference:.4f}")
    return _Check(failures, problems)


def _test06(record: Record, ctx: TreeContext, result, entry) -> _Check:
    """No numbers beside the three checks (compliance judges the lines, compliance-evidence the
    samples); the reference script skips the first-token check in Offline only."""
    folders = ctx.rules.scenario_folders
    scenario = ctx.rules.loadgen_scenario(result.scenario) if result.scenario in folders else result.scenario
    if "Skipped" in (record.get("first_token_check") or []) and scenario != "Offline":
        return _Check(["First token check pass: Skipped, which the reference script writes for Offline only"], [])
    return _Check([], [])


def _test07(record: Record, ctx: TreeContext, result, entry) -> _Check:
    score, stated = _one(record, "accuracy_score"), _one(record, "accuracy_threshold")
    threshold = entry.get("accuracy_threshold")
    failures, problems = [], []
    if stated is not None and threshold is not None and stated != float(threshold):
        problems.append(f"states Accuracy threshold: {stated:g}; {ctx.rules.name} sets TEST07's at {threshold}")
    judged = float(threshold) if threshold is not None else stated
    if score is not None and judged is not None and score < judged:
        failures.append(f"Accuracy score {score:g} is below the threshold {judged:g}")
    checks = set(record.get("accuracy_check") or [])
    if score is not None and judged is not None and "True" in checks and score < judged:
        problems.append(f"says Accuracy check pass: True with a score {score:g} below {judged:g}")
    logged, needed = _one(record, "logged_entries"), (entry.get("audit_config") or {}).get("min_query_count")
    if logged is not None and needed and not ctx.test_scale and logged != float(needed):
        problems.append(
            f"scored {logged:g} logged entries; TEST07 runs every one of the {needed} compliance samples once"
        )
    # (Not "Overall raw accuracy": the final score weighs the datasets, and published files differ there.)
    for name, label in (("final_score", "FINAL SCORE"),):
        value = _one(record, name)
        if value is not None and score is not None and not _close(value, score, 2):
            problems.append(f"{label}: {value:g}%, but Accuracy score: {score:g}")
    printed = _one(record, "printed_for_checker")
    if printed is not None and score is not None and not _close(printed, score, 3):
        problems.append(f"prints 'exact_match': {printed:g} for the checker, but Accuracy score: {score:g}")
    return _Check(failures, problems)


def _test08(record: Record, ctx: TreeContext, result, entry) -> _Check:
    mismatch, matched, unmatched = (_one(record, n) for n in ("num_ne_mismatch", "num_matched", "num_unmatched"))
    failures, problems = [], []
    if mismatch is not None and mismatch != 0:
        failures.append(f"num_ne_mismatch = {mismatch:g} (a pass needs 0)")
    if matched is not None and matched <= 0:
        failures.append(f"num_matched = {matched:g} (a pass needs at least one)")
    if unmatched is not None and unmatched != 0:
        failures.append(f"num_unmatched = {unmatched:g} (a pass needs 0)")
    accuracy_entries = _one(record, "num_acc_log_entries")
    if None not in (accuracy_entries, matched) and matched > accuracy_entries:
        problems.append(f"num_matched {matched:g} is more than num_acc_log_entries {accuracy_entries:g}")
    entries = _one(record, "num_perf_log_entries")
    if None not in (entries, matched, unmatched) and matched + unmatched != entries:
        problems.append(
            f"num_matched {matched:g} + num_unmatched {unmatched:g} is not num_perf_log_entries {entries:g}"
        )
    tolerance, allowed = _one(record, "tolerance"), entry.get("tolerance_percent")
    if tolerance is not None and allowed is not None and not _close(tolerance, float(allowed)):
        problems.append(f"states tolerance = {tolerance:g}%; {ctx.rules.name} sets TEST08's at {allowed}%")
    return _Check(failures, problems)


def _test09(record: Record, ctx: TreeContext, result, entry) -> _Check:
    failures, problems = [], []
    means = {_float(v) for v in record.get("mean_output_tokens") or []}
    if len(means) > 1:
        problems.append(f"prints Mean output tokens {' and '.join(sorted(record['mean_output_tokens']))}")
    mean = _one(record, "mean_output_tokens")
    low, high = entry.get("min_output_tokens"), entry.get("max_output_tokens")
    stated_low, stated_high = _one(record, "min_threshold"), _one(record, "max_threshold")
    if not ctx.test_scale:
        # (A test-scale band is the round's scaled to the stand-in: compliance-evidence judges it.)
        for name, stated, own in (("Min threshold", stated_low, low), ("Max threshold", stated_high, high)):
            if stated is not None and own is not None and stated != float(own):
                problems.append(f"states {name}: {stated:g}; {ctx.rules.name} sets it at {own}")
    else:
        # At test scale the band is the stand-in's own (its "Allowed range", or Min/Max threshold
        # lines); compliance-evidence holds it to the round's proportions. No stated band: no verdict to redo.
        allowed = re.findall(rf"{_NUMBER}", (record.get("allowed_range") or [""])[0])
        if len(allowed) == 2:
            stated_low, stated_high = stated_low or _float(allowed[0]), stated_high or _float(allowed[1])
        low, high = stated_low, stated_high
    if mean is not None and low is not None and high is not None and not float(low) <= mean <= float(high):
        failures.append(f"Mean output tokens {mean:g} is outside [{low}, {high}]")
    for name, bound, ok in (
        ("Min check pass", low, lambda b: mean >= float(b)),
        ("Max check pass", high, lambda b: mean <= float(b)),
    ):
        said = record.get("min_check" if name.startswith("Min") else "max_check") or []
        if mean is not None and bound is not None and "True" in said and not ok(bound):
            problems.append(f"says {name}: True, but Mean output tokens {mean:g} is not within {bound}")
    shortest, longest = _one(record, "min_output_tokens"), _one(record, "max_output_tokens")
    if None not in (mean, shortest, longest) and not shortest - 0.005 <= mean <= longest + 0.005:
        problems.append(
            f"Mean output tokens {mean:g} is outside its own Min/Max output tokens [{shortest:g}, {longest:g}]"
        )
    total = _one(record, "total_samples")
    needed = (entry.get("audit_config") or {}).get("min_query_count")
    if total is not None and needed and not ctx.test_scale and total != float(needed):
        problems.append(f"Total samples: {total:g}; TEST09 runs every one of the {needed} samples once")
    return _Check(failures, problems)


def _test09_run(ctx: TreeContext, result: ScenarioResult, path: Path, record: Record) -> list[Finding]:
    """TEST09's run logs every sample once: its tokens per second over its samples per second is
    the mean output length the verify file states (within 1%, in all 56 published pairs)."""
    mean = _one(record, "mean_output_tokens")
    relatives = ("performance/run_1/mlperf_log_detail.txt", "mlperf_log_detail.txt")
    log = next((path.parent / r for r in relatives if ctx.files.is_file(path.parent / r)), None)
    if mean is None or log is None:
        return []
    findings = []
    own = _tokens_per_sample(ctx.exact_detail(log))
    if own is not None and abs(own[0] - mean) > 0.01 * max(abs(mean), 1e-9):
        findings.append(
            Finding(
                "verify-evidence",
                ctx.rel(path),
                f"states Mean output tokens {mean:g}, but its run {ctx.rel(log)} gives {own[1]} = "
                f"{own[0]:.2f} tokens per sample",
            )
        )
    perf = result.path / PERF
    scored = _tokens_per_sample(ctx.exact_detail(perf)) if ctx.files.is_file(perf) and not ctx.test_scale else None
    if scored is not None and abs(scored[0] / mean - 1) > TEST09_RESULT_TOLERANCE:
        findings.append(
            Finding(
                "verify-evidence",
                ctx.rel(perf),
                f"gives {scored[1]} = {scored[0]:.1f} tokens per sample, but TEST09 ({ctx.rel(path)}) measured "
                f"{mean:g} over the same performance set ({abs(scored[0] / mean - 1):.1%} apart, at most "
                f"{TEST09_RESULT_TOLERANCE:.0%}): the result's token rate is not its model's",
                severity="warning" if ctx.division == "open" else "error",
            )
        )
    return findings


# A verify file's clock and the run's may be in two time zones (published: up to 8 hours apart,
# NVIDIA's); a verification logged more than this before its run ended did not verify it.
VERIFY_CLOCK_SLACK_H = 14
_SCENARIO_NAMES = {"offline", "server", "singlestream", "multistream", "interactive"}


def _model_of(ctx: TreeContext, benchmark: str) -> str:
    try:
        return ctx.rules.benchmark(benchmark).loadgen_model("Offline")
    except (UserError, KeyError):
        return benchmark


def _other_model(ctx: TreeContext, result: ScenarioResult, loaded: str) -> str | None:
    """The benchmark a loaded log's path names by a folder (the round's name, its model
    mapping or the submitter's) where that is another model than the result's (llama2-70b-99's
    run may be -99.9's)."""
    names = ctx.rules.data["benchmarks"]
    mapping = {**(ctx.rules.data.get("model_mapping") or {}), **(ctx.model_mapping or {})}
    own = _model_of(ctx, result.mlperf_benchmark)
    for part in re.split(r"[/\\]", loaded):
        benchmark = part if part in names else mapping.get(part)
        if benchmark in names and _model_of(ctx, benchmark) != own:
            return benchmark
    return None


def _loaded_elsewhere(
    ctx: TreeContext, result: ScenarioResult, spec: VerifyFile, path: Path, record: Record
) -> list[Finding]:
    """The logs a verify file says it loaded are this result's scenario's (or one the round
    infers it from), and it was written after its run ended."""
    findings = []
    allowed = {result.scenario.lower()}
    inferred = (ctx.rules.data.get("inferred_scenarios") or {}).get("edge", {})
    if "edge" in ctx.system_type(result.system):
        allowed |= {s.lower() for s in inferred.get(result.scenario, [])}
        allowed |= {s.lower() for s, sources in inferred.items() if result.scenario in sources}
    for loaded in record.get("loaded_log") or []:
        other = _other_model(ctx, result, loaded)
        if other:
            findings.append(
                Finding(
                    "verify-evidence",
                    ctx.rel(path),
                    f"says it loaded {loaded}, a log of {other}, in the {result.mlperf_benchmark} result: it "
                    "verified another benchmark's run",
                )
            )
            break
        named = {part.lower() for part in re.split(r"[/\\]", loaded)} & _SCENARIO_NAMES
        if named and not named & allowed:
            findings.append(
                Finding(
                    "verify-evidence",
                    ctx.rel(path),
                    f"says it loaded {loaded}, a {'/'.join(sorted(named))} run's log, in the {result.scenario} "
                    "result: it verified another scenario's run",
                )
            )
            break
    stamps = record.get("logged_at") or []
    ended = [
        power_time(ctx.detail_at(log.path).get("power_end")) for log in run_logs(ctx, result) if log.test == spec.test
    ]
    ended = [t for t in ended if t is not None]
    if stamps and ended:
        try:
            written = datetime.datetime.strptime(stamps[0], "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return findings
        if written < max(ended) - datetime.timedelta(hours=VERIFY_CLOCK_SLACK_H):
            findings.append(
                Finding(
                    "verify-evidence",
                    ctx.rel(path),
                    f"was logged at {stamps[0]}, more than {VERIFY_CLOCK_SLACK_H} hours (any two time zones) before "
                    f"its {spec.test} run ended ({max(ended):%Y-%m-%d %H:%M:%S}): it verified an earlier run",
                )
            )
    return findings


# The result's performance run against TEST09's mean output length: both generate the round's
# performance set with one model (in the 56 published v6.0 pairs within 1.6%).
TEST09_RESULT_TOLERANCE = 0.03


def _tokens_per_sample(detail: dict) -> tuple[float, str] | None:
    """A run's token rate over its sample rate (its mean output length), and how it was had."""
    tokens, samples = TOKEN_RATES["Offline" if detail.get("effective_scenario") == "Offline" else "Server"]
    rate, count = _float(str(detail.get(tokens))), _float(str(detail.get(samples)))
    if rate is None or not count:
        return None
    return rate / count, f"{tokens} / {samples}"


# The lines every published verify file of a kind holds (all 1,641 of v6.0 and v5.1, bar six
# TEST01 verify_performance.txt files without a verdict, which compliance fails) and the
# workflow's own writer prints too: a line missing leaves its check nothing to judge.
REQUIRED_FIELDS = {
    ("TEST01", "verify_accuracy.txt"): tuple(
        f for f in VERIFY_FILES[("TEST01", "verify_accuracy.txt")].fields if f not in _COMMON_FIELDS
    ),
    ("TEST01", "verify_performance.txt"): ("verdict", "reference_score", "test_score"),
    ("TEST04", "verify_performance.txt"): ("verdict", "reference_score", "test_score"),
    ("TEST06", "verify_accuracy.txt"): ("first_token_check", "eos_check", "sample_length_check"),
    ("TEST07", "verify_accuracy.txt"): ("verdict", "accuracy_score", "accuracy_threshold", "accuracy_check"),
    ("TEST08", "verify_accuracy.txt"): tuple(
        f for f in VERIFY_FILES[("TEST08", "verify_accuracy.txt")].fields if f not in _COMMON_FIELDS
    ),
    ("TEST09", "verify_output_len.txt"): ("verdict", "mean_output_tokens"),
}
# A check line's own verdict (the reference writes True or False from the numbers beside it).
CHECK_LINES = {"accuracy_check": "Accuracy check pass", "min_check": "Min check pass", "max_check": "Max check pass"}


_REDO: dict[tuple[str, str], Callable[..., _Check]] = {
    ("TEST01", "verify_accuracy.txt"): _test01_accuracy,
    ("TEST01", "verify_performance.txt"): lambda r, c, res, e: _band_check(r, c, res, e, two_sided=True),
    ("TEST04", "verify_performance.txt"): lambda r, c, res, e: _band_check(r, c, res, e, two_sided=False),
    ("TEST06", "verify_accuracy.txt"): _test06,
    ("TEST07", "verify_accuracy.txt"): _test07,
    ("TEST08", "verify_accuracy.txt"): _test08,
    ("TEST09", "verify_output_len.txt"): _test09,
}


def _register_kinds() -> None:
    for (test, name), spec in VERIFY_FILES.items():
        record_kind(spec.kind, f"{test}/{name}", "text", f"{test}'s verify file: a verdict and the numbers it rests on")


_register_kinds()


_VERIFY = "the file's own numbers, as the reference script computes the verdict"
_ROUND = "the round's table (compliance_tests.{test}.{key})"

VERIFY_EVIDENCE = [
    derived(
        "TEST01/verify_accuracy.txt",
        "verdict",
        f"{_VERIFY}: a pass needs num_perf_log_data_mismatch 0 and num_perf_log_qsl_idx_match > 0",
    ),
    cross_checked(
        "TEST01/verify_accuracy.txt", "num_perf_log_entries", "num_perf_log_qsl_idx_match + num_missing_qsl_idxs"
    ),
    cross_checked(
        "TEST01/verify_accuracy.txt",
        "num_perf_log_qsl_idx_match",
        "num_perf_log_entries - num_missing_qsl_idxs; at least num_perf_log_data_mismatch",
    ),
    cross_checked(
        "TEST01/verify_accuracy.txt", "num_missing_qsl_idxs", "num_perf_log_entries - num_perf_log_qsl_idx_match"
    ),
    cross_checked(
        "TEST01/verify_accuracy.txt",
        "num_perf_log_data_mismatch",
        "the verdict (0 for a pass), at most num_perf_log_qsl_idx_match",
    ),
    cross_checked("TEST01/verify_accuracy.txt", "num_acc_log_data_mismatch", "at most num_acc_log_duplicate_keys"),
    cross_checked("TEST01/verify_accuracy.txt", "num_acc_log_duplicate_keys", "at least num_acc_log_data_mismatch"),
    cross_checked(
        "TEST01/verify_accuracy.txt",
        "num_acc_log_entries",
        "the round's accuracy sample count and the result's accuracy run's (plus the duplicates it counts)",
    ),
    derived(
        "TEST01/verify_performance.txt",
        "verdict",
        f"{_VERIFY}: test score within {_ROUND.format(test='TEST01', key='performance_band')} of the reference score",
    ),
    cross_checked(
        "TEST01/verify_performance.txt",
        "reference_score",
        "the performance run's detail log (compliance-evidence), and the verdict",
    ),
    cross_checked(
        "TEST01/verify_performance.txt",
        "test_score",
        "the TEST01 run's detail log (compliance-evidence), and the verdict",
    ),
    derived(
        "TEST04/verify_performance.txt",
        "verdict",
        f"{_VERIFY}: test score below {_ROUND.format(test='TEST04', key='max_speedup')} times the reference score",
    ),
    cross_checked(
        "TEST04/verify_performance.txt",
        "reference_score",
        "the performance run's detail log (compliance-evidence), and the verdict",
    ),
    cross_checked(
        "TEST04/verify_performance.txt",
        "test_score",
        "the TEST04 run's detail log (compliance-evidence), and the verdict",
    ),
    derived("TEST04/verify_performance.txt", "ratio", "test score / reference score"),
    derived(
        "TEST07/verify_accuracy.txt",
        "verdict",
        f"{_VERIFY}: Accuracy score at least {_ROUND.format(test='TEST07', key='accuracy_threshold')}",
    ),
    derived("TEST07/verify_accuracy.txt", "accuracy_check", "Accuracy score against the round's threshold"),
    cross_checked(
        "TEST07/verify_accuracy.txt", "accuracy_threshold", _ROUND.format(test="TEST07", key="accuracy_threshold")
    ),
    cross_checked(
        "TEST07/verify_accuracy.txt",
        "accuracy_score",
        "the score it prints for the checker ('exact_match'), and the verdict",
    ),
    cross_checked("TEST07/verify_accuracy.txt", "printed_for_checker", "Accuracy score (3 decimals)"),
    cross_checked("TEST07/verify_accuracy.txt", "final_score", "Accuracy score (2 decimals)"),
    cross_checked(
        "TEST06/verify_accuracy.txt", "first_token_check", "Skipped in Offline only, as the reference script writes it"
    ),
    cross_checked(
        "TEST07/verify_accuracy.txt", "logged_entries", _ROUND.format(test="TEST07", key="audit_config.min_query_count")
    ),
    derived("TEST08/verify_accuracy.txt", "verdict", f"{_VERIFY}: num_ne_mismatch 0, num_unmatched 0, num_matched > 0"),
    cross_checked("TEST08/verify_accuracy.txt", "num_ne_mismatch", "the verdict (0 for a pass)"),
    cross_checked("TEST08/verify_accuracy.txt", "num_matched", "num_perf_log_entries - num_unmatched, and the verdict"),
    cross_checked("TEST08/verify_accuracy.txt", "num_unmatched", "num_perf_log_entries - num_matched, and the verdict"),
    cross_checked("TEST08/verify_accuracy.txt", "num_perf_log_entries", "num_matched + num_unmatched"),
    cross_checked(
        "TEST08/verify_accuracy.txt", "num_acc_log_entries", "at least num_matched (every matched sample is in it)"
    ),
    cross_checked("TEST08/verify_accuracy.txt", "tolerance", _ROUND.format(test="TEST08", key="tolerance_percent")),
    derived(
        "TEST09/verify_output_len.txt",
        "verdict",
        f"{_VERIFY}: Mean output tokens within the round's [min_output_tokens, max_output_tokens]",
    ),
    derived("TEST09/verify_output_len.txt", "min_check", "Mean output tokens against the round's min_output_tokens"),
    derived("TEST09/verify_output_len.txt", "max_check", "Mean output tokens against the round's max_output_tokens"),
    cross_checked(
        "TEST09/verify_output_len.txt", "min_threshold", _ROUND.format(test="TEST09", key="min_output_tokens")
    ),
    cross_checked(
        "TEST09/verify_output_len.txt", "max_threshold", _ROUND.format(test="TEST09", key="max_output_tokens")
    ),
    cross_checked(
        "TEST09/verify_output_len.txt",
        "mean_output_tokens",
        "its other printing in the same file, its own Min/Max output tokens, the TEST09 accuracy log "
        "where whole (compliance-evidence), and the verdict",
    ),
    cross_checked("TEST09/verify_output_len.txt", "min_output_tokens", "at most Mean output tokens"),
    cross_checked("TEST09/verify_output_len.txt", "max_output_tokens", "at least Mean output tokens"),
    cross_checked(
        "TEST09/verify_output_len.txt",
        "mean_output_tokens",
        "the TEST09 run's tokens per second over its samples per second (within 1%); the result's own "
        "performance run's (within 3%, the same set and model; a warning in open)",
    ),
    cross_checked(
        "TEST09/verify_output_len.txt",
        "total_samples",
        _ROUND.format(test="TEST09", key="audit_config.min_query_count"),
    ),
]


VERIFY_EVIDENCE += [
    entry
    for spec in VERIFY_FILES.values()
    for entry in (
        cross_checked(
            spec.kind,
            "loaded_log",
            "the result's scenario: a path naming another scenario (one the round does not infer it from) "
            "is another run's log",
        ),
        cross_checked(
            spec.kind, "logged_at", f"its run's power_end: not more than {VERIFY_CLOCK_SLACK_H} hours before it"
        ),
    )
]


@rule("verify-evidence", evidence=VERIFY_EVIDENCE)
def check_verify_files(ctx: TreeContext) -> list[Finding]:
    """Each compliance verify file's verdict redone from its own numbers, with the round's
    thresholds; a threshold that is not the round's, and a figure that contradicts another
    of the same file, named with both values."""
    findings = []
    for result in ctx.results:
        if result.facts is None or result.is_endpoints:
            continue
        for test in result.facts.compliance_tests:
            folder = result.compliance_path / test
            entry = ctx.rules.compliance_test(test, result.facts.name)
            for (spec_test, name), spec in VERIFY_FILES.items():
                path = folder / name
                if spec_test != test or not ctx.files.is_file(path):
                    continue
                findings.extend(_judge(ctx, result, spec, path, entry))
    return findings


def _judge(ctx: TreeContext, result: ScenarioResult, spec: VerifyFile, path: Path, entry: dict) -> list[Finding]:
    record = read_verify(spec, ctx.files.read_text(path))
    check = _REDO[(spec.test, spec.name)](record, ctx, result, entry)
    where = ctx.rel(path)
    findings = [Finding("verify-evidence", where, problem) for problem in check.problems]
    missing = [name for name in REQUIRED_FIELDS.get((spec.test, spec.name), ()) if name not in record]
    if missing:
        findings.append(
            Finding(
                "verify-evidence",
                where,
                f"lacks the line(s) the reference script writes for {', '.join(missing)}: its verdict cannot be redone",
                # An unfinished test where compliance is optional (the open division,
                # where v5.1 open/HPE files one) claims nothing: a warning there.
                severity="error" if ctx.enforces_compliance else "warning",
            )
        )
    verdicts = record.get("verdict") if "verdict" in spec.fields else None
    stated = {v.upper().split(":")[0].strip() for v in verdicts or []}
    if stated == {"TEST PASS", "TEST FAIL"}:
        findings.append(Finding("verify-evidence", where, "states both TEST PASS and TEST FAIL"))
    if spec.test == "TEST09":
        findings.extend(_test09_run(ctx, result, path, record))
    findings.extend(_loaded_elsewhere(ctx, result, spec, path, record))
    failed_checks = [CHECK_LINES[n] for n in CHECK_LINES if n in spec.fields and "False" in (record.get(n) or [])]
    if failed_checks and "TEST PASS" in stated:
        findings.append(Finding("verify-evidence", where, f"says TEST PASS beside {', '.join(failed_checks)}: False"))
    if check.failures and ("TEST PASS" in stated or (spec.test == "TEST06" and not stated)):
        findings.append(
            Finding(
                "verify-evidence",
                where,
                "says TEST PASS, but its own numbers give a fail: " + "; ".join(check.failures),
            )
        )
    return findings
