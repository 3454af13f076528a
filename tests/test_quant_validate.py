"""The quantized-checkpoint validator (mlperf_repro.quant.validate), `mlperf-repro quant-check`,
and the `tool: prequantized` recipe (mlperf_repro.quant.prequantized) end to end on a tiny Llama.

Our own checkpoints come from the project's writer (quant/checkpoint.py, Quark layout); the
other tools' checkpoints are written here in the layouts the project's FP4 research notes
(shared/spec/fp4-formats.md, section 2) measured: compressed-tensors MXFP4 (``weight_packed``
u8[out, in/2], ``weight_scale`` u8[out, in/32], ``format: mxfp4-pack-quantized``) and NVFP4
(``weight_global_scale``, divided), ModelOpt NVFP4 (``hf_quant_config.json``,
``weight_scale_2``, multiplied), compressed-tensors FP8 per channel and Quark MXFP6; those
whose codec module (quant/nvfp4.py, fp8.py, mx.py) is not there are skipped. Nothing touches
the network.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import SCHEMA, llm_benchmarks
from safetensors.torch import load_file, save_file

from mlperf_repro.errors import UserError
from mlperf_repro.fetch import record_built
from mlperf_repro.fetch.entries import acquire_model_entry
from mlperf_repro.hashing import sha256_file
from mlperf_repro.quant.checkpoint import quantize_checkpoint
from mlperf_repro.quant.formats import format_for
from mlperf_repro.quant.mxfp4 import CODEC_VERSION, quantize_mxfp4
from mlperf_repro.quant.tools import TOOLS, calibration_lines, quantize_recipe, transformations
from mlperf_repro.quant.validate import dequantized_shards, read_inventory, validate_checkpoint

Q0 = "model.layers.0.self_attn.q_proj"


@pytest.fixture(scope="module")
def ref(tmp_path_factory) -> Path:
    from conftest import save_tiny_llama

    path = save_tiny_llama(tmp_path_factory.mktemp("ref") / "tiny-llama")
    (path / "tokenizer_config.json").write_text('{"model_max_length": 128}\n')
    return path


@pytest.fixture(scope="module")
def ours(ref, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ours")
    quantize_checkpoint(ref, out / "quark", out / "emulated", evaluate=False)
    return out / "quark"


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_tensors(ckpt: Path, edit) -> None:
    """Apply ``edit(tensors)`` to every shard of ``ckpt`` (in place)."""
    for shard in sorted(ckpt.glob("*.safetensors")):
        tensors = load_file(shard)
        edit(tensors)
        save_file(tensors, shard, metadata={"format": "pt"})


def _edit_config(ckpt: Path, edit) -> None:
    cfg = json.loads((ckpt / "config.json").read_text())
    edit(cfg["quantization_config"])
    (ckpt / "config.json").write_text(json.dumps(cfg))


def _rules(report, tensor: str) -> set[str]:
    return {f.rule for f in report.findings if f.tensor == tensor}


# --------------------------------------------------------------------------- validator


def test_our_checkpoint_validates_clean(ours, ref):
    report = validate_checkpoint(ours, ref)
    assert report.ok, report.render()
    assert (report.quant_method, report.weight_format) == ("quark", "mxfp4")
    assert len(report.quantized) == 14 and "lm_head" not in report.quantized
    assert report.decoded and len(report.errors) == 14
    # MXFP4's intrinsic error on Gaussian weights is about 0.11 (shared/spec/fp4-formats.md 1.4).
    assert all(0.05 < e.rel_error < 0.2 for e in report.errors)
    assert report.to_dict()["worst_layers"][0]["rel_error"] == pytest.approx(
        max(e.rel_error for e in report.errors), rel=1e-5
    )


def test_inventory_reads_headers_only(ours):
    inv = read_inventory(ours)
    assert inv[f"{Q0}.weight"].dtype == "U8" and inv[f"{Q0}.weight"].shape == (64, 32)
    assert inv[f"{Q0}.weight_scale"].shape == (64, 2)
    assert inv["lm_head.weight"].dtype == "BF16"


def test_wrong_scale_shape(ours, ref, tmp_path):
    bad = _copy(ours, tmp_path / "bad")
    _edit_tensors(bad, lambda t: t.update({f"{Q0}.weight_scale": t[f"{Q0}.weight_scale"][:, :1].contiguous()}))
    report = validate_checkpoint(bad, ref)
    assert "scale-shape" in _rules(report, f"{Q0}.weight_scale"), report.render()


def test_missing_scale(ours, ref, tmp_path):
    bad = _copy(ours, tmp_path / "bad")
    _edit_tensors(bad, lambda t: t.pop(f"{Q0}.weight_scale"))
    report = validate_checkpoint(bad, ref)
    assert "missing-scale" in _rules(report, f"{Q0}.weight_scale"), report.render()


def test_quantized_layer_the_config_excludes(ours, ref, tmp_path):
    bad = _copy(ours, tmp_path / "bad")
    _edit_config(bad, lambda qc: qc["exclude"].append("re:model\\.layers\\.1\\.mlp\\..*"))
    report = validate_checkpoint(bad, ref)
    names = {f.tensor for f in report.findings if f.rule == "excluded-but-quantized"}
    assert names == {f"model.layers.1.mlp.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj")}


def test_layer_left_unquantized(ours, ref, tmp_path):
    bad = _copy(ours, tmp_path / "bad")
    bf16 = load_file(ref / "model.safetensors")[f"{Q0}.weight"]
    _edit_tensors(bad, lambda t: (t.pop(f"{Q0}.weight_scale"), t.update({f"{Q0}.weight": bf16})))
    report = validate_checkpoint(bad, ref)
    assert [(f.tensor, f.rule) for f in report.findings] == [(f"{Q0}.weight", "not-quantized")], report.render()
    # Excluded in the config, the same checkpoint is clean.
    _edit_config(bad, lambda qc: qc["exclude"].append(Q0))
    assert validate_checkpoint(bad, ref).ok


def test_dtype_mismatch(ours, ref, tmp_path):
    bad = _copy(ours, tmp_path / "bad")
    _edit_tensors(bad, lambda t: t.update({f"{Q0}.weight_scale": t[f"{Q0}.weight_scale"].to(torch.float32)}))
    report = validate_checkpoint(bad, ref)
    assert "scale-dtype" in _rules(report, f"{Q0}.weight_scale"), report.render()


def test_corrupted_codes_exceed_the_bound(ours, ref, tmp_path):
    bad = _copy(ours, tmp_path / "bad")
    name = "model.layers.1.mlp.down_proj.weight"

    def corrupt(t):
        gen = torch.Generator().manual_seed(1)
        t[name] = torch.randint(0, 256, t[name].shape, dtype=torch.uint8, generator=gen)

    _edit_tensors(bad, corrupt)
    assert validate_checkpoint(bad).ok  # the layout is fine: only the values are wrong
    report = validate_checkpoint(bad, ref, max_error=0.3)
    assert [f.tensor for f in report.findings] == [name], report.render()
    assert report.findings[0].rule == "weight-error"
    assert report.worst(1)[0].module == "model.layers.1.mlp.down_proj"


def _compressed_tensors_mxfp4(ref: Path, out: Path) -> Path:
    """An llm-compressor MXFP4A16 checkpoint as it writes it (fp4-formats.md 2.1)."""
    out.mkdir()
    tensors = {}
    for key, value in load_file(ref / "model.safetensors").items():
        if key.endswith("_proj.weight"):
            module = key[: -len(".weight")]
            tensors[f"{module}.weight_packed"], tensors[f"{module}.weight_scale"] = quantize_mxfp4(value)
        else:
            tensors[key] = value
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((ref / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "mxfp4-pack-quantized",
        "quantization_status": "compressed",
        "version": "0.19.0",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 4,
                    "type": "float",
                    "symmetric": True,
                    "group_size": 32,
                    "strategy": "group",
                    "scale_dtype": "torch.uint8",
                    "observer": "memoryless_minmax",
                },
                "input_activations": None,
            }
        },
    }
    (out / "config.json").write_text(json.dumps(config))
    return out


def test_emulated_copy_is_written_in_bounded_parts(ours):
    whole = dict(dequantized_shards(ours))
    assert list(whole) == ["model.safetensors"]
    parts = list(dequantized_shards(ours, max_shard_bytes=20_000))
    assert len(parts) > 3 and all(name.startswith("model-part") for name, _ in parts)
    merged = {k: v for _, tensors in parts for k, v in tensors.items()}
    assert merged.keys() == whole["model.safetensors"].keys()
    assert all(torch.equal(merged[k], v) for k, v in whole["model.safetensors"].items())
    assert f"{Q0}.weight_scale" not in merged and merged[f"{Q0}.weight"].dtype == torch.bfloat16


def test_compressed_tensors_checkpoint(ref, tmp_path):
    ckpt = _compressed_tensors_mxfp4(ref, tmp_path / "ct")
    report = validate_checkpoint(ckpt, ref)
    assert report.ok, report.render()
    assert (report.quant_method, report.weight_format, len(report.quantized)) == ("compressed-tensors", "mxfp4", 14)
    # Same codec, same weights: the same errors as our Quark-layout checkpoint.
    assert all(e.rel_error < 0.2 for e in report.errors)
    _edit_tensors(ckpt, lambda t: t.pop(f"{Q0}.weight_scale"))
    assert "missing-scale" in _rules(validate_checkpoint(ckpt, ref), f"{Q0}.weight_scale")


def test_quantized_embedding_is_named(ref, tmp_path):
    """llm-compressor's model_free_ptq (0.14, MXFP4A16) also packs embed_tokens (measured on this
    tiny model); transformers then loads a randomly initialised embedding (weight MISSING)."""
    ckpt = _compressed_tensors_mxfp4(ref, tmp_path / "ct")

    def pack_embedding(t):
        packed, scale = quantize_mxfp4(t.pop("model.embed_tokens.weight"))
        t.update({"model.embed_tokens.weight_packed": packed, "model.embed_tokens.weight_scale": scale})

    _edit_tensors(ckpt, pack_embedding)
    report = validate_checkpoint(ckpt, ref)
    assert [(f.tensor, f.rule) for f in report.findings] == [
        ("model.embed_tokens.weight_packed", "quantized-embedding")
    ], report.render()
    assert "model.embed_tokens" in {e.module for e in report.errors}  # decoded and measured too


def test_modelopt_config_is_read_from_hf_quant_config(ref, tmp_path):
    ckpt = _compressed_tensors_mxfp4(ref, tmp_path / "ct")
    _edit_config(ckpt, lambda qc: qc.clear())
    (ckpt / "hf_quant_config.json").write_text(
        json.dumps(
            {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "MXFP4", "exclude_modules": ["lm_head"]}}
        )
    )
    report = validate_checkpoint(ckpt, decode=False)
    assert (report.quant_method, report.weight_format) == ("modelopt", "mxfp4")
    # ModelOpt names the packed weight `weight`, so `weight_packed` is not its layout.
    assert not report.ok


def _synthetic(ref: Path, out: Path, quant_config: dict, tensors_of, hf_quant: dict | None = None) -> Path:
    """A checkpoint in a tool's layout: ``tensors_of(module, weight)`` gives each projection's
    tensors by suffix (``lm_head`` stays bf16); ``quant_config`` goes into config.json."""
    out.mkdir()
    tensors = {}
    for key, value in load_file(ref / "model.safetensors").items():
        if key.endswith("_proj.weight"):
            module = key[: -len(".weight")]
            tensors.update({f"{module}.{suffix}": t for suffix, t in tensors_of(value).items()})
        else:
            tensors[key] = value
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((ref / "config.json").read_text())
    config["quantization_config"] = quant_config
    (out / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (out / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    return out


def _nvfp4(mode: str, names: tuple[str, str, str]):
    nvfp4 = pytest.importorskip("mlperf_repro.quant.nvfp4")

    def tensors_of(w):
        packed, block, glob = nvfp4.quantize_nvfp4(w, mode)
        return dict(zip(names, (packed, block, glob)), input_scale=torch.tensor(1.0))

    return tensors_of


def test_modelopt_nvfp4(ref, tmp_path):
    quant = {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16, "exclude_modules": ["lm_head"]}
    ckpt = _synthetic(
        ref,
        tmp_path / "mo",
        {"quant_method": "modelopt", **quant},
        _nvfp4("weight_scale_2", ("weight", "weight_scale", "weight_scale_2")),
        hf_quant={"producer": {"name": "modelopt", "version": "0.47.0"}, "quantization": quant},
    )
    report = validate_checkpoint(ckpt, ref)
    assert report.ok and report.decoded, report.render()
    assert (report.quant_method, report.weight_format, len(report.quantized)) == ("modelopt", "nvfp4", 14)
    # NVFP4's error is below MXFP4's (fp4-formats.md 1.4).
    assert all(e.rel_error < 0.11 for e in report.errors)
    _edit_tensors(ckpt, lambda t: t.pop(f"{Q0}.weight_scale_2"))
    assert "missing-scale" in _rules(validate_checkpoint(ckpt, ref), f"{Q0}.weight_scale_2")


def test_compressed_tensors_nvfp4_divides_by_its_global_scale(ref, tmp_path):
    quant = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"]}
    tensors_of = _nvfp4("weight_global_scale", ("weight_packed", "weight_scale", "weight_global_scale"))
    report = validate_checkpoint(_synthetic(ref, tmp_path / "ct", quant, tensors_of), ref)
    assert report.ok and report.weight_format == "nvfp4", report.render()
    assert all(e.rel_error < 0.11 for e in report.errors)


def test_compressed_tensors_fp8_per_channel(ref, tmp_path):
    fp8 = pytest.importorskip("mlperf_repro.quant.fp8")

    def tensors_of(w):
        stored, scale = fp8.quantize_fp8(w, "channel")
        return {"weight": stored, "weight_scale": scale}

    quant = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"]}
    report = validate_checkpoint(_synthetic(ref, tmp_path / "fp8", quant, tensors_of), ref)
    assert report.ok and report.weight_format == "fp8", report.render()
    assert all(e.rel_error < 0.06 for e in report.errors)


def test_quark_mxfp6(ref, tmp_path):
    mx = pytest.importorskip("mlperf_repro.quant.mx")
    from mlperf_repro.quant.checkpoint import build_quantization_config

    quant = build_quantization_config()
    quant["global_quant_config"]["weight"]["dtype"] = "fp6_e2m3"

    def tensors_of(w):
        stored, scale = mx.quantize_mx(w, element="e2m3")
        return {"weight": stored, "weight_scale": scale}

    ckpt = _synthetic(ref, tmp_path / "mxfp6", quant, tensors_of)
    assert read_inventory(ckpt)[f"{Q0}.weight"].shape == (64, 48)  # four 6-bit codes in three bytes
    report = validate_checkpoint(ckpt, ref)
    assert report.ok and report.weight_format == "mxfp6_e2m3", report.render()
    assert all(e.rel_error < 0.05 for e in report.errors)


def test_gpt_oss_mxfp4_layout(tmp_path):
    """OpenAI gpt-oss (``quant_method: mxfp4``): MoE experts as ``<param>_blocks`` u8[E, out, in/32, 16]
    + ``<param>_scales`` u8[E, out, in/32]; the bf16 parameter is [E, in, out]. Our decode (and the
    emulated copy) equals transformers' own ``convert_moe_packed_tensors``."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    torch.manual_seed(0)
    experts = "model.layers.0.mlp.experts"
    ref_tensors = {
        f"{experts}.gate_up_proj": (torch.randn(2, 64, 128) * 0.05).to(torch.bfloat16),  # [E, in, out]
        f"{experts}.down_proj": (torch.randn(2, 64, 64) * 0.05).to(torch.bfloat16),
        f"{experts}.gate_up_proj_bias": torch.zeros(2, 128, dtype=torch.bfloat16),
        "model.layers.0.self_attn.q_proj.weight": (torch.randn(64, 64) * 0.05).to(torch.bfloat16),
    }
    ref = tmp_path / "ref"
    ref.mkdir()
    save_file(ref_tensors, ref / "model.safetensors", metadata={"format": "pt"})
    (ref / "config.json").write_text(json.dumps({"model_type": "gpt_oss"}))
    quant = {}
    for name, value in ref_tensors.items():
        if name.endswith("_proj"):
            packed, scales = quantize_mxfp4(value.transpose(1, 2).contiguous())  # [E, out, in]
            quant[f"{name}_blocks"] = packed.reshape(*packed.shape[:-1], -1, 16)
            quant[f"{name}_scales"] = scales
        else:
            quant[name] = value
    ckpt = tmp_path / "gpt-oss"
    ckpt.mkdir()
    save_file(quant, ckpt / "model.safetensors", metadata={"format": "pt"})
    not_convert = ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]
    (ckpt / "config.json").write_text(
        json.dumps(
            {
                "model_type": "gpt_oss",
                "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": not_convert},
            }
        )
    )
    report = validate_checkpoint(ckpt, ref)
    assert report.ok, report.render()
    assert (report.quant_method, report.weight_format) == ("mxfp4", "mxfp4")
    assert report.quantized == [f"{experts}.down_proj", f"{experts}.gate_up_proj"]
    assert len(report.errors) == 2 and all(0.05 < e.rel_error < 0.2 for e in report.errors)
    (shard, emulated), *_ = dequantized_shards(ckpt)
    for name in (f"{experts}.gate_up_proj", f"{experts}.down_proj"):
        theirs = convert_moe_packed_tensors(quant[f"{name}_blocks"], quant[f"{name}_scales"])
        assert emulated[name].shape == ref_tensors[name].shape and torch.equal(emulated[name], theirs)
    assert f"{experts}.gate_up_proj_blocks" not in emulated
    # An attention layer stored in blocks although modules_to_not_convert covers it.
    packed, scales = quantize_mxfp4(ref_tensors["model.layers.0.self_attn.q_proj.weight"])
    name = "model.layers.0.self_attn.q_proj.weight"
    _edit_tensors(
        ckpt,
        lambda t: (
            t.pop(name),
            t.update({f"{name}_blocks": packed.reshape(64, 2, 16), f"{name}_scales": scales}),
        ),
    )
    report = validate_checkpoint(ckpt)
    assert [(f.tensor, f.rule) for f in report.findings] == [(f"{name}_blocks", "excluded-but-quantized")]


