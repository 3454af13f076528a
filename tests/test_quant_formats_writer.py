"""Every scheme the checkpoint writer serves, round-tripped: write -> our validator -> decode -> the
emulated copy, and the written config read by vLLM's own loaders (Quark, ModelOpt, compressed-tensors).

MXFP4, MXFP6 (E2M3, E3M2), FP8 (W8A8 static) and NVFP4 (W4A4) in the Quark layout, NVFP4 also in
ModelOpt's and compressed-tensors' (the two storage conventions of its tensor scale), with FP8
KV-cache scales. A tiny random Llama (hidden 64, 2 layers) built locally; a few seconds each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from mlperf_repro.errors import UserError
from mlperf_repro.quant import fp8, mx, nvfp4
from mlperf_repro.quant.checkpoint import quantize_checkpoint
from mlperf_repro.quant.encodings import SCHEMES, encoding_for
from mlperf_repro.quant.formats import FORMATS, format_for
from mlperf_repro.quant.validate import read_quant_config, validate_checkpoint

N_LAYERS = 2
CASES = [
    ("mxfp4", None, None),
    ("mxfp6_e2m3", None, None),
    ("mxfp6_e3m2_weight_only", None, None),
    ("fp8", None, "fp8"),
    ("nvfp4", None, "fp8"),
    ("nvfp4", "modelopt", "fp8"),
    ("nvfp4", "compressed-tensors", "fp8"),
]


def _ids(case):
    return "-".join(str(x) for x in case if x)


def _tensors(directory: Path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(directory.glob("*.safetensors")):
        with safe_open(f, framework="pt") as handle:
            out.update({k: handle.get_tensor(k) for k in handle.keys()})
    return out


@pytest.fixture(scope="module")
def src_dir(tmp_path_factory) -> Path:
    from conftest import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("src") / "tiny-llama", layers=N_LAYERS)


CALIBRATION = {
    "input_ids": torch.randint(0, 128, (4, 32), generator=torch.Generator().manual_seed(1)).tolist(),
    "file": "calibration.pkl",
    "sha256": "0" * 64,
}


@pytest.fixture(scope="module", params=CASES, ids=_ids)
def written(request, src_dir, tmp_path_factory):
    scheme, layout, kv = request.param
    out = tmp_path_factory.mktemp(_ids(request.param))
    manifest = quantize_checkpoint(
        src_dir, out / "q", out / "e", scheme=scheme, layout=layout, kv_cache=kv, calibration=CALIBRATION
    )
    return request.param, out, manifest


def test_every_scheme_is_a_registered_format_scheme():
    served = {s for fmt in FORMATS.values() for s in fmt.schemes}
    assert set(SCHEMES) <= served
    for name, scheme in SCHEMES.items():
        assert format_for(name).name == scheme.format.split("_")[0]


def test_round_trip_through_validator_and_codec(written, src_dir):
    (scheme, layout, kv), out, manifest = written
    report = validate_checkpoint(out / "q", reference=src_dir)
    assert report.ok, report.render()
    qcfg = read_quant_config(out / "q")
    assert qcfg.fmt.name == SCHEMES[scheme].format
    assert report.decoded and len(report.errors) == len(report.quantized) == N_LAYERS * 7
    assert manifest["quantized_tensors"]["count"] == N_LAYERS * 7
    # Every quantized weight decodes, with the project codec, to the emulated copy the CPU serves.
    enc = encoding_for(scheme, layout)
    stored, emulated = _tensors(out / "q"), _tensors(out / "e")
    for name in manifest["quantized_tensors"]["names"]:
        module = name[: -len(".weight")]
        decoded = _decode(enc, stored, module)
        assert decoded.shape == emulated[name].shape
        assert torch.equal(decoded.to(torch.bfloat16), emulated[name]), name
        if enc.exact_in_bf16:
            assert torch.equal(decoded, emulated[name].float()), name
    assert manifest["layout"] == enc.layout and manifest["codec_version"] == enc.codec_version
    # The parts besides the weights, as the written config declares them, all found.
    assert report.activations == SCHEMES[scheme].activations, report.render()
    if SCHEMES[scheme].activations == "static":
        assert report.declared["activations"]["scales"] == N_LAYERS * 7
    assert ("kv_cache" in report.declared) == bool(kv)
    if kv:
        assert report.declared["kv_cache"] == {**report.declared["kv_cache"], "static": True, "scales": 2 * N_LAYERS}


def _declared_scale_names(written) -> list[str]:
    """The stored activation and KV-cache scale tensors of a written case."""
    (scheme, layout, kv), out, _ = written
    names = sorted(_tensors(out / "q"))
    suffixes = ("input_scale", "input_scale_2", "input_global_scale", "output_scale", "k_scale", "v_scale")
    return [n for n in names if n.rpartition(".")[2] in suffixes]


@pytest.mark.parametrize("damage", ["missing", "zero", "nan", "negative", "per-channel", "int"])
def test_a_damaged_declared_scale_is_named(written, tmp_path, damage):
    """Every activation or KV-cache scale the config declares is checked: a missing one, a value
    that is not a finite positive number, a shape that is not per-tensor or an integer dtype is a
    finding naming the tensor (the first and the last of the case's scales, each in turn)."""
    import shutil

    from safetensors.torch import load_file, save_file

    (scheme, layout, kv), out, _ = written
    names = _declared_scale_names(written)
    if not names:
        pytest.skip(f"{scheme} declares no activation or KV-cache scale")
    for victim in dict.fromkeys((names[0], names[-1])):
        ckpt = tmp_path / victim
        shutil.copytree(out / "q", ckpt)
        for shard in sorted(ckpt.glob("*.safetensors")):
            tensors = load_file(shard)
            if victim in tensors:
                value = tensors.pop(victim)
                replacement = {
                    "missing": None,
                    "zero": torch.zeros_like(value),
                    "nan": torch.full_like(value, float("nan")),
                    "negative": -value,
                    "per-channel": value.reshape(-1).repeat(4),
                    "int": value.to(torch.int32),
                }[damage]
                if replacement is not None:
                    tensors[victim] = replacement
                save_file(tensors, shard, metadata={"format": "pt"})
        report = validate_checkpoint(ckpt, decode=damage in ("zero", "nan", "negative"))
        module = victim.rpartition(".")[0]
        hits = [f for f in report.findings if f.tensor.startswith(module + ".")]
        assert hits and all("scale" in f.rule for f in hits), report.render()
        if damage == "missing":
            assert hits[0].rule.endswith("-missing") and hits[0].tensor.rpartition(".")[0] == module


def _decode(enc, stored, module):
    if enc.format.startswith("mx"):
        element = {"mxfp4": "e2m1", "mxfp6_e2m3": "e2m3", "mxfp6_e3m2": "e3m2"}[enc.format]
        return mx.dequantize_mx(stored[f"{module}.weight"], stored[f"{module}.weight_scale"], element=element)
    if enc.format == "fp8":
        return fp8.dequantize_fp8(stored[f"{module}.weight"], stored[f"{module}.weight_scale"])
    g = stored[f"{module}.{enc.global_suffix}"]
    return nvfp4.dequantize_nvfp4(
        stored[f"{module}.{enc.weight_suffix}"],
        stored[f"{module}.weight_scale"],
        torch.float32,
        g,
        scale_mode=enc.convention,
    )


def test_per_tensor_scales_are_shared_by_fused_shards(written):
    (scheme, layout, kv), out, _ = written
    enc = encoding_for(scheme, layout)
    if not enc.tensor_amax:
        pytest.skip("no per-tensor weight scale")
    stored = _tensors(out / "q")
    suffix = "weight_scale" if enc.format == "fp8" else enc.global_suffix
    for layer in range(N_LAYERS):
        p = f"model.layers.{layer}."
        for group in (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("mlp.gate_proj", "mlp.up_proj")):
            scales = {float(stored[f"{p}{m}.{suffix}"].reshape(())) for m in group}
            assert len(scales) == 1, (group, scales)
        # ... and the input scale too (vLLM keeps one per fused layer).
        inputs = {float(stored[f"{p}self_attn.{m}.{_input_suffix(enc)}"].reshape(())) for m in ("q_proj", "k_proj")}
        assert len(inputs) == 1


def _input_suffix(enc):
    return "input_scale" if enc.format == "fp8" else enc.input_suffix


def test_static_scales_come_from_calibration_and_are_recorded(written):
    (scheme, layout, kv), out, manifest = written
    enc = encoding_for(scheme, layout)
    if not enc.scheme.needs_calibration:
        assert manifest["calibration"] is None
        return
    calibration = manifest["calibration"]
    assert calibration["sha256"] == CALIBRATION["sha256"] and "input_ids" not in calibration
    stored = _tensors(out / "q")
    module = "model.layers.1.self_attn.o_proj"
    amax = calibration["activation_amax"][module]
    value = float(stored[f"{module}.{_input_suffix(enc)}"].reshape(()))
    if enc.format == "fp8":
        assert value == pytest.approx(amax / 448, rel=1e-5)
    elif enc.convention == "weight_global_scale":
        assert value == pytest.approx(448 * 6 / amax, rel=1e-5)
    else:
        assert value == pytest.approx(amax / (448 * 6), rel=1e-5)


def test_kv_cache_scales_under_the_names_vllm_maps(written):
    (scheme, layout, kv), out, manifest = written
    if not kv:
        assert manifest["kv_cache"] is None
        return
    stored = _tensors(out / "q")
    k_name = {
        "quark": "self_attn.k_proj.output_scale",
        "modelopt": "self_attn.k_proj.k_scale",
        "compressed-tensors": "self_attn.k_scale",
    }[encoding_for(scheme, layout).layout]
    amax = manifest["calibration"]["kv_amax"]["model.layers.0.self_attn.k_proj"]
    assert float(stored[f"model.layers.0.{k_name}"].reshape(())) == pytest.approx(amax / 448, rel=1e-5)
    assert manifest["kv_cache"]["scales"] == 2 * N_LAYERS


def test_vllm_loaders_read_the_written_configs(written):
    """vLLM's own config classes pick the scheme we meant (parser and scheme selection; the
    kernels need a GPU)."""
    pytest.importorskip("vllm")
    (scheme, layout, kv), out, _ = written
    qc = json.loads((out / "q" / "config.json").read_text())["quantization_config"]
    layout = encoding_for(scheme, layout).layout
    if layout == "quark":
        from vllm.model_executor.layers.linear import QKVParallelLinear, RowParallelLinear
        from vllm.model_executor.layers.quantization.quark import schemes
        from vllm.model_executor.layers.quantization.quark.quark import QuarkConfig, QuarkKVCacheMethod

        cfg = QuarkConfig.from_config(qc)
        cfg.packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}
        want = {"mx": schemes.QuarkOCP_MX, "fp": schemes.QuarkW8A8Fp8, "nv": schemes.QuarkNVFP4}[scheme[:2]]
        for prefix, cls in (("self_attn.qkv_proj", QKVParallelLinear), ("mlp.down_proj", RowParallelLinear)):
            _, _, scheme_cls = cfg.get_scheme_cls(cls, f"model.layers.0.{prefix}")
            assert scheme_cls is want
        if kv:
            assert cfg.kv_cache_group == ["*k_proj", "*v_proj"]
            QuarkKVCacheMethod.validate_kv_cache_config(cfg.kv_cache_config)
    elif layout == "modelopt":
        from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4Config

        hf = json.loads((out / "q" / "hf_quant_config.json").read_text())
        cfg = ModelOptNvFp4Config.from_config(hf)
        assert cfg.is_checkpoint_nvfp4_serialized and cfg.group_size == 16 and cfg.kv_cache_quant_algo == "FP8"
    else:
        from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
            CompressedTensorsConfig,
        )

        cfg = CompressedTensorsConfig.from_config(qc)
        weights = cfg.target_scheme_map["Linear"]["weights"]
        assert weights.group_size == 16 and weights.num_bits == 4 and cfg.kv_cache_scheme is not None


