"""engine.launch: shared for the diffusers backend, against the REAL tiny Wan pipeline in a real
video server: runs attach to one server and log the same videos, byte for byte, as a pipeline
in their own process; a server killed between two runs is started again by the next run, which
is VALID; a pipeline that cannot load fails the run with the reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from test_wan_task import CHILD, loadgen_run, tiny_wan  # noqa: F401 (tiny_wan: the fixture)

from mlperf_repro.accuracy.loadgen_log import read_accuracy_log
from mlperf_repro.launch.shared import SHARED_DIR, read_state, stop
from mlperf_repro.loadgen_logs import read_detail

pytestmark = pytest.mark.slow
ENGINE_ARGS = {"batch_size": 2, "threads": 1}
SHARED = {"backend": "diffusers", "launch": "shared", "engine_args": ENGINE_ARGS, "env": {}}
IN_PROCESS = {"backend": "diffusers", "engine_args": ENGINE_ARGS, "env": {}}
ACCURACY_CONF = "wan-2.2-t2v-a14b.Offline.target_qps = 10\n"
# Enough queries for LoadGen's early-stopping estimate of the 90th percentile.
SINGLE_STREAM_CONF = (
    "wan-2.2-t2v-a14b.SingleStream.min_query_count = 64\n"
    "wan-2.2-t2v-a14b.SingleStream.min_duration = 2000\n"
    "wan-2.2-t2v-a14b.SingleStream.target_latency = 100\n"
)


def videos(out):
    return {i: v.tobytes() for i, v in read_accuracy_log(out / "mlperf_log_accuracy.json", "uint8")}


def post(port: int, path: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_runs_share_one_video_server_render_as_in_process_and_survive_its_death(tiny_wan, tmp_path):  # noqa: F811
    def run(name, engine, scenario="Offline", mode="accuracy", conf=ACCURACY_CONF, data="data"):
        out = loadgen_run(tiny_wan, tmp_path, name, scenario, mode, conf, engine=engine, data=data)
        return out, (tmp_path / f"{name}.stdout").read_text()

    try:
        first, first_log = run("first", SHARED)
        second, second_log = run("second", SHARED)
        fresh, _ = run("fresh", IN_PROCESS)
        assert "[shared server] starting 1 server(s)" in first_log
        assert "[shared server] attaching to the servers started" in second_log
        # Two runs through one server log the very videos a pipeline of their own renders.
        assert videos(first) == videos(fresh) and videos(second) == videos(fresh)
        assert sorted(videos(fresh)) == [0, 1, 2, 3]
        record = json.loads((second / "run_record.json").read_text())
        assert record["backend_stats"]["videos"] == 4 and record["backend_stats"]["server"]["run_on_it"] == 2
        fresh_record = json.loads((fresh / "run_record.json").read_text())
        assert record["backend_stats"]["latent"] == fresh_record["backend_stats"]["latent"] == "drawn from seed 42"

        (home,) = (tmp_path / SHARED_DIR).iterdir()
        server = read_state(home)["servers"][0]
        # What the server refuses, it says why, and it keeps serving.
        assert post(server["port"], "/render", b'{"prompts": []}')[0] == 400
        assert post(server["port"], "/render", b"not json")[0] == 400
        assert post(server["port"], "/nowhere", b"{}")[0] == 404

        # The server dies between two runs: the next run starts it again and is VALID.
        os.killpg(server["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while read_state(home) is not None and time.monotonic() < deadline:
            time.sleep(0.2)  # its supervisor sees it exit and clears the state
        out, log = run("after-kill", SHARED, "SingleStream", "performance", SINGLE_STREAM_CONF, data="data64")
        assert "[shared server] starting 1 server(s)" in log
        assert read_state(home)["servers"][0]["pid"] != server["pid"]
        detail = read_detail(out / "mlperf_log_detail.txt")
        assert detail["result_validity"] == "VALID" and detail["errors"] == []

        # Killed while no run held it and before its supervisor noticed: the run restarts it.
        os.killpg(read_state(home)["servers"][0]["pid"], signal.SIGKILL)
        out, log = run("right-after-kill", SHARED)
        assert "[shared server] starting 1 server(s)" in log or "[shared server] restarting" in log
        assert videos(out) == videos(fresh)
    finally:
        for home in (tmp_path / SHARED_DIR).glob("*"):
            stop(home)
    assert not any(p.name == "state.json" for p in (tmp_path / SHARED_DIR).rglob("*"))


def test_a_pipeline_that_cannot_load_fails_the_run_with_the_reason(tiny_wan, tmp_path):  # noqa: F811
    args = json.loads(_args_file(tiny_wan, tmp_path).read_text())
    args["generation"]["latent_file"] = str(tmp_path / "missing_latent.pt")
    (tmp_path / "bad.json").write_text(json.dumps(args))
    try:
        result = subprocess.run(
            [sys.executable, str(CHILD), str(tmp_path / "bad.json")],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=600,
        )
    finally:
        for home in (tmp_path / SHARED_DIR).glob("*"):
            stop(home)
    assert result.returncode != 0
    assert "exited during start-up" in result.stderr and "missing_latent.pt does not exist" in result.stderr


def _args_file(tiny_wan, tmp_path):  # noqa: F811
    """The arguments loadgen_run writes for a shared run, without running it."""
    from test_wan_task import FACTS, VIDEO

    (tmp_path / "bad.user.conf").write_text(ACCURACY_CONF)
    path = tmp_path / "base.json"
    path.write_text(
        json.dumps(
            dict(
                model_dir=str(tiny_wan / "model"),
                dataset_dir=str(tiny_wan / "data"),
                dataset_file=str(tiny_wan / "data" / "vbench_prompts.txt"),
                user_conf=str(tmp_path / "bad.user.conf"),
                out_dir=str(tmp_path / "bad"),
                loadgen_model="wan-2.2-t2v-a14b",
                loadgen_scenario="Offline",
                mode="accuracy",
                performance_sample_count=4,
                generation={**FACTS.facts["generation"], **VIDEO},
                engine=SHARED,
                task="text-to-video",
            )
        )
    )
    return path
