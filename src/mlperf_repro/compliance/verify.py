"""Verification of compliance runs.

TEST06 (LLM output consistency): the first token reported through FirstTokenComplete
equals the first token of the output (Server-like scenarios), at most one EOS ends each
output, and the reported token count equals the output length.
TEST07 (accuracy in performance mode): the accuracy of the sampled outputs reaches the
table's threshold. TEST09 (output length in performance mode): the mean output length lies
within the table's bounds. TEST04 (no result caching): the run with the same sample
repeated is not more than the table's factor faster than the normal performance run.

Each function returns a :class:`Verdict`; :func:`write_verdict` writes the verify file
the checker reads (its name comes from the rules table) and copies the compliance
accuracy log beside it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..loadgen_logs import read_detail


@dataclass
class Verdict:
    test: str
    passed: bool
    lines: list[str]
    details: dict


def _entries(accuracy_log: str | Path) -> list[dict]:
    path = Path(accuracy_log)
    if not path.is_file():
        raise UserError(f"{path} is missing: the compliance run did not log its samples")
    entries = json.loads(path.read_text())
    if not entries:
        raise UserError(f"{path} has no samples: was the audit.config applied (accuracy_log_sampling_target)?")
    return entries


def _tokens(hex_data: str, dtype) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(hex_data), dtype=dtype)


def trailing_eos(tokens: Iterable[int], eos_token_id: int) -> int:
    count = 0
    for token in reversed(list(tokens)):
        if token != eos_token_id:
            break
        count += 1
    return count


def test06_failures(entries: list[dict], scenario: str, eos_token_id: int | None, dtype=np.int32) -> dict:
    """TEST06's three checks on logged samples: qsl_idx of the samples that fail each
    (``first_token``: None where the scenario skips it (Offline); ``eos``: None without an
    EOS token id). The first token(s) reported through FirstTokenComplete must begin the
    output, at most one EOS may end it, and the token count must be the output's length.
    An entry whose data cannot be decoded fails every check it is in."""
    first_token_required = scenario != "Offline"
    first, eos, length = [], [], []
    for entry in entries:
        qsl = entry.get("qsl_idx") if isinstance(entry, dict) else None
        try:
            data = _tokens(str(entry["data"]), dtype)
            if first_token_required:
                reported = _tokens(str(entry.get("token_data", "")), dtype)
                if not np.array_equal(data[: len(reported)], reported[: len(data)]):
                    first.append(qsl)
            if eos_token_id is not None and trailing_eos(data, eos_token_id) > 1:
                eos.append(qsl)
            if len(data) != int(entry.get("token_count", -1)):
                length.append(qsl)
        except (KeyError, TypeError, ValueError):
            for failed, applies in ((first, first_token_required), (eos, eos_token_id is not None), (length, True)):
                if applies:
                    failed.append(qsl)
    return {
        "first_token": first if first_token_required else None,
        "eos": eos if eos_token_id is not None else None,
        "length": length,
    }


def test06_lines(failures: dict) -> dict[str, str]:
    """The verify file's check lines (label -> True/False/Skipped) for :func:`test06_failures`."""
    lines = {
        "First token check pass": "Skipped" if failures["first_token"] is None else str(not failures["first_token"]),
        "Sample length check pass": str(not failures["length"]),
    }
    if failures["eos"] is not None:
        lines["EOS check pass"] = str(not failures["eos"])
    return lines


def verify_test06(accuracy_log: str | Path, scenario: str, eos_token_id: int, dtype=np.int32) -> Verdict:
    entries = _entries(accuracy_log)
    failures = test06_failures(entries, scenario, eos_token_id, dtype)
    checks = test06_lines(failures)
    passed = not failures["first_token"] and not failures["eos"] and not failures["length"]
    lines = [
        f"First token check pass: {checks['First token check pass']}",
        f"EOS check pass: {checks['EOS check pass']}",
        f"Sample length check pass: {checks['Sample length check pass']}",
        "TEST06 verification complete" if passed else "TEST06 verification failed",
    ]
    details = {
        "samples": len(entries),
        "first_token_mismatch": (failures["first_token"] or [])[:20],
        "eos_failures": failures["eos"][:20],
        "length_failures": failures["length"][:20],
        "eos_token_id": eos_token_id,
    }
    return Verdict("TEST06", passed, lines, details)