def test_not_a_checkpoint_is_a_user_error(ref, tmp_path):
    with pytest.raises(UserError, match="no quantization_config"):
        validate_checkpoint(ref)
    with pytest.raises(UserError, match="config.json is missing"):
        validate_checkpoint(tmp_path)


# --------------------------------------------------------------------------- CLI


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlperf_repro", "quant-check", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_cli_exit_codes(ours, ref, tmp_path):
    ok = _cli(str(ours), "--reference", str(ref))
    assert ok.returncode == 0 and ok.stdout.strip().endswith("OK"), ok.stderr
    data = json.loads(_cli(str(ours), "--reference", str(ref), "--json").stdout)
    assert data["ok"] and len(data["layers"]) == 14
    tight = _cli(str(ours), "--reference", str(ref), "--max-error", "0.01")
    assert tight.returncode == 1 and "weight-error" in tight.stdout and Q0 in tight.stdout
    truncated = _copy(ours, tmp_path / "truncated")
    with open(truncated / "model.safetensors", "r+b") as handle:
        handle.truncate(handle.seek(0, 2) - 1000)
    for folder in (ref, tmp_path / "nowhere", truncated):
        bad = _cli(str(folder))
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("error: ")


# --------------------------------------------------------------------------- prequantized tool


def test_tool_enum_is_the_registry():
    schema = yaml.safe_load(SCHEMA.read_text())
    tool = schema["properties"]["quantization"]["additionalProperties"]["properties"]["tool"]
    assert tool["enum"] == list(TOOLS)


