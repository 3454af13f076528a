"""Results of the MLCommons endpoints harness, read as LoadGen logs.

Since v6.1 a scenario folder of some benchmarks (the round table's ``endpoints.benchmarks``)
may hold what the endpoints harness writes instead of LoadGen's logs: ``config.yaml`` (the
resolved run configuration), ``performance/result_summary.json`` and
``accuracy/accuracy_results.json``. :func:`read_endpoints` turns one part of such a folder
into the dict :func:`mlperf_repro.loadgen_logs.read_detail` gives for a LoadGen detail log
(LoadGen's key names, an ``errors`` and a ``warnings`` list), so the checker's rules read
both alike. Which harness field stands for which LoadGen key is data: the table's
``endpoints.fields``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..loadgen_logs import finite_number
from .files import TreeFiles, UnreadableFile, files_of

# The part of a scenario folder -> the harness's JSON of that part.
PART_FILES = {
    "performance": "performance/result_summary.json",
    "accuracy": "accuracy/accuracy_results.json",
}
# LoadGen's detail logs: a folder holding either is a LoadGen result.
LOADGEN_DETAIL_LOGS = ("performance/run_1/mlperf_log_detail.txt", "accuracy/mlperf_log_detail.txt")


def endpoints_files(folder: Path, table: dict[str, Any], files: TreeFiles | None = None) -> list[str]:
    """The harness's files (``detect_files``) present in a scenario folder."""
    files = files_of(folder, files)
    return [name for name in table.get("detect_files", []) if files.is_file(folder / name)]


def is_endpoints_folder(folder: Path, table: dict[str, Any] | None, files: TreeFiles | None = None) -> bool:
    """The folder holds an endpoints-harness result: the round accepts them, no LoadGen
    detail log is there and at least one of the harness's files is (the official checker
    reads a folder without LoadGen logs as an endpoints result)."""
    if not table:
        return False
    files = files_of(folder, files)
    if any(files.is_file(folder / name) for name in LOADGEN_DETAIL_LOGS):
        return False
    return bool(endpoints_files(folder, table, files))


def get_path(data: Any, dotted: str) -> Any:
    """The value at a dotted path; a key that itself holds dots ("99.9") is one step, the
    longest matching key winning, and a number-like step matches a key of the same number
    ("99.0" finds "99"). None when absent or an empty dict/list."""
    parts = dotted.split(".")
    current = data
    i = 0
    while i < len(parts):
        if not isinstance(current, dict):
            return None
        for j in range(len(parts), i, -1):
            key = _find_key(current, ".".join(parts[i:j]))
            if key is not None:
                current = current[key]
                i = j
                break
        else:
            return None
    if isinstance(current, (dict, list)) and not current:
        return None
    return current


def _find_key(mapping: dict, candidate: str) -> Any:
    if candidate in mapping:
        return candidate
    try:
        number = float(candidate)
    except ValueError:
        return None
    for key in mapping:
        try:
            if float(key) == number:
                return key
        except (TypeError, ValueError):
            continue
    return None


def _paths(spec: Any) -> list[str]:
    if spec is None:
        return []
    return [spec] if isinstance(spec, str) else list(spec)


def _load_json(path: Path, errors: list[str], name: str, files: TreeFiles) -> dict:
    try:
        data = json.loads(files.read_bytes(path).decode("utf-8"))
    except (UnreadableFile, UnicodeDecodeError, ValueError, RecursionError) as exc:
        errors.append(f"{name} cannot be read: {exc}")
        return {}
    if not isinstance(data, dict):
        errors.append(f"{name} is not a JSON object")
        return {}
    return data


def load_config(
    folder: Path, table: dict[str, Any], errors: list[str] | None = None, files: TreeFiles | None = None
) -> dict:
    """The scenario folder's config.yaml (or config.yml) parsed; {} if absent or unreadable."""
    files = files_of(folder, files)
    for name in table.get("config_files", ["config.yaml"]):
        path = folder / name
        if files.is_file(path):
            try:
                data = yaml.safe_load(files.read_bytes(path).decode("utf-8"))
            except (UnreadableFile, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as exc:
                if errors is not None:
                    errors.append(f"{name} cannot be read: {exc}")
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def endpoints_scenario(config: dict, table: dict[str, Any], scenario_folder: str) -> str | None:
    """The LoadGen scenario of the run: the folder's own for ``folder_scenarios``, else the
    harness's test type (``submission`` runs give theirs in ``benchmark_mode``)."""
    if scenario_folder in table.get("folder_scenarios", []):
        return scenario_folder
    kinds = {str(k).lower(): v for k, v in (table.get("scenario_of_type") or {}).items()}
    for value in (config.get("type"), config.get("benchmark_mode")):
        if value is not None and str(value).lower() in kinds:
            return kinds[str(value).lower()]
    value = config.get("type")
    return None if value is None else str(value)


def accuracy_entries(results: dict) -> list[dict]:
    """accuracy_results.json's entries of the accuracy datasets (not the perf-scored one)."""
    entries = results.get("accuracy_scores")
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and e.get("dataset_type", "accuracy") == "accuracy"]


