"""GPU screening: the verdicts and the refuse/exclude decision on measured-device records,
the real enumeration on this (GPU-less) host, how a run applies the result, the config
cross-checks and the screen job in the DAG."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys

import pytest
import yaml
from conftest import MI355X_SYSTEM, SCHEMA, make_workdir, mi355x_in_process, run_snakemake
from test_dag import job_counts

from mlperf_repro.cluster import screen
from mlperf_repro.config import validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.plan import Plan

GIB = 1024**3


def device(index, tflops=1000.0, total_gib=288, free_gib=286, name="AMD Instinct MI355X", error=None):
    if error:
        return {"index": index, "name": name, "error": error}
    return {
        "index": index,
        "name": name,
        "tflops": tflops,
        "memory_total_bytes": int(total_gib * GIB),
        "memory_free_bytes": int(free_gib * GIB),
    }


def node(*devices, host="node07", backend="rocm", env=None):
    return {"host": host, "backend": backend, "visible_devices_env": env or {}, "devices": list(devices)}


def verdicts(judged):
    return {d["index"]: (d["verdict"], d["reason"]) for d in judged["devices"] if d["index"] is not None}


def test_a_healthy_node():
    judged = screen.judge(node(*(device(i, 1000 + i) for i in range(8))), expected_count=8, expected_memory_gib=288)
    assert judged["healthy"] == list(range(8)) and judged["missing"] == 0
    assert judged["median_tflops"] == pytest.approx(1003.5)
    decision = screen.decide(judged, policy="refuse", system="mi355x")
    assert decision == {"use": list(range(8)), "used": 8, "expected": 8, "note": "all 8 GPUs healthy"}


def test_each_kind_of_unhealthy_gpu():
    measured = node(
        device(0),
        device(1),
        device(2, tflops=850),  # 0.85 x the median 1000
        device(3, total_gib=256),  # less than 0.95 x 288 GiB
        device(4, free_gib=200),  # another process holds 88 GiB
        device(5, error="RuntimeError: HIP error: an illegal memory access was encountered"),
        device(6, tflops=910),
    )  # 0.91 x median: still healthy
    judged = screen.judge(
        measured, expected_count=8, expected_memory_gib=288, min_relative_speed=0.9, min_memory_fraction=0.95
    )
    found = verdicts(judged)
    assert found[0] == ("healthy", "ok") and found[1][0] == "healthy" and found[6][0] == "healthy"
    assert found[2][0] == "unhealthy" and "matmul 850.0 TFLOP/s < 0.9 x the host's median 1000.0" in found[2][1]
    assert found[3][0] == "unhealthy" and "memory 256.0 GiB < 0.95 x 288.0 GiB (expected)" in found[3][1]
    assert found[4][0] == "unhealthy" and "only 200.0 of 288.0 GiB free" in found[4][1]
    assert found[5] == ("unhealthy", "RuntimeError: HIP error: an illegal memory access was encountered")
    # Seven visible of eight expected: one missing device.
    assert judged["missing"] == 1
    assert judged["devices"][-1] == {"index": None, "verdict": "missing", "reason": "7 of 8 expected devices visible"}
    assert judged["healthy"] == [0, 1, 6] and judged["unhealthy"] == [2, 3, 4, 5]


def test_memory_against_the_host_median_when_no_expectation():
    judged = screen.judge(
        node(
            device(0, total_gib=192, free_gib=191),
            device(1, total_gib=192, free_gib=191),
            device(2, total_gib=128, free_gib=127),
        ),
        expected_count=3,
    )
    assert verdicts(judged)[2] == ("unhealthy", "memory 128.0 GiB < 0.95 x 192.0 GiB (the host's median)")
    assert judged["healthy"] == [0, 1]


def test_refuse_names_the_device():
    judged = screen.judge(node(*(device(i) for i in range(7)), device(7, tflops=400)), expected_count=8)
    with pytest.raises(UserError) as exc:
        screen.decide(judged, policy="refuse", system="mi355x-8x")
    message = str(exc.value)
    assert "GPU screening of mi355x-8x on node07 (policy refuse)" in message
    assert "GPU 7 (AMD Instinct MI355X): matmul 400.0 TFLOP/s" in message
    assert "systems.mi355x-8x.gpu_screening.policy: exclude" in message


def test_exclude_runs_on_the_healthy_ones():
    """The vendor's case: one bad GPU of eight on a node, the run goes on with seven."""
    judged = screen.judge(
        node(*(device(i) for i in range(5)), device(5, error="ECC errors"), device(6), device(7)), expected_count=8
    )
    decision = screen.decide(judged, policy="exclude", system="mi355x")
    assert decision["use"] == [0, 1, 2, 3, 4, 6, 7] and decision["used"] == 7
    assert decision["note"] == "ran on 7 of 8 GPUs; excluded: GPU 5 (AMD Instinct MI355X): ECC errors"
    # A missing device counts against the eight as well.
    missing_one = screen.judge(node(*(device(i) for i in range(7))), expected_count=8)
    assert screen.decide(missing_one, policy="exclude", system="s")["used"] == 7
    # Too few healthy for the default minimum (all but one) or a configured one.
    two_bad = screen.judge(
        node(*(device(i) for i in range(6)), device(6, tflops=10), device(7, tflops=10)), expected_count=8
    )
    with pytest.raises(UserError, match=r"only 6 healthy GPU\(s\), fewer than the 7"):
        screen.decide(two_bad, policy="exclude", system="s")
    assert screen.decide(two_bad, policy="exclude", min_devices=6, system="s")["used"] == 6


