"""Streaming MXFP4 writer and bounded evaluation (mlperf_repro.quant.checkpoint / .evaluate).

* The streamed shards are byte-identical to a whole-tensor reference (load a shard, quantize
  every tensor, ``save_file``) on a multi-shard checkpoint.
* Output shards are split by ``shard_cap_bytes`` with a valid index.
* The evaluation picks the layer-wise path when the memory budget is short, names the
  worst layers, and its unquantized forward matches transformers' activations.
No timing or memory assertions: those figures are bench/quantize.py's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from mlperf_repro.quant import evaluate as ev
from mlperf_repro.quant.checkpoint import (
    _INDEX_NAME,
    _ST_METADATA,
    quantize_checkpoint,
    select_quantized_tensors,
)
from mlperf_repro.quant.mxfp4 import dequantize_mxfp4, quantize_mxfp4

N_LAYERS = 2


def _tensors(directory: Path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(directory.glob("*.safetensors")):
        with safe_open(f, framework="pt") as handle:
            for key in handle.keys():
                out[key] = handle.get_tensor(key)
    return out


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    from conftest import save_tiny_llama

    path = save_tiny_llama(
        tmp_path_factory.mktemp("src") / "tiny-llama", seed=1, layers=N_LAYERS, max_shard_size="60KB"
    )
    assert len(list(path.glob("*.safetensors"))) > 2
    return path


def _reference(src: Path, qdir: Path, edir: Path) -> None:
    """Today's whole-shard writer: every tensor of a shard in memory, then save_file."""
    shapes = {}
    for f in src.glob("*.safetensors"):
        with safe_open(f, framework="pt") as h:
            shapes.update({k: h.get_slice(k).get_shape() for k in h.keys()})
    quantized = set(select_quantized_tensors(shapes))
    for d in (qdir, edir):
        d.mkdir(parents=True)
    for f in sorted(src.glob("*.safetensors")):
        q, e = {}, {}
        with safe_open(f, framework="pt") as h:
            for key in sorted(h.keys()):
                t = h.get_tensor(key)
                if key in quantized:
                    packed, scales = quantize_mxfp4(t, "even")
                    q[key], q[key + "_scale"] = packed, scales
                    e[key] = dequantize_mxfp4(packed, scales, dtype=torch.bfloat16)  # exact in bf16
                else:
                    q[key] = e[key] = t
        save_file(q, qdir / f.name, metadata=_ST_METADATA)
        save_file(e, edir / f.name, metadata=_ST_METADATA)


def test_streamed_shards_are_byte_identical_to_whole_tensor_reference(sharded, tmp_path):
    _reference(sharded, tmp_path / "ref_q", tmp_path / "ref_e")
    quantize_checkpoint(sharded, tmp_path / "q", tmp_path / "e", evaluate=False)
    for ours, ref in (("q", "ref_q"), ("e", "ref_e")):
        names = sorted(p.name for p in (tmp_path / ref).glob("*.safetensors"))
        assert sorted(p.name for p in (tmp_path / ours).glob("*.safetensors")) == names
        for name in names:
            assert (tmp_path / ours / name).read_bytes() == (tmp_path / ref / name).read_bytes(), name


def test_header_matches_save_file_for_mixed_dtypes(tmp_path):
    from mlperf_repro.quant.checkpoint import _OutTensor, _ShardWriter

    tensors = {
        "b.weight": torch.randn(3, 5).to(torch.bfloat16),
        "a.weight_scale": torch.randint(0, 255, (7, 1), dtype=torch.uint8),
        "z.f32": torch.randn(2),
        "m.i64": torch.arange(3),
        "é.unicode": torch.randn(1, 2).half(),
        "s.scalar": torch.tensor(1.5),
    }
    save_file(tensors, tmp_path / "ref.safetensors", metadata=_ST_METADATA)
    dtypes = {torch.bfloat16: "BF16", torch.uint8: "U8", torch.float32: "F32", torch.int64: "I64", torch.float16: "F16"}
    entries = [_OutTensor(k, dtypes[t.dtype], tuple(t.shape)) for k, t in tensors.items()]
    writer = _ShardWriter(tmp_path / "ours.safetensors", entries, _ST_METADATA)
    for k, t in tensors.items():
        writer.write(k, 0, t)
    writer.close()
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "ref.safetensors").read_bytes()


