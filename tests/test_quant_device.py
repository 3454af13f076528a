"""Where a quantize job runs: the recipe's ``device`` or what its tool needs (Quark's
AutoSmoothQuant with MXFP4 needs a GPU), asked of the scheduler as generic resources, priced
in the plan view's GPU-hours, refused by preflight where it cannot run, and recorded in the
quantize manifest."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
from conftest import MI355X_EXAMPLE, SCHEMA
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mlperf_repro.check.preflight import preflight
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.plan import Plan
from mlperf_repro.provenance import device_record
from mlperf_repro.quant.tools import needed_device, recipe_device

RECIPE = "llama2-70b-99-mxfp4"


@pytest.fixture
def vendor() -> dict:
    return validate_config(load_yaml(MI355X_EXAMPLE), SCHEMA)


def test_the_vendor_recipe_needs_a_gpu_and_a_native_one_does_not(vendor, default_config):
    device, why = needed_device(vendor["quantization"][RECIPE])
    assert device == "gpu" and "autosmoothquant" in why and "CUDA/HIP" in why
    gptq_only = {**vendor["quantization"][RECIPE], "algorithms": ["gptq"]}
    assert needed_device(gptq_only) == ("cpu", None)
    assert recipe_device({**gptq_only, "device": "gpu"}) == "gpu"
    for recipe in default_config["quantization"].values():
        assert needed_device(recipe) == ("cpu", None)


def test_the_plan_asks_for_the_gpus_and_prices_them(vendor):
    plan = Plan(vendor)
    assert plan.quantize_device(RECIPE)["device"] == "gpu" and plan.quantize_device(RECIPE)["gpus"] == 1
    vendor["quantization"][RECIPE].update(gpus=2, gpu_model="mi355x")
    plan = Plan(vendor)
    assert {k: plan.quantize_device(RECIPE)[k] for k in ("gpus", "gpu_model")} == {"gpus": 2, "gpu_model": "mi355x"}
    row = next(r for r in estimate_plan(vendor).rows if r.stage == "quantize")
    (detail,) = row.details
    assert detail["accelerators"] == 2 and detail["device"] == "gpu"
    assert row.gpu_hours == pytest.approx(detail["wall_s"] * 2 / 3600) and row.gpu_hours > 0


def test_a_cpu_recipe_asks_for_no_gpu_and_costs_no_gpu_hours(default_config):
    config = validate_config(default_config, SCHEMA)
    plan = Plan(config)
    for recipe in config["quantization"]:
        assert plan.quantize_device(recipe) == {"device": "cpu", "gpus": 0, "gpu_model": None, "needs_gpu": None}
    assert next(r for r in estimate_plan(config).rows if r.stage == "quantize").gpu_hours == 0


@pytest.mark.parametrize(("gpus", "gpu_model", "flags"), [(1, None, " --gpus=1"), (2, "mi355x", " --gpus=mi355x:2")])
def test_the_slurm_plugin_turns_the_resources_into_its_gpu_flags(vendor, gpus, gpu_model, flags):
    """The rule's resources (gpu, gpu_model), through the SLURM executor plugin's own flag
    builder (the Kubernetes rendering of the same job: tests/test_kubernetes.py)."""
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    vendor["quantization"][RECIPE].update(gpus=gpus, **({"gpu_model": gpu_model} if gpu_model else {}))
    where = Plan(vendor).quantize_device(RECIPE)
    resources = {"gpu": where["gpus"] or None, "gpu_model": where["gpu_model"]}
    job = SimpleNamespace(resources=SimpleNamespace(get=lambda key, default=None: resources.get(key) or default))
    assert set_gres_string(job) == flags


def test_preflight_refuses_a_gpu_recipe_without_a_gpu_system_and_warns_when_set_to_cpu(vendor, tmp_path):
    assert not [f for f in preflight(copy.deepcopy(vendor), tmp_path) if f.rule == "quantize-device"]
    cpu_only = copy.deepcopy(vendor)
    for system in cpu_only["systems"].values():
        system["description"]["accelerators_per_node"] = 0
    (found,) = [f for f in preflight(cpu_only, tmp_path) if f.rule == "quantize-device"]
    assert found.path == f"quantization.{RECIPE}" and "has an accelerator" in found.message
    assert found.severity == "error" and "device: cpu" in found.message
    # device: cpu runs the kernel's emulation (quark_runner): allowed, with a warning.
    for config in (copy.deepcopy(vendor), cpu_only):
        config["quantization"][RECIPE]["device"] = "cpu"
        (found,) = [f for f in preflight(config, tmp_path) if f.rule == "quantize-device"]
        assert found.path == f"quantization.{RECIPE}.device" and "autosmoothquant" in found.message
        assert found.severity == "warning" and "emulated" in found.message


def test_the_device_record_names_the_cpu_or_the_gpu():
    cpu = device_record("cpu")
    assert cpu["kind"] == "cpu" and cpu["name"] and cpu["name"] != "unknown"
    assert device_record("gpu", "NVIDIA H200") == {"kind": "gpu", "name": "NVIDIA H200"}


def test_the_vendor_quark_jobs_memory_counts_autosmoothquants_activation_cache(vendor, tmp_path):
    """amd-quark 0.13's AutoSmoothQuant copies each Linear's calibration input of a block to the
    host (q, k, v, o, gate, up: 8,192 wide; down: 28,672; and the block's inputs): at the
    vendor's 1,000 x 1,024 tokens that is 176 GB, more than the 142 GB of the bf16 model + 4 GB.
    On a GPU the model leaves the host first, so the job needs the larger; on a CPU both."""
    import math

    from mlperf_repro.quant.memory import autosmoothquant_cache_bytes, quantize_job_mem_mb

    cache = autosmoothquant_cache_bytes(1000 * 1024, 8192, 28672)
    assert cache == 1_024_000 * (7 * 8192 + 28672) * 2
    model_mb = math.ceil((2 * 68_976_648_192 + 4e9) / 1e6)

    def quantize_mem(config: dict) -> int:
        (detail,) = next(r for r in estimate_plan(config).rows if r.stage == "quantize").details
        return detail["mem_mb"]

    assert quantize_mem(copy.deepcopy(vendor)) == math.ceil(cache / 1e6) + 4000 > model_mb
    on_cpu = copy.deepcopy(vendor)
    on_cpu["quantization"][RECIPE]["device"] = "cpu"
    assert quantize_mem(on_cpu) == model_mb + math.ceil(cache / 1e6)
    gptq_only = copy.deepcopy(vendor)
    gptq_only["quantization"][RECIPE]["algorithms"] = ["gptq"]
    assert quantize_mem(gptq_only) == model_mb
    # The rule's figure, once the checkpoint is acquired: the widths from its config.json.
    (tmp_path / "config.json").write_text('{"hidden_size": 64, "intermediate_size": 224}')
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.zeros((224, 64), dtype=np.float16)}, str(tmp_path / "model.safetensors"))
    recipe = vendor["quantization"][RECIPE]
    small = quantize_job_mem_mb(tmp_path, tool="quark", recipe=recipe, on_gpu=False)
    assert small == math.ceil((2 * 224 * 64 + 4e9) / 1e6) + math.ceil(1_024_000 * (7 * 64 + 224) * 2 / 1e6)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    top=st.dictionaries(st.sampled_from(["hidden_size", "intermediate_size", "text_config", "x"]), _JSON, max_size=4),
    raw=st.none() | st.binary(max_size=20),
)
@example(top={"hidden_size": True, "intermediate_size": 224}, raw=None)
@example(top={"text_config": [1], "hidden_size": 64, "intermediate_size": 224}, raw=None)
def test_any_config_json_gives_widths_or_none(tmp_path_factory, top, raw):
    """A checkpoint's config.json is outside input: whatever it holds (any JSON, or bytes that
    are not JSON), the memory reader gives two positive integer widths or None, never an error."""
    from mlperf_repro.quant.memory import checkpoint_widths

    folder = tmp_path_factory.mktemp("widths")
    path = folder / "config.json"
    if raw is None:
        path.write_text(json.dumps(top, allow_nan=True))
    else:
        path.write_bytes(raw)
    widths = checkpoint_widths(folder)
    if (
        raw is None
        and all(type(top.get(k)) is int and top[k] > 0 for k in ("hidden_size", "intermediate_size"))
        and not isinstance(top.get("text_config"), dict)
    ):
        assert widths == (top["hidden_size"], top["intermediate_size"])
    assert widths is None or (
        all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths) and len(widths) == 2
    )


@settings(max_examples=100, deadline=None)
@given(nodes=st.integers(1, 12), per_node=st.integers(1, 9), data=st.data())
def test_a_servers_total_fills_the_nodes_in_order(nodes, per_node, data):
    """allocation.servers in its allowed range: that many endpoints, every node used, node by
    node, each node's ports consecutive from base_port; outside the range the config names it."""
    from mlperf_repro.config import allocation_endpoints

    servers = data.draw(st.integers((nodes - 1) * per_node + 1, nodes * per_node))
    entries = allocation_endpoints({"nodes": nodes, "servers_per_node": per_node, "servers": servers})
    assert len(entries) == servers
    assert [e["node"] for e in entries] == sorted((e["node"] for e in entries), key=lambda n: int(n[4:]))
    assert {e["node"] for e in entries} == {f"node{i}" for i in range(nodes)}
    for i in range(nodes):
        ports = [e["port"] for e in entries if e["node"] == f"node{i}"]
        assert ports == list(range(8000, 8000 + len(ports))) and len(ports) <= per_node
