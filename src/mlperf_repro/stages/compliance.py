"""The compliance verify stage: check a compliance run and write its TEST0x folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..compliance import eos_token_id
from ..compliance.verify import (
    copy_performance_logs,
    verify_test04,
    verify_test06,
    verify_test07,
    verify_test09,
    write_verdict,
)
from ..errors import UserError
from ..loadgen_logs import read_detail
from .accuracy import score_log


def mean_output_tokens(run_record: Path) -> float:
    """Mean output tokens of a run, from the harness's run_record.json."""
    import json

    if not run_record.is_file():
        raise UserError(f"{run_record} is missing: the performance run did not finish")
    record = json.loads(run_record.read_text())
    if not record.get("completed_samples"):
        raise UserError(f"{run_record} records no completed samples")
    return record["generated_tokens"] / record["completed_samples"]


def _check_audit_applied(run_dir: Path, audit_settings: dict[str, Any]) -> None:
    """The run must really have been an audit run (LoadGen read our audit.config)."""
    detail = read_detail(run_dir / "mlperf_log_detail.txt")
    for key in ("accuracy_log_sampling_target", "performance_issue_same"):
        target, seen = audit_settings.get(key), detail.get(f"effective_{key}")
        if target is not None and seen is not None and int(seen) != int(target):
            raise UserError(
                f"{run_dir}: LoadGen did not apply the audit.config ({key} is {seen}, expected "
                f"{target}); rerun the compliance test"
            )


def verify_job(
    test: str,
    run_dir: str,
    scenario: str,
    model_dir: str,
    rules_test: dict[str, Any],
    out_dir: str,
    *,
    dataset_file: str | None = None,
    tokenizer_dir: str | None = None,
    evaluator: str | None = None,
    accuracy_rules: dict[str, Any] | None = None,
    performance_run: str | None = None,
) -> bool:
    """Verify one compliance run into ``out_dir`` (the scenario's TEST0x folder).

    TEST07 scores the run's logged outputs with the benchmark's ``evaluator`` against
    ``dataset_file`` (the file the run was made on) using ``tokenizer_dir``'s tokenizer.
    ``performance_run`` is the scenario's normal performance run: TEST04 compares against it;
    at test scale TEST09's band is drawn around its mean output length instead of the
    reference model's."""
    run = Path(run_dir)
    _check_audit_applied(run, rules_test["audit_config"])
    log = run / "mlperf_log_accuracy.json"
    if test == "TEST06":
        verdict = verify_test06(log, scenario, eos_token_id(model_dir))
    elif test == "TEST07":
        if not (dataset_file and tokenizer_dir and evaluator):
            raise UserError("TEST07 needs the benchmark's evaluator, its compliance dataset file and a tokenizer")
        metric = rules_test.get("metric", "exact_match")
        verdict = verify_test07(
            log,
            float(rules_test["accuracy_threshold"]),
            lambda path: score_log(evaluator, path, dataset_file, tokenizer_dir, accuracy_rules or {}),
            metric=metric,
        )
    elif test == "TEST09":
        low, high = rules_test["min_output_tokens"], rules_test["max_output_tokens"]
        if performance_run:
            own = mean_output_tokens(Path(performance_run) / "run_record.json")
            scale = own / float(rules_test["reference_output_tokens"])
            verdict = verify_test09(log, round(low * scale, 2), round(high * scale, 2))
            verdict.lines.insert(
                0,
                f"TEST SCALE: bounds are the reference band ({low}, {high} around "
                f"{rules_test['reference_output_tokens']}) scaled to this model's own performance "
                f"run mean of {own:.2f} tokens - NOT SUBMITTABLE",
            )
        else:
            verdict = verify_test09(log, low, high)
    elif test == "TEST04":
        if not performance_run:
            raise UserError("TEST04 needs the scenario's performance run to compare with")
        verdict = verify_test04(
            Path(performance_run) / "mlperf_log_detail.txt",
            run / "mlperf_log_detail.txt",
            scenario,
            float(rules_test["max_speedup"][scenario]),
        )
    else:
        raise UserError(
            f"{test} verification is not implemented by this workflow (TEST04, TEST06, TEST07 and TEST09 are)"
        )
    # TEST04 logs no samples: its folder holds the verdict and the run's performance logs.
    write_verdict(verdict, out_dir, rules_test["verify_file"], None if test == "TEST04" else log)
    if test in ("TEST04", "TEST07"):
        # The checker's TEST04 and TEST07 folders also carry the run's performance logs.
        copy_performance_logs(run, out_dir)
    return verdict.passed