def test_layout_and_calibration_errors_name_the_fix(src_dir, tmp_path):
    with pytest.raises(UserError, match="cannot be written in layout 'compressed-tensors'.*quark"):
        quantize_checkpoint(src_dir, tmp_path / "q", tmp_path / "e", scheme="fp8", layout="compressed-tensors")
    with pytest.raises(UserError, match="scheme fp8 needs calibration data"):
        quantize_checkpoint(src_dir, tmp_path / "q", tmp_path / "e", scheme="fp8")
    with pytest.raises(UserError, match="kv_cache fp8 needs calibration data"):
        quantize_checkpoint(src_dir, tmp_path / "q", tmp_path / "e", scheme="mxfp4", kv_cache="fp8")
    assert not (tmp_path / "q").exists()  # refused before any output


def test_native_recipe_keys_in_config(default_config):
    from conftest import SCHEMA

    from mlperf_repro.config import validate_config

    config = default_config
    config["quantization"]["x"] = {"scheme": "nvfp4", "layout": "compressed-tensors", "kv_cache": "fp8"}
    validate_config(config, SCHEMA)
    for recipe, message in (
        (
            {"scheme": "fp8", "layout": "modelopt"},
            "quantization.x.layout: scheme fp8 cannot be written in layout modelopt",
        ),
        (
            {"scheme": "mxfp4", "calibration": {"samples": 4}},
            "quantization.x.calibration: scheme mxfp4 measures nothing",
        ),
        ({"scheme": "mxfp4", "tool": "quark", "layout": "quark"}, "quantization.x.layout: only for tool native"),
        # A scheme only some tools produce: the native writer does not write static FP8 inputs for MXFP4.
        ({"scheme": "mxfp4_fp8"}, "quantization.x.tool: scheme mxfp4_fp8 is produced by tool quark or prequantized"),
    ):
        config["quantization"]["x"] = recipe
        with pytest.raises(UserError, match=message):
            validate_config(config, SCHEMA)


@pytest.mark.slow
def test_calibrating_native_recipe_waits_for_the_benchmark_dataset(tmp_path, default_config):
    """The quantize job of a recipe with static scales takes the benchmark's dataset as input
    (Snakemake reruns it when the calibration data changes); a weights-only one does not."""
    import yaml
    from conftest import make_workdir, run_snakemake

    work = make_workdir(tmp_path)
    config = default_config
    for bench in config["benchmarks"].values():
        if bench.get("quantization"):
            bench["quantization"] = "fp8-kv8"  # a recipe of the default config
    (work / "fp8.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "fp8.yaml", "-p", timeout=120)
    assert result.returncode == 0, result.stderr
    quantize = result.stdout.split("rule quantize:", 1)[1].split("\n\n", 1)[0]
    assert "resources/datasets/openorca-synthetic" in quantize and "results/models/tiny-llama-fp8-kv8" in quantize
    result = run_snakemake(work, "-n", "--cores", "2", "-p", timeout=120)  # the default: mxfp4-w4a16
    quantize = result.stdout.split("rule quantize:", 1)[1].split("\n\n", 1)[0]
    assert "resources/datasets" not in quantize.split("output:")[0]
