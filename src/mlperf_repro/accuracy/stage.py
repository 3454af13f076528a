"""The evaluate stage: score an accuracy run and judge it against its target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import UserError


def judge(metrics: dict[str, Any], targets: dict[str, Any], reference: dict[str, Any] | None) -> dict[str, Any]:
    """Compare metrics with their targets.

    ``targets`` comes from :meth:`Plan.accuracy_targets`: either absolute thresholds from
    the round table, or a fraction of a measured reference (the unquantized model's score).
    """
    if targets["kind"] == "measured":
        if reference is None:
            raise UserError("accuracy_target 'measured' needs the reference accuracy run's result")
        minimums = {m: reference["metrics"][m] * targets["fraction"] for m in targets["metrics"]}
        maximums: dict[str, float] = {}
    else:
        minimums = dict(targets["targets"])
        maximums = dict(targets.get("upper_bounds", {}))
    checks = []
    for metric, minimum in minimums.items():
        value = metrics[metric]
        checks.append({"metric": metric, "value": value, "minimum": round(minimum, 4), "passed": value >= minimum})
    for metric, maximum in maximums.items():
        value = metrics[metric]
        checks.append({"metric": metric, "value": value, "maximum": round(maximum, 4), "passed": value <= maximum})
    return {"kind": targets["kind"], "checks": checks, "passed": all(c["passed"] for c in checks)}


def load_tokenizer(model_dir: str):
    """The tokenizer as the reference evaluation loads it (slow when one exists)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_dir, model_max_length=2048, padding_side="left", use_fast=False)
    except (ValueError, OSError, TypeError):
        # Tokenizers that exist only as tokenizer.json (the demo's byte-level BPE).
        return AutoTokenizer.from_pretrained(model_dir, model_max_length=2048, padding_side="left")


def accuracy_job(
    *,
    run_dir: str,
    dataset_file: str,
    tokenizer_dir: str,
    evaluator: str,
    targets: dict[str, Any],
    reference_path: str | None,
    out_txt: str,
    out_json: str,
) -> dict[str, Any]:
    if evaluator != "llama2-rouge":
        raise UserError(f"evaluator '{evaluator}' is not implemented yet")
    from ..harness.dataset import load_token_dataset
    from .llama2 import evaluate_llama2, format_accuracy_txt

    log = Path(run_dir) / "mlperf_log_accuracy.json"
    if not log.is_file():
        raise UserError(f"{log} is missing: the accuracy run did not write its log")
    dataset = load_token_dataset(dataset_file)
    metrics = evaluate_llama2(log, dataset.references, load_tokenizer(tokenizer_dir), dtype="int32")
    reference = json.loads(Path(reference_path).read_text()) if reference_path else None
    verdict = judge(metrics, targets, reference)
    Path(out_txt).parent.mkdir(parents=True, exist_ok=True)
    Path(out_txt).write_text(format_accuracy_txt(metrics))
    record = {"metrics": metrics, "verdict": verdict,
              "reference_metrics": reference["metrics"] if reference else None}
    Path(out_json).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record