def accuracy_sample_count(results: dict) -> int | None:
    """Samples the accuracy run scored: each accuracy entry's total_samples (else its
    response_counts.issued), summed over the datasets."""
    counts = []
    for entry in accuracy_entries(results):
        responses = entry.get("response_counts") if isinstance(entry.get("response_counts"), dict) else {}
        for value in (entry.get("total_samples"), responses.get("issued")):
            number = finite_number(value)
            if number is not None and number.is_integer():
                counts.append(int(number))
                break
    return sum(counts) if counts else None


def read_endpoints(
    folder: str | Path, part: str, table: dict[str, Any], scenario_folder: str, files: TreeFiles | None = None
) -> dict[str, Any] | None:
    """One part ("performance" or "accuracy") of an endpoints scenario folder as a LoadGen
    detail log's dict; None when the part's JSON is absent.

    ``effective_scenario`` is a LoadGen scenario name (``endpoints_test_type`` keeps the
    harness's own); the rate a LoadGen log would carry is derived from the issued count and
    the duration when the harness gives none; failed samples are ``errors``; the accuracy
    part adds ``effective_accuracy_sample_count``, ``accuracy_score`` (the first entry's
    score) and ``accuracy_scores`` (every entry's)."""
    folder = Path(folder)
    files = files_of(folder, files)
    path = folder / PART_FILES[part]
    if not files.is_file(path):
        return None
    errors: list[str] = []
    data = _load_json(path, errors, PART_FILES[part], files)
    config = load_config(folder, table, errors, files)
    values: dict[str, Any] = {}
    for key, spec in (table.get("fields") or {}).items():
        for source, where in (("json", data), ("config", config)):
            found = next(
                (v for v in (get_path(where, p) for p in _paths((spec or {}).get(source))) if v is not None), None
            )
            if found is not None:
                values[key] = found
                break
    for key, source in (table.get("inferred_fields") or {}).items():
        if key not in values and values.get(source) is not None:
            values[key] = values[source]
    if "effective_scenario" in values:
        values["endpoints_test_type"] = values["effective_scenario"]
    scenario = endpoints_scenario(config, table, scenario_folder)
    if scenario is not None:
        values["effective_scenario"] = scenario
    count, duration = values.get("generated_query_count"), values.get("generated_query_duration")
    if part == "performance" and scenario and count and duration:
        # LoadGen's Offline rate is samples/s, the online ones completed samples/s.
        rate_key = "result_samples_per_second" if scenario == "Offline" else "result_completed_samples_per_sec"
        try:
            values.setdefault(rate_key, float(count) / (float(duration) / 1e9))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            pass
    if part == "accuracy":
        count = accuracy_sample_count(data)
        if count is not None:
            values["effective_accuracy_sample_count"] = count
            values.setdefault("qsl_reported_total_count", count)
        entries = data.get("accuracy_scores")
        scores = [e.get("score") for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
        scores = [s for s in scores if s is not None]
        values["accuracy_scores"] = scores
        values["accuracy_score"] = scores[0] if scores else None
    failed = values.get("num_errors")
    try:
        if failed is not None and int(failed) > 0:
            errors.append(f"{PART_FILES[part]}: {int(failed)} sample(s) failed (n_samples_failed)")
    except (TypeError, ValueError, OverflowError):
        pass
    values["errors"] = errors
    values["warnings"] = []
    return values


def score_readings(score: Any, reading: dict[str, Any] | None, metrics: list[str]) -> dict[str, float]:
    """The table's accuracy metrics an endpoints score gives: a number is the ``metric``
    the benchmark's ``accuracy_score`` entry names; a dict is read by the metrics' names
    (case-insensitively). {} when the benchmark's reading is unknown (``reading`` None)."""
    if reading is None or score is None:
        return {}
    if isinstance(score, dict):
        lowered = {str(k).lower(): v for k, v in score.items()}
        found = {m: finite_number(lowered.get(m.lower())) for m in metrics}
        metric = reading.get("metric")
        if metric and found.get(metric) is None:
            found[metric] = finite_number(lowered.get("score", lowered.get("accuracy")))
        return {m: v for m, v in found.items() if v is not None}
    value = finite_number(score)
    metric = reading.get("metric")
    return {metric: value} if metric and value is not None else {}
