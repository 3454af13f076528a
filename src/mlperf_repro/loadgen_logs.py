"""Read LoadGen's output: ``mlperf_log_detail.txt`` (``:::MLLOG`` JSON lines) and
``mlperf_log_summary.txt``. Used by the checker, the accuracy stage, packaging and reports.

Both logs are written by one LoadGen run from the same numbers, so every figure the summary
prints that the detail log records too must agree, up to the printing precision of each
(:func:`summary_disagreements`; which summary line records which detail key is
:data:`SUMMARY_KEYS`, from LoadGen's results.cc and test_settings_internal.cc).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

MLLOG_PREFIX = ":::MLLOG"


def record_key(line: str) -> str | None:
    """The record's key without parsing the JSON (LoadGen writes ``{"key": "<name>", ...``)."""
    start = line.find('"key": "')
    if start < 0:
        return None
    start += 8
    end = line.find('"', start)
    return line[start:end] if end > start else None


def _lines(source: str | Path | Iterable[str]) -> Iterable[str]:
    if isinstance(source, (str, Path)):
        with open(source, encoding="utf-8", errors="replace") as handle:
            yield from handle
    else:
        yield from source


def read_detail(
    source: str | Path | Iterable[str],
    keys: frozenset[str] | set[str] | Callable[[str | None], bool] | None = None,
    *,
    exact: bool = False,
) -> dict[str, Any]:
    """Key -> value of every MLLOG record (the last one wins), plus ``errors``/``warnings`` lists.

    ``source`` is the log's path or its lines. Streams the file: detail logs of long runs
    are large. With ``keys`` (a set, or a test of the key), only those records (and every
    error or warning) are parsed, which makes reading thousands of logs fast. With ``exact``, numbers with a fraction or
    an exponent are :class:`~decimal.Decimal` as written (their printing precision kept).
    A line that is not a well-formed record is skipped.
    """
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    parse_float = Decimal if exact else float
    wanted = keys if callable(keys) or keys is None else keys.__contains__
    for line in _lines(source):
        if not line.startswith(MLLOG_PREFIX):
            continue
        if wanted is not None and not wanted(record_key(line)) and '": true' not in line:
            continue
        try:
            record = json.loads(line[len(MLLOG_PREFIX) :], parse_float=parse_float)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict) or not isinstance(record.get("key"), str):
            continue
        key = record["key"]
        value = record.get("value")
        metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
        if key == "error_invalid_config" or key == "error_invalid_test_settings" or metadata.get("is_error") is True:
            errors.append(f"{key}: {value}")
        elif metadata.get("is_warning") is True:
            warnings.append(f"{key}: {value}")
        values[key] = value
    values["errors"] = errors
    values["warnings"] = warnings
    return values


_SUMMARY_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


