"""Memory a quantize job needs, from a checkpoint's safetensors headers (no torch).

The streaming writer and the layer-wise evaluation hold at most one tensor's row blocks of
two weights at a time: ``bounded = 2 x largest tensor + 1 GB``. The whole-model logit
comparison holds two float32 copies: ``logits = 8 bytes x parameters + 1 GB`` (for a
Diffusers pipeline, the video comparison of the unquantized and the emulated pipeline). The quantize
rule asks for ``logits`` when that is modest, else ``bounded`` (:func:`quantize_job_mem_mb`;
AMD Quark, which loads the whole model, its bf16 size + 4 GB);
the job picks the logit path only when its memory covers ``logits``
(mlperf_repro.quant.evaluate.choose_evaluation). Read by
the rule's resources and the plan view, so it stays free of the ML stack.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

__all__ = ["DEFAULT_MEM_MB", "OVERHEAD_BYTES", "checkpoint_tensors", "job_mem_mb", "need_mb", "quantize_job_mem_mb"]

#: Fixed overhead of a quantize job (interpreter, torch, transformers, activations): 1 GB.
OVERHEAD_BYTES = 10**9

_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2}


def checkpoint_tensors(model_dir: str | Path) -> list[tuple[int, int]]:
    """``(elements, bytes)`` of every tensor in a directory's ``*.safetensors`` (headers only);
    for a Diffusers pipeline folder (``model_index.json``) those of its components' subfolders."""
    return [(elements, size) for _, _, elements, size in named_tensors(model_dir)]


def named_tensors(model_dir: str | Path) -> list[tuple[str, tuple[int, ...], int, int]]:
    """``(name, shape, elements, bytes)`` of every tensor :func:`checkpoint_tensors` counts."""
    model_dir = Path(model_dir)
    pattern = "*/*.safetensors" if (model_dir / "model_index.json").is_file() else "*.safetensors"
    out = []
    for path in sorted(model_dir.glob(pattern)):
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            out.append((name, tuple(info["shape"]), math.prod(info["shape"]), end - begin))
    return out


#: Quark's job beyond the model it loads whole in bf16: calibration activations, GPTQ's
#: per-layer Hessians, the export buffers.
QUARK_OVERHEAD_BYTES = 4 * 10**9


def need_mb(largest_tensor_bytes: float, parameters: float) -> dict[str, int]:
    """MB for the bounded path (``bounded``), the logit path (``logits``) and AMD Quark, which
    loads the whole model in bf16 (``quark``)."""
    return {
        "bounded": math.ceil((2 * largest_tensor_bytes + OVERHEAD_BYTES) / 1e6),
        "logits": math.ceil((8 * parameters + OVERHEAD_BYTES) / 1e6),
        "quark": math.ceil((2 * parameters + QUARK_OVERHEAD_BYTES) / 1e6),
        "largest_tensor_mb": math.ceil(largest_tensor_bytes / 1e6),
    }


#: The quantize job's memory while its checkpoint's sizes are not known (not acquired yet).
DEFAULT_MEM_MB = 8000


def job_mem_mb(
    largest_tensor_bytes: float, parameters: float, default: int = DEFAULT_MEM_MB, tool: str | None = None
) -> tuple[int, str]:
    """The quantize job's memory and why: enough for the whole-model logit comparison where
    that needs no more than ``default`` (a small model gets the better evaluation), else the
    bounded path's need (a 70B model gets a job of a few GB, not 550). ``tool: quark`` loads
    the whole model: its bf16 size + 4 GB (the validation after it is bounded)."""
    need = need_mb(largest_tensor_bytes, parameters)
    if tool == "quark":
        return max(need["quark"], need["bounded"]), "bf16 model + 4 GB (AMD Quark loads the whole model)"
    if need["logits"] <= default:
        return need["logits"], "two float32 copies + 1 GB (whole-model logit comparison)"
    return need["bounded"], "2 x largest tensor + 1 GB (streaming, layer-wise evaluation)"


def quantize_job_mem_mb(model_dir: str | Path, default: int = DEFAULT_MEM_MB, tool: str | None = None) -> int:
    """The quantize rule's ``mem_mb`` for the checkpoint in ``model_dir`` and the recipe's
    ``tool`` (:func:`job_mem_mb`); ``default`` while it has no weights yet (not acquired)."""
    tensors = checkpoint_tensors(model_dir) if Path(model_dir).is_dir() else []
    if not tensors:
        return default
    return job_mem_mb(max(b for _, b in tensors), sum(e for e, _ in tensors), default, tool)[0]
