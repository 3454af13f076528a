"""LoadGen conf files as a submitter wrote them (``user.conf``, ``mlperf.conf``).

Lines are ``<model>.<scenario>.<key> = <value>``; model and scenario may be ``*``. LoadGen
looks a key up as ``model.scenario``, then ``*.scenario``, then ``model.*``, then ``*.*``
and takes the first it finds (test_settings_internal.cc, FromConfig's lookup); a later
line for the same name replaces an earlier one.

:data:`REQUESTED_KEYS` says which ``requested_*`` record of the detail log shows the value
a user.conf key gave the run, and how LoadGen turned the text into it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError


@dataclass(frozen=True)
class ConfLine:
    model: str
    scenario: str
    key: str
    value: str
    line_no: int


def parse_conf(text: str, known_keys: list[str] | None = None) -> tuple[list[ConfLine], list[str]]:
    """Every setting line of a conf file's text, and a problem ("<line>: what") for each
    line that is none; with ``known_keys``, a key LoadGen does not read is a problem too
    (LoadGen itself would ignore it silently, so a typo would change nothing without a word)."""
    lines, problems = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        content = raw.split("#", 1)[0].strip()
        if not content:
            continue
        if "=" not in content:
            problems.append(f"{number}: {raw.strip()!r} is not a '<model>.<scenario>.<key> = <value>' line")
            continue
        name, value = (part.strip() for part in content.split("=", 1))
        parts = name.split(".")
        if len(parts) < 3:
            problems.append(f"{number}: {name!r} is not '<model>.<scenario>.<key>'")
            continue
        model, scenario, key = ".".join(parts[:-2]), parts[-2], parts[-1]
        if known_keys is not None and key not in known_keys:
            problems.append(
                f"{number}: {key!r} is not a key LoadGen reads (it would be ignored); known keys: "
                f"{', '.join(known_keys)}"
            )
            continue
        lines.append(ConfLine(model, scenario, key, value, number))
    return lines, problems


def read_conf(path: Path, known_keys: list[str] | None = None) -> list[ConfLine]:
    """Every setting line of a conf file; a line that is none is an error (see :func:`parse_conf`)."""
    lines, problems = parse_conf(path.read_text(errors="replace"), known_keys)
    if problems:
        raise UserError(f"{path}:{problems[0]}")
    return lines


def effective(lines: list[ConfLine], model: str, scenario: str) -> dict[str, ConfLine]:
    """key -> the line LoadGen applies to this model and scenario."""
    rank = {("*", "*"): 0, (model, "*"): 1, ("*", scenario): 2, (model, scenario): 3}
    chosen: dict[str, tuple[int, ConfLine]] = {}
    for line in lines:
        level = rank.get((line.model, line.scenario))
        if level is not None and level >= chosen.get(line.key, (-1, line))[0]:
            chosen[line.key] = (level, line)
    return {key: line for key, (_, line) in chosen.items()}


def number(value: str) -> int | float:
    """A conf value as LoadGen parses it (integers stay integers)."""
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            raise UserError(f"{value!r} is not a number") from None


# user.conf key -> (the scenario LoadGen looks it up under, None for the run's own; the
# detail log's requested_* key, per LoadGen scenario where only some log it; how LoadGen
# reads the text: "int" (strtoull), "float" (strtod), "bool" (any non-zero integer),
# "bool1" (only 1); the factor it multiplies by: milliseconds logged as nanoseconds, percent
# logged as a fraction). The seeds and accuracy_log_probability come from mlperf.conf only
# (a user.conf line for them changes nothing), so they are not here.
REQUESTED_KEYS: dict[str, tuple[str | None, dict[str, str] | str, str, float]] = {
    "target_qps": (
        None,
        {"Server": "requested_server_target_qps", "Offline": "requested_offline_expected_qps"},
        "float",
        1,
    ),
    "target_latency": (
        None,
        {
            "Server": "requested_server_target_latency_ns",
            "SingleStream": "requested_single_stream_expected_latency_ns",
            "MultiStream": "requested_multi_stream_expected_latency_ns",
        },
        "float",
        1e6,
    ),
    "target_latency_percentile": (
        None,
        {
            "Server": "requested_server_target_latency_percentile",
            "SingleStream": "requested_single_stream_target_latency_percentile",
            "MultiStream": "requested_multi_stream_target_latency_percentile",
        },
        "float",
        0.01,
    ),
    "samples_per_query": ("MultiStream", {"MultiStream": "requested_multi_stream_samples_per_query"}, "int", 1),
    "coalesce_queries": ("Server", {"Server": "requested_server_coalesce_queries"}, "bool", 1),
    "max_async_queries": ("Server", {"Server": "requested_server_max_async_queries"}, "int", 1),
    "min_duration": (None, "requested_min_duration_ms", "int", 1),
    "max_duration": (None, "requested_max_duration_ms", "int", 1),
    "min_query_count": (None, "requested_min_query_count", "int", 1),
    "max_query_count": (None, "requested_max_query_count", "int", 1),
    "performance_sample_count_override": (None, "requested_performance_sample_count_override", "int", 1),
    "accuracy_sample_count_override": (None, "requested_accuracy_sample_count_override", "int", 1),
    "print_timestamps": (None, "requested_print_timestamps", "bool", 1),
    "performance_issue_unique": (None, "requested_performance_issue_unique", "bool", 1),
    "performance_issue_same": (None, "requested_performance_issue_same", "bool", 1),
    "performance_issue_same_index": (None, "requested_performance_issue_same_index", "int", 1),
    "sample_concatenate_permutation": (None, "requested_sample_concatenate_permutation", "bool1", 1),
    "use_token_latencies": (None, "requested_use_token_latencies", "bool1", 1),
    "ttft_latency": ("Server", "requested_server_ttft_latency", "int", 1e6),
    "tpot_latency": ("Server", "requested_server_tpot_latency", "int", 1e6),
    "accuracy_log_rng_seed": (None, "requested_accuracy_log_rng_seed", "int", 1),
    "accuracy_log_sampling_target": (None, "requested_accuracy_log_sampling_target", "int", 1),
}
_INTEGER = re.compile(r"\s*[-+]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def conf_number(text: str, kind: str) -> int | float | bool | None:
    """A conf value as LoadGen reads it: C's strtoull (base 0: 0x hex, a leading 0 octal)
    or strtod on the text's start; None where nothing numeric starts it."""
    if kind == "float":
        match = _FLOAT.match(text)
        return float(match.group(0)) if match else None
    match = _INTEGER.match(text)
    if not match:
        return None
    digits = match.group(1)
    if digits[:2].lower() == "0x":
        value = int(digits, 16)
    else:
        value = int(digits, 8) if digits.startswith("0") and len(digits) > 1 else int(digits)
    if match.group(0).strip().startswith("-"):
        value = -value % 2**64  # strtoull wraps a negative number
    if kind == "bool":
        return value != 0
    if kind == "bool1":
        return value == 1
    return value


def requested_settings(lines: list[ConfLine], model: str, scenario: str) -> dict[str, tuple[ConfLine, Any]]:
    """The detail log's requested_* key -> (the user.conf line LoadGen applied, the value
    it then logs) for a run of ``model`` in LoadGen ``scenario``; only the keys a line sets
    and a run of that scenario logs."""
    out: dict[str, tuple[ConfLine, Any]] = {}
    for key, (lookup, logged, kind, factor) in REQUESTED_KEYS.items():
        target = logged.get(scenario) if isinstance(logged, dict) else logged
        line = effective([x for x in lines if x.key == key], model, lookup or scenario).get(key)
        if target is None or line is None:
            continue
        value = conf_number(line.value, kind)
        if value is None:
            continue
        if factor != 1 and not isinstance(value, bool):
            value = value * int(factor) if kind == "int" else value * factor
        out[target] = (line, value)
    return out
