"""A quantization format is one module in src/mlperf_repro/quant/formats/: a toy int8
per-tensor format, written here into a temporary folder that is added to the package's path,
plugs into config validation, the plan view, the preflight disk check, the measurements and
calibration texts, the quantize stage and the tensor codec with no other edit. Also the
registry's own checks and the MXFP4 format's facts."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import SCHEMA

from mlperf_repro.check.preflight import estimated_bytes
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import Estimator, estimate_plan
from mlperf_repro.package.tree import _calibration_doc, measurements
from mlperf_repro.plan import Plan
from mlperf_repro.quant import formats
from mlperf_repro.quant.formats import FORMATS, QuantFormat, format_for, register_format, schemes

BENCH, RECIPE = "tiny-llama-mxfp4", "int8-toy"

TOY_MODULE = '''
"""Toy int8 format: one float32 scale per tensor, amax / 127, round to nearest."""

import json
from pathlib import Path

from . import QuantFormat, register_format

WRITES = []  # (src, quantized_dir, emulated_dir, options) per call, for the test


def quantize(w, scale_mode="even"):
    import torch

    scale = (w.abs().max().to(torch.float32) / 127).clamp(min=1e-12).reshape(1)
    return torch.round(w.to(torch.float32) / scale).clamp(-127, 127).to(torch.int8), scale


def dequantize(q, scale, dtype=None):
    import torch

    return (q.to(torch.float32) * scale).to(dtype or torch.float32)


def write(src_dir, quantized_dir, emulated_dir, **options):
    WRITES.append((src_dir, quantized_dir, emulated_dir, options))
    manifest = {"scheme": options["scheme"], "software": {}}
    for out in (quantized_dir, emulated_dir):
        Path(out).mkdir(parents=True)
    Path(options["manifest_path"]).write_text(json.dumps(manifest))
    return manifest


INT8 = register_format(
    QuantFormat(
        name="toy_int8",
        schemes=("int8_per_tensor",),
        quantize=quantize,
        dequantize=dequantize,
        writer=write,
        bytes_per_param=1.0,
        size_note="int8 = 1 byte per quantized parameter (one float32 scale per tensor)",
        weight_data_types="int8",
        transformations=lambda recipe: f"toy int8 per-tensor ({recipe['scheme']})",
        calibration=lambda recipe: [f"- Scheme: `{recipe['scheme']}` (toy int8, one scale per tensor)."],
    )
)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy format, found by the package's own discovery in a folder added to its path."""
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "toy_int8.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.setattr(formats, "__path__", [*formats.__path__, str(folder)])
    formats.discover()
    try:
        yield sys.modules["mlperf_repro.quant.formats.toy_int8"]
    finally:
        FORMATS.pop("toy_int8", None)
        sys.modules.pop("mlperf_repro.quant.formats.toy_int8", None)


def toy_config(default_config, hub_model=False):
    config = default_config
    config["quantization"][RECIPE] = {"scheme": "int8_per_tensor"}
    config["benchmarks"][BENCH]["quantization"] = RECIPE
    if hub_model:
        config["models"]["tiny-llama"] = {
            "source": "hf://meta-llama/Llama-2-70b-chat-hf@" + "0" * 40,
            "allow_unverified": True,
        }
        config["datasets"]["openorca-synthetic"]["builtin"]["model"] = "tiny-llama"
    return validate_config(config, SCHEMA)


def test_toy_format_is_registered_by_discovery(toy):
    assert format_for("int8_per_tensor") is toy.INT8
    assert schemes()[-1] == "int8_per_tensor" and {"mxfp4", "mxfp4_weight_only", "fp8", "nvfp4"} <= set(schemes())
    formats.discover()  # idempotent: the module is imported once
    assert list(FORMATS) == ["fp8", "mxfp4", "mxfp6", "nvfp4", "toy_int8"]


def test_config_validation_takes_the_registry_schemes(toy, default_config):
    unchecked = copy.deepcopy(default_config)
    assert toy_config(default_config)["quantization"][RECIPE]["scheme"] == "int8_per_tensor"
    FORMATS.pop("toy_int8")  # unregistered: the same config is refused, naming the key path
    with pytest.raises(UserError) as err:
        toy_config(unchecked)
    message = str(err.value)
    assert (
        f"quantization.{RECIPE}.scheme: 'int8_per_tensor' is not allowed; allowed values: fp8, fp8_dynamic, mxfp4,"
        in message
    )
    assert "int8" not in message.rpartition("allowed values:")[2]


def test_plan_view_sizes_the_toy_format(toy, default_config):
    config = toy_config(default_config)
    est = estimate_plan(config)
    sizes = Estimator(config).model_sizes("tiny-llama")
    linear, rest = sizes["linear"], sizes["parameters"] - sizes["linear"]
    quantize = next(r for r in est.rows if r.stage == "quantize")
    assert quantize.details[0]["recipe"] == RECIPE
    assert quantize.details[0]["fp4_bytes"] == round(linear * 1.0 + rest * 2)  # 1,327,104 + 789,120
    assert quantize.disk_bytes == linear * 1.0 + rest * 2 + sizes["bytes"]
    assert any("int8 = 1 byte per quantized parameter" in note and "MXFP4" not in note for note in est.notes)


def test_preflight_disk_check_uses_the_toy_size(toy, default_config, tmp_path):
    plan = Plan(toy_config(default_config, hub_model=True))
    model_bytes = 137953316864
    # the bf16 weights, the int8 checkpoint (1 of 2 bytes) and the emulated bf16 copy
    assert estimated_bytes(plan, tmp_path) == model_bytes + int(model_bytes * (0.5 + 1.0))


