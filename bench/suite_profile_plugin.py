"""A pytest plugin that records where a suite run's time goes, for bench/suite_profile.py.

Loaded with ``-p suite_profile_plugin`` (``bench/`` on ``PYTHONPATH``) and
``MLPERF_REPRO_PROFILE_DIR`` naming a folder; each process (the controller or an xdist worker)
appends JSON lines to ``<worker>.jsonl`` there:

- ``phase``: each test's setup, call and teardown, with start and stop (epoch seconds) and
  ``cpu``: the CPU seconds (user and system) the pytest process and the children it waited for
  spent in it. On a CPU-bound run the wall times stretch with contention; the CPU seconds are
  the cost a cut removes;
- ``fixture``: each fixture's setup (from ``pytest_fixture_setup``) and teardown (from its
  first finalizer to ``pytest_fixture_post_finalizer``), with its scope and the test it ran for;
- ``session``: the process's session start and finish.

Nothing here changes what a test does; without the environment variable it records nothing.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

_OUT: Path | None = None
_WORKER = "main"
_TEARDOWN_STARTS: dict[int, float] = {}
_CONTROLLER = False
_PHASE_CPU: dict[tuple[str, str], float] = {}


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _write(record: dict) -> None:
    if _OUT is None:
        return
    record["worker"] = _WORKER
    with (_OUT / f"{_WORKER}.jsonl").open("a") as out:
        out.write(json.dumps(record) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    global _OUT, _WORKER
    folder = os.environ.get("MLPERF_REPRO_PROFILE_DIR")
    if not folder:
        return
    _OUT = Path(folder)
    _OUT.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        # An xdist worker: its parent is the run's controller, whose pid labels the run.
        _WORKER = f"{os.getppid()}-{worker}"
    else:
        # One pytest process (or an xdist controller): its own pid labels the run, so the two
        # runs of ./test.sh stay apart.
        _WORKER = f"{os.getpid()}-main"
    global _CONTROLLER
    # An xdist controller also sees its workers' reports: only they record test phases.
    _CONTROLLER = not worker and bool(getattr(config.option, "numprocesses", None))


def pytest_sessionstart(session: pytest.Session) -> None:
    _write({"kind": "session", "event": "start", "t": time.time()})


def pytest_sessionfinish(session: pytest.Session) -> None:
    _write({"kind": "session", "event": "finish", "t": time.time()})


def _timed(when: str):
    @pytest.hookimpl(hookwrapper=True)
    def wrapper(item):
        before = _cpu_seconds()
        yield
        _PHASE_CPU[(item.nodeid, when)] = _cpu_seconds() - before

    return wrapper


pytest_runtest_setup = _timed("setup")
pytest_runtest_call = _timed("call")
pytest_runtest_teardown = _timed("teardown")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _CONTROLLER:
        return
    _write(
        {
            "kind": "phase",
            "test": report.nodeid,
            "phase": report.when,
            "start": report.start,
            "stop": report.stop,
            "cpu": _PHASE_CPU.pop((report.nodeid, report.when), None),
            "outcome": report.outcome,
        }
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    start = time.time()
    yield
    stop = time.time()
    if _OUT is None:
        return
    test = getattr(request.node, "nodeid", "")
    _write(
        {
            "kind": "fixture",
            "event": "setup",
            "fixture": fixturedef.argname,
            "scope": fixturedef.scope,
            "defined_in": _defined_in(fixturedef),
            "test": test,
            "start": start,
            "stop": stop,
        }
    )
    # Registered after the fixture's own teardown, so it runs first (finalizers run last-in
    # first-out): the teardown's start.
    key = id(fixturedef)
    fixturedef.addfinalizer(lambda: _TEARDOWN_STARTS.__setitem__(key, time.time()))


def pytest_fixture_post_finalizer(fixturedef, request):
    start = _TEARDOWN_STARTS.pop(id(fixturedef), None)
    if start is None or _OUT is None:
        return
    _write(
        {
            "kind": "fixture",
            "event": "teardown",
            "fixture": fixturedef.argname,
            "scope": fixturedef.scope,
            "defined_in": _defined_in(fixturedef),
            "test": getattr(request.node, "nodeid", ""),
            "start": start,
            "stop": time.time(),
        }
    )


def _defined_in(fixturedef) -> str:
    func = getattr(fixturedef, "func", None)
    code = getattr(func, "__code__", None)
    if code is None:
        return "?"
    path = Path(code.co_filename)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return path.name
