"""``launch: slurm``: the run job, inside its SLURM allocation, starts the servers on the
allocation's nodes as srun steps (one step per node, one task per server, the port from the
task's local id), after screening their GPUs when the system asks for it. The steps are
stopped whatever happens (run failure, Ctrl-C); when SLURM cancels the job it takes the
steps with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import UserError
from . import register_launcher
from .common import serve_command, stop_process, wait_until_healthy

SLURM_QUERY_TIMEOUT_S = 30
# What SLURM's commands print when the controller is busy rather than the request wrong
# ("slurm_load_jobs error: Socket timed out on send/recv operation" was seen on the test
# cluster under load): a read-only query is asked again after these pauses.
TRANSIENT_CONTROLLER_ERRORS = ("Socket timed out", "Unable to contact slurm controller", "Connection refused")
QUERY_RETRY_PAUSES_S = (2.0, 5.0, 10.0)


def _slurm_query(args: list[str], *, retry: bool = True, pauses: tuple[float, ...] = QUERY_RETRY_PAUSES_S) -> str:
    """The command's output. With ``retry`` (read-only queries; never a submission, which may have
    gone through) a busy controller's answer is asked for again after each of ``pauses``."""
    for pause in (*pauses, None) if retry else (None,):
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=SLURM_QUERY_TIMEOUT_S)
        except FileNotFoundError:
            raise UserError(f"launch: slurm needs SLURM's commands on this node ({args[0]} not found)") from None
        except subprocess.TimeoutExpired:
            why = f"'{' '.join(args)}' did not answer within {SLURM_QUERY_TIMEOUT_S} s; is slurmctld up?"
        else:
            if done.returncode == 0:
                return done.stdout
            why = f"'{' '.join(args)}' failed: {done.stderr.strip()[:300]}"
            if not any(text in done.stderr for text in TRANSIENT_CONTROLLER_ERRORS):
                break
        if pause is not None:
            time.sleep(pause)
    raise UserError(why)


def allocation_hosts(job_id: str) -> list[str]:
    """The host names of a SLURM job's nodes, in allocation order.

    Read from the controller, not from SLURM_JOB_NODELIST: Snakemake's job-step wrapper
    passes on only the job id of the SLURM_* variables."""
    fields = dict(
        item.split("=", 1) for item in _slurm_query(["scontrol", "show", "job", "-o", job_id]).split() if "=" in item
    )
    nodelist = fields.get("NodeList", "")
    if not nodelist or nodelist == "(null)":
        raise UserError(f"SLURM job {job_id} has no nodes yet (NodeList={nodelist or 'missing'})")
    return _slurm_query(["scontrol", "show", "hostnames", nodelist]).split()


def allocation_endpoints_on(entries: Sequence[dict], hosts: Sequence[str]) -> list[dict]:
    """The generated endpoint entries with the allocation's real host names in place."""
    from ..config import ALLOCATION_HOST_PREFIX

    placed = []
    for entry in entries:
        index = int(entry["host"][len(ALLOCATION_HOST_PREFIX) :])
        if index >= len(hosts):
            raise UserError(
                f"the endpoints need {index + 1} node(s) but the SLURM job has {len(hosts)} "
                f"({', '.join(hosts)}); engine.endpoints.allocation.nodes sets the run job's --nodes"
            )
        placed.append(dict(entry, host=hosts[index], node=hosts[index]))
    return placed


def srun_server_step(
    job_id: str, host: str, ports: Sequence[int], command: list[str], log_dir: Path, srun_args: Sequence[str] = ()
) -> list[str]:
    """One srun step on ``host`` with a task per server; task i listens on ports[0] + i."""
    base = ports[0]
    if list(ports) != list(range(base, base + len(ports))):
        raise ValueError(f"ports on one node must be consecutive, got {list(ports)}")
    # With screened GPUs each task exports its own group (MLPERF_REPRO_DEVICE_GROUPS: "0,1;2,3",
    # group i for local task i) into the variables the backend reads before it execs.
    launcher = (
        'if [ -n "${MLPERF_REPRO_DEVICE_GROUPS:-}" ]; then '
        'IFS=";" read -ra groups <<< "$MLPERF_REPRO_DEVICE_GROUPS"; '
        'for var in $MLPERF_REPRO_DEVICE_VARS; do export "$var=${groups[${SLURM_LOCALID:-0}]}"; done; fi; '
        f'exec "$@" --port $(( {base} + ${{SLURM_LOCALID:-0}} ))'
    )
    return [
        "srun",
        f"--jobid={job_id}",
        "--overlap",
        "--nodes=1",
        f"--ntasks={len(ports)}",
        f"--nodelist={host}",
        "--kill-on-bad-exit=0",
        f"--job-name=vllm-serve-{host}",
        f"--output={log_dir}/vllm-serve-{host}-%t.log",
        *srun_args,
        "bash",
        "-c",
        launcher,
        "vllm-serve",
        *command,
    ]