def _publish(ckpt: Path, where: Path) -> Path:
    """The "published" source: a folder with the checkpoint and a sha256sum manifest beside it."""
    shutil.copytree(ckpt, where)
    lines = [f"{sha256_file(p)}  {p.relative_to(where).as_posix()}" for p in sorted(where.rglob("*")) if p.is_file()]
    manifest = where.parent / f"{where.name}.sha256"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def test_prequantized_recipe_end_to_end(ours, ref, tmp_path):
    published = tmp_path / "hub" / "tiny-llama-mxfp4"
    manifest = _publish(ours, published)
    work = tmp_path / "work"
    model_dir = work / "resources/models/tiny-llama"
    shutil.copytree(ref, model_dir)
    record_built(model_dir, "builtin:tiny-llama", {})
    entry = {"source": f"file://{published}", "sha256_manifest": str(manifest)}
    ckpt_dir = work / "resources/models/tiny-llama-mxfp4-published"
    acquire_model_entry(entry, ckpt_dir, work / "results/acquire/models/published.json")
    recipe = {"tool": "prequantized", "checkpoint": "tiny-llama-mxfp4-published", "scheme": "mxfp4_weight_only"}
    qdir, edir = work / "results/models/tiny-llama-pub", work / "results/models/tiny-llama-pub-emulated"
    manifest_data = quantize_recipe(str(model_dir), str(qdir), str(edir), recipe, checkpoint=[str(ckpt_dir)])

    # Passed through unchanged: the published files, byte for byte, plus our manifest.
    for path in published.iterdir():
        assert sha256_file(qdir / path.name) == sha256_file(path)
    assert sorted(p.name for p in qdir.iterdir()) == sorted(
        [*(p.name for p in published.iterdir()), "quant_manifest.json"]
    )
    # The emulated copy: plain bf16, our codec's values.
    emu = load_file(edir / "model.safetensors")
    assert emu[f"{Q0}.weight"].dtype == torch.bfloat16 and f"{Q0}.weight_scale" not in emu
    assert "quantization_config" not in json.loads((edir / "config.json").read_text())
    assert (edir / "tokenizer_config.json").is_file()
    from mlperf_repro.quant.mxfp4 import dequantize_mxfp4

    q = load_file(published / "model.safetensors")
    expected = dequantize_mxfp4(q[f"{Q0}.weight"], q[f"{Q0}.weight_scale"]).to(torch.bfloat16)
    assert torch.equal(emu[f"{Q0}.weight"], expected)
    # The manifest: tool, source, its checksums, the validation results.
    on_disk = json.loads((qdir / "quant_manifest.json").read_text())
    assert on_disk == json.loads((edir / "quant_manifest.json").read_text())
    assert on_disk["tool"] == manifest_data["tool"] == "prequantized"
    assert on_disk["source"]["uri"] == f"file://{published}" and on_disk["source"]["status"] == "verified"
    files = {f["path"]: f["sha256"] for f in on_disk["source"]["files"]}
    assert files["model.safetensors"] == sha256_file(published / "model.safetensors")
    assert on_disk["validation"]["ok"] and len(on_disk["validation"]["layers"]) == 14
    assert on_disk["codec_version"] == CODEC_VERSION
    # The served copy against the unquantized model: no memory limit given, so whole-model logits.
    assert on_disk["evaluation"]["method"] == "logits" and len(on_disk["layerwise_error"]["layers"]) == 14
    assert 0 < on_disk["logit_error"]["rel_mean"] < 0.5 and on_disk["logit_error"]["top1_agreement"] > 0.5
    # A job too small for two float32 copies gets the per-Linear error of every quantized layer.
    small = quantize_recipe(str(model_dir), str(qdir), str(edir), recipe, checkpoint=str(ckpt_dir), mem_mb=1)
    assert small["evaluation"]["method"] == "layerwise" and small["logit_error"] is None
    assert small["layerwise_error"]["max"] < 0.5 and len(small["layerwise_error"]["layers"]) == 14
    # What the submission tree says about it (measurements.json, documentation/calibration.md).
    models = {"tiny-llama-mxfp4-published": entry}
    text = transformations(recipe, models)
    assert "tiny-llama-mxfp4-published" in text and f"file://{published}" in text and "unchanged" in text
    doc = "\n".join(calibration_lines(recipe, models, on_disk))
    assert "Published pre-quantized checkpoint" in doc and "`mxfp4`" in doc and "worst relative weight error" in doc
    native = {"scheme": "mxfp4"}
    assert transformations(native, models) == format_for("mxfp4").transformations(native)

    # A tampered file after acquisition is refused, named.
    with open(ckpt_dir / "model.safetensors", "r+b") as handle:
        handle.seek(-1, 2)
        last = handle.read(1)
        handle.seek(-1, 2)
        handle.write(bytes([last[0] ^ 0xFF]))
    with pytest.raises(UserError, match="model.safetensors"):
        quantize_recipe(str(model_dir), str(qdir), str(edir), recipe, checkpoint=str(ckpt_dir))
    # ... and a published file that no longer matches its manifest is never acquired.
    with open(published / "config.json", "a") as handle:
        handle.write(" ")
    with pytest.raises(UserError, match="config.json"):
        acquire_model_entry(entry, tmp_path / "again", tmp_path / "again.json")


