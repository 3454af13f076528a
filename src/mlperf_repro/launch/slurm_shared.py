"""``launch: slurm-shared``: the servers of a system run in a SLURM job of their own, the
*server job*, which the first run job of the system submits and every later run job of the
system attaches to: one model load per workflow run on the allocation's nodes instead of
one per LoadGen process (minutes each for a 70B model on eight GPUs, ten or more runs per
system). The run jobs are heads only: one node, no GPU.

Why a job of its own and not ``launch: slurm`` with a longer life: a run job's allocation
ends with its LoadGen test (one test per process), so servers started in it cannot outlive
it; a separate allocation can, and the run jobs stay separate jobs with their own outputs,
retries and logs. (Snakemake's service jobs would need every run of the system in one
group job, scheduled and retried together: see :mod:`.shared`.)

The state lives on the shared file system, in ``results/servers/slurm-<key>/``:
``spec.json`` (what to serve), ``job.json`` (the server job last submitted), ``state.json``
(written by the server job once every server answers: its job id, the servers' real hosts
and ports, the nodes' facts, the GPU screen), a lock, and per server job its log
(``server-job-<id>.log``) and its servers' logs (``servers-<id>/``).

* A run holds the lock for its whole LoadGen test: one measurement per server job at a time.
* Before each run the servers' prefix caches are emptied (as with ``launch: shared``).
* A server job that is gone, not RUNNING, or whose servers do not all answer /health is
  cancelled and a new one submitted; a server that dies during a run fails that run, and
  the rule's retry gets a new server job.
* The server job stops itself when no run has used it for ``idle_timeout_s``, when a server
  step exits, or when ``stop`` appears in its folder; the workflow's end (the Snakefile's
  onsuccess / onerror) cancels it, pending or running. Its ``allocation.time_min`` bounds it
  in any case.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import UserError
from . import register_launcher
from .common import _healthy
from .shared import (
    DEFAULT_IDLE_TIMEOUT_S,
    SERVER_ENV,
    SHARED_DIR,
    _exclusive,
    _idle_for,
    read_state,
    reset_prefix_caches,
    server_key,
    write_state,
)
from .slurm import _slurm_query, allocation_node_facts, slurm_allocation_servers

SERVER_JOB_MODULE = "mlperf_repro.launch.slurm_server"
DEFAULT_TIME_MIN = 1440
DEFAULT_QUEUE_TIMEOUT_S = 3600.0
HOME_PREFIX = "slurm-"
# sbatch flags the site may set in allocation.sbatch_args instead of inheriting the run job's.
PARTITION_FLAGS = ("-p", "--partition")
ACCOUNT_FLAGS = ("-A", "--account")
GPU_FLAGS = ("--gres", "--gpus", "--gpus-per-node", "-G", "--gpus-per-task")


def home_of(engine: dict[str, Any], model_path: str, root: Path = SHARED_DIR) -> Path:
    return root.resolve() / f"{HOME_PREFIX}{server_key(engine, model_path)}"


@register_launcher("slurm-shared")
@contextmanager
def launch_slurm_shared(
    engine: dict[str, Any], model_path: str, log_dir: str | Path, *, screening: dict | None = None
) -> Iterator[dict[str, Any]]:
    """Attach to the system's server job (submitting one when none serves); yields the engine
    with the servers' real hosts, the nodes' facts and, when screened, the GPU screen."""
    home = home_of(engine, model_path)
    home.mkdir(parents=True, exist_ok=True)
    with _exclusive(home / "lock"):
        state = read_state(home)
        problem = serving_problem(state) if state else "none running"
        if problem is None:
            print(
                f"[shared server job] attaching to SLURM job {state['job_id']} (started {state['started']}; "
                f"run {state['runs'] + 1} on it; {home})",
                flush=True,
            )
        else:
            state = start(home, engine, model_path, screening, problem)
        reset_prefix_caches(state["endpoints"])
        state["runs"] += 1
        state["last_used"] = time.time()
        write_state(home, state)
        endpoints = engine["endpoints"]
        run_engine = dict(engine, endpoints=dict(endpoints, list=state["endpoints"]))
        run_engine["node_facts"] = state["node_facts"]
        if state.get("gpu_screening") is not None:
            run_engine["gpu_screening"] = state["gpu_screening"]
        try:
            yield run_engine
        finally:
            state = read_state(home) or state
            state["last_used"] = time.time()
            write_state(home, state)


# -- the run job's side --------------------------------------------------------------------
def job_state(job_id: str) -> str:
    """SLURM's state of the job (RUNNING, PENDING, ...); GONE once the controller forgot it."""
    try:
        fields = dict(
            item.split("=", 1)
            for item in _slurm_query(["scontrol", "show", "job", "-o", job_id]).split()
            if "=" in item
        )
    except UserError as exc:
        if "Invalid job id" in str(exc):
            return "GONE"
        raise
    return fields.get("JobState", "UNKNOWN")