def verify_test07(
    accuracy_log: str | Path,
    threshold: float,
    score: Callable[[Path], tuple[dict, str]],
    *,
    metric: str = "exact_match",
) -> Verdict:
    """``score(accuracy_log) -> (metrics, evaluator printout)`` is the benchmark's evaluator on
    the logged outputs of the whole compliance set; ``metrics[metric]`` must reach ``threshold``.

    The verify file is what the reference run_verification.py writes: the evaluator's
    printout, then a summary ending in TEST PASS or TEST FAIL."""
    entries = _entries(accuracy_log)
    metrics, printout = score(Path(accuracy_log))
    value = float(metrics[metric])
    passed = value >= threshold
    lines = printout.rstrip("\n").split("\n") + [
        "",
        "=" * 80,
        "TEST07 Verification Summary",
        "=" * 80,
        f"Accuracy score: {value}",
        f"Accuracy threshold: {threshold}",
        f"Accuracy check pass: {passed}",
        "TEST PASS" if passed else "TEST FAIL",
    ]
    details = {
        metric: value,
        "threshold": threshold,
        "logged_samples": len(entries),
        "metrics": {k: v for k, v in metrics.items() if k != metric},
    }
    return Verdict("TEST07", passed, lines, details)


def verify_test09(accuracy_log: str | Path, min_tokens: float, max_tokens: float, dtype=np.int32) -> Verdict:
    entries = _entries(accuracy_log)
    lengths = [len(_tokens(e["data"], dtype)) for e in entries]
    mean = float(np.mean(lengths))
    passed = min_tokens <= mean <= max_tokens
    lines = [
        f"Mean output tokens: {mean:.2f}",
        f"Allowed range: [{min_tokens}, {max_tokens}]",
        "TEST PASS" if passed else "TEST FAIL",
    ]
    return Verdict("TEST09", passed, lines, {"mean_output_tokens": mean, "samples": len(lengths)})


# The detail-log value TEST04 compares per scenario, and whether it is a latency (ns),
# compared as 1 / latency so that higher is always faster.
TEST04_SCORE = {
    "Offline": ("result_samples_per_second", False),
    "Server": ("result_completed_samples_per_sec", False),
    "SingleStream": ("early_stopping_latency_ss", True),
    "MultiStream": ("early_stopping_latency_ms", True),
}


def test04_score(detail: dict, scenario: str) -> float | None:
    """TEST04's score of a run (higher is faster) from its detail log's values; None where
    the log lacks the value (or it is not a positive number)."""
    key, is_latency = TEST04_SCORE.get(scenario, (None, False))
    try:
        value = float(detail[key])
    except (KeyError, TypeError, ValueError):
        return None
    if not value > 0 or value == float("inf"):
        return None
    return 1e9 / value if is_latency else value


def _test04_score(detail_path: str | Path, scenario: str) -> tuple[float, str]:
    detail = read_detail(detail_path)
    score = test04_score(detail, scenario)
    if score is None:
        raise UserError(f"{detail_path} has no {TEST04_SCORE[scenario][0]}: was it a {scenario} performance run?")
    return score, str(detail.get("result_validity"))


def verify_test04(reference_detail: str | Path, audit_detail: str | Path, scenario: str, max_speedup: float) -> Verdict:
    """TEST04: the run that issues one sample again and again must not be more than
    ``max_speedup`` times faster than the normal performance run (no result caching); both
    runs must be VALID."""
    reference, reference_validity = _test04_score(reference_detail, scenario)
    audited, audit_validity = _test04_score(audit_detail, scenario)
    speedup = audited / reference
    problems = [
        f"{name} results are {validity}"
        for name, validity in (("Reference", reference_validity), ("Test", audit_validity))
        if validity != "VALID"
    ]
    if speedup >= max_speedup:
        problems.append(f"the test run is {speedup:.4f}x the reference (limit {max_speedup})")
    passed = not problems
    lines = [
        f"reference score = {reference}",
        f"test score = {audited}",
        f"ratio = {speedup:.4f} (must be below {max_speedup})",
        "TEST PASS" if passed else "TEST FAIL: " + "; ".join(problems),
    ]
    return Verdict(
        "TEST04",
        passed,
        lines,
        {"speedup": speedup, "reference_score": reference, "test_score": audited, "max_speedup": max_speedup},
    )


def write_verdict(verdict: Verdict, out_dir: str | Path, verify_file: str, accuracy_log: str | Path | None) -> None:
    """``out_dir`` becomes the scenario's ``TEST0x/`` folder content; ``verify_file`` is the
    name the checker reads for this test (rules table: ``compliance_tests.<test>.verify_file``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / verify_file).write_text("\n".join(verdict.lines) + "\n")
    (out / "verdict.json").write_text(
        json.dumps({"test": verdict.test, "passed": verdict.passed, "details": verdict.details}, indent=2) + "\n"
    )
    if accuracy_log is not None:
        (out / "accuracy").mkdir(exist_ok=True)
        shutil.copyfile(accuracy_log, out / "accuracy" / "mlperf_log_accuracy.json")


def copy_performance_logs(run_dir: str | Path, out_dir: str | Path) -> None:
    """The compliance run's summary and detail logs into ``out_dir/performance/run_1/``."""
    dest = Path(out_dir) / "performance" / "run_1"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        source = Path(run_dir) / name
        if not source.is_file():
            raise UserError(f"{source} is missing: the compliance run did not finish")
        shutil.copyfile(source, dest / name)
