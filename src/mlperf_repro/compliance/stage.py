"""The compliance verify stage: check a compliance run and write its TEST0x folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError
from ..loadgen_logs import read_detail
from . import eos_token_id
from .verify import verify_test06, verify_test09, write_verdict


def _check_audit_applied(run_dir: Path, audit_settings: dict[str, Any]) -> None:
    """The run must really have been an audit run (LoadGen read our audit.config)."""
    detail = read_detail(run_dir / "mlperf_log_detail.txt")
    target = audit_settings.get("accuracy_log_sampling_target")
    seen = detail.get("effective_accuracy_log_sampling_target")
    if target is not None and seen is not None and int(seen) != int(target):
        raise UserError(f"{run_dir}: LoadGen did not apply the audit.config (accuracy_log_sampling_target is "
                        f"{seen}, expected {target}); rerun the compliance test")


def verify_job(test: str, run_dir: str, scenario: str, model_dir: str, rules_test: dict[str, Any],
               out_dir: str) -> bool:
    run = Path(run_dir)
    _check_audit_applied(run, rules_test["audit_config"])
    log = run / "mlperf_log_accuracy.json"
    if test == "TEST06":
        verdict = verify_test06(log, scenario, eos_token_id(model_dir))
    elif test == "TEST09":
        verdict = verify_test09(log, rules_test["min_output_tokens"], rules_test["max_output_tokens"])
    else:
        raise UserError(f"{test} verification needs this benchmark's evaluator, which the workflow does not "
                        f"run yet (only TEST06 and TEST09 run end to end)")
    write_verdict(verdict, out_dir, rules_test["verify_file"], log)
    return verdict.passed