def test_nothing_to_screen():
    judged = screen.judge(node(backend="none"), expected_count=0)
    assert judged["devices"] == [] and judged["missing"] == 0
    assert screen.decide(judged, policy="refuse")["note"] == "no accelerators expected or visible: nothing to screen"


def test_visible_devices_follow_the_backend_and_an_inherited_restriction():
    assert screen.visible_devices_env([0, 2, 3], node(backend="cuda")) == {"CUDA_VISIBLE_DEVICES": "0,2,3"}
    assert screen.visible_devices_env([1], node(backend="rocm")) == {
        "HIP_VISIBLE_DEVICES": "1",
        "CUDA_VISIBLE_DEVICES": "1",
    }
    # The screen ran inside an allocation that gave it GPUs 4-7: index 1 is GPU 5.
    inherited = node(backend="cuda", env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert screen.visible_devices_env([0, 1, 3], inherited) == {"CUDA_VISIBLE_DEVICES": "4,5,7"}


@pytest.mark.slow
def test_real_enumeration_on_this_host():
    """No GPU here: torch enumerates zero devices, which is nothing to screen."""
    measured = screen.measure_devices(matmul_size=64, repeats=1)
    assert measured["host"] == socket.gethostname()
    assert measured["backend"] == "none" and measured["devices"] == []
    child = screen.measure_in_child(64, 1, timeout_s=120)
    assert child["devices"] == [] and "error" not in child
    done = subprocess.run(
        [sys.executable, "-m", "mlperf_repro.cluster.screen", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["devices"] == []
    # Expecting a GPU that is not there: one missing device, exit 1.
    done = subprocess.run(
        [sys.executable, "-m", "mlperf_repro.cluster.screen", "--expected", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "missing: 0 of 1 expected devices visible" in done.stdout


def test_a_hung_check_is_killed_and_fails_the_screen():
    measured = screen.measure_in_child(64, 1, timeout_s=0.001)
    assert "did not finish within" in measured["error"]
    judged = screen.judge(measured, expected_count=2)
    assert judged["missing"] == 2 and "did not finish" in judged["devices"][0]["reason"]
    with pytest.raises(UserError, match="a missing device"):
        screen.decide(judged, policy="exclude", system="s")


@pytest.mark.slow
def test_screen_job_writes_the_record(tmp_path, capsys):
    out = tmp_path / "screen" / "cpu.json"
    result = screen.screen_job(
        out_path=str(out), screening={"enabled": True, "repeats": 1, "matmul_size": 64}, expected_count=0, system="cpu"
    )
    assert json.loads(out.read_text())["devices"] == [] == result["devices"]
    with pytest.raises(UserError, match="policy refuse"):
        screen.screen_job(
            out_path=str(out), screening={"enabled": True, "policy": "refuse"}, expected_count=8, system="gpu-node"
        )
    assert json.loads(out.read_text())["missing"] == 8  # written before it refuses: the record stays
    assert "missing: 0 of 8 expected devices visible" in capsys.readouterr().out  # and the log has the table


@pytest.fixture
def clean_visible_env(monkeypatch):
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    yield
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        os.environ.pop(var, None)


def test_a_run_applies_the_screen(tmp_path, clean_visible_env):
    screened = screen.judge(
        node(*(device(i) for i in range(3)), device(3, tflops=1), host=socket.gethostname(), backend="cuda"),
        expected_count=4,
    )
    path = tmp_path / "s.json"
    path.write_text(json.dumps(screened))
    record = screen.prepare_run(
        path,
        {"enabled": True, "policy": "exclude", "min_devices": 2},
        system="s",
        expected_count=4,
        engine={"engine_args": {"tensor_parallel_size": 1}},
    )
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2"
    assert record["used"] == 3 and record["expected"] == 4 and record["devices"] == [0, 1, 2]
    assert "ran on 3 of 4 GPUs" in record["note"] and record["rescreened"] is None
    del os.environ["CUDA_VISIBLE_DEVICES"]  # a fresh run process
    with pytest.raises(UserError, match="3 healthy GPU\\(s\\) but the engine needs 4"):
        screen.prepare_run(
            path,
            {"enabled": True, "policy": "exclude", "min_devices": 2},
            system="s",
            expected_count=4,
            engine={"engine_args": {"tensor_parallel_size": 4}},
        )
    assert screen.prepare_run(None, None, system="s", expected_count=0)["enabled"] is False


def test_a_run_given_other_gpus_screens_again(tmp_path, clean_visible_env, monkeypatch):
    """Same node, but the scheduler gave the run GPUs 4-7 while the screen saw 0-3: screen again."""
    measured = node(
        *(device(i) for i in range(4)),
        host=socket.gethostname(),
        backend="cuda",
        env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"},
    )
    path = tmp_path / "s.json"
    path.write_text(json.dumps(screen.judge(measured, expected_count=4)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    with pytest.raises(UserError, match="0 of 4 expected devices visible"):  # this host has no GPU at all
        screen.prepare_run(path, {"enabled": True, "repeats": 1, "matmul_size": 64}, system="s", expected_count=4)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"  # left as the scheduler set it


def test_a_run_on_another_host_screens_again(tmp_path, clean_visible_env):
    """The screen says node07 is fine; this host (no GPU) is not node07, so it is screened itself."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps(screen.judge(node(*(device(i) for i in range(8))), expected_count=8)))
    with pytest.raises(UserError, match="0 of 8 expected devices visible"):
        screen.prepare_run(
            path, {"enabled": True, "policy": "refuse", "repeats": 1, "matmul_size": 64}, system="s", expected_count=8
        )
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_system_description_notes_the_gpus_used():
    from mlperf_repro.benchmarks import load_round
    from mlperf_repro.package.systems import system_description

    desc = mi355x_in_process()["systems"][MI355X_SYSTEM]["description"]
    provenance = {
        "gpu_screening": {
            "enabled": True,
            "policy": "exclude",
            "host": "node07",
            "note": "ran on 7 of 8 GPUs; excluded: GPU 5 (AMD Instinct MI355X): ECC errors",
        }
    }
    merged = system_description(
        desc, rules=load_round("v6.0"), division="closed", submitter="X", provenance=provenance, test_scale=False
    )
    assert merged["hw_notes"].endswith(
        "GPU screening (exclude) on node07: ran on 7 of 8 GPUs; excluded: GPU 5 (AMD Instinct MI355X): ECC errors."
    )
    plain = system_description(
        desc,
        rules=load_round("v6.0"),
        division="closed",
        submitter="X",
        provenance={"gpu_screening": {"enabled": False}},
        test_scale=False,
    )
    assert "GPU screening" not in plain["hw_notes"]


# -- config and workflow ---------------------------------------------------------------------------
def mi355x(**screening):
    """The vendor example with vLLM in the LoadGen process on the node's eight GPUs, screened."""
    config = mi355x_in_process()
    config["systems"][MI355X_SYSTEM]["gpu_screening"] = {"enabled": True, **screening}
    return config


def test_config_cross_checks(default_config):
    cpu = copy.deepcopy(default_config)
    cpu["systems"]["cpu-2c-vllm"]["gpu_screening"] = {"enabled": True}
    with pytest.raises(UserError, match=r"gpu_screening.enabled: the system has no accelerators"):
        validate_config(cpu, SCHEMA)
    with pytest.raises(UserError, match=r"min_devices: 9 is more than the 8"):
        validate_config(mi355x(min_devices=9), SCHEMA)
    # tensor_parallel_size 8: excluding a GPU would leave too few for the engine.
    with pytest.raises(UserError, match=r"tensor_parallel_size x pipeline_parallel_size = 8; set min_devices to 8"):
        validate_config(mi355x(policy="exclude"), SCHEMA)
    assert validate_config(mi355x(policy="exclude", min_devices=8), SCHEMA)
    with pytest.raises(UserError, match=r"policy: 'drop' is not allowed"):
        validate_config(mi355x(policy="drop"), SCHEMA)
    # launch: slurm: the run screens every node and gives each server its GPUs itself, so SLURM
    # must not bind GPUs to the server tasks.
    slurm = mi355x()
    slurm["systems"][MI355X_SYSTEM]["engine"] = {
        "backend": "endpoints",
        "endpoints": {
            "launch": "slurm",
            "allocation": {
                "nodes": 11,
                "accelerator": "AMD Instinct MI355X",
                "accelerator_count": 8,
                "srun_args": ["--gpus-per-task=8", "--exclusive"],
            },
        },
    }
    with pytest.raises(UserError, match=r"srun_args: --gpus-per-task=8 lets SLURM hand out the GPUs"):
        validate_config(copy.deepcopy(slurm), SCHEMA)
    slurm["systems"][MI355X_SYSTEM]["engine"]["endpoints"]["allocation"]["srun_args"] = ["--exclusive"]
    plan = Plan(validate_config(slurm, SCHEMA))
    assert plan.screening(MI355X_SYSTEM) is None  # no screen_gpus job: the run job screens
    assert plan.allocation_screening(MI355X_SYSTEM)["enabled"]


@pytest.mark.slow
def test_screen_in_the_dag(tmp_path):
    """Enabled on a GPU system: one screen_gpus job, and every run waits for it; the plan view agrees."""
    config = mi355x()
    work = make_workdir(tmp_path)
    (work / "screened.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "screened.yaml", timeout=120)
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout)
    assert counts["screen_gpus"] == 1
    counts.pop("all")
    assert estimate_plan(validate_config(copy.deepcopy(config), SCHEMA)).rule_counts() == counts
    result = run_snakemake(
        work,
        "-n",
        "--cores",
        "2",
        "--configfile",
        "screened.yaml",
        "-p",
        "--forceall",
        "--rerun-triggers",
        "mtime",
        timeout=120,
    )
    jobs = result.stdout.split("\nrule ")
    runs = [j for j in jobs if j.startswith(("loadgen_run", "compliance_run"))]
    assert runs and all(f"results/screen/{MI355X_SYSTEM}.json" in j.split("output:")[0] for j in runs)


def test_decide_allocation_counts_over_nodes():
    """Eleven nodes of eight, one GPU bad on one node: the run goes on with 87 of 88."""
    nodes = [screen.judge(node(*(device(i) for i in range(8)), host=f"n{k:02d}"), expected_count=8) for k in range(10)]
    nodes.append(
        screen.judge(node(*(device(i) for i in range(7)), device(7, tflops=500), host="n10"), expected_count=8)
    )
    decision = screen.decide_allocation(nodes, policy="exclude", system="mi355x-11-nodes")
    assert decision["used"] == 87 and decision["expected"] == 88
    assert decision["hosts"]["n10"] == list(range(7)) and decision["hosts"]["n00"] == list(range(8))
    assert decision["note"].startswith("ran on 87 of 88 GPUs (n10: ran on 7 of 8 GPUs; excluded: GPU 7")
