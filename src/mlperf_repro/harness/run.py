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

from .. import progress
from ..errors import UserError
from ..loadgen_counts import generated_queries
from ..loadgen_logs import read_detail, result_is_valid
from .dataset import TokenDataset
from .sut import LlmSut

AUDIT_CONFIG_NAME = "audit.config"
MODES = {"performance": "PerformanceOnly", "accuracy": "AccuracyOnly"}
# Queries and tokens completed, sampled while LoadGen runs: the report's throughput over
# the run (LoadGen's own trace, per query, is ~1 MB per 700 queries and stays off).
TIMELINE_FILE = "throughput_timeline.json"
TIMELINE_INTERVAL_S = 0.5


class _Timeline:
    """Samples (seconds since LoadGen started, queries completed, tokens generated) on a
    daemon thread every ``interval_s``; ``write`` puts them in the run folder."""

    def __init__(self, sut, interval_s: float = TIMELINE_INTERVAL_S) -> None:
        self.sut, self.interval_s = sut, interval_s
        self.samples: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="timeline", daemon=True)

    def start(self) -> None:
        self._start = time.monotonic()
        self._thread.start()

    def _take(self) -> None:
        elapsed = round(time.monotonic() - self._start, 3)
        self.samples.append([elapsed, self.sut.completed, getattr(self.sut, "generated_tokens", 0)])

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def write(self, out_dir: Path) -> None:
        self._stop.set()
        self._thread.join()
        self._take()
        (out_dir / TIMELINE_FILE).write_text(
            json.dumps(
                {"interval_s": self.interval_s, "columns": ["seconds", "queries", "tokens"], "samples": self.samples}
            )
            + "\n"
        )


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
    reporter, loaded_model = run_progress(test, settings, len(dataset), sut, backend)
    with reporter:
        return _run(test, settings, dataset, sut, backend, loaded_model)


def expected_queries(test: LoadgenTest, settings, dataset_size: int) -> int | None:
    """About how many query samples the test will complete (LoadGen's rules: an accuracy run
    issues every sample once; a performance run lasts until min_duration and min_query_count
    are both met, Offline in one query of max(min_query_count, 1.1 x min_duration x target),
    padded to whole permutations of the loaded samples with sample_concatenate_permutation)."""
    if test.mode == "accuracy":
        return dataset_size
    scenario = test.loadgen_scenario
    if scenario == "Offline":
        qps = settings.offline_expected_qps
    elif scenario == "Server":
        qps = settings.server_target_qps
    elif scenario == "SingleStream" and settings.single_stream_expected_latency_ns > 0:
        qps = 1e9 / settings.single_stream_expected_latency_ns
    else:
        return None
    count = int(
        generated_queries(
            scenario,
            min_duration_s=settings.min_duration_ms / 1000.0,
            target_qps=qps,
            min_query_count=settings.min_query_count,
            loaded_samples=settings.performance_sample_count_override
            or min(test.performance_sample_count, dataset_size),
            concatenate=bool(settings.sample_concatenate_permutation),
        )
    )
    if settings.max_query_count > 0:
        count = min(count, settings.max_query_count)
    return count or None


def run_progress(
    test: LoadgenTest, settings, dataset_size: int, sut, backend
) -> tuple[progress.Progress, Callable[[], None]]:
    """The run's reporter: queries completed of expected, tokens/s (LLM SUTs), elapsed against
    min_duration once LoadGen's clock runs; on a stall it names the backend holding the
    outstanding queries, or LoadGen's issue_queries callback when none is outstanding. The
    callable marks the end of the model load (the start of LoadGen's test)."""
    min_duration_s = settings.min_duration_ms / 1000.0
    clock: dict[str, float] = {}

    def details(_elapsed: float) -> list[str]:
        if "loadgen" not in clock:
            return []
        ran = progress.format_duration(time.monotonic() - clock["loadgen"])
        if test.mode == "performance":
            return [f"LoadGen {ran} of min_duration {progress.format_duration(min_duration_s)}"]
        return [f"LoadGen {ran}"]

    def engine() -> str:
        describe = getattr(backend, "describe", None)
        return describe() if callable(describe) else f"the engine ({type(backend).__name__})"

    def waiting_for() -> str:
        name = engine()
        outstanding = sut.outstanding
        if outstanding:
            return f"{name} to answer {outstanding} outstanding queries"
        return "LoadGen to issue queries (its issue_queries callback) - none is outstanding"

    rates = {"tokens/s": lambda: sut.generated_tokens} if hasattr(sut, "generated_tokens") else {}
    reporter = progress.Progress(
        f"loadgen {test.loadgen_model} {test.loadgen_scenario} {test.mode}",
        total=expected_queries(test, settings, dataset_size),
        unit="queries",
        count=lambda: sut.completed,
        rates=rates,
        details=details,
        waiting_for=waiting_for,
    )
    reporter.phase("loading the model", waiting_for=f"{engine()} to load the model and start")

    def loaded_model() -> None:
        clock["loadgen"] = time.monotonic()
        reporter.phase(None, waiting_for=waiting_for)

    return reporter, loaded_model


def _run(test: LoadgenTest, settings, dataset, sut, backend, loaded_model: Callable[[], None]) -> dict[str, Any]:
    import mlperf_loadgen as lg

    started = time.time()
    backend.start()  # loads the model; LoadGen's clock starts only in StartTest
    loaded = time.time()
    loaded_model()

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
    timeline = _Timeline(sut)
    timeline.start()
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
        timeline.write(test.out_dir)
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
