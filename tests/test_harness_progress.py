"""Progress lines and the stall watchdog (mlperf_repro.progress): the reporter on a fake clock,
then real LoadGen runs in a child process whose job log is read back: periodic lines with a
scripted engine, and a stall line when a SIMULATED endpoint stops answering."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_endpoints import free_ports, simulated_endpoints
from simulated_endpoint import SimulatedEndpointSpec

from mlperf_repro import progress
from mlperf_repro.loadgen_logs import read_detail
from mlperf_repro.progress import PROGRESS_PREFIX, STALL_PREFIX, Progress, ProgressSettings

CHILD = Path(__file__).with_name("harness_child.py")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reporter(clock, stream, **kwargs) -> Progress:
    kwargs.setdefault("settings", ProgressSettings(interval_s=10, stall_after_s=60))
    return Progress("step", clock=clock, stream=stream, live=False, **kwargs)


def test_plain_lines_every_interval_with_done_of_total_rate_and_eta():
    clock, out = FakeClock(), io.StringIO()
    tokens = {"n": 0}
    p = reporter(clock, out, total=100, unit="queries", rates={"tokens/s": lambda: tokens["n"]})
    for _ in range(4):
        clock.now += 5
        p.advance(10)
        tokens["n"] += 500
        p.poll()
    lines = [line for line in out.getvalue().splitlines() if line.startswith(PROGRESS_PREFIX)]
    assert len(lines) == 2  # one per 10 s
    assert (
        lines[-1] == f"{PROGRESS_PREFIX}step: 40/100 queries (40%), 2.0 queries/s, ETA 30s, elapsed 20s, 100 tokens/s"
    )


def test_bytes_are_shown_in_binary_units():
    clock, out = FakeClock(), io.StringIO()
    p = reporter(clock, out, total=4 << 20, unit="B")
    clock.now += 10
    p.advance(1 << 20)
    (line,) = p.poll()
    assert "1.0 MiB/4.0 MiB (25%), 102.4 KiB/s, ETA 30s" in line


def test_a_stall_names_what_it_waits_for_repeats_and_ends_with_a_resumed_line():
    clock, out = FakeClock(), io.StringIO()
    asked = []

    def waiting_for() -> str:
        asked.append(clock.now)
        return "the server at http://h:1"

    p = reporter(clock, out, total=10, unit="queries", waiting_for=waiting_for)
    p.advance(3)
    p.poll()
    for _ in range(13):  # 130 s without progress
        clock.now += 10
        p.poll()
    stalls = [line for line in out.getvalue().splitlines() if line.startswith(STALL_PREFIX)]
    assert stalls == [
        f"{STALL_PREFIX}step: no progress for 1m00s at 3/10 queries; waiting for the server at http://h:1",
        f"{STALL_PREFIX}step: no progress for 2m00s at 3/10 queries; waiting for the server at http://h:1",
    ]
    assert len(asked) == 2  # asked at the moment of the stall, not before
    p.advance()
    clock.now += 1
    assert p.poll() == [f"{PROGRESS_PREFIX}step: resumed after 2m11s without progress"]


def test_a_phase_change_is_progress_and_names_its_own_wait():
    clock, out = FakeClock(), io.StringIO()
    p = reporter(clock, out, total=10, unit="queries", waiting_for="the engine")
    p.phase("loading the model", waiting_for="the engine to load the model")
    p.poll()  # the watcher sees the phase
    clock.now += 61
    (line,) = [x for x in p.poll() if x.startswith(STALL_PREFIX)]
    assert "(loading the model) at 0/10 queries; waiting for the engine to load the model" in line
    p.phase(None, waiting_for="the engine")
    clock.now += 1
    assert any("resumed" in x for x in p.poll())


def test_stall_after_zero_turns_the_watchdog_off():
    clock, out = FakeClock(), io.StringIO()
    p = reporter(clock, out, settings=ProgressSettings(interval_s=10, stall_after_s=0))
    clock.now += 10_000
    p.poll()
    assert STALL_PREFIX not in out.getvalue()


def test_stall_lines_are_echoed_to_the_terminal(monkeypatch):
    clock, log, terminal = FakeClock(), io.StringIO(), io.StringIO()
    progress.configure(ProgressSettings(interval_s=5, stall_after_s=30), terminal=terminal, terminal_note=" (log: x)")
    try:
        p = Progress("step", clock=clock, stream=log, live=False, waiting_for="LoadGen")
        assert p.settings.interval_s == 5
        clock.now += 31
        p.poll()
    finally:
        progress.configure()
    assert terminal.getvalue().startswith(STALL_PREFIX) and terminal.getvalue().endswith("LoadGen (log: x)\n")
    assert STALL_PREFIX in log.getvalue()


def test_a_terminal_gets_a_live_line_instead_of_periodic_lines():
    clock, out = FakeClock(), io.StringIO()
    p = Progress("step", total=10, unit="queries", clock=clock, stream=out, live=True)
    for _ in range(3):
        clock.now += 10
        p.advance(2)
        p.poll()
    p.close()
    text = out.getvalue()
    assert "step: " in text and "\r" in text  # redrawn in place
    assert text.count(PROGRESS_PREFIX) == 1  # only the closing summary


def test_watch_opens_and_closes_around_a_loop_and_advance_reaches_the_innermost():
    out = io.StringIO()
    p = Progress("loop", total=3, unit="files", stream=out, live=False)
    for _ in p.watch(range(3)):
        progress.advance()  # as an evaluator deep inside a step does
    lines = out.getvalue().splitlines()
    assert lines[0] == f"{PROGRESS_PREFIX}loop: started (3 files expected)"
    assert lines[-1].startswith(f"{PROGRESS_PREFIX}loop: finished: 3/3 files (100%)")
    progress.advance()  # no active reporter: nothing happens
    assert p.done == 3


def test_vllms_progress_bar_hook_counts_finished_prompts_into_the_reporter():
    """LLM.generate(use_tqdm=<factory>): vLLM makes its bars with tqdm's arguments and reads
    format_dict, n and postfix; only its "Processed prompts" bar counts."""
    clock, out = FakeClock(), io.StringIO()
    p = reporter(clock, out, unit="samples")
    factory = progress.EngineBar.into(p)
    rendering = factory(iter(range(8)), desc="Rendering prompts")  # vLLM iterates the prompts through it
    assert list(rendering) == list(range(8))
    rendering.update(8)
    bar = factory(total=8, desc="Processed prompts", dynamic_ncols=True, postfix="est. speed input: 0.00 toks/s")
    assert p.total == 8 and p.done == 0 and bar.format_dict["elapsed"] > 0
    bar.update(3)
    bar.postfix = "est. speed input: 10.00 toks/s"
    bar.refresh()
    bar.close()
    assert p.done == 3 and bar.n == 3


def test_settings_come_from_the_config_section():
    assert progress.settings_from_config({}) == ProgressSettings(10.0, 120.0)
    assert progress.settings_from_config({"progress": {"interval_s": 2}}) == ProgressSettings(2.0, 120.0)


# -- real LoadGen runs, read back from the job log ------------------------------------------


def start_child(tmp_path: Path, scenario: str, settings: dict, env_extra: dict | None = None):
    log = tmp_path / "job.log"
    env = dict(
        os.environ,
        HARNESS_LOG=str(log),
        HARNESS_PROGRESS=json.dumps(settings),
        **(env_extra or {}),
    )
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(tmp_path / "run"), scenario, "performance", "5"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, log


@pytest.mark.slow
def test_a_loadgen_run_logs_periodic_lines_with_queries_and_tokens_per_second(tmp_path):
    conf = "llama2-70b.Server.min_duration = 3000\n"
    proc, log = start_child(tmp_path, "Server", {"interval_s": 0.3, "stall_after_s": 60}, {"HARNESS_CONF": conf})
    assert proc.wait(120) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "RECORD " in text
    lines = [line for line in text.splitlines() if line.startswith(PROGRESS_PREFIX)]
    label = f"{PROGRESS_PREFIX}loadgen llama2-70b Server performance: "
    # 3 s at 200 queries/s: max(min_query_count 64, 3 x 200), padded to whole passes over the 32
    # performance samples (llama2's sample_concatenate_permutation): 608 expected.
    assert lines[0] == f"{label}started (608 queries expected)"
    # LoadGen's own count (its schedule seed is mlperf.conf's, so the run is the same every time).
    assert read_detail(tmp_path / "run" / "mlperf_log_detail.txt")["generated_query_count"] == 608
    periodic = [line for line in lines if "queries/s" in line and "tokens/s" in line and "of min_duration 3s" in line]
    assert len(periodic) >= 3, text
    assert any("/608 queries" in line for line in periodic)
    assert lines[-1].startswith(f"{label}finished: ")
    assert STALL_PREFIX not in text


@pytest.mark.slow
def test_a_hanging_endpoint_is_reported_as_a_stall_naming_the_server(tmp_path):
    (port,) = free_ports(1)
    hang = SimulatedEndpointSpec(port=port, tokens_per_s=500, fault="hang", fault_after_requests=3)
    with simulated_endpoints([hang]):
        proc, log = start_child(
            tmp_path, "Server", {"interval_s": 0.5, "stall_after_s": 2}, {"HARNESS_ENDPOINT": str(port)}
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and STALL_PREFIX not in (log.read_text() if log.exists() else ""):
                assert proc.poll() is None, log.read_text()[-3000:]
                time.sleep(0.2)
        finally:
            proc.kill()
            proc.wait(30)
    text = log.read_text()
    stalls = [line for line in text.splitlines() if line.startswith(STALL_PREFIX)]
    assert stalls, text[-3000:]
    assert stalls[0].startswith(f"{STALL_PREFIX}loadgen llama2-70b Server performance: no progress for ")
    assert f"waiting for the server ep0 at http://127.0.0.1:{port} (" in stalls[0]
    assert "outstanding queries" in stalls[0]


@pytest.mark.parametrize("bad", [{"interval_s": 0}, {"stall_after_s": -1}, {"every": 3}])
def test_the_schema_refuses_bad_progress_settings(default_config, bad):
    from conftest import SCHEMA

    from mlperf_repro.config import validate_config
    from mlperf_repro.errors import UserError

    config = dict(default_config, progress=bad)
    with pytest.raises(UserError, match="progress"):
        validate_config(config, SCHEMA)