def test_shards_split_by_cap_with_valid_index(sharded, tmp_path):
    cap = 20_000
    quantize_checkpoint(sharded, tmp_path / "q", tmp_path / "e", evaluate=False, shard_cap_bytes=cap)
    quantize_checkpoint(sharded, tmp_path / "q0", tmp_path / "e0", evaluate=False, shard_cap_bytes=None)
    for d, whole in (("q", "q0"), ("e", "e0")):
        files = sorted((tmp_path / d).glob("*.safetensors"))
        assert len(files) > len(list((tmp_path / whole).glob("*.safetensors")))
        assert any("-part-" in f.name for f in files)
        index = json.loads((tmp_path / d / _INDEX_NAME).read_text())
        seen = {}
        for f in files:
            with safe_open(f, framework="pt") as h:
                keys = list(h.keys())
                data = sum(h.get_tensor(k).numel() * h.get_tensor(k).element_size() for k in keys)
                # A file passes the cap only when it holds a single tensor larger than the cap.
                assert data <= cap or len(keys) == 1, f.name
                for k in keys:
                    assert index["weight_map"][k] == f.name
                    seen[k] = h.get_tensor(k)
        assert set(index["weight_map"]) == set(seen)
        assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in seen.values())
        reference = _tensors(tmp_path / whole)
        assert seen.keys() == reference.keys()
        assert all(torch.equal(seen[k], reference[k]) for k in seen)


def test_short_memory_picks_layerwise_and_names_worst_layers(sharded, tmp_path):
    m = quantize_checkpoint(sharded, tmp_path / "q", tmp_path / "e", mem_mb=1)
    assert m["evaluation"]["method"] == "layerwise"
    assert "do not fit" in m["evaluation"]["reason"]
    assert m["evaluation"]["mem_mb"] == 1
    assert m["evaluation"]["logits_need_mb"] > 1 and m["evaluation"]["layerwise_need_mb"] >= 1000
    assert m["logit_error"] is None
    lw = m["layerwise_error"]
    assert lw["count"] == 7 * N_LAYERS == len(lw["layers"])
    assert set(lw["layers"]) == {n[: -len(".weight")] for n in m["quantized_tensors"]["names"]}
    assert all(0 < e < 0.5 for e in lw["layers"].values())
    worst = lw["worst"]
    assert len(worst) == ev.N_WORST
    assert worst[0]["rel_error"] == lw["max"] == max(lw["layers"].values())
    assert [w["rel_error"] for w in worst] == sorted((w["rel_error"] for w in worst), reverse=True)
    assert all(lw["layers"][w["module"]] == w["rel_error"] for w in worst)

    roomy = quantize_checkpoint(sharded, tmp_path / "q2", tmp_path / "e2", mem_mb=10**6)
    assert roomy["evaluation"]["method"] == "logits" and roomy["logit_error"]["cosine"] > 0.9
    # A model this small gets the per-Linear error too (the report's per-layer bars): the same
    # layers and values as the layer-wise evaluation alone.
    assert roomy["evaluation"]["per_layer_too"] is True and roomy["layerwise_error"]["layers"] == lw["layers"]
    off = quantize_checkpoint(sharded, tmp_path / "q3", tmp_path / "e3", evaluate=False, mem_mb=1)
    assert off["evaluation"]["method"] is None and off["logit_error"] is None and off["layerwise_error"] is None


def test_w4a4_layerwise_error_is_larger(sharded, tmp_path):
    quantize_checkpoint(sharded, tmp_path / "q", tmp_path / "e", evaluate=False)
    w4a16 = ev.layerwise_error(sharded, tmp_path / "e")
    w4a4 = ev.layerwise_error(sharded, tmp_path / "e", act_quant=True)
    assert w4a4["activation_emulation"] and not w4a16["activation_emulation"]
    assert w4a4["mean"] > w4a16["mean"]