def test_prequantized_recipe_fails_on_error_bound(ours, ref, tmp_path):
    bad = _copy(ours, tmp_path / "bad")
    name = "model.layers.0.mlp.up_proj.weight"
    _edit_tensors(bad, lambda t: t.update({name: torch.full_like(t[name], 0x77)}))
    manifest = _publish(bad, tmp_path / "hub" / "bad")
    model_dir = _copy(ref, tmp_path / "model")
    record_built(model_dir, "builtin:tiny-llama", {})
    ckpt = tmp_path / "ckpt"
    acquire_model_entry(
        {"source": f"file://{tmp_path / 'hub' / 'bad'}", "sha256_manifest": str(manifest)}, ckpt, tmp_path / "r.json"
    )
    recipe = {"tool": "prequantized", "checkpoint": "bad", "scheme": "mxfp4", "max_error": 0.3}
    with pytest.raises(UserError, match=r"worst layers.*model\.layers\.0\.mlp\.up_proj") as info:
        quantize_recipe(str(model_dir), str(tmp_path / "q"), str(tmp_path / "e"), recipe, checkpoint=str(ckpt))
    assert name in str(info.value)
    assert not (tmp_path / "q").exists()


def _mxfp4_fp8(ours: Path, out: Path) -> Path:
    """A checkpoint as Quark's mxfp4_fp8 scheme exports it (AMD's gpt-oss-120b recipe): our MXFP4
    weights, the config's input spec FP8 e4m3 per-tensor static, an ``input_scale`` per Linear."""
    ckpt = _copy(ours, out)
    fp8_static = {
        "dtype": "fp8_e4m3",
        "qscheme": "per_tensor",
        "is_dynamic": False,
        "observer_cls": "PerTensorMinMaxObserver",
    }
    _edit_config(ckpt, lambda qc: qc["global_quant_config"].update(input_tensors=fp8_static))

    def add_scales(tensors):
        for name in [n for n in tensors if n.endswith(".weight_scale")]:
            tensors[name.replace(".weight_scale", ".input_scale")] = torch.tensor(0.0125)

    _edit_tensors(ckpt, add_scales)
    return ckpt