def serving_problem(state: dict[str, Any]) -> str | None:
    """None when the server job runs and every server answers /health; else why not."""
    current = job_state(state["job_id"])
    if current != "RUNNING":
        return f"server job {state['job_id']} is {current}"
    for server in state["endpoints"]:
        if not _healthy(server["host"], server["port"]):
            return f"server {server['name']} ({server['host']}:{server['port']}) does not answer /health"
    return None


def start(home: Path, engine: dict[str, Any], model_path: str, screening: dict | None, problem: str) -> dict:
    """A server job that serves: the one a run submitted and died waiting for, if it is
    still queued or starting, else a new one (cancelling the one that stopped serving)."""
    print(f"[shared server job] no server job serves this system ({problem})", flush=True)
    submitted = _read_json(home / "job.json")
    waiting_for = None
    if submitted:
        current = job_state(submitted["job_id"])
        state = read_state(home)
        if current in ("PENDING", "CONFIGURING") or (current == "RUNNING" and not state):
            waiting_for = submitted["job_id"]
            print(f"[shared server job] waiting for SLURM job {waiting_for}, submitted earlier ({current})", flush=True)
        elif current not in ("GONE", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED"):
            print(f"[shared server job] cancelling SLURM job {submitted['job_id']}: {problem}", flush=True)
            cancel(home, submitted["job_id"])
    if waiting_for is None:
        (home / "state.json").unlink(missing_ok=True)
        (home / "stop").unlink(missing_ok=True)
        waiting_for = submit(home, engine, model_path, screening)
    return wait_for_servers(home, waiting_for, engine["endpoints"])


def server_job_spec(engine: dict[str, Any], model_path: str, screening: dict | None) -> dict[str, Any]:
    endpoints = engine["endpoints"]
    return {
        "entries": endpoints["list"],
        "model_path": str(Path(model_path).resolve()),
        "served_model_name": endpoints.get("served_model_name", "model"),
        "engine_args": engine.get("engine_args", {}),
        "env": {**engine.get("env", {}), **SERVER_ENV},
        "srun_args": endpoints["allocation"].get("srun_args", []),
        "startup_timeout_s": endpoints.get("startup_timeout_s", 600),
        "idle_timeout_s": endpoints.get("idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S),
        "screening": (screening or {}).get("settings"),
        "system": (screening or {}).get("system", "<system>"),
    }


def sbatch_command(home: Path, allocation: dict[str, Any], inherited: dict[str, str]) -> list[str]:
    """The server job's sbatch line: its nodes and a task per server, the time limit, a GPU
    request per node when the servers have accelerators, the run job's partition and
    account unless ``allocation.sbatch_args`` names its own, then those args."""
    extra = list(allocation.get("sbatch_args", []))
    named = {arg.split("=")[0] for arg in extra}
    command = [
        "sbatch",
        "--parsable",
        f"--job-name=vllm-servers-{home.name[len(HOME_PREFIX) :]}",
        f"--nodes={allocation['nodes']}",
        f"--ntasks-per-node={allocation.get('servers_per_node', 1)}",
        f"--time={allocation.get('time_min', DEFAULT_TIME_MIN)}",
        f"--output={home}/server-job-%j.log",
        f"--chdir={Path.cwd()}",
    ]
    gpus = allocation.get("servers_per_node", 1) * allocation.get("accelerator_count", 1)
    if allocation.get("accelerator", "N/A") != "N/A" and gpus and not named & set(GPU_FLAGS):
        command.append(f"--gpus-per-node={gpus}")
    for flags, key in ((PARTITION_FLAGS, "Partition"), (ACCOUNT_FLAGS, "Account")):
        if inherited.get(key) and not named & set(flags):
            command.append(f"{flags[1]}={inherited[key]}")
    command += extra
    command += ["--wrap", shlex.join([sys.executable, "-m", SERVER_JOB_MODULE, str(home)])]
    return command


def run_job_placement() -> dict[str, str]:
    """The partition and account of the SLURM job this runs in (none outside one)."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        return {}
    fields = dict(
        item.split("=", 1) for item in _slurm_query(["scontrol", "show", "job", "-o", job_id]).split() if "=" in item
    )
    return {key: fields[key] for key in ("Partition", "Account") if fields.get(key) not in (None, "", "(null)")}


def submit(home: Path, engine: dict[str, Any], model_path: str, screening: dict | None) -> str:
    (home / "spec.json").write_text(json.dumps(server_job_spec(engine, model_path, screening), indent=2) + "\n")
    command = sbatch_command(home, engine["endpoints"]["allocation"], run_job_placement())
    job_id = _slurm_query(command, retry=False).strip().split(";")[0]
    if not job_id.isdigit():
        raise UserError(f"sbatch answered {job_id!r}, not a job id: {shlex.join(command)}")
    (home / "job.json").write_text(
        json.dumps({"job_id": job_id, "submitted": _now(), "command": command}, indent=2) + "\n"
    )
    print(
        f"[shared server job] submitted SLURM job {job_id} for the servers (log {home}/server-job-{job_id}.log); "
        f"later runs of this system attach to it",
        flush=True,
    )
    return job_id


def wait_for_servers(home: Path, job_id: str, endpoints: dict[str, Any], poll_s: float = 2.0) -> dict:
    """The server job's state once it has written it (every server answers), or a UserError:
    the job ended, stayed queued past ``allocation.queue_timeout_s``, or its servers did not
    start within ``startup_timeout_s`` of the job starting."""
    queue_timeout = endpoints["allocation"].get("queue_timeout_s", DEFAULT_QUEUE_TIMEOUT_S)
    startup_timeout = endpoints.get("startup_timeout_s", 600)
    log = home / f"server-job-{job_id}.log"
    submitted, running_since, last = time.monotonic(), None, None
    while True:
        state = read_state(home)
        if state and state.get("job_id") == job_id:
            return state
        current = job_state(job_id)
        if current != last:
            print(f"[shared server job] SLURM job {job_id}: {current}", flush=True)
            last = current
        now = time.monotonic()
        if current == "RUNNING":
            running_since = running_since or now
            if now - running_since > startup_timeout:
                cancel(home, job_id)
                raise UserError(
                    f"the servers of SLURM job {job_id} did not all answer /health within {startup_timeout:g} s "
                    f"(engine.endpoints.startup_timeout_s); see {log}{_tail(log)}"
                )
        elif current in ("PENDING", "CONFIGURING"):
            if now - submitted > queue_timeout:
                cancel(home, job_id)
                raise UserError(
                    f"the server job {job_id} waited in the queue longer than {queue_timeout:g} s "
                    f"(engine.endpoints.allocation.queue_timeout_s); cancelled"
                )
        else:
            raise UserError(
                f"the server job {job_id} ended ({current}) before its servers answered; see {log}{_tail(log)}"
            )
        time.sleep(poll_s)


def cancel(home: Path, job_id: str) -> None:
    """Stop the server job: ``stop`` for a running one (it stops its servers and exits), and
    scancel, which also removes a queued one."""
    (home / "stop").touch()
    subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
    state = read_state(home)
    if state and state.get("job_id") == job_id:
        (home / "state.json").unlink(missing_ok=True)


def stop_server_jobs(root: Path = SHARED_DIR) -> list[str]:
    """Cancel every server job under ``root`` (the workflow has ended); returns their ids."""
    stopped = []
    for home in sorted(Path(root).glob(f"{HOME_PREFIX}*")):
        submitted = _read_json(home / "job.json")
        if submitted and job_state(submitted["job_id"]) not in ("GONE", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"):
            cancel(home, submitted["job_id"])
            stopped.append(submitted["job_id"])
    return stopped


# -- the server job's side (python -m mlperf_repro.launch.slurm_server HOME) ----------------
def serve(home: Path, poll_s: float = 1.0) -> int:
    """Inside the server job: start the servers on the allocation's nodes, write the state
    once all answer, and keep them until stopped, idle, or a server step exits."""
    signal.signal(signal.SIGTERM, _exit_on_signal)  # scancel / time limit: the steps go too
    spec = json.loads((home / "spec.json").read_text())
    job_id = os.environ["SLURM_JOB_ID"]
    with slurm_allocation_servers(
        spec["entries"],
        spec["model_path"],
        spec["served_model_name"],
        spec["engine_args"],
        home / f"servers-{job_id}",
        srun_args=spec["srun_args"],
        env=spec["env"],
        startup_timeout_s=spec["startup_timeout_s"],
        screening=spec["screening"],
        system=spec["system"],
    ) as (placed, screened, steps):
        state = {
            "job_id": job_id,
            "started": _now(),
            "runs": 0,
            "last_used": time.time(),
            "endpoints": placed,
            "node_facts": allocation_node_facts(job_id, list(dict.fromkeys(e["host"] for e in placed))),
            "gpu_screening": screened,
        }
        write_state(home, state)
        addresses = ", ".join(f"{e['host']}:{e['port']}" for e in placed)
        print(f"{_now()} serving: {addresses}", flush=True)
        try:
            reason = None
            while reason is None:
                time.sleep(poll_s)
                exited = [host for host, step in steps.items() if step.poll() is not None]
                if (home / "stop").exists():
                    reason = "asked to stop"
                elif exited:
                    reason = f"the server step on {', '.join(exited)} exited"
                elif _idle_for(home) > spec["idle_timeout_s"]:
                    reason = f"no run used the servers for {spec['idle_timeout_s']:g} s"
            print(f"{_now()} stopping: {reason}", flush=True)
        finally:
            # First the state: a run arriving now submits a new job instead of attaching.
            current = read_state(home)
            if current and current.get("job_id") == job_id:
                (home / "state.json").unlink(missing_ok=True)
    return 0


def _exit_on_signal(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        return "\n" + path.read_text(errors="replace")[-chars:]
    except FileNotFoundError:
        return ""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