@contextmanager
def slurm_allocation_servers(
    entries: Sequence[dict],
    model_path: str,
    served_model_name: str,
    engine_args: dict[str, Any],
    log_dir: str | Path,
    *,
    srun_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    startup_timeout_s: float = 600.0,
    screening: dict[str, Any] | None = None,
    system: str = "<system>",
) -> Iterator[tuple[list[dict], dict | None, dict[str, subprocess.Popen]]]:
    """Start the servers of a ``launch: slurm`` system on its job's nodes; yield the endpoint
    entries with real host names once every server answers /health, what the GPU screen
    decided (None when the system does not screen) and the srun step of each host."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        raise UserError(
            "engine.endpoints.launch is slurm, but this run is not inside a SLURM job; run the "
            "workflow with --workflow-profile profiles/slurm, or use launch: local / external"
        )
    log_dir = Path(log_dir).resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    placed = allocation_endpoints_on(entries, allocation_hosts(job_id))
    step_env: dict[str, dict[str, str]] = {}
    screened = None
    if screening:
        placed, step_env, screened = screen_and_place(job_id, placed, screening, system)
    by_host: dict[str, list[int]] = {}
    for entry in placed:
        by_host.setdefault(entry["host"], []).append(entry["port"])
    # Absolute: the steps run on other nodes (same cwd on shared storage, but say it plainly).
    command = serve_command(str(Path(model_path).resolve()), served_model_name, "0.0.0.0", None, engine_args)
    steps: dict[str, subprocess.Popen] = {}
    try:
        for host, ports in by_host.items():
            steps[host] = subprocess.Popen(
                srun_server_step(job_id, host, sorted(ports), command, log_dir, srun_args),
                stdout=subprocess.DEVNULL,
                stderr=open(log_dir / f"srun-{host}.log", "w"),
                env=dict(os.environ, **(env or {}), **step_env.get(host, {})),
                start_new_session=True,
            )

        def exited(waiting: set) -> None:
            for host, _ in waiting:
                if steps[host].poll() is not None:
                    raise UserError(
                        f"the server step on {host} exited with code {steps[host].returncode} during "
                        f"start-up; see {log_dir}/srun-{host}.log and {log_dir}/vllm-serve-{host}-*.log"
                    )

        wait_until_healthy(
            [(e["host"], e["port"]) for e in placed],
            startup_timeout_s,
            check=exited,
            describe=lambda waiting: f"see the logs in {log_dir}",
        )
        yield placed, screened, steps
    finally:
        for step in steps.values():
            stop_process(step)


def place_on_screened_gpus(
    placed: Sequence[dict], decision: dict[str, Any], measured_by_host: dict[str, dict]
) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """Give each server on a node ``accelerator_count`` of the node's healthy GPUs, in order;
    servers left without enough GPUs are not started (the last ones on that node, so the
    rest keep consecutive ports). Returns the servers to start and each node's step
    environment (MLPERF_REPRO_DEVICE_GROUPS / _VARS for the launcher)."""
    from ..cluster.screen import VISIBLE_DEVICES_VARS, visible_devices_env

    kept: list[dict] = []
    step_env: dict[str, dict[str, str]] = {}
    by_host: dict[str, list[dict]] = {}
    for entry in placed:
        by_host.setdefault(entry["host"], []).append(entry)
    for host, servers in by_host.items():
        free = list(decision["hosts"].get(host, []))
        measured = measured_by_host.get(host, {})
        groups = []
        for server in servers:
            count = server.get("accelerator_count", 1)
            if len(free) < count:
                break
            group, free = free[:count], free[count:]
            groups.append(next(iter(visible_devices_env(group, measured).values()), ",".join(map(str, group))))
        kept += servers[: len(groups)]
        if groups:
            step_env[host] = {
                "MLPERF_REPRO_DEVICE_GROUPS": ";".join(groups),
                "MLPERF_REPRO_DEVICE_VARS": " ".join(VISIBLE_DEVICES_VARS.get(measured.get("backend"), ())),
            }
    return kept, step_env


def screen_and_place(
    job_id: str, placed: list[dict], screening: dict[str, Any], system: str
) -> tuple[list[dict], dict[str, dict[str, str]], dict[str, Any]]:
    """Screen every node of the allocation (one srun task each), decide by the system's
    policy, and place the servers on the healthy GPUs."""
    from ..cluster.screen import decide_allocation, screen_allocation

    hosts = list(dict.fromkeys(e["host"] for e in placed))
    per_node = max(sum(e.get("accelerator_count", 1) for e in placed if e["host"] == h) for h in hosts)
    judged = screen_allocation(
        screening,
        per_node,
        srun=("srun", f"--jobid={job_id}", "--overlap", f"--nodes={len(hosts)}", f"--nodelist={','.join(hosts)}"),
    )
    decision = decide_allocation(
        judged, policy=screening.get("policy", "refuse"), min_devices=screening.get("min_devices"), system=system
    )
    kept, step_env = place_on_screened_gpus(placed, decision, {n["host"]: n["measured"] for n in judged})
    if not kept:
        raise UserError(
            f"GPU screening of {system}: no node has enough healthy GPUs for one server; {decision['note']}"
        )
    used = sum(e.get("accelerator_count", 1) for e in kept)
    return (
        kept,
        step_env,
        {
            "enabled": True,
            "policy": screening.get("policy", "refuse"),
            "expected": decision["expected"],
            "used": used,
            "note": decision["note"]
            if used == decision["used"]
            else f"{decision['note']}; {used} of them serve ({len(kept)} of {len(placed)} servers started)",
            "hosts": decision["hosts"],
            "servers_started": len(kept),
            "servers_configured": len(placed),
        },
    )


NODE_FACTS_TIMEOUT_S = 120


def parse_node_facts(stdout: str) -> list[dict[str, Any]]:
    """The JSON lines ``python -m mlperf_repro.sysfacts`` printed, one per node, by host name."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return sorted(found, key=lambda facts: str(facts.get("hostname", "")))


