"""Adding a server launcher takes one module: a toy launcher, written to a temporary module
and registered with ``mlperf_repro.launch.register_launcher``, starts the project's
SIMULATED endpoint as a local subprocess, and an ``endpoints`` engine runs through it
(``backends.endpoints.serving`` looks the launcher up by ``engine.endpoints.launch``)."""

from __future__ import annotations

import importlib
import sys
import textwrap
import threading
import time
from collections import defaultdict

import pytest
from sim_endpoints import free_ports
from simulated_endpoint import output_token_ids

from mlperf_repro.backends import GenerationSettings, Request, make_backend
from mlperf_repro.backends.endpoints import serving
from mlperf_repro.errors import UserError
from mlperf_repro.launch import LAUNCHERS

TOY_LAUNCHER = '''
"""launch: toy-sim: the engine's endpoints served by the simulated endpoint, here."""

from contextlib import contextmanager

from sim_endpoints import SimProcess
from simulated_endpoint import SimulatedEndpointSpec

from mlperf_repro.launch import register_launcher

STARTED = []


@register_launcher("toy-sim")
@contextmanager
def launch_toy(engine, model_path, log_dir, *, screening=None):
    specs = [
        SimulatedEndpointSpec(port=e["port"], output_tokens=20, tokens_per_s=400, ttft_s=0.01)
        for e in engine["endpoints"]["list"]
    ]
    sim = SimProcess(specs)  # returns once the endpoints answer
    STARTED.append(sim)
    try:
        yield dict(engine, servers={"launch": "toy-sim", "model_path": model_path, "pid": sim.proc.pid})
    finally:
        sim.stop()
'''

MAX_NEW = 64


@pytest.fixture
def toy_launcher(tmp_path, monkeypatch):
    (tmp_path / "toy_launcher.py").write_text(textwrap.dedent(TOY_LAUNCHER))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield lambda: importlib.import_module("toy_launcher")
    LAUNCHERS.pop("toy-sim", None)
    sys.modules.pop("toy_launcher", None)


def toy_engine(ports: list[int]) -> dict:
    return {
        "backend": "endpoints",
        "endpoints": {
            "launch": "toy-sim",
            "served_model_name": "sim",
            "list": [{"name": f"toy{i}", "host": "127.0.0.1", "port": port} for i, port in enumerate(ports)],
        },
        "dispatch": {"stall_timeout_s": 2, "probe_interval_s": 0.2, "down_grace_s": 2},
    }


def run_through(engine: dict, requests: list[Request], model_path: str, log_dir) -> tuple[dict, dict]:
    """Serve ``engine`` as the run stage does: servers from its launcher, then the endpoint backend."""
    completes: dict[int, list[list[int]]] = defaultdict(list)
    with serving(engine, model_path, log_dir) as run_engine:
        backend = make_backend(
            run_engine,
            model_path=model_path,
            generation=GenerationSettings(max_new_tokens=MAX_NEW),
            stream=True,
            on_first_tokens=None,
            on_completions=lambda answers: [completes[i].append(tokens) for i, tokens in answers],
        )
        done = threading.Event()

        def issue() -> None:
            backend.submit(requests)
            deadline = time.monotonic() + 60
            while len(completes) < len(requests) and time.monotonic() < deadline:
                time.sleep(0.01)
            done.set()

        try:
            backend.start()
            threading.Thread(target=issue, daemon=True).start()
            backend.serve_until(done)
        finally:
            stats = backend.stats
            backend.stop()
    return completes, stats


def test_a_registered_launcher_serves_an_endpoints_engine(toy_launcher, tmp_path):
    ports = free_ports(2)
    engine = toy_engine(ports)
    with pytest.raises(UserError, match="unknown server launcher 'toy-sim'.*registered: external, kubernetes"):
        with serving(engine, "model", tmp_path):
            pass

    module = toy_launcher()
    assert LAUNCHERS["toy-sim"] is module.launch_toy
    requests = [Request(i, [i + 1, 2 * i + 3, 7]) for i in range(40)]
    completes, stats = run_through(engine, requests, str(tmp_path / "model"), tmp_path / "logs")

    assert sorted(completes) == [r.request_id for r in requests]
    for req in requests:
        assert completes[req.request_id] == [output_token_ids(list(req.prompt_token_ids), MAX_NEW, 20)]
    assert stats["unanswered_queries"] == 0
    assert stats["servers"]["launch"] == "toy-sim"  # what the launcher recorded reaches the run's stats
    assert sum(e["completed"] for e in stats["endpoints"].values()) == len(requests)
    (sim,) = module.STARTED
    assert sim.proc.poll() is not None  # leaving the run stopped the servers


def test_the_built_in_launchers_are_registered():
    assert {"external", "local", "slurm", "kubernetes"} <= set(LAUNCHERS)


def test_config_validation_takes_the_registered_launchers(toy_launcher):
    """``engine.endpoints.launch`` allows exactly the registered launchers: a typo is named at
    parse time, and a newly registered one is accepted without a schema edit."""
    import yaml
    from conftest import REPO, SCHEMA

    from mlperf_repro.config import validate_config

    def config_with(launch):
        config = yaml.safe_load((REPO / "config/examples/multinode-local.yaml").read_text())
        for system in config["systems"].values():
            if (system.get("engine") or {}).get("backend") == "endpoints":
                system["engine"]["endpoints"]["launch"] = launch
        return config

    validate_config(config_with("external"), SCHEMA, launchers=LAUNCHERS)
    with pytest.raises(
        UserError,
        match=r"endpoints.launch: 'slrum' is not allowed; allowed values: external, kubernetes, local, shared, slurm",
    ):
        validate_config(config_with("slrum"), SCHEMA, launchers=LAUNCHERS)
    with pytest.raises(UserError, match="endpoints.launch: 'toy-sim'"):
        validate_config(config_with("toy-sim"), SCHEMA, launchers=LAUNCHERS)
    toy_launcher()
    validate_config(config_with("toy-sim"), SCHEMA, launchers=LAUNCHERS)
