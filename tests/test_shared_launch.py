"""launch: shared without an engine: the supervisor's life cycle with a real (plain HTTP)
server process, the config's refusals, and the plan view's model loads. Against a real vLLM
server: tests/test_shared_server.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SCHEMA, model_load_per_run

from mlperf_repro.config import validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.launch.shared import SUPERVISOR_MODULE, _alive, _is_supervisor, free_port, read_state, stop

SYSTEM = "cpu-2c-vllm"


def supervised(home: Path, watch_pid: int, idle_timeout_s: float = 600) -> tuple[subprocess.Popen, dict]:
    """A supervisor over one plain HTTP server, started as the launcher starts it."""
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    spec = {
        "servers": [{"name": "web", "port": port, "log": str(home / "web.log"), "command": command}],
        "env": {},
        "watch_pid": watch_pid,
        "idle_timeout_s": idle_timeout_s,
    }
    (home / "spec.json").write_text(json.dumps(spec))
    with open(home / "supervisor.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", SUPERVISOR_MODULE, str(home)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while (state := read_state(home)) is None:
        assert time.monotonic() < deadline and proc.poll() is None, "the supervisor wrote no state"
        time.sleep(0.05)
    return proc, state


def wait_exit(proc: subprocess.Popen, timeout_s: float = 30) -> None:
    proc.wait(timeout_s)


def test_the_servers_stop_when_the_workflow_ends(tmp_path):
    workflow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    proc, state = supervised(tmp_path / "home", workflow.pid)
    server = state["servers"][0]["pid"]
    assert _is_supervisor(proc.pid, tmp_path / "home") and _alive(server)
    workflow.kill()
    workflow.wait()
    wait_exit(proc)
    assert not _alive(server) and read_state(tmp_path / "home") is None
    assert f"stopping: the workflow (pid {workflow.pid}) has ended" in (tmp_path / "home/supervisor.log").read_text()


def test_stop_asks_the_supervisor_and_waits(tmp_path):
    home = tmp_path / "home"
    proc, state = supervised(home, watch_pid=1)
    stop(home)
    assert proc.poll() is not None and not _alive(state["servers"][0]["pid"]) and read_state(home) is None


def test_unused_servers_stop_after_the_idle_timeout(tmp_path):
    proc, state = supervised(tmp_path / "home", watch_pid=1, idle_timeout_s=0.5)
    wait_exit(proc)
    assert not _alive(state["servers"][0]["pid"])
    assert "stopping: no run used the servers for 0.5 s" in (tmp_path / "home/supervisor.log").read_text()


def test_a_pid_that_is_not_the_supervisor_is_never_taken_for_it(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not _is_supervisor(other.pid, tmp_path)
    finally:
        other.kill()


def shared_config(config: dict, **endpoint_changes) -> dict:
    engine = config["systems"][SYSTEM]["engine"]
    assert engine["endpoints"]["launch"] == "shared"  # the default config's
    engine["endpoints"]["list"][0].update(endpoint_changes)
    return config


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"launch": "local"},
            "port 0 (endpoint(s) local) means a free port chosen at start, which only launch: shared",
        ),
        ({"idle_timeout_s": 60, "launch": "external", "port_": 8000}, "idle_timeout_s: only used with launch: shared"),
        ({"host_": "gpu-node-1"}, "'shared' starts servers on this host, but endpoint(s) local name another host"),
    ],
)
def test_the_config_refuses_what_shared_alone_means(default_config, change, message):
    endpoints = default_config["systems"][SYSTEM]["engine"]["endpoints"]
    for key, value in change.items():
        if key.endswith("_"):
            endpoints["list"][0][key[:-1]] = value
        else:
            endpoints[key] = value
    with pytest.raises(UserError) as err:
        validate_config(default_config, SCHEMA)
    assert message in str(err.value)


def test_the_plan_view_prices_one_model_load_per_shared_system(default_config):
    shared = estimate_plan(validate_config(default_config, SCHEMA))
    per_run = estimate_plan(validate_config(model_load_per_run(default_config), SCHEMA))
    runs = lambda est: [  # noqa: E731
        d for r in est.rows for d in r.details if d["rule"] in ("loadgen_run", "compliance_run", "find_performance")
    ]
    processes = len(runs(per_run))
    # The default config: run_overhead_s 30, attach_overhead_s 5 (default).
    assert sum(d["wall_s"] for d in runs(per_run)) - sum(d["wall_s"] for d in runs(shared)) == pytest.approx(
        (processes - 1) * (30 - 5)
    )
    assert any(
        f"model loads of {SYSTEM}: 1 for its {processes} LoadGen processes (launch: shared)" in n for n in shared.notes
    )
    assert any(
        f"model loads of {SYSTEM}: {processes} (one per LoadGen process); servers started once" in n
        for n in per_run.notes
    )


def test_the_plan_view_prices_one_pipeline_load_for_a_shared_video_system(demo_config):
    video = "cpu-2c-diffusers"
    shared = estimate_plan(validate_config(copy.deepcopy(demo_config), SCHEMA))
    per_run = estimate_plan(validate_config(model_load_per_run(demo_config), SCHEMA))
    processes = sum(
        d.get("loadgen_runs", 1)
        for r in shared.rows
        for d in r.details
        if d.get("system") == video
        and d["rule"] in ("loadgen_run", "compliance_run", "measurement_pair", "find_performance")
    )
    assert any(
        f"model loads of {video}: 1 for its {processes} LoadGen processes (launch: shared)" in n for n in shared.notes
    )
    assert any(
        f"model loads of {video}: {processes} (one per LoadGen process); its video server started once" in n
        for n in per_run.notes
    )
