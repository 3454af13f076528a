"""``launch: slurm``: the endpoint list generated from the allocation, the run job's node
count, the srun step per node, and clear errors outside SLURM. The servers started in a
real SLURM job are tested in test_slurm_servers.py."""

from __future__ import annotations

import copy

import pytest

from conftest import SCHEMA
from mlperf_repro.backends.endpoints import serving
from mlperf_repro.backends.servers import allocation_endpoints_on, srun_server_step
from mlperf_repro.config import allocation_endpoints, validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.plan import Plan


def slurm_system(default_config: dict, **allocation) -> dict:
    config = copy.deepcopy(default_config)
    system = next(iter(config["systems"].values()))
    system["engine"] = {
        "backend": "endpoints",
        "endpoints": {"launch": "slurm", "served_model_name": "tiny",
                      "allocation": dict({"nodes": 3, "servers_per_node": 2, "accelerator": "AMD Instinct MI355X",
                                          "accelerator_count": 4, "base_port": 9000}, **allocation)},
    }
    for key in ("number_of_nodes", "accelerators_per_node", "accelerator_model_name"):
        system["description"][key] = "auto"
    return config


def test_the_endpoint_list_is_generated_from_the_allocation(default_config):
    config = validate_config(slurm_system(default_config), SCHEMA)
    system = next(iter(config["systems"]))
    entries = config["systems"][system]["engine"]["endpoints"]["list"]
    assert [(e["name"], e["host"], e["port"], e["node"]) for e in entries] == [
        ("node0-0", "slurm-node-0", 9000, "node0"), ("node0-1", "slurm-node-0", 9001, "node0"),
        ("node1-0", "slurm-node-1", 9000, "node1"), ("node1-1", "slurm-node-1", 9001, "node1"),
        ("node2-0", "slurm-node-2", 9000, "node2"), ("node2-1", "slurm-node-2", 9001, "node2"),
    ]
    plan = Plan(config)
    assert plan.nodes(system) == 3
    assert plan.accelerators(system) == 3 * 2 * 4  # every accelerator of the job, all nodes
    # Validating again (Snakemake and the scripts may) keeps the generated list.
    assert validate_config(config, SCHEMA)["systems"][system]["engine"]["endpoints"]["list"] == entries


@pytest.mark.parametrize("change, fragment", [
    (lambda ep: ep.pop("allocation"), "endpoints.allocation: launch: slurm starts the servers"),
    (lambda ep: ep.update(launch="external", list=[{"name": "a", "host": "h", "port": 1}]),
     "endpoints.allocation: only used with launch: slurm"),
    (lambda ep: ep.update(list=[{"name": "a", "host": "h", "port": 1}]), "the list is generated from allocation"),
    (lambda ep: ep["allocation"].update(nodes=0), "nodes"),
])
def test_bad_slurm_launch_settings_are_named(default_config, change, fragment):
    config = slurm_system(default_config)
    change(next(iter(config["systems"].values()))["engine"]["endpoints"])
    with pytest.raises(UserError, match="invalid config") as err:
        validate_config(config, SCHEMA)
    assert fragment in str(err.value)


def test_generated_hosts_become_the_allocations_hosts():
    entries = allocation_endpoints({"nodes": 2, "servers_per_node": 2})
    placed = allocation_endpoints_on(entries, ["gpu-a17", "gpu-b03"])
    assert [(e["host"], e["port"], e["node"]) for e in placed] == [
        ("gpu-a17", 8000, "gpu-a17"), ("gpu-a17", 8001, "gpu-a17"), ("gpu-b03", 8000, "gpu-b03"),
        ("gpu-b03", 8001, "gpu-b03")]
    with pytest.raises(UserError, match=r"need 2 node\(s\) but the SLURM job has 1 \(gpu-a17\)"):
        allocation_endpoints_on(entries, ["gpu-a17"])


def test_one_srun_step_per_node_with_a_task_per_server(tmp_path):
    args = srun_server_step("4711", "gpu-a17", [8000, 8001], ["python", "-m", "vllm"], tmp_path, ["--gpus-per-task=4"])
    assert args[:8] == ["srun", "--jobid=4711", "--overlap", "--nodes=1", "--ntasks=2", "--nodelist=gpu-a17",
                        "--kill-on-bad-exit=0", "--job-name=vllm-serve-gpu-a17"]
    assert f"--output={tmp_path}/vllm-serve-gpu-a17-%t.log" in args and "--gpus-per-task=4" in args
    # Task i (SLURM_LOCALID) listens on 8000 + i.
    assert args[-5:] == ["exec \"$@\" --port $(( 8000 + ${SLURM_LOCALID:-0} ))", "vllm-serve", "python", "-m", "vllm"]
    with pytest.raises(ValueError, match="consecutive"):
        srun_server_step("1", "h", [8000, 8002], ["x"], tmp_path)


def test_launch_slurm_outside_a_slurm_job_is_a_clear_error(default_config, tmp_path, monkeypatch):
    config = validate_config(slurm_system(default_config), SCHEMA)
    engine = next(iter(config["systems"].values()))["engine"]
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(UserError, match="not inside a SLURM job; run the workflow with --workflow-profile profiles/slurm"):
        with serving(engine, "model", tmp_path):
            pass


def test_a_scaling_run_asks_only_for_the_nodes_of_its_servers(default_config):
    config = validate_config(slurm_system(default_config), SCHEMA)  # 3 nodes x 2 servers x 4 GPUs
    plan = Plan(config)
    system = plan.systems[0]
    assert [plan.nodes(system, n) for n in (1, 2, 3, 6)] == [1, 1, 2, 3]
    assert [plan.server_tasks(system, n) for n in (1, 3, 6)] == [2, 3, 6]
    assert [plan.accelerators(system, n) for n in (1, 3, 6)] == [4, 12, 24]