def test_measurements_and_calibration_texts_come_from_the_toy_format(toy, default_config):
    plan = Plan(toy_config(default_config))
    data = measurements(plan, BENCH)
    assert data["weight_data_types"] == "int8"
    assert data["weight_transformations"] == "toy int8 per-tensor (int8_per_tensor)"
    doc = _calibration_doc(plan)
    assert "- Scheme: `int8_per_tensor` (toy int8, one scale per tensor)." in doc
    assert "MXFP4" not in doc


def test_quantize_stage_and_codec_go_through_the_toy_format(toy, tmp_path, monkeypatch):
    from mlperf_repro.quant import stage

    monkeypatch.setattr(stage, "verify_dir", lambda path: None)  # no acquired model here
    recipe = {"scheme": "int8_per_tensor", "scale_mode": "even", "exclude": ["lm_head"]}
    manifest = stage.quantize_job(str(tmp_path / "m"), str(tmp_path / "q"), str(tmp_path / "e"), recipe)
    assert manifest["scheme"] == "int8_per_tensor" and len(toy.WRITES) == 1
    assert (tmp_path / "e" / stage.MANIFEST_NAME).is_file()

    fmt = format_for("int8_per_tensor")
    w = torch.tensor([[0.5, -1.0, 0.25], [1.0, 0.0, -0.75]])
    stored = fmt.quantize_tensors({"layer.weight": w, "norm.weight": torch.ones(3)}, ["layer.weight"])
    assert sorted(stored) == ["layer.weight", "layer.weight_scale", "norm.weight"]
    assert stored["layer.weight"].dtype == torch.int8 and stored["layer.weight"].abs().max() == 127
    back = fmt.dequantize_tensors(stored)
    assert sorted(back) == ["layer.weight", "norm.weight"]
    assert torch.allclose(back["layer.weight"], w, atol=1 / 127)
    assert torch.equal(back["norm.weight"], torch.ones(3))


# --------------------------------------------------------------------------- registry


def test_unknown_scheme_names_it_and_the_known_ones():
    with pytest.raises(UserError) as err:
        format_for("nvfp5")
    message = str(err.value)
    assert "unknown quantization scheme 'nvfp5'" in message
    assert "mxfp4 (format mxfp4), mxfp4_weight_only (format mxfp4)" in message
    assert "src/mlperf_repro/quant/formats/" in message


def _fmt(**changes):
    base = dict(
        name="other",
        schemes=("other_scheme",),
        quantize=lambda w, scale_mode="even": (w, w),
        dequantize=lambda q, s, dtype=None: q,
        writer=lambda *a, **k: {},
        bytes_per_param=1.0,
        size_note="other",
        weight_data_types="other",
        transformations=lambda recipe: "",
        calibration=lambda recipe: [],
    )
    return QuantFormat(**{**base, **changes})


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"name": "mxfp4"}, ValueError, "quantization format 'mxfp4' is already registered"),
        (
            {"schemes": ("mxfp4_weight_only",)},
            ValueError,
            "quantization format 'other': scheme 'mxfp4_weight_only' is already served by format 'mxfp4'",
        ),
        ({"schemes": ()}, ValueError, "schemes must be a non-empty tuple of names"),
        ({"schemes": "other_scheme"}, ValueError, "schemes must be a non-empty tuple of names"),
        ({"schemes": ("a", "a")}, ValueError, "repeat a name"),
        ({"bytes_per_param": 0}, ValueError, "bytes_per_param must be > 0, got 0"),
        ({"name": ""}, ValueError, "a quantization format needs a name"),
    ],
)
def test_register_format_refuses(changes, error, message):
    before = dict(FORMATS)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        register_format(_fmt(**changes))
    assert FORMATS == before


def test_register_format_needs_a_quant_format():
    with pytest.raises(TypeError, match="register_format expects a QuantFormat, got dict"):
        register_format({"name": "x"})


def test_quantize_tensors_names_a_missing_tensor():
    with pytest.raises(UserError, match="mxfp4: no tensor named 'missing.weight' to quantize"):
        format_for("mxfp4").quantize_tensors({"a.weight": torch.zeros(1, 32)}, ["missing.weight"])


# --------------------------------------------------------------------------- MXFP4


def test_mxfp4_facts():
    from mlperf_repro.quant.checkpoint import SCHEMES, quantize_checkpoint
    from mlperf_repro.quant.mxfp4 import dequantize_mxfp4, quantize_mxfp4

    fmt = format_for("mxfp4_weight_only")
    assert fmt is format_for("mxfp4") is FORMATS["mxfp4"]
    # The project's writer serves exactly the schemes of the formats that register it.
    assert {s for f in FORMATS.values() if f.writer is fmt.writer for s in f.schemes} == set(SCHEMES)
    assert fmt.bytes_per_param == 0.53125  # 4 bits + one 8-bit scale per 32 values = 4.25 bits
    w = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    stored = fmt.quantize_tensors({"x.weight": w}, scale_mode="floor")
    packed, scales = quantize_mxfp4(w, "floor")
    assert torch.equal(stored["x.weight"], packed) and torch.equal(stored["x.weight_scale"], scales)
    assert torch.equal(fmt.dequantize_tensors(stored)["x.weight"], dequantize_mxfp4(packed, scales))
    assert fmt.writer.__module__ == "mlperf_repro.quant.formats._common" and quantize_checkpoint is not None


def test_schema_holds_no_list_of_schemes():
    scheme = load_yaml(SCHEMA)["properties"]["quantization"]["additionalProperties"]["properties"]["scheme"]
    assert "enum" not in scheme  # the registry is the one list (config.with_registered_schemes)


def test_the_registry_does_not_import_torch():
    code = "import sys, mlperf_repro.quant.formats, mlperf_repro.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
