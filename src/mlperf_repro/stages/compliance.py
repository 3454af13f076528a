"""The compliance verify stage: check a compliance run and write its TEST0x folder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compliance import eos_token_id
from ..compliance.verify import (
    Verdict,
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


@dataclass(frozen=True)
class VerifyInputs:
    """What a compliance verifier may read (the arguments of :func:`verify_job`)."""

    run: Path
    scenario: str
    model_dir: str
    rules_test: dict[str, Any]
    dataset_file: str | None = None
    tokenizer_dir: str | None = None
    evaluator: str | None = None
    accuracy_rules: dict[str, Any] | None = None
    performance_run: str | None = None

    @property
    def accuracy_log(self) -> Path:
        return self.run / "mlperf_log_accuracy.json"


@dataclass(frozen=True)
class Verifier:
    """How one compliance test is verified, and what its TEST0x folder keeps besides the
    verdict: the run's accuracy log (the tests that log samples) and its performance logs
    (the folders the checker reads them from)."""

    verify: Callable[[VerifyInputs], Verdict]
    keeps_accuracy_log: bool = True
    copies_performance_logs: bool = False


VERIFIERS: dict[str, Verifier] = {}


def register_verifier(test: str, **folder: bool) -> Callable[[Callable[[VerifyInputs], Verdict]], Callable]:
    """Decorator: the verifier of compliance test ``test`` (``folder``: Verifier's flags)."""

    def register(function: Callable[[VerifyInputs], Verdict]) -> Callable[[VerifyInputs], Verdict]:
        VERIFIERS[test] = Verifier(function, **folder)
        return function

    return register


@register_verifier("TEST06")
def _test06(inputs: VerifyInputs) -> Verdict:
    return verify_test06(inputs.accuracy_log, inputs.scenario, eos_token_id(inputs.model_dir))


@register_verifier("TEST07", copies_performance_logs=True)
def _test07(inputs: VerifyInputs) -> Verdict:
    if not (inputs.dataset_file and inputs.tokenizer_dir and inputs.evaluator):
        raise UserError("TEST07 needs the benchmark's evaluator, its compliance dataset file and a tokenizer")
    return verify_test07(
        inputs.accuracy_log,
        float(inputs.rules_test["accuracy_threshold"]),
        lambda path: score_log(
            inputs.evaluator, path, inputs.dataset_file, inputs.tokenizer_dir, inputs.accuracy_rules or {}
        ),
        metric=inputs.rules_test.get("metric", "exact_match"),
    )


@register_verifier("TEST09")
def _test09(inputs: VerifyInputs) -> Verdict:
    rules_test = inputs.rules_test
    low, high = rules_test["min_output_tokens"], rules_test["max_output_tokens"]
    if not inputs.performance_run:
        return verify_test09(inputs.accuracy_log, low, high)
    own = mean_output_tokens(Path(inputs.performance_run) / "run_record.json")
    scale = own / float(rules_test["reference_output_tokens"])
    verdict = verify_test09(inputs.accuracy_log, round(low * scale, 2), round(high * scale, 2))
    verdict.lines.insert(
        0,
        f"TEST SCALE: bounds are the reference band ({low}, {high} around "
        f"{rules_test['reference_output_tokens']}) scaled to this model's own performance "
        f"run mean of {own:.2f} tokens - NOT SUBMITTABLE",
    )
    return verdict


@register_verifier("TEST04", keeps_accuracy_log=False, copies_performance_logs=True)
def _test04(inputs: VerifyInputs) -> Verdict:
    # TEST04 logs no samples: it compares the audited run's speed with the normal run's.
    if not inputs.performance_run:
        raise UserError("TEST04 needs the scenario's performance run to compare with")
    return verify_test04(
        Path(inputs.performance_run) / "mlperf_log_detail.txt",
        inputs.run / "mlperf_log_detail.txt",
        inputs.scenario,
        float(inputs.rules_test["max_speedup"][inputs.scenario]),
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
    """Verify one compliance run into ``out_dir`` (the scenario's TEST0x folder) with the
    test's registered verifier.

    TEST07 scores the run's logged outputs with the benchmark's ``evaluator`` against
    ``dataset_file`` (the file the run was made on) using ``tokenizer_dir``'s tokenizer.
    ``performance_run`` is the scenario's normal performance run: TEST04 compares against it;
    at test scale TEST09's band is drawn around its mean output length instead of the
    reference model's."""
    verifier = VERIFIERS.get(test)
    if verifier is None:
        raise UserError(f"{test} verification is not implemented by this workflow ({', '.join(sorted(VERIFIERS))} are)")
    run = Path(run_dir)
    _check_audit_applied(run, rules_test["audit_config"])
    inputs = VerifyInputs(
        run, scenario, model_dir, rules_test, dataset_file, tokenizer_dir, evaluator, accuracy_rules, performance_run
    )
    verdict = verifier.verify(inputs)
    write_verdict(
        verdict, out_dir, rules_test["verify_file"], inputs.accuracy_log if verifier.keeps_accuracy_log else None
    )
    if verifier.copies_performance_logs:
        copy_performance_logs(run, out_dir)
    return verdict.passed
