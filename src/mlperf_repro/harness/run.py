"""Run exactly one LoadGen test in this process.

LoadGen keeps global state: a second ``FromConfig(..., conf_type=1)`` in one process logs
"Multiple conf files are used" and invalidates the run, so every test gets its own
process. A stray ``audit.config`` in the working directory silently turns a run into a
compliance audit, so the test runs inside its own output directory, where we control
exactly whether an audit.config exists.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..loadgen_logs import read_detail, result_is_valid
from .dataset import TokenDataset
from .sut import LlmSut

AUDIT_CONFIG_NAME = "audit.config"
MODES = {"performance": "PerformanceOnly", "accuracy": "AccuracyOnly"}


@dataclass
class LoadgenTest:
    user_conf: Path
    loadgen_model: str
    loadgen_scenario: str  # Offline | Server | SingleStream | MultiStream
    mode: str  # performance | accuracy
    out_dir: Path
    performance_sample_count: int
    audit_config: str | None = None  # audit.config text; only compliance runs pass one
    extra: dict[str, Any] = field(default_factory=dict)


@contextmanager
def _working_directory(path: Path):
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def _prepare_out_dir(test: LoadgenTest) -> None:
    if test.out_dir.exists():
        shutil.rmtree(test.out_dir)
    test.out_dir.mkdir(parents=True)
    if test.audit_config is not None:
        (test.out_dir / AUDIT_CONFIG_NAME).write_text(test.audit_config)


def build_settings(test: LoadgenTest):
    import mlperf_loadgen as lg

    if not test.user_conf.is_file():
        raise UserError(f"user.conf {test.user_conf} does not exist")
    settings = lg.TestSettings()
    # conf_type 1: LoadGen first applies its embedded mlperf.conf (seeds, round rules),
    # then this user.conf. Exactly once per process.
    status = settings.FromConfig(str(test.user_conf), test.loadgen_model, test.loadgen_scenario, 1)
    if status != 0:
        raise UserError(f"LoadGen could not read {test.user_conf} (FromConfig returned {status})")
    settings.scenario = getattr(lg.TestScenario, test.loadgen_scenario)
    settings.mode = getattr(lg.TestMode, MODES[test.mode])
    return settings


def run_loadgen_test(
    test: LoadgenTest,
    dataset: TokenDataset,
    backend_factory: Callable[[LlmSut], Any],
    make_sut: Callable[..., Any] = LlmSut,
) -> dict[str, Any]:
    """Run one test; return a record of what ran (validity, counters, wall time).
    ``make_sut(dataset, report_first_token=...)`` is the benchmark task's system under test
    (mlperf_repro.tasks; the LLM SUT by default)."""
    import mlperf_loadgen as lg

    if test.mode not in MODES:
        raise UserError(f"mode '{test.mode}' is not one of {sorted(MODES)}")
    test.out_dir = test.out_dir.resolve()
    test.user_conf = test.user_conf.resolve()
    _prepare_out_dir(test)
    settings = build_settings(test)
    if test.audit_config is not None and settings.performance_sample_count_override > len(dataset):
        # A compliance set smaller than the round's performance_sample_count (gpt-oss TEST07:
        # 990 rows, mlperf.conf asks 6396): LoadGen would plan queries for samples the QSL
        # lacks (with performance_issue_unique it crashes); load the whole set instead.
        settings.performance_sample_count_override = len(dataset)

    stream = test.loadgen_scenario in ("Server", "SingleStream", "MultiStream")
    sut = make_sut(dataset, report_first_token=stream)
    backend = backend_factory(sut)
    sut.attach(backend)
    started = time.time()
    backend.start()  # loads the model; LoadGen's clock starts only in StartTest
    loaded = time.time()

    log_output = lg.LogOutputSettings()
    log_output.outdir = str(test.out_dir)
    log_output.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = log_output
    # The trace is ~1 MB per 700 queries and no part of a submission.
    log_settings.enable_trace = False

    sut_handle = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
    qsl_handle = lg.ConstructQSL(
        len(dataset), min(test.performance_sample_count, len(dataset)), lambda _: None, lambda _: None
    )
    loadgen_done = threading.Event()
    loadgen_error: list[BaseException] = []

    def loadgen_main() -> None:
        try:
            with _working_directory(test.out_dir):
                lg.StartTestWithLogSettings(sut_handle, qsl_handle, settings, log_settings, AUDIT_CONFIG_NAME)
        except BaseException as exc:  # reported on the main thread
            loadgen_error.append(exc)
        finally:
            loadgen_done.set()

    # LoadGen runs beside the backend, which keeps the main thread (vLLM's engine loop).
    loadgen_thread = threading.Thread(target=loadgen_main, name="loadgen", daemon=True)
    loadgen_thread.start()
    try:
        backend.serve_until(loadgen_done)
    except BaseException:
        # Answer everything LoadGen issued or will issue, so it finishes instead of waiting
        # forever; the run is then useless, and the error below says why.
        sut.abandon()
        loadgen_done.wait()
        raise
    finally:
        loadgen_thread.join()
        backend.stop()
        lg.DestroyQSL(qsl_handle)
        lg.DestroySUT(sut_handle)
        # Never leave the audit file behind: a later run in this directory would audit.
        (test.out_dir / AUDIT_CONFIG_NAME).unlink(missing_ok=True)
    if loadgen_error:
        raise loadgen_error[0]
    finished = time.time()

    detail = read_detail(test.out_dir / "mlperf_log_detail.txt")
    record = {
        "loadgen_model": test.loadgen_model,
        "loadgen_scenario": test.loadgen_scenario,
        "mode": test.mode,
        "result_validity": detail.get("result_validity"),
        "valid": result_is_valid(detail) if test.mode == "performance" else None,
        "loadgen_errors": detail["errors"],
        "completed_samples": sut.completed,
        "generated_tokens": sut.generated_tokens,
        "single_token_outputs": sut.single_token_outputs,
        "model_load_seconds": round(loaded - started, 2),
        "test_seconds": round(finished - loaded, 2),
        "backend_stats": getattr(backend, "stats", {}),
        "compliance_audit": test.audit_config is not None,
    }
    (test.out_dir / "run_record.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record
