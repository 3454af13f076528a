"""Reading Hugging Face safetensors checkpoints without mapping them, and choosing which of
their tensors a weight format quantizes.

The lowest layer of the quantize stage: the checkpoint writer (:mod:`.checkpoint`), the
evaluation (:mod:`.evaluate`) and the layer-wise pipeline (:mod:`.pipeline`) all read
through it, and it imports none of them.

Tensors are read one at a time (row blocks for the big ones) with pread on plain file
descriptors: no safetensors shard is memory-mapped, so the page cache that a shard's bytes
pass through never counts as this process's RSS.

Which tensors are quantized (decided from tensor names, checked against ``config.json``):
every 2-D ``*.{q,k,v,o,gate,up,down}_proj.weight`` of a ``model_type: llama`` checkpoint,
minus the modules matched by ``exclude`` (vLLM's Quark rule: an exact module name, or
``"re:<regex>"`` matched with ``re.match``).
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mlperf_repro.errors import UserError
from mlperf_repro.quant.mxfp4 import GROUP_SIZE

#: Linear layers of a Llama decoder block that get MXFP4 weights.
QUANTIZED_PROJECTIONS: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)

# vLLM fuses these into one layer (qkv_proj, gate_up_proj) and refuses a checkpoint in
# which only some of the shards are excluded, so we refuse it up front.
_FUSED_GROUPS: tuple[tuple[str, ...], ...] = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))

SUPPORTED_MODEL_TYPES: tuple[str, ...] = ("llama",)

_WEIGHT_FILE_SUFFIXES = (".safetensors",)


# --------------------------------------------------------------------------- selection


def _matches(module: str, pattern: str) -> bool:
    """vLLM's Quark exclude rule: exact module name, or ``re:`` + regex (``re.match``)."""
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None
    return module == pattern


def _is_excluded(module: str, exclude: Iterable[str]) -> bool:
    return any(_matches(module, p) for p in exclude)


def check_exclude(exclude: Sequence[str]) -> None:
    """A UserError for an ``exclude`` entry that is not a non-empty string or whose ``re:`` regex does not compile."""
    for pattern in exclude:
        if not isinstance(pattern, str) or not pattern:
            raise UserError(f"exclude entries must be non-empty strings, got {pattern!r}")
        if pattern.startswith("re:"):
            try:
                re.compile(pattern[3:])
            except re.error as exc:
                raise UserError(f"exclude pattern {pattern!r} is not a valid regex: {exc}") from None


def select_quantized_tensors(
    shapes: dict[str, Sequence[int]],
    exclude: Sequence[str] = ("lm_head",),
    *,
    group: int = GROUP_SIZE,
    format_name: str = "MXFP4",
) -> list[str]:
    """Names (``<module>.weight``) of the tensors to quantize, sorted.

    ``shapes`` maps every tensor name of the checkpoint to its shape. Raises
    :class:`UserError` for an in-features size that is not a multiple of the format's
    ``group`` (32 for MX, 16 for NVFP4) and for an ``exclude`` that splits a group vLLM
    fuses (q/k/v, gate/up).
    """
    check_exclude(exclude)
    chosen: list[str] = []
    excluded_by_parent: dict[str, dict[str, bool]] = {}
    for name in sorted(shapes):
        if not name.endswith(".weight"):
            continue
        module = name[: -len(".weight")]
        parent, _, proj = module.rpartition(".")
        if proj not in QUANTIZED_PROJECTIONS or len(shapes[name]) != 2:
            continue
        excluded = _is_excluded(module, exclude)
        excluded_by_parent.setdefault(parent, {})[proj] = excluded
        if excluded:
            continue
        in_features = int(shapes[name][1])
        if in_features % group != 0:
            raise UserError(
                f"tensor {name!r} has in-features {in_features}, not a multiple of the {format_name} "
                f"group size {group}; add {module!r} to the quantization exclude list"
            )
        chosen.append(name)

    for parent, flags in sorted(excluded_by_parent.items()):
        for group in _FUSED_GROUPS:
            present = {p: flags[p] for p in group if p in flags}
            if len(set(present.values())) > 1:
                raise UserError(
                    f"exclude list quantizes only some of {', '.join(group)} under {parent!r} "
                    f"(excluded: {sorted(p for p, e in present.items() if e)}); vLLM fuses these "
                    "layers and needs one scheme for all of them"
                )
    return chosen


# --------------------------------------------------------------------------- files