def test_layerwise_forward_matches_transformers_activations(sharded, tmp_path, monkeypatch):
    """The layer-wise path's unquantized forward feeds each Linear what transformers does."""
    from transformers import AutoModelForCausalLM

    quantize_checkpoint(sharded, tmp_path / "q", tmp_path / "e", evaluate=False)
    ours: dict[str, torch.Tensor] = {}
    linear = ev._Layerwise.__call__

    def capture(self, module, x):
        ours[module] = x.clone()
        return linear(self, module, x)

    monkeypatch.setattr(ev._Layerwise, "__call__", capture)
    ev.layerwise_error(sharded, tmp_path / "e", seed=3, n_sequences=2, seq_len=16)

    model = AutoModelForCausalLM.from_pretrained(
        sharded, dtype=torch.float32, attn_implementation="eager", local_files_only=True
    ).eval()
    theirs: dict[str, torch.Tensor] = {}
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name != "lm_head":
            mod.register_forward_pre_hook(lambda m, a, name=name: theirs.__setitem__(name, a[0].clone()))
    input_ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model(input_ids=input_ids)
    assert ours.keys() == theirs.keys() and len(ours) == 7 * N_LAYERS
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-4, atol=1e-5, msg=name)


def test_memory_need_is_largest_tensor_twice_plus_overhead(sharded):
    from mlperf_repro.quant.checkpoint import tensor_refs

    refs = [r for f in sorted(sharded.glob("*.safetensors")) for r in tensor_refs(f)]
    need = ev.memory_need_mb(refs)
    largest = max(r.nbytes for r in refs)
    assert need["bounded"] == -(-(2 * largest + 10**9) // 10**6)
    params = sum(r.nbytes // 2 for r in refs)  # bf16
    assert need["logits"] == -(-(8 * params + 10**9) // 10**6)


def test_job_memory_figures(sharded, tmp_path, monkeypatch):
    from mlperf_repro.quant import memory, stage
    from mlperf_repro.quant.checkpoint import tensor_refs

    refs = [r for f in sorted(sharded.glob("*.safetensors")) for r in tensor_refs(f)]
    # The rule's figure, from the headers: the logit comparison's need while it is at most the
    # default (a small model), else the bounded path's; the default before acquisition.
    need = ev.memory_need_mb(refs)
    assert memory.quantize_job_mem_mb(sharded) == need["logits"]
    assert memory.quantize_job_mem_mb(sharded, default=need["logits"] - 1) == need["bounded"]
    assert memory.quantize_job_mem_mb(tmp_path / "not-acquired") == 8000
    # AMD Quark loads the whole model: its bf16 size + 4 GB, whatever the default.
    params = sum(math.prod(r.shape) for r in refs)
    assert memory.quantize_job_mem_mb(sharded, tool="quark") == -(-(2 * params + 4 * 10**9) // 10**6)
    monkeypatch.setenv("SLURM_MEM_PER_NODE", "12000")
    assert stage.job_memory_mb() == (12000.0, "SLURM_MEM_PER_NODE")


def test_plan_view_quantize_memory():
    from conftest import DEFAULT_CONFIG, SCHEMA

    from mlperf_repro.estimate import estimate_file

    est = estimate_file(str(DEFAULT_CONFIG), str(SCHEMA))
    detail = next(r for r in est.rows if r.stage == "quantize").details[0]
    # tiny-llama is small: the job gets the whole-model logit comparison's need (two float32
    # copies + 1 GB), what the rule asks for once the checkpoint is acquired.
    from mlperf_repro.quant.memory import need_mb

    bounded = need_mb(937 * 192 * 2, 0)["bounded"]  # largest tensor: embed/lm_head 937 x 192 bf16
    assert bounded == 1001 < detail["mem_mb"] < 8000
    # The shipped checkpoint's safetensors headers, read where its file:// source lies.
    assert "logit comparison" in detail["mem_from"] and "checkpoint at its file:// source" in detail["mem_from"]


def test_plan_view_quantize_memory_of_the_vendor_recipe():
    """config/examples/mi355x-llama2-70b.yaml quantizes with AMD Quark, which loads the 70B model
    whole (its bf16 size + 4 GB, from the rules table's parameters) and, with AutoSmoothQuant,
    caches a block's calibration activations on the host (from the rules table's widths): on a
    GPU the job asks for the larger, the cache (tests/test_quant_device.py has the arithmetic)."""
    from conftest import REPO, SCHEMA

    from mlperf_repro.estimate import estimate_file

    est = estimate_file(str(REPO / "config/examples/mi355x-llama2-70b.yaml"), str(SCHEMA))
    detail = next(r for r in est.rows if r.stage == "quantize").details[0]
    assert "AMD Quark" in detail["mem_from"] and "rules table v6.0: widths" in detail["mem_from"]
    assert 175_000 < detail["mem_mb"] < 185_000  # 1,024,000 tokens x (7 x 8,192 + 28,672) x 2 bytes + 4 GB
