"""The evaluate stage: score an accuracy run with its task's evaluator (looked up in the task
registry) and judge it against its target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import progress
from ..accuracy.loadgen_log import read_accuracy_log
from ..accuracy.open_accuracy import DIGITS, format_open_accuracy
from ..errors import UserError
from ..tasks import find_evaluator


def judge(metrics: dict[str, Any], targets: dict[str, Any], reference: dict[str, Any] | None) -> dict[str, Any]:
    """Compare metrics with their targets.

    ``targets`` comes from :meth:`Plan.accuracy_targets`: either absolute thresholds from
    the round table, or a fraction of a measured reference (the unquantized model's score).
    """
    if targets["kind"] == "measured":
        if reference is None:
            raise UserError("accuracy_target 'measured' needs the reference accuracy run's result")
        minimums = {}
        for metric in targets["metrics"]:
            value = reference["metrics"].get(metric)
            if value is None:
                raise UserError(
                    f"the reference accuracy run has no {metric} (it was scored for other metrics, or could not "
                    "compute it): rerun it (rule reference_accuracy)"
                )
            minimums[metric] = value * targets["fraction"]
        # open_accuracy: floors given in the config (video_ssim_minimum).
        minimums.update(targets.get("minimums") or {})
        maximums: dict[str, float] = {}
    else:
        minimums = dict(targets["targets"])
        maximums = dict(targets.get("upper_bounds", {}))
    checks = []
    for metric, minimum in minimums.items():
        value = metrics[metric]
        if value is None:  # the evaluator could not compute it here (VBench without its models)
            checks.append({"metric": metric, "value": None, "minimum": round(minimum, 4), "passed": False})
            continue
        checks.append({"metric": metric, "value": value, "minimum": round(minimum, 4), "passed": value >= minimum})
    for metric, maximum in maximums.items():
        value = metrics[metric]
        checks.append({"metric": metric, "value": value, "maximum": round(maximum, 4), "passed": value <= maximum})
    return {"kind": targets["kind"], "checks": checks, "passed": all(c["passed"] for c in checks)}


def score_entries(
    evaluator: str, entries: list, dataset_file: str, tokenizer: Any, accuracy_rules: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """(metrics, accuracy.txt text) of ``[(qsl_idx, values)]`` by the benchmark's evaluator,
    looked up in the task registry (mlperf_repro.tasks).

    ``accuracy_rules`` is the benchmark's ``accuracy`` entry of the rules table."""
    _, found = find_evaluator(evaluator)
    return found.score(entries, dataset_file, tokenizer, accuracy_rules)


def evaluator_tokenizer(evaluator: str, tokenizer_dir: str) -> Any:
    """The tokenizer as the evaluator's reference script loads it (None if it needs none)."""
    _, found = find_evaluator(evaluator)
    return found.load_tokenizer(tokenizer_dir) if found.load_tokenizer else None


def log_entries(evaluator: str, log: str | Path) -> list:
    """``[(qsl_idx, values)]`` of an accuracy log, read as the evaluator's task and reference
    script read it (its data type; the first entry per sample or every entry)."""
    task, found = find_evaluator(evaluator)
    log = Path(log)
    if not log.is_file():
        raise UserError(f"{log} is missing: the run did not write its accuracy log")
    return read_accuracy_log(log, task.accuracy_log_dtype, first_per_sample=found.first_per_sample)


def score_log(
    evaluator: str,
    log: str | Path,
    dataset_file: str,
    tokenizer_dir: str,
    accuracy_rules: dict[str, Any],
    extras_dir: str | Path | None = None,
) -> tuple[dict[str, Any], str]:
    """(metrics, accuracy.txt text) of one LoadGen accuracy log, read as its task's data type
    (int32 token ids for the LLMs, mp4 bytes for text-to-video). Whether the first entry per
    sample or every entry is scored is the evaluator's (llama2: the first, gpt-oss: every
    entry). With ``extras_dir`` the evaluator's extra outputs (text-to-video: the named
    videos) are written there."""
    entries = log_entries(evaluator, log)
    _, found = find_evaluator(evaluator)
    # Samples scored of the log's, as the evaluator reports them (progress.advance).
    with progress.Progress(
        f"accuracy {evaluator} {log.parent.parent.name}",
        total=len(entries),
        unit="samples",
        waiting_for=f"the {evaluator} evaluator (decoding or scoring; it reports samples as it finishes them)",
    ) as reporter:
        if extras_dir is not None:
            Path(extras_dir).mkdir(parents=True, exist_ok=True)
            if found.write_extras is not None:
                found.write_extras(entries, dataset_file, accuracy_rules, Path(extras_dir))
        scored = score_entries(
            evaluator, entries, dataset_file, evaluator_tokenizer(evaluator, tokenizer_dir), accuracy_rules
        )
        reporter.update(len(entries))  # every sample, also from evaluators that report none on the way
    return scored


def score_open_metrics(
    evaluator: str,
    log: str | Path,
    metrics: list[str],
    reference_outputs: str | None,
    accuracy_rules: dict[str, Any],
    extras_dir: str | Path | None,
) -> dict[str, Any]:
    """The open-division metrics of an accuracy log (the task's ``score_open``), each value
    rounded as accuracy.txt prints it, with ``metrics`` (the declared names)."""
    task, _ = find_evaluator(evaluator)
    if task.score_open is None:
        raise UserError(f"the {task.name} task has no open-division metrics (benchmarks.<name>.open_accuracy)")
    scored = task.score_open(log_entries(evaluator, log), list(metrics), reference_outputs, accuracy_rules, extras_dir)
    for name in metrics:
        scored[name] = None if scored[name] is None else round(scored[name], DIGITS)
    return {**scored, "metrics": list(metrics)}


def open_targets(targets: dict[str, Any], reference: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    """accuracy.txt's targets of the judged open metrics: a fraction of the unquantized model's
    value (with both), or the config's minimum."""
    found: dict[str, dict[str, float]] = {}
    for metric in targets.get("metrics") or []:
        unquantized = round(reference["metrics"][metric], DIGITS)
        found[metric] = {
            "minimum": round(unquantized * targets["fraction"], DIGITS),
            "fraction": targets["fraction"],
            "unquantized": unquantized,
        }
    for metric, minimum in (targets.get("minimums") or {}).items():
        found[metric] = {"minimum": minimum}
    return found


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
    accuracy_rules: dict[str, Any] | None = None,
    extras_dir: str | None = None,
    reference_outputs: str | None = None,
) -> dict[str, Any]:
    """Score a run's accuracy log, judge it, and write accuracy.txt, the verdict and the
    evaluator's extra outputs (``extras_dir``, copied into the package's accuracy folder).
    With ``targets["open_metrics"]`` (benchmarks.<name>.open_accuracy) the log is also scored
    by those weight-free metrics, against the reference run's outputs (``reference_outputs``)
    where they compare, and accuracy.txt declares them (accuracy.open_accuracy). An evaluator
    that runs model-written code reports ``sandbox`` beside its metrics (the log entries by
    the isolation mode their code ran in, and whether any ran unsandboxed): the record keeps
    it apart from the metrics."""
    log = Path(run_dir) / "mlperf_log_accuracy.json"
    metrics, text = score_log(evaluator, log, dataset_file, tokenizer_dir, accuracy_rules or {}, extras_dir)
    sandbox = metrics.pop("sandbox", None)
    reference = json.loads(Path(reference_path).read_text()) if reference_path else None
    open_record = None
    if targets.get("open_metrics"):
        open_record = score_open_metrics(
            evaluator, log, targets["open_metrics"], reference_outputs, accuracy_rules or {}, extras_dir
        )
        metrics.update({m: open_record[m] for m in targets["open_metrics"]})
    verdict = judge(metrics, targets, reference)
    if open_record is not None:
        text += format_open_accuracy(open_record, open_targets(targets, reference), targets.get("replaces") or [])
    Path(out_txt).parent.mkdir(parents=True, exist_ok=True)
    Path(out_txt).write_text(text)
    record = {"metrics": metrics, "verdict": verdict, "reference_metrics": reference["metrics"] if reference else None}
    if open_record is not None:
        record["open_accuracy"] = {k: open_record[k] for k in ("metrics", "videos_scored", "samples")}
    if sandbox is not None:
        record["sandbox"] = sandbox
    Path(out_json).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record
