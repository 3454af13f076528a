"""config/examples/mi355x-gpt-oss-120b.yaml, the vendor's published gpt-oss-120b setup on
MI355X as `mlperf-repro import` wrote it: it validates, serves the published checkpoint
unchanged, one tensor-parallel-1 server per GPU, and its plan view prices every run in
GPU-hours (numbers checked by hand)."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, SCHEMA

from mlperf_repro.cli import main as cli_main
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.plan import Plan

EXAMPLE = REPO / "config" / "examples" / "mi355x-gpt-oss-120b.yaml"
SINGLE, MULTI = "8xMI355X_2xEPYC_9575F", "94xMI355X_24xEPYC_9575F"


@pytest.fixture(scope="module")
def config() -> dict:
    return validate_config(load_yaml(EXAMPLE), SCHEMA)


def test_the_example_is_the_vendors_shape(config):
    plan = Plan(config)
    recipe = config["quantization"][config["benchmarks"]["gpt-oss-120b"]["quantization"]]
    # A published checkpoint, pinned: nothing is quantized again.
    assert recipe["tool"] == "prequantized"
    checkpoint = config["models"][recipe["checkpoint"]]
    assert checkpoint["source"].startswith("hf://amd/") and "@" in checkpoint["source"]
    assert checkpoint.get("sha256_manifest")
    # What the published tree does not say is a placeholder preflight refuses.
    assert "@TODO:" in checkpoint["source"] and checkpoint["sha256_manifest"].startswith("TODO:")
    for system, nodes, servers in ((SINGLE, 1, 8), (MULTI, 12, 94)):
        engine = config["systems"][system]["engine"]
        allocation = engine["endpoints"]["allocation"]
        # One tensor-parallel-1 server per GPU, 8 GPUs per node; the 12-node result ran 94 of the
        # 96, and so does the allocation (allocation.servers).
        assert engine["engine_args"]["tensor_parallel_size"] == 1
        assert allocation["accelerator_count"] == 1 and allocation["servers_per_node"] == 8
        assert allocation["nodes"] == nodes
        # The servers run in a SLURM server job every run attaches to (launch slurm-shared): the
        # run jobs are heads holding no GPU.
        assert engine["endpoints"]["launch"] == "slurm-shared"
        assert plan.server_accelerators(system) == servers and plan.accelerators(system) == 0
    # Sampling comes from the rules table: temperature 1, at most 10,240 tokens in performance runs.
    generation = plan.generation("gpt-oss-120b", "performance")
    assert (generation.temperature, generation.greedy, generation.max_new_tokens) == (1.0, False, 10240)
    assert config["systems"][SINGLE]["benchmarks"]["gpt-oss-120b"]["Offline"]["target_qps"] == 70
    assert config["systems"][MULTI]["engine"]["dispatch"]["min_healthy_endpoints"] == 94
    # The vendor's per-scenario tuning: Offline batches more sequences than Server.
    offline, server = (plan.run_engine(SINGLE, "gpt-oss-120b", s)["engine_args"] for s in ("Offline", "Server"))
    assert (offline["max_num_seqs"], server["max_num_seqs"]) == (1792, 1024)


def test_plan_prices_every_run_in_gpu_hours():
    # By hand with a model load per LoadGen process (launch slurm): every run + 120 s.
    example = load_yaml(EXAMPLE)
    for system in (SINGLE, MULTI):
        example["systems"][system]["engine"]["endpoints"]["launch"] = "slurm"
    est = estimate_plan(validate_config(example, SCHEMA))
    runs = [d for r in est.rows if r.stage.startswith("run: ") for d in r.details if d["rule"] == "loadgen_run"]
    # Both systems, Offline and Server, performance and accuracy.
    assert {(d["system"], d["scenario"], d["mode"]) for d in runs} == {
        (s, scenario, mode)
        for s in (SINGLE, MULTI)
        for scenario in ("Offline", "Server")
        for mode in ("performance", "accuracy")
    }
    for detail in runs:
        assert detail["accelerators"] == (8 if detail["system"] == SINGLE else 96)
        assert detail["wall_s"] > 0
    offline = next(r for r in est.rows if r.stage == "run: Offline performance")
    # Single node: min_duration 2,400 s at 70/s -> max(6,396, 1.1 x 2,400 x 70 = 184,800) samples,
    # padded to whole passes over the 6,396 performance samples (sample_concatenate_permutation):
    # 29 x 6,396 = 185,484 = 2,649.8 s, + 120 s overhead, on 8 GPUs. Cluster: 600 s at 820/s ->
    # 541,200 -> 85 x 6,396 = 543,660 samples = 663.0 s, + 120 s, on 96 GPUs.
    single_s, cluster_s = 185_484 / 70 + 120, 543_660 / 820 + 120
    assert offline.gpu_hours == pytest.approx((single_s * 8 + cluster_s * 96) / 3600)  # 27.03 GPU-h
    assert est.total["gpu_hours"] > offline.gpu_hours
    # Accuracy runs cover the round's 4,395-row accuracy file, not the 6,396 performance rows:
    # 4,395 at 70/s = 62.8 s (+ 120 s) on 8 GPUs; at 820/s = 5.36 s (+ 120 s) on 96.
    accuracy = next(r for r in est.rows if r.stage == "run: Offline accuracy")
    assert {d["queries"] for d in accuracy.details} == {4395}
    assert accuracy.gpu_hours == pytest.approx(((4395 / 70 + 120) * 8 + (4395 / 820 + 120) * 96) / 3600)
    evals = next(r for r in est.rows if r.stage == "accuracy")
    assert {d["samples"] for d in evals.details if d["rule"] == "accuracy_eval"} == {4395}
    # Server runs stop early, so LoadGen's default minimum of 100 queries applies (as in the
    # vendor's published logs), and min_duration sets their length.
    server = next(r for r in est.rows if r.stage == "run: Server performance")
    assert all(d["queries"] == pytest.approx(d["test_seconds"] * 61.2) for d in server.details if d["system"] == SINGLE)


def test_plan_command_reports_gpu_hours(capsys):
    assert cli_main(["plan", "--configfile", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "GPU-hours" in out
    assert cli_main(["plan", "--configfile", str(EXAMPLE), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["stage"]: row for row in data["stages"]}
    for name in ("Offline performance", "Offline accuracy", "Server performance", "Server accuracy"):
        assert rows[f"run: {name}"]["gpu_hours"] > 0, name