def parse_summary(text: str) -> dict[str, str]:
    """The 'key : value' lines of a summary's text, as written (first occurrence wins)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _SUMMARY_LINE.match(line)
        if match and match.group(1) not in values:
            values[match.group(1)] = match.group(2)
    return values


def finite_number(value: Any) -> float | None:
    """A logged value as a number; None where it is none (absent, text, a container, a bool,
    or not finite: LoadGen logs no inf or NaN, and an integer past float's range is none too,
    so the checker's rules report such a value as missing)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return result if math.isfinite(result) else None


def read_summary(path: str | Path) -> dict[str, str]:
    """The 'key : value' lines of the summary, as written (first occurrence wins)."""
    return parse_summary(Path(path).read_text(errors="replace"))


def result_is_valid(detail: dict[str, Any]) -> bool:
    return str(detail.get("result_validity", "")).upper() == "VALID"


# -- the summary against the detail log ---------------------------------------------------------

# Summary label -> the detail key LoadGen logs the same figure under. Not compared: "TPS w/o
# loadgen overhead" (the detail's result_token_throughput divides by nanoseconds, not
# seconds) and the recommendations' free text.
SUMMARY_KEYS = {
    "SUT name": "sut_name",
    "Scenario": "effective_scenario",
    "Mode": "effective_test_mode",
    "Completed samples per second": "result_completed_samples_per_sec",
    "Samples per second": "result_samples_per_second",
    "Tokens per second": "result_tokens_per_second",
    "Completed tokens per second": "result_completed_tokens_per_second",
    "Tokens per second (inferred)": "result_inferred_tokens_per_second",
    "Completed tokens per second (inferred)": "result_inferred_completed_tokens_per_second",
    "Result is": "result_validity",
    "Performance constraints satisfied": "result_perf_constraints_met",
    "Min duration satisfied": "result_min_duration_met",
    "Min queries satisfied": "result_min_queries_met",
    "Early stopping satisfied": "early_stopping_met",
    "QPS w/ loadgen overhead": "result_qps_with_loadgen_overhead",
    "QPS w/o loadgen overhead": "result_qps_without_loadgen_overhead",
    "Scheduled samples per second": "result_scheduled_samples_per_sec",
    "Min latency (ns)": "result_min_latency_ns",
    "Max latency (ns)": "result_max_latency_ns",
    "Mean latency (ns)": "result_mean_latency_ns",
    "TPS w/ loadgen overhead": "result_token_throughput_with_loadgen_overhead",
    "Min First Token latency (ns)": "result_first_token_min_latency_ns",
    "Max First Token latency (ns)": "result_first_token_max_latency_ns",
    "Mean First Token latency (ns)": "result_first_token_mean_latency_ns",
    "Min Time per Output Token (ns)": "result_time_to_output_token_min",
    "Max Time per Output Token (ns)": "result_time_to_output_token_max",
    "Mean Time per Output Token (ns)": "result_time_to_output_token_mean",
    # Test Parameters Used (the settings the run used; the token limits are logged as requested)
    "samples_per_query": "effective_samples_per_query",
    "target_qps": "effective_target_qps",
    "target_latency (ns)": "effective_target_latency_ns",
    "ttft_latency (ns)": "requested_server_ttft_latency",
    "tpot_latency (ns)": "requested_server_tpot_latency",
    "max_async_queries": "effective_max_async_queries",
    "min_duration (ms)": "effective_min_duration_ms",
    "max_duration (ms)": "effective_max_duration_ms",
    "min_query_count": "effective_min_query_count",
    "max_query_count": "effective_max_query_count",
    "qsl_rng_seed": "effective_qsl_rng_seed",
    "sample_index_rng_seed": "effective_sample_index_rng_seed",
    "schedule_rng_seed": "effective_schedule_rng_seed",
    "accuracy_log_rng_seed": "effective_accuracy_log_rng_seed",
    "accuracy_log_probability": "effective_accuracy_log_probability",
    "accuracy_log_sampling_target": "effective_accuracy_log_sampling_target",
    "print_timestamps": "effective_print_timestamps",
    "performance_issue_unique": "effective_performance_issue_unique",
    "performance_issue_same": "effective_performance_issue_same",
    "performance_issue_same_index": "effective_performance_issue_same_index",
    "performance_sample_count": "effective_performance_sample_count",
    "accuracy_sample_count": "effective_accuracy_sample_count",
}
# A MultiStream summary prints per-query latencies where the others print per-sample ones.
MULTISTREAM_KEYS = {
    "Min latency (ns)": "result_min_query_latency_ns",
    "Max latency (ns)": "result_max_query_latency_ns",
    "Mean latency (ns)": "result_mean_query_latency_ns",
}
# Percentile lines: label pattern -> detail key template ({p}: the percentile as LoadGen
# writes it in keys, two decimals).
SUMMARY_PATTERNS = (
    (re.compile(r"^(\d+(?:\.\d+)?) percentile latency \(ns\)$"), "result_{p}_percentile_latency_ns"),
    (
        re.compile(r"^(\d+(?:\.\d+)?) percentile first token latency \(ns\)$"),
        "result_first_token_{p}_percentile_latency_ns",
    ),
    (
        re.compile(r"^(\d+(?:\.\d+)?) percentile time to output token \(ns\)$"),
        "result_time_per_output_token_{p}_percentile_ns",
    ),
    # The target percentile's latency at the top of a SingleStream / MultiStream summary.
    (re.compile(r"^(\d+(?:\.\d+)?)th percentile latency \(ns\)$"), "result_{p}_percentile_latency_ns"),
    (
        re.compile(r"^(\d+(?:\.\d+)?)th first token percentile latency \(ns\)$"),
        "result_first_token_{p}_percentile_latency_ns",
    ),
)
MULTISTREAM_PATTERN_KEY = "result_{p}_percentile_per_query_latency_ns"
# The early-stopping recommendation lines (" * ...") the detail log repeats in one record.
EARLY_STOPPING_BLOCKS = {
    "Early Stopping Result": "early_stopping_result",
    "TTFT Early Stopping Result": "early_stopping_ttft_result",
    "TPOT Early Stopping Result": "early_stopping_tpot_result",
}
# The error count (not the warnings': LoadGen counts warnings it logs after the detail log
# is written, e.g. its own "Logging allocation detected", so published pairs differ there).
_ERROR_COUNT = re.compile(r"^(No|\d+) (?:errors|ERRORS?) encountered", re.MULTILINE)
_YES_NO = {"yes": True, "no": False}


# The records a summary repeats (read_detail's keys= for summary_disagreements).
SUMMARY_RECORD_PREFIXES = ("result_", "effective_", "requested_", "early_stopping", "num_errors", "sut_name")


def summary_record(key: str | None) -> bool:
    return key is not None and key.startswith(SUMMARY_RECORD_PREFIXES)


@dataclass(frozen=True)
class Disagreement:
    label: str  # as the summary prints it
    summary_value: str
    key: str  # the detail log's
    detail_value: Any


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


# LoadGen prints a double with 6 significant digits ("1.01638e+06", "3629.98", "3650") or
# with 2 decimals (DoubleToString), and an integer setting or count in full.
DOUBLE_DIGITS = 6


def _unit(number: Decimal) -> Decimal:
    """The value of the last digit printed: 0.01 for "3591.83", 10 for "1.01638e+06". A number
    printed without a fraction ("3650", "0") may be a double rounded to 6 significant digits
    (its unit is that of the 6th digit) or an integer printed in full (exact: 0)."""
    sign, digits, exponent = number.as_tuple()
    if not isinstance(exponent, int):
        return Decimal(0)
    if exponent != 0:
        return Decimal(1).scaleb(exponent)
    significant = len(digits) - next((i for i, d in enumerate(digits) if d), len(digits))
    return Decimal(1).scaleb(max(significant, 1) - DOUBLE_DIGITS) if significant <= DOUBLE_DIGITS else Decimal(0)


def values_agree(printed: str, logged: Any) -> bool:
    """A summary value against the detail's, up to the printing precision of both."""
    if isinstance(logged, bool):
        text = printed.strip().lower()
        if text in _YES_NO:
            return _YES_NO[text] == logged
        return text in ("0", "1", "true", "false") and (text in ("1", "true")) == logged
    shown, recorded = _decimal(printed), _decimal(logged)
    if shown is not None and recorded is not None:
        allowed = (_unit(shown) + _unit(recorded)) / 2
        return abs(shown - recorded) <= allowed * (1 + Decimal("1e-9"))
    return printed.strip() == str(logged).strip()


def _percentile_key(template: str, percentile: str) -> str:
    return template.format(p=f"{float(percentile):.2f}")


def summary_key(label: str, scenario: str | None) -> str | None:
    """The detail key recording what a summary line (its label as printed) shows, if any."""
    label = label.strip().lstrip("*").strip()
    if scenario == "MultiStream" and label in MULTISTREAM_KEYS:
        return MULTISTREAM_KEYS[label]
    if label in SUMMARY_KEYS:
        return SUMMARY_KEYS[label]
    for pattern, template in SUMMARY_PATTERNS:
        match = pattern.match(label)
        if match:
            if scenario == "MultiStream" and template == "result_{p}_percentile_latency_ns":
                template = MULTISTREAM_PATTERN_KEY
            return _percentile_key(template, match.group(1))
    return None


def _early_stopping_lines(text: str) -> dict[str, list[str]]:
    """The summary's early-stopping blocks: header -> its " * ..." lines."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        header = line.strip().rstrip(":")
        if header in EARLY_STOPPING_BLOCKS and line.strip().endswith(":"):
            current = header
            blocks[current] = []
        elif current and line.startswith(" * "):
            blocks[current].append(line.strip())
        elif current and blocks[current] and line.startswith(" ") and line.strip():
            blocks[current][-1] += " " + line.strip()  # a line LoadGen wrapped
        else:
            current = None
    return blocks


def _words(text: str) -> str:
    return " ".join(str(text).split())


def summary_gaps(summary_text: str, performance: bool) -> list[str]:
    """What every LoadGen summary prints and this one lacks: the error count, and in a
    performance run's summary the result line (a summary without them is not LoadGen's)."""
    gaps = [] if _ERROR_COUNT.search(summary_text) else ["the error count"]
    if performance and "Result is" not in parse_summary(summary_text):
        gaps.append("the run's result ('Result is : ...')")
    return gaps


def summary_disagreements(summary_text: str, detail: dict[str, Any]) -> list[Disagreement]:
    """Every figure the summary prints that the detail log (read with ``exact=True``) also
    records and that disagrees with it beyond the printing precision of the two; also the
    early-stopping verdict lines and the error count."""
    scenario = detail.get("effective_scenario")
    scenario = scenario if isinstance(scenario, str) else None
    found = []
    for label, printed in parse_summary(summary_text).items():
        key = summary_key(label, scenario)
        if key is None or key not in detail:
            continue
        if not values_agree(printed, detail[key]):
            found.append(Disagreement(label, printed, key, detail[key]))
    for header, lines in _early_stopping_lines(summary_text).items():
        key = EARLY_STOPPING_BLOCKS[header]
        if key in detail and _words(" ".join(lines)) != _words(detail[key]):
            found.append(Disagreement(header, " ".join(lines), key, detail[key]))
    for number in _ERROR_COUNT.findall(summary_text):
        printed = 0 if number == "No" else int(number)
        key = "num_errors" if isinstance(detail.get("num_errors"), int) else "errors"
        logged = detail["num_errors"] if key == "num_errors" else len(detail.get("errors") or [])
        if printed != logged:
            found.append(Disagreement("errors encountered", number, key, logged))
    return found