def _read_config(src: Path) -> dict[str, Any]:
    path = src / "config.json"
    if not path.is_file():
        raise UserError(f"{src} is not a Hugging Face checkpoint: config.json is missing")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    if config.get("quantization_config"):
        raise UserError(
            f"{path} already has a quantization_config "
            f"({config['quantization_config'].get('quant_method')!r}); quantize the unquantized "
            "bf16/fp32 checkpoint instead"
        )
    if config.get("model_type") not in SUPPORTED_MODEL_TYPES:
        raise UserError(
            f"{path}: model_type {config.get('model_type')!r} is not supported by the "
            f"checkpoint writer (supported: {list(SUPPORTED_MODEL_TYPES)})"
        )
    return config


def _weight_files(src: Path) -> list[Path]:
    files = sorted(p for p in src.iterdir() if p.is_file() and p.suffix in _WEIGHT_FILE_SUFFIXES)
    if not files:
        raise UserError(f"{src} has no *.safetensors weights (convert .bin checkpoints to safetensors first)")
    return files


# --------------------------------------------------------------------------- streaming reads

#: Bytes of source weights decoded per step (row block) when a tensor is quantized or copied.
_BLOCK_BYTES = 64 * 2**20

_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}


@dataclass(frozen=True)
class TensorRef:
    """Where one tensor's bytes lie in a safetensors file (from its header)."""

    name: str
    path: Path
    dtype: str  # safetensors dtype string: "BF16", "F32", "U8", ...
    shape: tuple[int, ...]
    start: int  # absolute byte offset of the data in the file
    nbytes: int

    @property
    def torch_dtype(self) -> torch.dtype:
        return _st_types()[self.dtype]

    @property
    def row_bytes(self) -> int:
        rows = self.shape[0] if self.shape else 1
        return self.nbytes // rows if rows else 0


def _st_types() -> dict[str, torch.dtype]:
    from safetensors.torch import _TYPES

    return _TYPES


def _dtype_size(dtype: str) -> int:
    return torch.empty(0, dtype=_st_types()[dtype]).element_size()


def read_header(path: Path) -> tuple[int, dict[str, Any]]:
    """``(data_start, header)`` of a safetensors file, read without mapping the file."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise UserError(f"{path} is not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", raw)
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: unreadable safetensors header: {exc}") from None
    return 8 + n, header


def tensor_refs(path: Path) -> list[TensorRef]:
    """Every tensor of one safetensors file, in name order."""
    data_start, header = read_header(path)
    refs = []
    for name in sorted(k for k in header if k != "__metadata__"):
        info = header[name]
        begin, end = info["data_offsets"]
        if info["dtype"] not in _st_types():
            raise UserError(f"{path}: tensor {name!r} has dtype {info['dtype']}, which torch cannot read")
        refs.append(
            TensorRef(name, path, info["dtype"], tuple(int(d) for d in info["shape"]), data_start + begin, end - begin)
        )
    return refs


def read_rows(ref: TensorRef, start: int = 0, stop: int | None = None, fd: int | None = None) -> torch.Tensor:
    """Rows ``start:stop`` of a tensor (the whole tensor by default), read with pread."""
    shape = ref.shape
    if not shape:
        start, stop, lead = 0, 1, ()
    else:
        stop = shape[0] if stop is None else stop
        lead = (stop - start,)
    tail = tuple(shape[1:])
    n = (stop - start) * ref.row_bytes if shape else ref.nbytes
    if n == 0:
        return torch.empty(lead + tail, dtype=ref.torch_dtype)
    buf = bytearray(n)
    own = fd is None
    if own:
        fd = os.open(ref.path, os.O_RDONLY)
    try:
        view, off, pos = memoryview(buf), ref.start + start * ref.row_bytes, 0
        while pos < n:
            got = os.preadv(fd, [view[pos:]], off + pos)
            if got <= 0:
                raise UserError(f"{ref.path}: file ends inside tensor {ref.name!r}")
            pos += got
    finally:
        if own:
            os.close(fd)
    return torch.frombuffer(buf, dtype=ref.torch_dtype).reshape(lead + tail)


def read_tensor(ref: TensorRef) -> torch.Tensor:
    return read_rows(ref)


def _row_blocks(ref: TensorRef) -> Iterable[tuple[int, int]]:
    rows = ref.shape[0] if ref.shape else 1
    step = max(1, _BLOCK_BYTES // max(1, ref.row_bytes))
    for start in range(0, rows, step):
        yield start, min(rows, start + step)


def _sig(x: float, digits: int = 6) -> float:
    """Round to a few significant digits: keeps the manifest stable against last-ulp noise."""
    return float(f"{x:.{digits}g}")