def test_prequantized_mxfp4_fp8_checks_its_activation_scales(ours, ref, tmp_path):
    ckpt = _mxfp4_fp8(ours, tmp_path / "w4a8")
    report = validate_checkpoint(ckpt, ref)
    assert report.ok, report.render()
    assert report.activations == "static" and report.declared["activations"]["scales"] == 14
    assert "activations: fp8_e4m3 static (global_quant_config.input_tensors), 14 scales checked" in report.render()

    manifest = _publish(ckpt, tmp_path / "hub" / "w4a8")
    model_dir = _copy(ref, tmp_path / "model")
    record_built(model_dir, "builtin:tiny-llama", {})
    acquired = tmp_path / "acquired"
    entry = {"source": f"file://{tmp_path / 'hub' / 'w4a8'}", "sha256_manifest": str(manifest)}
    acquire_model_entry(entry, acquired, tmp_path / "r.json")
    out = (str(tmp_path / "q"), str(tmp_path / "e"))
    recipe = {"tool": "prequantized", "checkpoint": "w4a8", "scheme": "mxfp4_fp8"}
    done = quantize_recipe(str(model_dir), *out, recipe, checkpoint=str(acquired), mem_mb=1)
    assert done["validation"]["activations"]["scales"] == 14
    # The recipe must name what the checkpoint holds: weights-only or dynamic activations are refused, named.
    for wrong in ("mxfp4_weight_only", "mxfp4"):
        with pytest.raises(UserError, match=r"declares fp8_e4m3 activations, static.*'mxfp4_fp8'|mxfp4_fp8"):
            quantize_recipe(str(model_dir), *out, {**recipe, "scheme": wrong}, checkpoint=str(acquired), mem_mb=1)
    # ... and a weights-only checkpoint is not served as mxfp4_fp8.
    plain = tmp_path / "plain"
    acquire_model_entry(
        {
            "source": f"file://{tmp_path / 'hub' / 'plain'}",
            "sha256_manifest": str(_publish(ours, tmp_path / "hub" / "plain")),
        },
        plain,
        tmp_path / "p.json",
    )
    with pytest.raises(UserError, match=r"declares no activation quantization.*mxfp4_weight_only"):
        quantize_recipe(str(model_dir), *out, recipe, checkpoint=str(plain), mem_mb=1)

    # One Linear without its activation scale: a finding naming it, and the job refuses the checkpoint.
    missing = _copy(ckpt, tmp_path / "missing")
    _edit_tensors(missing, lambda t: t.pop(f"{Q0}.input_scale", None))
    report = validate_checkpoint(missing, ref)
    assert _rules(report, f"{Q0}.input_scale") == {"activation-scale-missing"}


