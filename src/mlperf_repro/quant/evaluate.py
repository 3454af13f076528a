"""Accuracy of a quantized checkpoint within a memory budget.

Two evaluations, chosen from the checkpoint's size and the job's memory (:func:`choose_evaluation`):

``logits``
    :func:`mlperf_repro.quant.checkpoint.logit_error`: both models whole in float32 through
    transformers, logits compared. Needs two float32 copies of the model (Llama-2-70B:
    ~550 GB), so it only runs where that fits.
``layerwise``
    :func:`layerwise_error`: the unquantized model is run on the same calibration tokens
    (embeddings, then each decoder block), one weight tensor in memory at a time and read
    in row blocks; the input of every quantized Linear is captured and ``W x`` compared with
    ``Ŵ x`` (``Ŵ`` read from the emulated bf16 copy, i.e. what was written; for W4A4 the input
    of ``Ŵ`` is MXFP4-QDQ'd as vLLM does at run time). Per Linear: ``rel_error =
    ||Ŵx - Wx||_F / ||Wx||_F`` over all calibration tokens. The forward keeps running on
    the unquantized outputs, so each layer's error is its own, not accumulated. Memory:
    the activations (tokens x intermediate size, float32) plus one row block of two weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from mlperf_repro.errors import UserError
from mlperf_repro.quant.encodings import ACTIVATION_SCALE_MODE as _ACTIVATION_SCALE_MODE
from mlperf_repro.quant.memory import OVERHEAD_BYTES, need_mb
from mlperf_repro.quant.mxfp4 import qdq_mxfp4
from mlperf_repro.quant.tensor_files import (
    TensorRef,
    _read_config,
    _row_blocks,
    _sig,
    _weight_files,
    read_rows,
    select_quantized_tensors,
    tensor_refs,
)

__all__ = [
    "OVERHEAD_BYTES",
    "calibration_amax",
    "choose_evaluation",
    "layerwise_error",
    "llama_forward",
    "memory_need_mb",
    "random_tokens",
]

#: ``linear(module, x) -> y``: one projection of the forward.
Linear = Callable[[str, torch.Tensor], torch.Tensor]
#: ``act_qdq(module, x) -> x``: a W+A scheme's activation quantize-dequantize for one Linear.
ActQDQ = Callable[[str, torch.Tensor], torch.Tensor]


def _mxfp4_act_qdq(module: str, x: torch.Tensor) -> torch.Tensor:
    return qdq_mxfp4(x, _ACTIVATION_SCALE_MODE)


#: How many of the worst layers the manifest names.
N_WORST = 5


def memory_need_mb(tensors: Iterable[TensorRef]) -> dict[str, int]:
    """Memory (MB) each path of the quantize job needs for a checkpoint with these tensors
    (:func:`mlperf_repro.quant.memory.need_mb`): ``bounded``, the streaming writer and the
    layer-wise evaluation, ``2 x largest tensor + 1 GB``; ``logits``, two float32 copies of
    the model + 1 GB."""
    refs = list(tensors)
    return need_mb(max((r.nbytes for r in refs), default=0), sum(math.prod(r.shape) for r in refs))


# A logits evaluation needing at most this (two float32 copies of up to 256 MB, + the 1 GB
# every need counts): the per-Linear error as well (seconds for a stand-in), so the report
# shows which layers the format hurts most.
PER_LAYER_TOO_MB = 256 + 1024


def choose_evaluation(tensors: Iterable[TensorRef], mem_mb: float | None, *, evaluate: bool = True) -> dict[str, Any]:
    """Which evaluation the job runs and why (recorded as the manifest's ``evaluation``);
    ``per_layer_too``: a small model gets the per-Linear error besides the logits."""
    need = memory_need_mb(tensors)
    out: dict[str, Any] = {
        "mem_mb": mem_mb,
        "logits_need_mb": need["logits"],
        "layerwise_need_mb": need["bounded"],
        "per_layer_too": evaluate and need["logits"] <= PER_LAYER_TOO_MB,
    }
    if not evaluate:
        return {"method": None, "reason": "evaluation turned off (evaluate=False)", **out}
    if mem_mb is None:
        return {"method": "logits", "reason": "no memory limit given: whole-model logit comparison", **out}
    if need["logits"] <= mem_mb:
        return {
            "method": "logits",
            "reason": f"two float32 copies of the model ({need['logits']} MB) fit in the job's {mem_mb:g} MB",
            **out,
        }
    return {
        "method": "layerwise",
        "reason": (
            f"two float32 copies of the model ({need['logits']} MB) do not fit in the job's {mem_mb:g} MB: "
            f"per-Linear output error, one weight at a time ({need['bounded']} MB)"
        ),
        **out,
    }


class _Weights:
    """Name -> tensor location over a checkpoint's shards (headers only)."""

    def __init__(self, directory: Path):
        self.refs: dict[str, TensorRef] = {}
        for f in _weight_files(directory):
            for ref in tensor_refs(f):
                self.refs[ref.name] = ref

    def get(self, name: str) -> torch.Tensor:
        if name not in self.refs:
            raise UserError(f"checkpoint has no tensor {name!r}")
        return read_rows(self.refs[name]).to(torch.float32)

    def rows(self, name: str, ids: torch.Tensor) -> torch.Tensor:
        ref = self.refs[name]
        return torch.stack([read_rows(ref, i, i + 1)[0] for i in ids.tolist()]).to(torch.float32)


class _Layerwise:
    """The Linear callback of :func:`llama_forward` for :func:`layerwise_error`."""

    def __init__(self, src: _Weights, emulated: _Weights, quantized: set[str], act_qdq: ActQDQ | None):
        self.src, self.emu, self.quantized, self.act_qdq = src, emulated, quantized, act_qdq
        self.errors: dict[str, float] = {}

    def __call__(self, module: str, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T (+ b)`` with the unquantized weight; records the quantized one's error."""
        weight = module + ".weight"
        ref = self.src.refs[weight]
        flat = x.reshape(-1, x.shape[-1])
        y = torch.empty(flat.shape[0], ref.shape[0], dtype=torch.float32)
        q = weight in self.quantized
        xq = self.act_qdq(module, flat) if q and self.act_qdq is not None else flat
        err = ref_norm = 0.0
        for start, stop in _row_blocks(ref):
            w = read_rows(ref, start, stop).to(torch.float32)
            y[:, start:stop] = flat @ w.T
            del w
            if q:
                wq = read_rows(self.emu.refs[weight], start, stop).to(torch.float32)
                yq = xq @ wq.T
                del wq
                err += (yq.double() - y[:, start:stop].double()).pow(2).sum().item()
                ref_norm += y[:, start:stop].double().pow(2).sum().item()
        if q:
            self.errors[module] = _sig(math.sqrt(err / ref_norm)) if ref_norm > 0 else (0.0 if err == 0 else math.inf)
        return _with_bias(self.src, module, y).reshape(*x.shape[:-1], ref.shape[0])


def _with_bias(weights: _Weights, module: str, y: torch.Tensor) -> torch.Tensor:
    bias = module + ".bias"
    return y + weights.get(bias) if bias in weights.refs else y


def _unquantized_linear(weights: _Weights, module: str, x: torch.Tensor) -> torch.Tensor:
    ref = weights.refs[module + ".weight"]
    flat = x.reshape(-1, x.shape[-1])
    y = torch.empty(flat.shape[0], ref.shape[0], dtype=torch.float32)
    for start, stop in _row_blocks(ref):
        y[:, start:stop] = flat @ read_rows(ref, start, stop).to(torch.float32).T
    return _with_bias(weights, module, y).reshape(*x.shape[:-1], ref.shape[0])


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def llama_forward(src: Path, weights: _Weights, input_ids: torch.Tensor, linear: Linear) -> None:
    """The unquantized Llama's decoder blocks on ``input_ids [B, S]`` in float32, one weight
    in memory at a time (read in row blocks); every projection goes through
    ``linear(module, x) -> y``, so a caller can measure or record each Linear."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig.from_pretrained(src, local_files_only=True)
    n_sequences, seq_len = input_ids.shape
    ids, inverse = torch.unique(input_ids, return_inverse=True)
    hidden = weights.rows("model.embed_tokens.weight", ids)[inverse]  # [B, S, H]

    n_heads = int(config.num_attention_heads)
    n_kv = int(config.num_key_value_heads or n_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // n_heads)
    eps = float(config.rms_norm_eps)
    positions = torch.arange(seq_len).unsqueeze(0).expand(n_sequences, -1)
    cos, sin = LlamaRotaryEmbedding(config)(hidden, positions)
    mask = torch.full((seq_len, seq_len), float("-inf")).triu(1)
    act = torch.nn.functional.silu
    if getattr(config, "hidden_act", "silu") != "silu":
        raise UserError(f"layer-wise evaluation supports hidden_act silu, not {config.hidden_act!r}")

    with torch.no_grad():
        for i in range(int(config.num_hidden_layers)):
            p = f"model.layers.{i}."
            x = _rms_norm(hidden, weights.get(p + "input_layernorm.weight"), eps)
            q = linear(p + "self_attn.q_proj", x)
            k = linear(p + "self_attn.k_proj", x)
            v = linear(p + "self_attn.v_proj", x)
            q = q.view(n_sequences, seq_len, n_heads, head_dim).transpose(1, 2)
            k = k.view(n_sequences, seq_len, n_kv, head_dim).transpose(1, 2)
            v = v.view(n_sequences, seq_len, n_kv, head_dim).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            k = k.repeat_interleave(n_heads // n_kv, dim=1)
            v = v.repeat_interleave(n_heads // n_kv, dim=1)
            scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + mask
            attn = torch.softmax(scores, dim=-1) @ v
            attn = attn.transpose(1, 2).reshape(n_sequences, seq_len, n_heads * head_dim)
            del q, k, v, scores
            hidden = hidden + linear(p + "self_attn.o_proj", attn)
            x = _rms_norm(hidden, weights.get(p + "post_attention_layernorm.weight"), eps)
            gate = linear(p + "mlp.gate_proj", x)
            up = linear(p + "mlp.up_proj", x)
            hidden = hidden + linear(p + "mlp.down_proj", act(gate) * up)
            del x, gate, up, attn


def random_tokens(src: Path, seed: int, n_sequences: int, seq_len: int) -> torch.Tensor:
    """Token ids uniform over the vocabulary from ``torch.Generator().manual_seed(seed)``."""
    import json

    vocab = int(json.loads((Path(src) / "config.json").read_text())["vocab_size"])
    return torch.randint(0, vocab, (n_sequences, seq_len), generator=torch.Generator().manual_seed(seed))


def calibration_amax(
    src_dir: str | Path, sequences: Sequence[Sequence[int]], quantized: Iterable[str]
) -> dict[str, Any]:
    """What static scales are made of, from the unquantized model on calibration tokens:
    ``{"inputs": {module: max |x|}}`` over the inputs of the quantized Linears (``quantized``:
    their weight names) and ``{"kv": {module: max |y|}}`` over the outputs of every
    ``k_proj`` / ``v_proj`` (the FP8 KV cache's scales, measured before RoPE as Quark does
    with ``kv_cache_post_rope: false``). Sequences of different lengths run in groups of equal length."""
    src = Path(src_dir)
    _read_config(src)
    weights = _Weights(src)
    wanted = {name[: -len(".weight")] for name in quantized}
    inputs: dict[str, float] = {}
    kv: dict[str, float] = {}

    def record(module: str, x: torch.Tensor) -> torch.Tensor:
        y = _unquantized_linear(weights, module, x)
        if module in wanted:
            inputs[module] = max(inputs.get(module, 0.0), float(x.abs().max()) if x.numel() else 0.0)
        if module.rpartition(".")[2] in ("k_proj", "v_proj"):
            kv[module] = max(kv.get(module, 0.0), float(y.abs().max()) if y.numel() else 0.0)
        return y

    by_length: dict[int, list[Sequence[int]]] = {}
    for seq in sequences:
        if len(seq):
            by_length.setdefault(len(seq), []).append(seq)
    if not by_length:
        raise UserError("calibration needs at least one non-empty token sequence")
    for _length, group in sorted(by_length.items()):
        llama_forward(src, weights, torch.tensor(group, dtype=torch.int64), record)
    return {"inputs": dict(sorted(inputs.items())), "kv": dict(sorted(kv.items()))}


def layerwise_error(
    ref_dir: str | Path,
    quant_dir: str | Path,
    *,
    quantized: Iterable[str] | None = None,
    act_quant: bool = False,
    act_qdq: ActQDQ | None = None,
    activation_emulation: str | None = None,
    seed: int = 0,
    n_sequences: int = 8,
    seq_len: int = 48,
) -> dict[str, Any]:
    """Per quantized Linear, ``||Ŵx - Wx|| / ||Wx||`` on the unquantized model's own activations.

    ``ref_dir``: the unquantized HF Llama checkpoint; ``quant_dir``: its emulated bf16 copy
    (plain HF layout, quantized weights dequantized); ``quantized``: the weight names that
    were quantized (default: :func:`select_quantized_tensors` with its default exclude).
    Tokens as in ``logit_error``: uniform over the vocabulary from
    ``torch.Generator().manual_seed(seed)``. ``act_qdq(module, x)``: the activation
    quantize-dequantize of a W+A scheme, applied to the quantized layers' inputs
    (``act_quant=True``: MXFP4, dynamic, as vLLM does for W4A4); ``activation_emulation``
    names it in the result. Float32 on CPU, one weight at a time.
    """
    src, qdir = Path(ref_dir), Path(quant_dir)
    _read_config(src)  # a Llama, unquantized
    src_weights, emu_weights = _Weights(src), _Weights(qdir)
    if quantized is None:
        quantized = select_quantized_tensors({k: r.shape for k, r in src_weights.refs.items()})
    quantized = set(quantized)
    missing = sorted(k for k in quantized if k not in emu_weights.refs or k not in src_weights.refs)
    if missing:
        raise UserError(f"{qdir}: quantized weights missing from the checkpoints: {', '.join(missing[:5])}")
    if act_quant and act_qdq is None:
        act_qdq, activation_emulation = _mxfp4_act_qdq, "mxfp4 QDQ of the quantized Linears' inputs"
    ev = _Layerwise(src_weights, emu_weights, quantized, act_qdq)
    llama_forward(src, src_weights, random_tokens(src, seed, n_sequences, seq_len), ev)

    errors = dict(sorted(ev.errors.items()))
    worst = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:N_WORST]
    values = list(errors.values())
    return {
        "metric": "rel_error = ||W_q x - W x||_F / ||W x||_F per quantized Linear over all calibration tokens",
        "layers": errors,
        "count": len(errors),
        "mean": _sig(sum(values) / len(values)) if values else None,
        "max": _sig(max(values)) if values else None,
        "worst": [{"module": m, "rel_error": e} for m, e in worst],
        "inputs": {
            "seed": seed,
            "n_sequences": n_sequences,
            "seq_len": seq_len,
            "token_ids": "uniform over vocab from torch.Generator().manual_seed(seed)",
        },
        "compute": (
            "unquantized Llama forward (embeddings, decoder blocks) in float32 on CPU, one weight in memory "
            "at a time; each Linear's input captured and compared against the emulated copy's weight"
        ),
        "activation_emulation": activation_emulation if act_qdq is not None else None,
    }
