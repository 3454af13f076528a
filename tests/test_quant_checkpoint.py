"""MXFP4 checkpoint writer: Quark layout, emulated bf16 copy, manifest, vLLM config parse.

A tiny random Llama (hidden 64, intermediate 128, 2 layers, vocab 128) is built locally
with transformers; nothing touches the network.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from mlperf_repro.errors import UserError
from mlperf_repro.hashing import sha256_file
from mlperf_repro.quant.checkpoint import (
    QUANTIZED_PROJECTIONS,
    build_quantization_config,
    load_quark_checkpoint_dequantized,
    quantize_checkpoint,
    select_quantized_tensors,
)
from mlperf_repro.quant.mxfp4 import CODEC_VERSION, dequantize_mxfp4, quantize_mxfp4

N_LAYERS = 2
SIDE_FILES = {
    "tokenizer.json": '{"version": "1.0", "model": {"type": "WordLevel"}}\n',
    "tokenizer_config.json": '{"model_max_length": 128}\n',
    "special_tokens_map.json": "{}\n",
}


def _read_tensors(directory: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in sorted(directory.glob("*.safetensors")):
        with safe_open(f, framework="pt") as handle:
            for key in handle.keys():
                out[key] = handle.get_tensor(key)
    return out


@pytest.fixture(scope="module")
def src_dir(tmp_path_factory) -> Path:
    from conftest import save_tiny_llama

    path = save_tiny_llama(tmp_path_factory.mktemp("src") / "tiny-llama", layers=N_LAYERS)
    # Tokenizer files are only copied byte for byte, so any content will do.
    for name, text in SIDE_FILES.items():
        (path / name).write_text(text)
    return path


@pytest.fixture(scope="module")
def w4a16(src_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("w4a16")
    manifest = quantize_checkpoint(src_dir, out / "quark", out / "emulated", manifest_path=out / "manifest.json")
    return out, manifest


@pytest.fixture(scope="module")
def w4a4(src_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("w4a4")
    manifest = quantize_checkpoint(src_dir, out / "quark", out / "emulated", scheme="mxfp4")
    return out, manifest


def _expected_quantized(src_dir: Path) -> set[str]:
    names = {k for k in _read_tensors(src_dir) if k.split(".")[-2] in QUANTIZED_PROJECTIONS}
    assert len(names) == 7 * N_LAYERS
    return names


# ----------------------------------------------------------------------------- layout


def test_quark_dir_tensor_layout(src_dir, w4a16):
    out, _ = w4a16
    src = _read_tensors(src_dir)
    quark = _read_tensors(out / "quark")
    expected = _expected_quantized(src_dir)
    assert set(quark) == set(src) | {n + "_scale" for n in expected}
    for name, tensor in src.items():
        if name in expected:
            rows, cols = tensor.shape
            assert quark[name].dtype == torch.uint8 and quark[name].shape == (rows, cols // 2)
            scale = quark[name + "_scale"]
            assert scale.dtype == torch.uint8 and scale.shape == (rows, cols // 32)
        else:  # embeddings, norms, lm_head: copied unchanged
            assert quark[name].dtype == tensor.dtype and torch.equal(quark[name], tensor)
    assert "lm_head.weight" in src and quark["lm_head.weight"].dtype == torch.bfloat16


def test_round_trip_is_bit_exact(src_dir, w4a16):
    out, _ = w4a16
    src = _read_tensors(src_dir)
    emulated = _read_tensors(out / "emulated")
    decoded = load_quark_checkpoint_dequantized(out / "quark")
    assert set(decoded) == set(src) == set(emulated)
    for name in _expected_quantized(src_dir):
        reference = dequantize_mxfp4(*quantize_mxfp4(src[name], "even"))
        assert emulated[name].dtype == torch.bfloat16
        assert torch.equal(decoded[name], reference)
        assert torch.equal(emulated[name].float(), reference)
        assert not torch.equal(reference, src[name].float())  # it really was quantized
    for name in set(src) - _expected_quantized(src_dir):
        assert torch.equal(decoded[name], src[name]) and torch.equal(emulated[name], src[name])


def test_configs_and_side_files(src_dir, w4a16):
    out, manifest = w4a16
    src_config = json.loads((src_dir / "config.json").read_text())
    quark_config = json.loads((out / "quark" / "config.json").read_text())
    qc = quark_config.pop("quantization_config")
    assert quark_config == src_config
    assert qc == build_quantization_config("mxfp4_weight_only", "even", ["lm_head"])
    assert qc == manifest["quantization_config"]
    weight = qc["global_quant_config"]["weight"]
    assert (weight["dtype"], weight["qscheme"], weight["group_size"]) == ("fp4", "per_group", 32)
    assert weight["scale_format"] == "e8m0" and weight["round_method"] == "half_even"
    assert weight["is_dynamic"] is False
    assert weight["scale_calculation_mode"] == "even"
    assert qc["global_quant_config"]["input_tensors"] is None
    assert qc["quant_method"] == "quark" and qc["exclude"] == ["lm_head"]
    assert qc["export"]["kv_cache_group"] == [] and qc["export"]["pack_method"] == "reorder"
    # the emulated copy is a plain HF checkpoint
    assert (out / "emulated" / "config.json").read_bytes() == (src_dir / "config.json").read_bytes()
    for name in [*SIDE_FILES, "generation_config.json"]:
        for d in ("quark", "emulated"):
            assert (out / d / name).read_bytes() == (src_dir / name).read_bytes()


def test_w4a4_config_and_manifest(w4a4, w4a16):
    out, manifest = w4a4
    qc = json.loads((out / "quark" / "config.json").read_text())["quantization_config"]
    act = qc["global_quant_config"]["input_tensors"]
    assert act["dtype"] == "fp4" and act["is_dynamic"] is True and act["group_size"] == 32
    assert act["scale_format"] == "e8m0" and act["qscheme"] == "per_group"
    assert manifest["scheme"] == "mxfp4"
    assert manifest["cpu_serving_emulation"] == "weights-only"
    assert manifest["cpu_serving_matches_scheme"] is False
    assert manifest["logit_error"]["activation_emulation"].startswith("mxfp4 QDQ")
    # same weights as W4A16 (next test), so the extra error comes from the activation QDQ
    assert manifest["logit_error"]["rel_mean"] > w4a16[1]["logit_error"]["rel_mean"]


def test_w4a4_weights_equal_w4a16_weights(w4a4, w4a16):
    a = _read_tensors(w4a4[0] / "quark")
    b = _read_tensors(w4a16[0] / "quark")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------- manifest


def test_manifest_fields_and_hashes(src_dir, w4a16):
    out, manifest = w4a16
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["codec_version"] == CODEC_VERSION
    assert manifest["scheme"] == "mxfp4_weight_only" and manifest["scale_mode"] == "even"
    assert manifest["group_size"] == 32 and manifest["exclude"] == ["lm_head"]
    assert manifest["quantized_tensors"]["count"] == 7 * N_LAYERS
    assert set(manifest["quantized_tensors"]["names"]) == _expected_quantized(src_dir)
    assert manifest["cpu_serving_emulation"] == "weights-only"
    assert manifest["cpu_serving_matches_scheme"] is True
    for record, root in [
        (manifest["input"], src_dir),
        (manifest["outputs"]["quark_dir"], out / "quark"),
        (manifest["outputs"]["emulated_dir"], out / "emulated"),
    ]:
        on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        assert sorted(record["files"]) == on_disk
        for rel, info in record["files"].items():
            assert info["sha256"] == sha256_file(root / rel)
            assert info["bytes"] == (root / rel).stat().st_size
        assert record["bytes"] == sum(i["bytes"] for i in record["files"].values())
    sizes = manifest["quantized_weight_bytes"]
    # bf16 (16 bits) -> 4 bits per element + one 8-bit scale per 32: 4.25 / 16 = 17 / 64
    assert sizes["quark"] * 64 == sizes["source"] * 17
    text = json.dumps(manifest)
    assert str(src_dir) not in text and str(out) not in text  # no absolute paths


def test_logit_error_is_finite_and_small(w4a16):
    err = w4a16[1]["logit_error"]
    for key in ("rel_mean", "rel_max", "cosine", "top1_agreement", "kl_ref_q_mean"):
        assert math.isfinite(err[key]), key
    assert 0 < err["rel_mean"] < 0.5 and 0 < err["rel_max"] < 1.0
    assert 0.9 < err["cosine"] <= 1.0 and 0.5 < err["top1_agreement"] <= 1.0
    assert 0 <= err["kl_ref_q_mean"] < 0.1
    assert err["inputs"] == {
        "seed": 0,
        "n_sequences": 8,
        "seq_len": 48,
        "token_ids": "uniform over vocab from torch.Generator().manual_seed(seed)",
    }


def test_manifest_is_deterministic(src_dir, w4a16, tmp_path):
    again = quantize_checkpoint(src_dir, tmp_path / "quark", tmp_path / "emulated")
    assert again == w4a16[1]


# ----------------------------------------------------------------------------- selection / errors


def test_regex_exclude_keeps_layers_unquantized(src_dir, tmp_path):
    exclude = ["lm_head", r"re:model\.layers\.1\.mlp\."]
    manifest = quantize_checkpoint(src_dir, tmp_path / "q", tmp_path / "e", exclude=exclude, evaluate=False)
    assert manifest["logit_error"] is None
    assert manifest["quantized_tensors"]["count"] == 7 * N_LAYERS - 3
    quark = _read_tensors(tmp_path / "q")
    assert quark["model.layers.1.mlp.down_proj.weight"].dtype == torch.bfloat16
    assert "model.layers.1.mlp.down_proj.weight_scale" not in quark
    assert quark["model.layers.0.mlp.down_proj.weight"].dtype == torch.uint8


def test_in_features_not_multiple_of_32_names_the_tensor():
    shapes = {"model.layers.0.self_attn.o_proj.weight": [64, 48]}
    with pytest.raises(UserError, match=r"model\.layers\.0\.self_attn\.o_proj\.weight.*48"):
        select_quantized_tensors(shapes)
    assert select_quantized_tensors(shapes, ["model.layers.0.self_attn.o_proj"]) == []


def test_split_fused_group_is_refused():
    shapes = {f"model.layers.0.self_attn.{p}.weight": [64, 64] for p in ("q_proj", "k_proj", "v_proj")}
    with pytest.raises(UserError, match="q_proj, k_proj, v_proj"):
        select_quantized_tensors(shapes, ["model.layers.0.self_attn.k_proj"])


def test_selection_ignores_norms_embeddings_and_lm_head():
    shapes = {
        "model.embed_tokens.weight": [128, 64],
        "model.norm.weight": [64],
        "lm_head.weight": [128, 64],
        "model.layers.0.input_layernorm.weight": [64],
        "model.layers.0.mlp.up_proj.weight": [128, 64],
        "model.layers.0.mlp.gate_proj.weight": [128, 64],
    }
    assert select_quantized_tensors(shapes, []) == [
        "model.layers.0.mlp.gate_proj.weight",
        "model.layers.0.mlp.up_proj.weight",
    ]


def test_user_errors(src_dir, w4a16, tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    with pytest.raises(UserError, match="not empty"):
        quantize_checkpoint(src_dir, busy, tmp_path / "e", evaluate=False)
    with pytest.raises(UserError, match="already has a quantization_config"):
        quantize_checkpoint(w4a16[0] / "quark", tmp_path / "q", tmp_path / "e2", evaluate=False)
    with pytest.raises(UserError, match="scheme"):
        quantize_checkpoint(src_dir, tmp_path / "q", tmp_path / "e3", scheme="nvfp4")
    with pytest.raises(UserError, match="config.json"):
        quantize_checkpoint(tmp_path, tmp_path / "q", tmp_path / "e4")


# ----------------------------------------------------------------------------- vLLM parser


@pytest.mark.slow
def test_vllm_quark_parser_accepts_config(w4a16, w4a4, src_dir, tmp_path):
    """vLLM's own QuarkConfig resolves the written configs to OCP MX fp4 (one test: ~12 s import).

    We go as far as the parser and scheme construction. ``QuarkOCP_MX.create_weights``
    is not called: it picks an MXFP4 linear kernel, and the CPU platform has none (vLLM
    raises "Failed to find a kernel"): on CPU the workflow serves the dequantized copy.
    """
    pytest.importorskip("vllm")
    from vllm.model_executor.layers.linear import (
        MergedColumnParallelLinear,
        QKVParallelLinear,
        RowParallelLinear,
        UnquantizedLinearMethod,
    )
    from vllm.model_executor.layers.quantization import get_quantization_config
    from vllm.model_executor.layers.quantization.quark.quark import QuarkConfig, QuarkLinearMethod
    from vllm.model_executor.layers.quantization.quark.schemes import QuarkOCP_MX
    from vllm.model_executor.layers.quantization.utils.quant_utils import kMxfp4Dynamic, kMxfp4Static

    assert get_quantization_config("quark") is QuarkConfig
    # What LlamaForCausalLM hands the quant config in vLLM (its packed_modules_mapping).
    packed = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
    layers = [
        ("self_attn.qkv_proj", QKVParallelLinear),
        ("self_attn.o_proj", RowParallelLinear),
        ("mlp.gate_up_proj", MergedColumnParallelLinear),
        ("mlp.down_proj", RowParallelLinear),
    ]

    def parse(quark_dir: Path) -> QuarkConfig:
        qc = json.loads((quark_dir / "config.json").read_text())["quantization_config"]
        cfg = QuarkConfig.from_config(qc)
        cfg.packed_modules_mapping = dict(packed)
        return cfg

    for (out, _), act_key in [(w4a16, None), (w4a4, kMxfp4Dynamic)]:
        cfg = parse(out / "quark")
        assert cfg.get_name() == "quark"
        for layer in range(N_LAYERS):
            for suffix, cls in layers:
                prefix = f"model.layers.{layer}.{suffix}"
                w_key, a_key, method = cfg.get_quant_method_target(prefix, cls)
                assert method is QuarkLinearMethod, prefix
                assert (w_key, a_key) == (kMxfp4Static, act_key)
                w_key, a_key, scheme_cls = cfg.get_scheme_cls(cls, prefix)
                assert scheme_cls is QuarkOCP_MX
                scheme = cfg.init_scheme(scheme_cls, weight_quant_key=w_key, activation_quant_key=a_key)
                assert scheme.weight_dtype == "mxfp4" and scheme.packed_factor == 2
                assert scheme.input_dtype == ("mxfp4" if act_key else None)
        assert cfg.get_quant_method_target("lm_head", RowParallelLinear)[2] is UnquantizedLinearMethod

    # A regex exclude written by us is honoured by vLLM the same way.
    quantize_checkpoint(
        src_dir,
        tmp_path / "q",
        tmp_path / "e",
        exclude=["lm_head", r"re:model\.layers\.1\.mlp\."],
        evaluate=False,
    )
    cfg = parse(tmp_path / "q")

    def method(prefix: str) -> type:
        return cfg.get_quant_method_target(prefix, MergedColumnParallelLinear)[2]

    assert method("model.layers.1.mlp.gate_up_proj") is UnquantizedLinearMethod
    assert method("model.layers.0.mlp.gate_up_proj") is QuarkLinearMethod


def test_sharded_checkpoint_keeps_shards_and_rewrites_index(src_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    sharded = tmp_path / "sharded"
    model = AutoModelForCausalLM.from_pretrained(src_dir, dtype=torch.bfloat16, local_files_only=True)
    model.save_pretrained(sharded, max_shard_size="100KB")
    shards = sorted(p.name for p in sharded.glob("*.safetensors"))
    assert len(shards) > 1
    quantize_checkpoint(sharded, tmp_path / "q", tmp_path / "e", evaluate=False)
    for d in ("q", "e"):
        assert sorted(p.name for p in (tmp_path / d).glob("*.safetensors")) == shards
        index = json.loads((tmp_path / d / "model.safetensors.index.json").read_text())
        tensors = {}
        for shard in shards:
            with safe_open(tmp_path / d / shard, framework="pt") as handle:
                for key in handle.keys():
                    tensors[key] = handle.get_tensor(key)
                    assert index["weight_map"][key] == shard
        assert set(index["weight_map"]) == set(tensors)
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        assert index["metadata"]["total_size"] == total
    decoded = load_quark_checkpoint_dequantized(tmp_path / "q")
    emulated = _read_tensors(tmp_path / "e")
    assert decoded.keys() == emulated.keys()
    assert all(torch.equal(decoded[k], emulated[k].to(decoded[k].dtype)) for k in decoded)
