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

__all__ = [
    "DEFAULT_MEM_MB",
    "OVERHEAD_BYTES",
    "autosmoothquant_cache_bytes",
    "calibration_tokens",
    "checkpoint_tensors",
    "checkpoint_widths",
    "job_mem_mb",
    "need_mb",
    "quantize_job_mem_mb",
]

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


def autosmoothquant_cache_bytes(tokens: int, hidden: int, intermediate: int, dtype_bytes: int = 2) -> int:
    """Host memory amd-quark 0.13's AutoSmoothQuant holds for one decoder block: each Linear's
    calibration input, which a forward hook copies to the CPU per Linear (``auto_smooth.
    _get_input_feat``: q, k, v, o, gate and up are ``hidden`` wide, down ``intermediate``),
    and the block's inputs (``hidden``), for every calibration token. The vendor's 1,000 x
    1,024 tokens on Llama 2 70B: 176 GB."""
    return tokens * (7 * hidden + intermediate) * dtype_bytes


def checkpoint_widths(model_dir: str | Path) -> tuple[int, int] | None:
    """``(hidden_size, intermediate_size)`` from a checkpoint's config.json, or None."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    # A multimodal checkpoint keeps the language model's widths in text_config.
    if isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    widths = config.get("hidden_size"), config.get("intermediate_size")
    if all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths):
        return widths[0], widths[1]
    return None


def job_mem_mb(
    largest_tensor_bytes: float,
    parameters: float,
    default: int = DEFAULT_MEM_MB,
    tool: str | None = None,
    activation_cache_bytes: float = 0,
    on_gpu: bool = False,
) -> tuple[int, str]:
    """The quantize job's memory and why: enough for the whole-model logit comparison where
    that needs no more than ``default`` (a small model gets the better evaluation), else the
    bounded path's need (a 70B model gets a job of a few GB, not 550). ``tool: quark`` loads
    the whole model: its bf16 size + 4 GB (the validation after it is bounded); with
    AutoSmoothQuant also its host-side activation cache (:func:`autosmoothquant_cache_bytes`),
    next to the model on a CPU, after it (the model moved to the GPU) on a GPU."""
    need = need_mb(largest_tensor_bytes, parameters)
    if tool == "quark":
        model = max(need["quark"], need["bounded"])
        if not activation_cache_bytes:
            return model, "bf16 model + 4 GB (AMD Quark loads the whole model)"
        cache = math.ceil(activation_cache_bytes / 1e6)
        if on_gpu:
            return max(model, cache + math.ceil(QUARK_OVERHEAD_BYTES / 1e6)), (
                "the larger of the bf16 model + 4 GB (loaded, then moved to the GPU) and AutoSmoothQuant's "
                "host cache of a block's calibration activations + 4 GB (AMD Quark)"
            )
        return model + cache, "bf16 model + 4 GB + AutoSmoothQuant's cache of a block's calibration activations"
    if need["logits"] <= default:
        return need["logits"], "two float32 copies + 1 GB (whole-model logit comparison)"
    return need["bounded"], "2 x largest tensor + 1 GB (streaming, layer-wise evaluation)"


def calibration_tokens(recipe: dict) -> int:
    """Tokens AutoSmoothQuant caches activations of: the recipe's calibration rows x seq_len
    (an upper bound for rows cut per row), none for a recipe without it."""
    if "autosmoothquant" not in [str(a).lower() for a in recipe.get("algorithms") or []]:
        return 0
    calibration = recipe.get("calibration") or {}
    return int(calibration.get("samples", 0) or 0) * int(calibration.get("seq_len", 0) or 0)


def quantize_job_mem_mb(
    model_dir: str | Path,
    default: int = DEFAULT_MEM_MB,
    tool: str | None = None,
    recipe: dict | None = None,
    on_gpu: bool = False,
) -> int:
    """The quantize rule's ``mem_mb`` for the checkpoint in ``model_dir`` and the recipe's
    ``tool`` (:func:`job_mem_mb`; its AutoSmoothQuant cache from the checkpoint's widths);
    ``default`` while it has no weights yet (not acquired)."""
    tensors = checkpoint_tensors(model_dir) if Path(model_dir).is_dir() else []
    if not tensors:
        return default
    widths = checkpoint_widths(model_dir)
    tokens = calibration_tokens(recipe or {})
    cache = autosmoothquant_cache_bytes(tokens, *widths) if widths and tokens else 0
    return job_mem_mb(max(b for _, b in tensors), sum(e for e, _ in tensors), default, tool, cache, on_gpu)[0]
