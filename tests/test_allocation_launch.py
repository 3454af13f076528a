"""``launch: slurm``: the endpoint list generated from the allocation, the run job's node
count, the srun step per node, and clear errors outside SLURM. The servers started in a
real SLURM job are tested in test_slurm_servers.py."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, SCHEMA

from mlperf_repro.backends.endpoints import serving
from mlperf_repro.config import allocation_endpoints, validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.launch.slurm import allocation_endpoints_on, place_on_screened_gpus, srun_server_step
from mlperf_repro.plan import Plan


def slurm_system(default_config: dict, **allocation) -> dict:
    config = copy.deepcopy(default_config)
    system = next(iter(config["systems"].values()))
    system["engine"] = {
        "backend": "endpoints",
        "endpoints": {
            "launch": "slurm",
            "served_model_name": "tiny",
            "allocation": dict(
                {
                    "nodes": 3,
                    "servers_per_node": 2,
                    "accelerator": "AMD Instinct MI355X",
                    "accelerator_count": 4,
                    "base_port": 9000,
                },
                **allocation,
            ),
        },
    }
    for key in ("number_of_nodes", "accelerators_per_node", "accelerator_model_name"):
        system["description"][key] = "auto"
    return config


def test_the_endpoint_list_is_generated_from_the_allocation(default_config):
    config = validate_config(slurm_system(default_config), SCHEMA)
    system = next(iter(config["systems"]))
    entries = config["systems"][system]["engine"]["endpoints"]["list"]
    assert [(e["name"], e["host"], e["port"], e["node"]) for e in entries] == [
        ("node0-0", "slurm-node-0", 9000, "node0"),
        ("node0-1", "slurm-node-0", 9001, "node0"),
        ("node1-0", "slurm-node-1", 9000, "node1"),
        ("node1-1", "slurm-node-1", 9001, "node1"),
        ("node2-0", "slurm-node-2", 9000, "node2"),
        ("node2-1", "slurm-node-2", 9001, "node2"),
    ]
    plan = Plan(config)
    assert plan.nodes(system) == 3
    assert plan.accelerators(system) == 3 * 2 * 4  # every accelerator of the job, all nodes
    # Validating again (Snakemake and the scripts may) keeps the generated list.
    assert validate_config(config, SCHEMA)["systems"][system]["engine"]["endpoints"]["list"] == entries


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda ep: ep.pop("allocation"), "endpoints.allocation: launch: slurm starts the servers"),
        (
            lambda ep: ep.update(launch="external", list=[{"name": "a", "host": "h", "port": 1}]),
            "endpoints.allocation: only used with launch: slurm",
        ),
        (lambda ep: ep.update(list=[{"name": "a", "host": "h", "port": 1}]), "the list is generated from allocation"),
        (lambda ep: ep["allocation"].update(nodes=0), "nodes"),
    ],
)
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
        ("gpu-a17", 8000, "gpu-a17"),
        ("gpu-a17", 8001, "gpu-a17"),
        ("gpu-b03", 8000, "gpu-b03"),
        ("gpu-b03", 8001, "gpu-b03"),
    ]
    with pytest.raises(UserError, match=r"need 2 node\(s\) but the SLURM job has 1 \(gpu-a17\)"):
        allocation_endpoints_on(entries, ["gpu-a17"])


def test_a_servers_total_below_the_allocation_leaves_the_last_node_short(default_config):
    """The vendor's 87 engines on 11 nodes of 8: the endpoint list holds 87, node by node, the
    last node 7; the run job asks SLURM for 11 nodes and a task per server; a total that would
    leave a node empty (or not fit) is one message naming the key."""
    entries = allocation_endpoints({"nodes": 11, "servers_per_node": 8, "servers": 87})
    assert len(entries) == 87 and [e["node"] for e in entries].count("node10") == 7
    assert entries[-1]["name"] == "node10-6" and entries[-1]["port"] == 8006
    config = slurm_system(default_config)
    system = next(iter(config["systems"]))
    config["systems"][system]["engine"]["endpoints"]["allocation"].update(nodes=11, servers_per_node=8, servers=87)
    plan = Plan(validate_config(copy.deepcopy(config), SCHEMA))
    assert (plan.nodes(system), plan.server_tasks(system)) == (11, 87)
    for servers, allowed in ((80, False), (81, True), (88, True), (89, False)):
        config["systems"][system]["engine"]["endpoints"]["allocation"]["servers"] = servers
        if allowed:
            validate_config(copy.deepcopy(config), SCHEMA)
            continue
        with pytest.raises(UserError, match=r"allocation\.servers: .* must be 81 to 88"):
            validate_config(copy.deepcopy(config), SCHEMA)


def test_one_srun_step_per_node_with_a_task_per_server(tmp_path):
    args = srun_server_step("4711", "gpu-a17", [8000, 8001], ["python", "-m", "vllm"], tmp_path, ["--exclusive"])
    assert args[:8] == [
        "srun",
        "--jobid=4711",
        "--overlap",
        "--nodes=1",
        "--ntasks=2",
        "--nodelist=gpu-a17",
        "--kill-on-bad-exit=0",
        "--job-name=vllm-serve-gpu-a17",
    ]
    assert f"--output={tmp_path}/vllm-serve-gpu-a17-%t.log" in args and "--exclusive" in args
    assert args[-7:-5] == ["bash", "-c"] and args[-4:] == ["vllm-serve", "python", "-m", "vllm"]
    with pytest.raises(ValueError, match="consecutive"):
        srun_server_step("1", "h", [8000, 8002], ["x"], tmp_path)


@pytest.mark.parametrize(
    "local_id, groups, expected",
    [
        ("1", None, "None ['--port', '8001']"),  # task 1 of the step listens on base + 1
        ("1", "4,5;6,7", "6,7 ['--port', '8001']"),  # and, screened, sees its own GPU group
        ("0", "4,5;6,7", "4,5 ['--port', '8000']"),
    ],
)
def test_the_task_launcher_picks_its_port_and_gpu_group(tmp_path, local_id, groups, expected):
    """The launcher each server task runs, executed for real: the port from SLURM_LOCALID and,
    with screened GPUs, the task's group exported before the server starts."""
    probe = [sys.executable, "-c", "import os, sys; print(os.environ.get('HIP_VISIBLE_DEVICES'), sys.argv[1:])"]
    args = srun_server_step("1", "h", [8000, 8001], probe, tmp_path)
    env = {"PATH": os.environ["PATH"], "SLURM_LOCALID": local_id}
    if groups:
        env.update(
            MLPERF_REPRO_DEVICE_GROUPS=groups, MLPERF_REPRO_DEVICE_VARS="HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES"
        )
    done = subprocess.run(args[args.index("bash") :], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == expected, done.stderr


def test_servers_get_the_healthy_gpus_of_their_node_and_the_rest_do_not_start():
    """Screened allocation (exclude): node a lost GPU 2, node b is whole. Two servers of 4 GPUs
    per node: a keeps one server (GPUs 0,1,3,4), b keeps both; SLURM had restricted node b to
    physical GPUs 8-15, so its indices map through that restriction."""
    placed = allocation_endpoints_on(
        allocation_endpoints({"nodes": 2, "servers_per_node": 2, "accelerator_count": 4}), ["a", "b"]
    )
    decision = {"hosts": {"a": [0, 1, 3, 4, 5, 6, 7], "b": list(range(8))}}
    measured = {
        "a": {"backend": "rocm", "visible_devices_env": {}},
        "b": {"backend": "rocm", "visible_devices_env": {"HIP_VISIBLE_DEVICES": ",".join(map(str, range(8, 16)))}},
    }
    kept, step_env = place_on_screened_gpus(placed, decision, measured)
    assert [(e["host"], e["port"]) for e in kept] == [("a", 8000), ("b", 8000), ("b", 8001)]
    assert step_env["a"] == {
        "MLPERF_REPRO_DEVICE_GROUPS": "0,1,3,4",
        "MLPERF_REPRO_DEVICE_VARS": "HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES",
    }
    assert step_env["b"]["MLPERF_REPRO_DEVICE_GROUPS"] == "8,9,10,11;12,13,14,15"


def test_launch_slurm_outside_a_slurm_job_is_a_clear_error(default_config, tmp_path, monkeypatch):
    config = validate_config(slurm_system(default_config), SCHEMA)
    engine = next(iter(config["systems"].values()))["engine"]
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(
        UserError, match="not inside a SLURM job; run the workflow with --workflow-profile profiles/slurm"
    ):
        with serving(engine, "model", tmp_path):
            pass


def test_a_scaling_run_asks_only_for_the_nodes_of_its_servers(default_config):
    config = validate_config(slurm_system(default_config), SCHEMA)  # 3 nodes x 2 servers x 4 GPUs
    plan = Plan(config)
    system = plan.systems[0]
    assert [plan.nodes(system, n) for n in (1, 2, 3, 6)] == [1, 1, 2, 3]
    assert [plan.server_tasks(system, n) for n in (1, 3, 6)] == [2, 3, 6]
    assert [plan.accelerators(system, n) for n in (1, 3, 6)] == [4, 12, 24]


def test_false_switches_become_no_flags_and_none_leaves_a_flag_off():
    from mlperf_repro.launch.common import engine_args_to_flags

    flags = engine_args_to_flags(
        {"enable_prefix_caching": False, "enforce_eager": True, "disable_log_stats": False, "seed": None}
    )
    # disable_log_stats has no --no- form in vLLM: false leaves it off.
    assert flags == ["--no-enable-prefix-caching", "--enforce-eager"]


FLAGS_GONE_SINCE_THE_VENDORS_VLLM = {"swap_space"}


@pytest.mark.slow
def test_vllms_own_parser_takes_the_vendor_flags_and_knows_our_plain_switches():
    """The vendor's gpt-oss engine arguments (with their false switches) through the real
    ``vllm serve`` argument parser of the installed vLLM; and our list of switches without a
    ``--no-`` form is exactly vLLM's."""
    import argparse

    from conftest import REPO, SCHEMA

    from mlperf_repro.config import load_yaml
    from mlperf_repro.launch.common import STORE_TRUE_ONLY_FLAGS, engine_args_to_flags

    cli_args = pytest.importorskip("vllm.entrypoints.launchers.cli_args")
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = cli_args.make_arg_parser(FlexibleArgumentParser())
    plain = {a.dest for a in parser._actions if isinstance(a, argparse._StoreTrueAction)}
    assert plain == set(STORE_TRUE_ONLY_FLAGS)
    # Every scenario of every imported vendor example: the system's engine arguments with the
    # scenario's own on top, as the run passes them to `vllm serve`.
    from mlperf_repro.config import validate_config
    from mlperf_repro.plan import Plan

    for name in ("mi355x-gpt-oss-120b", "mi355x-llama2-70b", "mi355x-multinode-slurm"):
        example = validate_config(load_yaml(REPO / "config" / "examples" / f"{name}.yaml"), SCHEMA)
        plan = Plan(example)
        for system, entry in example["systems"].items():
            for benchmark, scenarios in entry["benchmarks"].items():
                for scenario in scenarios:
                    engine_args = plan.run_engine(system, benchmark, scenario)["engine_args"]
                    # The vendor's vLLM (0.14-dev in their image) still takes swap_space; the vLLM
                    # installed here (0.32) dropped it with the V0 engine. Every other flag must parse.
                    current = {k: v for k, v in engine_args.items() if k not in FLAGS_GONE_SINCE_THE_VENDORS_VLLM}
                    parsed = parser.parse_args(["--model", "m", *engine_args_to_flags(current)])
                    assert parsed.enable_prefix_caching is False and parsed.enforce_eager is False
                    assert parsed.max_num_seqs == engine_args["max_num_seqs"], (name, scenario)


# -- launch: slurm-shared: the servers in a server job of their own ----------------------------
def slurm_shared_system(default_config: dict, **allocation) -> tuple[dict, str]:
    config = slurm_system(default_config, **allocation)
    system = next(iter(config["systems"]))
    config["systems"][system]["engine"]["endpoints"]["launch"] = "slurm-shared"
    return config, system


def test_slurm_shared_run_jobs_are_heads_and_the_server_job_holds_the_gpus(default_config):
    config, system = slurm_shared_system(default_config, time_min=600, sbatch_args=["--exclusive"])
    plan = Plan(validate_config(config, SCHEMA))
    # The run job: one node, no GPU, no server tasks; the servers' 24 GPUs stay in the plan's GPU-hours.
    assert (plan.nodes(system), plan.accelerators(system), plan.server_tasks(system)) == (1, 0, None)
    assert plan.server_accelerators(system) == plan.system_accelerators(system) == 3 * 2 * 4
    assert plan.shares_servers(system) and plan.submits_server_jobs()
    assert len(plan.engine(system)["endpoints"]["list"]) == 6


@pytest.mark.parametrize("key, value", [("time_min", 60), ("queue_timeout_s", 600), ("sbatch_args", ["--exclusive"])])
def test_server_job_settings_mean_nothing_to_launch_slurm(default_config, key, value):
    config = slurm_system(default_config, **{key: value})
    with pytest.raises(UserError) as err:
        validate_config(config, SCHEMA)
    assert f"endpoints.allocation.{key}: only used with launch: slurm-shared" in str(err.value)


def test_the_server_jobs_sbatch_line(tmp_path):
    from mlperf_repro.launch.slurm_shared import SERVER_JOB_MODULE, sbatch_command

    allocation = {"nodes": 11, "servers_per_node": 8, "accelerator": "AMD Instinct MI355X", "accelerator_count": 1}
    home = tmp_path / "slurm-abc"
    line = sbatch_command(home, allocation, {"Partition": "gpu", "Account": "proj"})
    assert line[:2] == ["sbatch", "--parsable"]
    for flag in ("--nodes=11", "--ntasks-per-node=8", "--time=1440", "--gpus-per-node=8", "--partition=gpu"):
        assert flag in line, (flag, line)
    assert "--account=proj" in line and f"--output={home}/server-job-%j.log" in line
    assert line[-2] == "--wrap" and line[-1].endswith(f"-m {SERVER_JOB_MODULE} {home}")
    # The site's own flags replace what would be inherited or derived, and come last.
    own = sbatch_command(
        home, dict(allocation, time_min=90, sbatch_args=["-p", "mi355x", "--gres=gpu:8"]), {"Partition": "gpu"}
    )
    assert "--time=90" in own and own[-5:-2] == ["-p", "mi355x", "--gres=gpu:8"]
    assert not any(a.startswith(("--partition", "--gpus-per-node")) for a in own)
    # CPU servers ask for no GPU.
    assert not any("gpu" in a for a in sbatch_command(home, dict(allocation, accelerator="N/A"), {})[:-1])


def test_without_sbatch_a_slurm_shared_run_says_what_it_needs(default_config, tmp_path, monkeypatch):
    config, system = slurm_shared_system(default_config)
    engine = validate_config(config, SCHEMA)["systems"][system]["engine"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no SLURM commands here
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(UserError) as err, serving(engine, str(tmp_path), log_dir=tmp_path / "logs"):
        pass
    assert "launch: slurm needs SLURM's commands on this node (sbatch not found)" in str(err.value)
    # Nothing half-started is left to attach to.
    (home,) = (tmp_path / "results/servers").iterdir()
    assert not (home / "state.json").exists() and not (home / "job.json").exists()


def test_the_plan_view_prices_the_mi355x_cluster_with_one_model_load():
    """The vendor's 11-node MI355X system (the imported example, launch slurm-shared): one model
    load for the workflow run; as launch slurm, one per LoadGen process, and the GPU-hours
    sharing saves."""
    example = yaml.safe_load((REPO / "config/examples/mi355x-multinode-slurm.yaml").read_text())
    (system,) = example["systems"]
    assert example["systems"][system]["engine"]["endpoints"]["launch"] == "slurm-shared"
    shared = estimate_plan(validate_config(copy.deepcopy(example), SCHEMA))
    example["systems"][system]["engine"]["endpoints"]["launch"] = "slurm"
    per_run = estimate_plan(validate_config(example, SCHEMA))
    (would,) = [n for n in per_run.notes if n.startswith(f"model loads of {system}:")]
    (saves,) = [n for n in shared.notes if n.startswith(f"model loads of {system}:")]
    assert "(one per LoadGen process)" in would and "slurm-shared on a SLURM cluster) would save" in would
    assert "(launch: slurm-shared); saves" in saves and "GPU-hours" in saves
    assert would.rsplit("save ", 1)[1] == saves.split("saves ", 1)[1].removesuffix(" against a load per process")


def _counting_command(tmp_path, stderr: str, answers_after: int):
    """A command that fails with ``stderr`` until its ``answers_after``-th call, then prints "ok";
    the calls are counted in a file beside it."""
    calls = tmp_path / "calls"
    script = tmp_path / "scontrol-stand-in"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(( $(cat {calls} 2>/dev/null || echo 0) + 1 )); echo $n > {calls}\n"
        f"if [ $n -ge {answers_after} ]; then echo ok; exit 0; fi\n"
        f'echo "{stderr}" >&2; exit 1\n'
    )
    script.chmod(0o755)
    return [str(script)], calls


def test_a_busy_controller_is_asked_again_a_wrong_request_is_not(tmp_path):
    """slurmctld under load answers "Socket timed out on send/recv operation" (seen on the test
    cluster: a run failed on it and was retried); a read-only query asks again, a submission
    (which may have gone through) and a wrong request do not."""
    from mlperf_repro.launch.slurm import _slurm_query

    busy = "slurm_load_jobs error: Socket timed out on send/recv operation"
    command, calls = _counting_command(tmp_path, busy, answers_after=3)
    assert _slurm_query(command, pauses=(0.01, 0.01, 0.01)) == "ok\n"
    assert calls.read_text().strip() == "3"
    calls.unlink()
    with pytest.raises(UserError, match="Socket timed out"):
        _slurm_query(command, retry=False)
    assert calls.read_text().strip() == "1"
    calls.unlink()
    with pytest.raises(UserError, match="Socket timed out"):
        _slurm_query(command, pauses=(0.01,))
    assert calls.read_text().strip() == "2"
    calls.unlink()
    wrong, calls = _counting_command(tmp_path, "slurm_load_jobs error: Invalid job id specified", answers_after=3)
    with pytest.raises(UserError, match="Invalid job id"):
        _slurm_query(wrong, pauses=(0.01, 0.01))
    assert calls.read_text().strip() == "1"