def allocation_node_facts(job_id: str, hosts: Sequence[str]) -> dict[str, Any]:
    """Every server node's facts (:mod:`mlperf_repro.sysfacts`, one srun task per node), for
    the system description's ``auto`` fields; {"nodes": [...]} or {"unknown": why}. A node
    that cannot answer does not stop the run: the description then says what is unknown."""
    command = [
        "srun",
        f"--jobid={job_id}",
        "--overlap",
        f"--nodes={len(hosts)}",
        f"--nodelist={','.join(hosts)}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",
        sys.executable,
        "-m",
        "mlperf_repro.sysfacts",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NODE_FACTS_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"unknown": f"srun on the allocation's nodes failed: {exc}"}
    nodes = parse_node_facts(done.stdout)
    if len(nodes) < len(hosts):
        tail = " | ".join((done.stderr or "").strip().splitlines()[-3:])
        return {
            "nodes": nodes,
            "unknown": f"{len(nodes)} of {len(hosts)} nodes reported (exit {done.returncode}) {tail}",
        }
    return {"nodes": nodes}


@register_launcher("slurm")
@contextmanager
def launch_slurm(
    engine: dict[str, Any], model_path: str, log_dir: str | Path, *, screening: dict | None = None
) -> Iterator[dict[str, Any]]:
    """The servers on the run's SLURM allocation (its GPUs screened first when ``screening``
    says so); yields the engine with the endpoint list naming the real hosts and, when
    screened, ``gpu_screening``: what the screen decided."""
    endpoints = engine["endpoints"]
    with slurm_allocation_servers(
        endpoints["list"],
        model_path,
        endpoints.get("served_model_name", "model"),
        engine.get("engine_args", {}),
        log_dir,
        srun_args=endpoints["allocation"].get("srun_args", []),
        env=engine.get("env"),
        startup_timeout_s=endpoints.get("startup_timeout_s", 600),
        screening=(screening or {}).get("settings"),
        system=(screening or {}).get("system", "<system>"),
    ) as (placed, screened, _steps):
        run_engine = dict(engine, endpoints=dict(endpoints, list=placed))
        run_engine["node_facts"] = allocation_node_facts(
            os.environ["SLURM_JOB_ID"], list(dict.fromkeys(e["host"] for e in placed))
        )
        if screened is not None:
            run_engine["gpu_screening"] = screened
        yield run_engine
