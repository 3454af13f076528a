"""Where a quantize job runs: the recipe's ``device`` or what its tool needs (Quark's
AutoSmoothQuant with MXFP4 needs a GPU), asked of the scheduler as generic resources, priced
in the plan view's GPU-hours, refused by preflight where it cannot run, and recorded in the
quantize manifest."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from conftest import MI355X_EXAMPLE, SCHEMA

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
