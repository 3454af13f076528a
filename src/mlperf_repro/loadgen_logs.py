"""Read LoadGen's output: ``mlperf_log_detail.txt`` (``:::MLLOG`` JSON lines) and
``mlperf_log_summary.txt``. Used by the checker, the accuracy stage, packaging and reports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

MLLOG_PREFIX = ":::MLLOG"


def _key_of(line: str) -> str | None:
    """The record's key without parsing the JSON (LoadGen writes ``{"key": "<name>", ...``)."""
    start = line.find('"key": "')
    if start < 0:
        return None
    start += 8
    end = line.find('"', start)
    return line[start:end] if end > start else None


def read_detail(path: str | Path, keys: frozenset[str] | set[str] | None = None) -> dict[str, Any]:
    """Key -> value of every MLLOG record (the last one wins), plus ``errors``/``warnings`` lists.

    Streams the file: detail logs of long runs are large. With ``keys``, only those records
    (and every error or warning) are parsed, which makes reading thousands of logs fast.
    """
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.startswith(MLLOG_PREFIX):
                continue
            if keys is not None and _key_of(line) not in keys and '": true' not in line:
                continue
            try:
                record = json.loads(line[len(MLLOG_PREFIX) :])
            except json.JSONDecodeError:
                continue
            key = record.get("key")
            value = record.get("value")
            if (
                key == "error_invalid_config"
                or key == "error_invalid_test_settings"
                or record.get("metadata", {}).get("is_error")
            ):
                errors.append(f"{key}: {value}")
            elif record.get("metadata", {}).get("is_warning"):
                warnings.append(f"{key}: {value}")
            values[key] = value
    values["errors"] = errors
    values["warnings"] = warnings
    return values


_SUMMARY_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


def read_summary(path: str | Path) -> dict[str, str]:
    """The 'key : value' lines of the summary, as written (first occurrence wins)."""
    values: dict[str, str] = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        match = _SUMMARY_LINE.match(line)
        if match and match.group(1) not in values:
            values[match.group(1)] = match.group(2)
    return values


def result_is_valid(detail: dict[str, Any]) -> bool:
    return str(detail.get("result_validity", "")).upper() == "VALID"