def test_prequantized_config_references(default_config):
    from mlperf_repro.config import validate_config

    config = default_config
    config["models"]["published"] = {"source": "file:///nowhere", "sha256": {"model.safetensors": "0" * 64}}
    config["quantization"]["pub"] = {"tool": "prequantized", "checkpoint": "published", "scheme": "mxfp4"}
    validate_config(config, SCHEMA)
    config["quantization"]["pub"]["checkpoint"] = "missing"
    with pytest.raises(UserError, match="quantization.pub.checkpoint: 'missing' is not a models entry"):
        validate_config(config, SCHEMA)
    config["quantization"]["pub"] = {"tool": "llm-compressor-someday", "scheme": "mxfp4"}
    with pytest.raises(UserError, match="quantization.pub.tool"):
        validate_config(config, SCHEMA)
    config["quantization"]["pub"] = {"scheme": "mxfp4", "checkpoint": "published"}
    with pytest.raises(UserError, match="only for tool prequantized"):
        validate_config(config, SCHEMA)


@pytest.mark.slow
def test_prequantized_recipe_in_the_dag(tmp_path, default_config):
    """The workflow acquires the published checkpoint (a models entry) and hands it to the quantize job."""
    from conftest import make_workdir, run_snakemake

    work = make_workdir(tmp_path)
    config = default_config
    config["models"]["published"] = {"source": "file:///nowhere", "sha256": {"model.safetensors": "0" * 64}}
    config["quantization"]["pub"] = {"tool": "prequantized", "checkpoint": "published", "scheme": "mxfp4"}
    for bench in llm_benchmarks(config):  # a published LLM checkpoint
        bench["quantization"] = "pub"
    (work / "pub.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "pub.yaml", "-p", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "resources/models/published" in result.stdout
    quantize = result.stdout.split("rule quantize:", 1)[1].split("\n\n", 1)[0]
    assert "resources/models/published" in quantize and "results/models/tiny-llama-pub" in quantize


@pytest.mark.slow
def test_prequantized_recipe_through_snakemake(ours, ref, tmp_path, default_config):
    """The quantize rule with a prequantized recipe: both models acquired from local folders with
    their sha256 manifests, the checkpoint validated and passed through, the bf16 copy written."""
    from conftest import make_workdir, run_snakemake, write_recipe_config

    work = make_workdir(tmp_path)
    ref_manifest = _publish(ref, tmp_path / "hub" / "tiny-llama")
    pub_manifest = _publish(ours, tmp_path / "hub" / "tiny-llama-mxfp4")
    config = default_config
    config["models"] = {
        "tiny-llama": {"source": f"file://{tmp_path / 'hub' / 'tiny-llama'}", "sha256_manifest": str(ref_manifest)},
        "published": {
            "source": f"file://{tmp_path / 'hub' / 'tiny-llama-mxfp4'}",
            "sha256_manifest": str(pub_manifest),
        },
    }
    config["datasets"]["openorca-synthetic"]["builtin"]["model"] = "tiny-llama"
    recipe = {"tool": "prequantized", "checkpoint": "published", "scheme": "mxfp4_weight_only"}
    configfile = write_recipe_config(work, config, "pub", recipe)
    target = "results/models/tiny-llama-pub"
    result = run_snakemake(work, target, "--cores", "2", "--configfile", configfile, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((work / target / "quant_manifest.json").read_text())
    assert manifest["tool"] == "prequantized" and manifest["validation"]["ok"]
    assert manifest["source"]["checkpoint"] == "published"
    assert sha256_file(work / target / "model.safetensors") == sha256_file(ours / "model.safetensors")
    assert (work / f"{target}-emulated" / "model.safetensors").is_file()
