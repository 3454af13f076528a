"""``launch: shared``: the system's ``vllm serve`` processes start once per workflow run and
every run job of that system (performance, accuracy, compliance, repeats) attaches to them,
instead of one model load per LoadGen process (``launch: local``).

Why a server the run jobs attach to, not Snakemake's service jobs: a service job lives only
inside a group job, so every run of the system would have to be one group, scheduled and
retried together; here each run stays its own job with its own outputs, and the server is a
cache of the model load that any run can rebuild.

How one server serves many runs and each run still sees a fresh engine:

* The servers of one (model, served name, engine_args, env, endpoint list) live under
  ``results/servers/<key>/``: ``state.json`` (pids, ports), the servers' logs and a lock.
* A run holds the lock for its whole LoadGen test: one measurement per server at a time;
  a second run of the system waits for it.
* Before each run the prefix cache is emptied (vLLM's ``/reset_prefix_cache``, which only
  succeeds once no request holds cache blocks): no run is faster from an earlier run's prompts.
* A dead or unhealthy server found by a run is stopped and started again; a server that
  dies during a run fails that run, and the rule's retry gets a restarted server.
* A detached supervisor process owns the servers and stops them when the workflow's
  Snakemake process exits, when no run has used them for ``idle_timeout_s``, or when
  ``results/servers/<key>/stop`` appears. On a cluster executor each job is its own
  allocation, whose end stops the supervisor with it: there this is ``launch: local``
  (:mod:`.slurm_shared` is the SLURM form: the servers in a job of their own).

The text-to-video form (backend diffusers, ``engine.launch: shared``) is the same machinery
(:func:`attach`) around one video server (:mod:`mlperf_repro.video.server`) instead of
``vllm serve``: :func:`shared_video_server`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import UserError
from . import register_launcher
from .common import _healthy, serve_command, wait_until_healthy

SHARED_DIR = Path("results/servers")
SUPERVISOR_MODULE = "mlperf_repro.launch.shared_supervisor"
DEFAULT_IDLE_TIMEOUT_S = 600.0
# vLLM's /reset_prefix_cache is one of its dev-mode routes.
SERVER_ENV = {"VLLM_SERVER_DEV_MODE": "1"}


def server_key(engine: dict[str, Any], model_path: str) -> str:
    """What makes two runs' servers interchangeable: the same model, engine and endpoints."""
    endpoints = engine["endpoints"]
    identity = {
        "model": os.path.realpath(model_path),
        "served_model_name": endpoints.get("served_model_name", "model"),
        "engine_args": engine.get("engine_args", {}),
        "env": engine.get("env", {}),
        "endpoints": [[e["name"], e["host"], e["port"]] for e in endpoints["list"]],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


@register_launcher("shared")
@contextmanager
def launch_shared(
    engine: dict[str, Any], model_path: str, log_dir: str | Path, *, screening: dict | None = None
) -> Iterator[dict[str, Any]]:
    """Attach to the system's running ``vllm serve`` servers (starting them if none answer);
    yields the engine with the servers' real ports. The servers keep running after the run."""
    endpoints = engine["endpoints"]

    def servers(home: Path) -> list[dict[str, Any]]:
        found = []
        for endpoint in endpoints["list"]:
            port = endpoint["port"] or free_port()
            if _port_taken(port):
                raise UserError(
                    f"engine.endpoints.list ({endpoint['name']}): port {port} on this host is already in use by "
                    f"another process; choose another port, or port: 0 for a free one"
                )
            command = serve_command(
                model_path,
                endpoints.get("served_model_name", "model"),
                "127.0.0.1",
                port,
                engine.get("engine_args", {}),
            )
            found.append(
                {
                    "name": endpoint["name"],
                    "port": port,
                    "log": str(home / f"vllm-serve-{endpoint['name']}.log"),
                    "command": command,
                }
            )
        return found

    spec = ServerSpec(
        key=server_key(engine, model_path),
        what="vllm serve",
        describe=model_path,
        servers=servers,
        env={**engine.get("env", {}), **SERVER_ENV},
        idle_timeout_s=endpoints.get("idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S),
        startup_timeout_s=endpoints.get("startup_timeout_s", 600),
        # No run is faster from an earlier run's prompts.
        before_each_run=lambda state: reset_prefix_caches(state["servers"]),
    )
    with attach(spec) as state:
        ports = {s["name"]: s["port"] for s in state["servers"]}
        yield dict(engine, endpoints=dict(endpoints, list=[dict(e, port=ports[e["name"]]) for e in endpoints["list"]]))


@contextmanager
def shared_video_server(
    engine: dict[str, Any], model_path: str, generation: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """The text-to-video form (backend diffusers, ``engine.launch: shared``): one video server
    (:mod:`mlperf_repro.video.server`) per (pipeline, generation settings, engine_args, env),
    held by one run at a time; yields its state (``servers[0]["port"]``). Nothing to empty
    between runs: a video depends on its prompt and the fixed latent only."""
    from ..video.server import server_command

    engine_args = engine.get("engine_args", {})
    identity = {
        "backend": "diffusers",
        "model": os.path.realpath(model_path),
        "generation": generation,
        "engine_args": engine_args,
        "env": engine.get("env", {}),
    }

    def servers(home: Path) -> list[dict[str, Any]]:
        port = free_port()
        command = server_command(model_path, generation, engine_args, port)
        return [{"name": "video", "port": port, "log": str(home / "video-server.log"), "command": command}]

    spec = ServerSpec(
        key=hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16],
        what="video server",
        describe=model_path,
        servers=servers,
        env=dict(engine.get("env", {})),
    )
    with attach(spec) as state:
        yield state


@dataclass(frozen=True)
class ServerSpec:
    """What :func:`attach` starts once and lets runs share: the servers of one ``key`` (what
    makes two runs' servers interchangeable), each ``{"name", "port", "log", "command"}``
    from ``servers(home)``, their environment, how long they may sit unused, and what each
    run needs done before it uses them (``before_each_run(state)``)."""

    key: str
    what: str
    describe: str
    servers: Callable[[Path], list[dict[str, Any]]]
    env: dict[str, str] = field(default_factory=dict)
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    startup_timeout_s: float = 600.0
    before_each_run: Callable[[dict[str, Any]], None] | None = None


@contextmanager
def attach(spec: ServerSpec) -> Iterator[dict[str, Any]]:
    """Hold the servers of ``spec`` for one run: started if none answer (restarted if dead
    or unhealthy), locked against other runs until the context ends; yields their state."""
    # Per host: a state file written on another node names pids that mean nothing here.
    home = SHARED_DIR.resolve() / f"{socket.gethostname()}-{spec.key}"
    home.mkdir(parents=True, exist_ok=True)
    with _exclusive(home / "lock"):
        state = read_state(home)
        problem = _not_serving(state, home) if state else "none running"
        if problem is None:
            print(
                f"[shared server] attaching to the servers started {state['started']} "
                f"(run {state['runs'] + 1} on them; {home})",
                flush=True,
            )
        else:
            if state:
                print(f"[shared server] restarting the servers: {problem}", flush=True)
                stop(home)
            state = start(home, spec)
        if spec.before_each_run is not None:
            spec.before_each_run(state)
        state["runs"] += 1
        state["last_used"] = time.time()
        write_state(home, state)
        try:
            yield state
        finally:
            state = read_state(home) or state
            state["last_used"] = time.time()
            write_state(home, state)


# -- state ------------------------------------------------------------------------------
def read_state(home: Path) -> dict[str, Any] | None:
    try:
        return json.loads((home / "state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_state(home: Path, state: dict[str, Any]) -> None:
    tmp = home / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    tmp.replace(home / "state.json")


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[shared server] waiting for another run to finish with the servers ({path.parent})", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _is_supervisor(pid: int, home: Path) -> bool:
    """``pid`` is the supervisor of ``home`` (not a process that got its number later)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    return _alive(pid) and SUPERVISOR_MODULE.encode() in cmdline and str(home).encode() in cmdline


def _not_serving(state: dict[str, Any], home: Path) -> str | None:
    """None when the supervisor and every server run and answer /health; else why not."""
    if not _is_supervisor(state["supervisor_pid"], home):
        return f"their supervisor (pid {state['supervisor_pid']}) is gone"
    for server in state["servers"]:
        if not _alive(server["pid"]):
            return f"server {server['name']} (pid {server['pid']}) has exited; see {server['log']}"
        if not _healthy("127.0.0.1", server["port"]):
            return f"server {server['name']} on port {server['port']} does not answer /health; see {server['log']}"
    return None


# -- start and stop ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def is_snakemake(argv: list[bytes]) -> bool:
    """``argv`` runs Snakemake: ``snakemake ...``, ``python .../snakemake ...`` or ``python -m
    snakemake ...``; not a shell or wrapper whose arguments merely mention it (``bash -c '...
    snakemake ...'``, ``strace ... snakemake``), which would outlive the workflow."""
    names = [Path(arg.decode(errors="replace")).name for arg in argv[:2]]
    if names and names[0] == "snakemake":
        return True
    is_python = bool(names) and names[0].startswith("python")
    return is_python and (names[1:] == ["snakemake"] or argv[1:3] == [b"-m", b"snakemake"])


def workflow_pid() -> int:
    """The outermost Snakemake process above this one (the workflow run the servers belong
    to); without one, this process's parent."""
    found, pid = None, os.getppid()
    while pid > 1:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ValueError, IndexError):
            break
        if is_snakemake(argv):
            found = pid
        pid = ppid
    return found or os.getppid()


def start(home: Path, spec: ServerSpec) -> dict[str, Any]:
    """Start the supervisor, which starts the servers; return their state once all answer."""
    servers = spec.servers(home)
    supervised = {
        "servers": servers,
        "env": spec.env,
        "watch_pid": workflow_pid(),
        "idle_timeout_s": spec.idle_timeout_s,
    }
    (home / "spec.json").write_text(json.dumps(supervised, indent=2) + "\n")
    (home / "state.json").unlink(missing_ok=True)
    (home / "stop").unlink(missing_ok=True)
    with open(home / "supervisor.log", "w") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", SUPERVISOR_MODULE, str(home)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this run; stopped by the workflow's end, not the job's
        )
    print(
        f"[shared server] starting {len(servers)} server(s) for {spec.describe} (supervisor pid {supervisor.pid}, "
        f"logs in {home}); later runs of this system attach to them",
        flush=True,
    )

    def check(waiting: set) -> None:
        if supervisor.poll() is not None:
            tails = [f"{log}:\n{_tail(Path(log))}" for log in [s["log"] for s in servers] + [home / "supervisor.log"]]
            raise UserError("the shared server(s) exited during start-up\n" + "\n".join(tails))

    wait_until_healthy(
        [("127.0.0.1", s["port"]) for s in servers],
        spec.startup_timeout_s,
        check=check,
        describe=lambda waiting: f"see the logs in {home}",
        what=spec.what,
    )
    deadline = time.monotonic() + 30
    while (state := read_state(home)) is None:
        if time.monotonic() > deadline:
            raise UserError(f"the shared servers' supervisor wrote no state; see {home / 'supervisor.log'}")
        time.sleep(0.1)
    return state


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:].rstrip()
    except FileNotFoundError:
        return "(no log)"


def stop(home: Path, timeout_s: float = 60.0) -> None:
    """Ask the supervisor to stop its servers and wait until it has."""
    state = read_state(home)
    (home / "stop").touch()
    deadline = time.monotonic() + timeout_s
    while state and _is_supervisor(state["supervisor_pid"], home) and time.monotonic() < deadline:
        time.sleep(0.2)
    if state and _is_supervisor(state["supervisor_pid"], home):  # hung: it and its servers go
        for pid in [s["pid"] for s in state["servers"]] + [state["supervisor_pid"]]:
            try:
                os.killpg(pid, signal.SIGKILL)  # each started in its own session: its group is its own
            except ProcessLookupError:
                pass
    (home / "state.json").unlink(missing_ok=True)


def reset_prefix_caches(servers: list[dict[str, Any]], timeout_s: float = 60.0) -> None:
    """Empty every server's prefix cache (each ``{"name", "port"}`` with its ``host``, default
    this one, and ``log``); vLLM refuses while requests still hold blocks (a run's abandoned
    requests draining), so retry until it succeeds."""
    import urllib.error
    import urllib.request

    for server in servers:
        where = f"{server.get('host', '127.0.0.1')}:{server['port']}"
        log = f"; see {server['log']}" if server.get("log") else ""
        deadline = time.monotonic() + timeout_s
        while True:
            request = urllib.request.Request(f"http://{where}/reset_prefix_cache", method="POST")
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    if json.loads(response.read() or b"{}").get("success", True):
                        break
            except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
                if time.monotonic() > deadline:
                    raise UserError(
                        f"shared server {server['name']} ({where}): emptying its prefix cache failed ({exc}){log}"
                    ) from None
            if time.monotonic() > deadline:
                raise UserError(
                    f"shared server {server['name']} ({where}) still holds requests from an earlier run after "
                    f"{timeout_s:g} s{log}"
                )
            time.sleep(0.2)


# -- the supervisor (its own process: python -m mlperf_repro.launch.shared_supervisor HOME) --
def supervise(home: Path, poll_s: float = 0.5) -> int:
    spec = json.loads((home / "spec.json").read_text())
    env = dict(os.environ, **spec["env"])
    procs = []
    for server in spec["servers"]:
        with open(server["log"], "w") as log:
            procs.append(
                subprocess.Popen(
                    server["command"], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            )
    started = datetime.now(UTC).isoformat(timespec="seconds")
    state = {
        "supervisor_pid": os.getpid(),
        "started": started,
        "runs": 0,
        "last_used": time.time(),
        "servers": [
            {"name": s["name"], "port": s["port"], "pid": p.pid, "log": s["log"]}
            for s, p in zip(spec["servers"], procs)
        ],
    }
    write_state(home, state)
    reason = None
    while reason is None:
        time.sleep(poll_s)
        if (home / "stop").exists():
            reason = "asked to stop"
        elif not _alive(spec["watch_pid"]):
            reason = f"the workflow (pid {spec['watch_pid']}) has ended"
        elif any(p.poll() is not None for p in procs):
            reason = "a server exited: " + ", ".join(
                f"{s['name']} (code {p.returncode})" for s, p in zip(spec["servers"], procs) if p.poll() is not None
            )
        elif _idle_for(home) > spec["idle_timeout_s"]:
            reason = f"no run used the servers for {spec['idle_timeout_s']:g} s"
    print(f"{datetime.now(UTC).isoformat(timespec='seconds')} stopping: {reason}", flush=True)
    # First the state: a run arriving now starts new servers instead of attaching to these.
    current = read_state(home)
    if current and current.get("supervisor_pid") == os.getpid():
        (home / "state.json").unlink(missing_ok=True)
    from .common import stop_process

    for proc in procs:
        stop_process(proc)
    return 0


def _idle_for(home: Path) -> float:
    """Seconds since a run last let go of the servers; 0 while one holds them."""
    with open(home / "lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0.0
        fcntl.flock(handle, fcntl.LOCK_UN)
    state = read_state(home) or {}
    return time.time() - state.get("last_used", time.time())
