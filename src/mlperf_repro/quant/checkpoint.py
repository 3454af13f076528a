"""Write MXFP4 checkpoints (Quark layout + an emulated bf16 copy) and their manifest.

Input: a Hugging Face Llama checkpoint directory (``config.json``, ``*.safetensors``,
tokenizer files; weights bf16/fp16/fp32). Outputs:

``quark_dir``
    The layout vLLM loads with ``quant_method: "quark"`` (native MXFP4 on ROCm gfx950 via
    AITER, emulated elsewhere): each quantized Linear ``<m>.weight`` becomes
    ``<m>.weight`` uint8 ``[out, in/2]`` (packed E2M1, element 2i in the low nibble) plus
    ``<m>.weight_scale`` uint8 ``[out, in/32]`` (raw E8M0). Everything else is copied
    unchanged and ``config.json`` gains a ``quantization_config`` in Quark's export schema.
``emulated_dir``
    A plain HF checkpoint (no ``quantization_config``) in which every quantized weight is
    replaced by its dequantized value in bfloat16 (exact: E2M1 values have two significant
    bits and the scales are powers of two). vLLM's CPU backend has no FP4 kernel and serves
    this copy; it reproduces the weight quantization only, not MXFP4 activations.

Which tensors are quantized (decided from tensor names, checked against ``config.json``):
every 2-D ``*.{q,k,v,o,gate,up,down}_proj.weight`` of a ``model_type: llama`` checkpoint,
i.e. all ``nn.Linear`` layers inside the decoder blocks, minus the modules matched by
``exclude``. Embeddings, norms and ``lm_head`` are never quantized (lm_head is also
excluded by default so vLLM's parser agrees). ``exclude`` entries follow vLLM's Quark
matching rule: an exact module name, or ``"re:<regex>"`` matched with ``re.match``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from mlperf_repro import progress
from mlperf_repro.errors import UserError
from mlperf_repro.fetch._manifest import RECORD_NAME, WORKFLOW_MARKERS
from mlperf_repro.hashing import sha256_tree
from mlperf_repro.provenance import device_record
from mlperf_repro.quant.encodings import (
    ACTIVATION_SCALE_MODE,
    KV_SCALE_NAMES,
    SCHEMES,
    Encoding,
    build_quantization_config,
    encoding_for,
    extra_files,
)
from mlperf_repro.quant.mxfp4 import GROUP_SIZE, dequantize_mxfp4, qdq_mxfp4
from mlperf_repro.quant.tensor_files import (  # noqa: F401  (re-exported: the writer's readers)
    _BLOCK_BYTES,
    _FLOAT_DTYPES,
    _FUSED_GROUPS,
    QUANTIZED_PROJECTIONS,
    SUPPORTED_MODEL_TYPES,
    TensorRef,
    _dtype_size,
    _is_excluded,
    _read_config,
    _row_blocks,
    _sig,
    _st_types,
    _weight_files,
    check_exclude,
    read_header,
    read_rows,
    read_tensor,
    select_quantized_tensors,
    tensor_refs,
)

__all__ = [
    "QUANTIZED_PROJECTIONS",
    "SCHEMES",
    "build_quantization_config",
    "load_quark_checkpoint_dequantized",
    "logit_error",
    "quantize_checkpoint",
    "select_quantized_tensors",
]

# Files never copied to the outputs: weights in other formats (they would shadow or
# duplicate the quantized ones) and the index / config files that we rewrite ourselves.
_SKIP_COPY_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".safetensors")
# Model-level files the writer regenerates, and the acquire stage's own records.
_SKIP_COPY_NAMES = {
    "config.json",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "manifest.sha256",
    "ACQUIRED.json",
    "quant_manifest.json",
}
_INDEX_NAME = "model.safetensors.index.json"
_ST_METADATA = {"format": "pt"}  # what transformers' save_pretrained writes


# Activations are quantized at run time by vLLM/AITER with the "even" scale rule (vLLM's
# MXFP4 activation quantizers do not read the mode from the config), so the input spec
# and the evaluation's activation emulation always use "even".
_ACTIVATION_SCALE_MODE = ACTIVATION_SCALE_MODE


# --------------------------------------------------------------------------- files


def _prepare_out_dir(path: Path, src: Path) -> None:
    if path.resolve() == src.resolve():
        raise UserError(f"output directory {path} is the input checkpoint directory")
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UserError(f"output directory {path} exists and is not empty; remove it first")
    path.mkdir(parents=True, exist_ok=True)


def _copy_side_files(src: Path, dests: Sequence[Path], skip: Iterable[str] = ()) -> list[str]:
    """Copy tokenizer files, generation_config.json, etc. (top-level regular files only; not
    the weights, the files the writer regenerates, nor the names in ``skip``)."""
    copied = []
    skipped = _SKIP_COPY_NAMES | set(skip)
    for p in sorted(src.iterdir()):
        if not p.is_file() or p.name.startswith(".") or p.name in skipped:
            continue
        if p.suffix in _SKIP_COPY_SUFFIXES:
            continue
        for d in dests:
            shutil.copyfile(p, d / p.name)
        copied.append(p.name)
    return copied


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


NOT_CONTENT = frozenset({RECORD_NAME}) | WORKFLOW_MARKERS


def _tree_record(root: Path) -> dict[str, Any]:
    """Per-file sha256 and size of a directory's content (relative POSIX paths, sorted).

    The acquisition record (times, durations) and Snakemake's marker are not content: with
    them the same weights would hash differently on every run."""
    hashes = {rel: h for rel, h in sha256_tree(root).items() if rel not in NOT_CONTENT}
    files = {rel: {"sha256": h, "bytes": (root / rel).stat().st_size} for rel, h in hashes.items()}
    return {"files": files, "bytes": sum(f["bytes"] for f in files.values())}


# --------------------------------------------------------------------------- streaming I/O
#
# Tensors are read and written one at a time (row blocks for the big ones) with pread /
# pwrite on plain file descriptors: no safetensors shard is memory-mapped, so the page
# cache that a shard's bytes pass through never counts as this process's RSS, and peak
# memory is one tensor's row block plus the codec's temporaries, whatever the model size.
# Output shards are laid out from the headers alone (every output shape and dtype is known
# before a byte is quantized), their header written first and each tensor's bytes put at
# its offset; the header is byte-identical to what ``safetensors.torch.save_file`` writes
# for the same tensors (same order, JSON and padding; tests/test_quant_streaming.py).

#: Output shards are split when they would grow past this many bytes (one tensor larger
#: than the cap gets a shard of its own).
SHARD_CAP_BYTES = 5 * 10**9


@dataclass(frozen=True)
class _OutTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _dtype_size(self.dtype)


def _safetensors_order(entries: Sequence[_OutTensor], metadata: dict[str, str]) -> list[str]:
    """The order ``save_file`` lays these tensors out in, asked of safetensors itself
    (one element each: the order depends on dtype and name only)."""
    from safetensors.torch import save

    types = _st_types()
    probe = save({e.name: torch.zeros(1, dtype=types[e.dtype]) for e in entries}, metadata=metadata)
    (n,) = struct.unpack("<Q", probe[:8])
    header = json.loads(probe[8 : 8 + n])
    header.pop("__metadata__", None)
    return sorted(header, key=lambda k: header[k]["data_offsets"][0])


class _ShardWriter:
    """One output safetensors file laid out up front; tensors are filled in by offset."""

    def __init__(self, path: Path, entries: Sequence[_OutTensor], metadata: dict[str, str]):
        self.path = path
        self.entries = {e.name: e for e in entries}
        header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
        self.offsets: dict[str, int] = {}
        pos = 0
        for name in _safetensors_order(entries, metadata):
            e = self.entries[name]
            header[name] = {"dtype": e.dtype, "shape": list(e.shape), "data_offsets": [pos, pos + e.nbytes]}
            self.offsets[name] = pos
            pos += e.nbytes
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        text += b" " * (-len(text) % 8)
        self.data_start = 8 + len(text)
        self.size = self.data_start + pos
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._pwrite(struct.pack("<Q", len(text)) + text, 0)
        os.ftruncate(self.fd, self.size)

    def _pwrite(self, data: Any, offset: int) -> None:
        view = memoryview(data).cast("B")
        while view.nbytes:
            done = os.pwrite(self.fd, view, offset)
            view, offset = view[done:], offset + done

    def write(self, name: str, byte_offset: int, tensor: torch.Tensor) -> None:
        """Put ``tensor``'s bytes at ``byte_offset`` inside tensor ``name``'s data."""
        flat = tensor.contiguous().reshape(-1)
        if flat.numel():
            self._pwrite(flat.view(torch.uint8).numpy(), self.data_start + self.offsets[name] + byte_offset)

    def close(self) -> None:
        os.close(self.fd)


def _plan_shards(file_name: str, tensors: Sequence[_OutTensor], cap: int | None) -> list[tuple[str, list[_OutTensor]]]:
    """One source shard's output tensors cut into files of at most ``cap`` bytes: the source
    file name when they fit in one, ``<stem>-part-00001-of-0000N.safetensors`` otherwise."""
    pieces: list[list[_OutTensor]] = [[]]
    size = 0
    for t in tensors:
        if cap is not None and pieces[-1] and size + t.nbytes > cap:
            pieces.append([])
            size = 0
        pieces[-1].append(t)
        size += t.nbytes
    if len(pieces) == 1:
        return [(file_name, pieces[0])]
    stem = file_name[: -len(".safetensors")]
    n = len(pieces)
    return [(f"{stem}-part-{k:05d}-of-{n:05d}.safetensors", p) for k, p in enumerate(pieces, 1)]


# --------------------------------------------------------------------------- writer


def _emulated_bf16(name: str, decoded: torch.Tensor, enc: Encoding) -> torch.Tensor:
    """Decoded weight in bfloat16 for the emulated copy. For formats exact in bfloat16 (MX:
    at most 4 significant bits times a power of two) the copy must equal the checkpoint to
    the bit, so it is checked (a scale near the top of E8M0 overflows); FP8 and NVFP4 carry a
    float32 tensor scale, so each value is rounded once, as a bf16 model serving them does."""
    bf = decoded.to(torch.bfloat16)
    finite = bool(torch.isfinite(decoded).all())
    if finite and (not enc.exact_in_bf16 or torch.equal(bf.to(torch.float32), decoded)):
        return bf
    raise UserError(
        f"tensor {name!r}: {enc.format} values exceed the bfloat16/float32 exponent range "
        "(weights of magnitude ~2**127); it cannot be emulated, exclude it"
    )


def _stream_amax(ref: TensorRef, fd: int) -> float:
    amax = 0.0
    for start, stop in _row_blocks(ref):
        block = read_rows(ref, start, stop, fd).to(torch.float32)
        if not torch.isfinite(block).all():
            raise UserError(f"tensor {ref.name!r} contains NaN or Inf")
        if block.numel():
            amax = max(amax, float(block.abs().max()))
    return amax


def _fused_group(module: str) -> str:
    """The layer vLLM fuses ``module`` into (``<parent>.qkv``, ``<parent>.gate_up``), else itself."""
    parent, _, proj = module.rpartition(".")
    for group in _FUSED_GROUPS:
        if proj in group:
            return f"{parent}.{'_'.join(group)}"
    return module


def weight_amax(refs: dict[str, TensorRef], quantized: Iterable[str]) -> dict[str, float]:
    """Per quantized weight, the amax its per-tensor scale is made of: the max over the shards
    vLLM fuses with it (one streaming pass over each weight)."""
    own: dict[str, float] = {}
    for name in sorted(quantized, key=lambda n: (str(refs[n].path), refs[n].start)):
        fd = os.open(refs[name].path, os.O_RDONLY)
        try:
            own[name] = _stream_amax(refs[name], fd)
        finally:
            os.close(fd)
    shared: dict[str, float] = {}
    for name, amax in own.items():
        key = _fused_group(name[: -len(".weight")])
        shared[key] = max(shared.get(key, 0.0), amax)
    return {name: shared[_fused_group(name[: -len(".weight")])] for name in own}


def _quantize_streamed(
    ref: TensorRef,
    fd: int,
    enc: Encoding,
    amax: float | None,
    q_of: dict[str, _ShardWriter],
    e_of: dict[str, _ShardWriter],
) -> None:
    """Quantize one weight row block by row block into the quantized and emulated shards."""
    module = ref.name[: -len(".weight")]
    rows, cols = ref.shape
    row_bytes = {s.suffix: math.prod(s.shape[1:]) * _dtype_size(s.dtype) for s in enc.stored(rows, cols) if s.per_row}
    for start, stop in _row_blocks(ref):
        block = read_rows(ref, start, stop, fd)
        try:
            stored, decoded = enc.encode(block, None if amax is None else torch.tensor(amax))
        except ValueError as exc:
            raise UserError(f"tensor {ref.name!r}: {exc}") from None
        del block
        for suffix, tensor in stored.items():
            name = f"{module}.{suffix}"
            q_of[name].write(name, start * row_bytes[suffix], tensor)
        e_of[ref.name].write(ref.name, start * cols * 2, _emulated_bf16(ref.name, decoded, enc))
        del stored, decoded


def _calibration_tokens(calibration: dict[str, Any] | None, scheme: str, kv_cache: str | None) -> list[list[int]]:
    if calibration is None or not calibration.get("input_ids"):
        wants = f"scheme {scheme}" + (f" with kv_cache {kv_cache}" if kv_cache else "")
        raise UserError(
            f"{wants} needs calibration data (static scales): give the benchmark's dataset as the "
            "calibration file (quantization.<recipe>.calibration sets how many rows)"
        )
    return [list(map(int, seq)) for seq in calibration["input_ids"]]


def write_quantized_files(
    files: Sequence[Path],
    refs_by_file: dict[Path, list[TensorRef]],
    quantized: set[str],
    enc: Encoding,
    qdir: Path,
    edir: Path,
    *,
    w_amax: dict[str, float],
    act_amax: dict[str, float],
    kv_tensors: dict[str, torch.Tensor] | None = None,
    kv_file: dict[str, str] | None = None,
    shard_cap_bytes: int | None = SHARD_CAP_BYTES,
    write_index: bool = False,
    index_name: str = _INDEX_NAME,
) -> dict[str, int]:
    """Stream the safetensors ``files`` (their tensors ``refs_by_file``) into ``qdir`` (each
    weight of ``quantized`` stored as ``enc`` stores it, with its scales; every other tensor
    copied) and ``edir`` (the quantized weights decoded, bfloat16), shard by shard, one row
    block in memory at a time. ``w_amax`` / ``act_amax``: per-tensor weight amax (by weight
    name) and static activation amax (by module) for the per-tensor scales; ``kv_tensors``:
    extra float32 scalars (KV-cache scales) and ``kv_file`` the source file each goes with.
    Writes ``index_name`` in both dirs when ``write_index`` or when the output has more than
    one file. Returns the bytes of the quantized weights: ``source`` (as read) and ``quark``
    (as stored, scales included). The checkpoint writers of an LLM folder
    (:func:`quantize_checkpoint`) and of a Diffusers pipeline's transformers
    (:mod:`mlperf_repro.quant.pipeline`) both write through it."""
    kv_tensors = kv_tensors or {}
    kv_file = kv_file or {}
    q_index: dict[str, str] = {}
    e_index: dict[str, str] = {}
    q_total = e_total = 0
    src_quantized_bytes = q_quantized_bytes = 0
    n_out_files = 0
    reporter = progress.Progress(
        f"quantize {qdir.name}",
        total=sum(len(refs_by_file[f]) for f in files),
        unit="tensors",
        waiting_for="the tensor being quantized (reading, encoding and writing it)",
    )
    for f in reporter.watch(files):
        q_entries: list[_OutTensor] = []
        e_entries: list[_OutTensor] = []
        scalars: dict[str, torch.Tensor] = {}
        for ref in refs_by_file[f]:
            if ref.name in quantized:
                rows, cols = ref.shape
                module = ref.name[: -len(".weight")]
                stored = enc.stored(rows, cols)
                q_entries += [_OutTensor(f"{module}.{s.suffix}", s.dtype, s.shape) for s in stored]
                e_entries.append(_OutTensor(ref.name, "BF16", ref.shape))
                for suffix, value in enc.scalars(w_amax.get(ref.name), act_amax.get(module)).items():
                    scalars[f"{module}.{suffix}"] = value
            else:
                q_entries.append(_OutTensor(ref.name, ref.dtype, ref.shape))
                e_entries.append(_OutTensor(ref.name, ref.dtype, ref.shape))
        for name, value in kv_tensors.items():
            if kv_file[name] == f.name:
                q_entries.append(_OutTensor(name, "F32", tuple(value.shape)))
                scalars[name] = value
        q_shards = _plan_shards(f.name, q_entries, shard_cap_bytes)
        e_shards = _plan_shards(f.name, e_entries, shard_cap_bytes)
        n_out_files = max(n_out_files, len(q_shards), len(e_shards))
        q_writers = {name: _ShardWriter(qdir / name, ts, _ST_METADATA) for name, ts in q_shards}
        e_writers = {name: _ShardWriter(edir / name, ts, _ST_METADATA) for name, ts in e_shards}
        q_of = {t.name: q_writers[name] for name, ts in q_shards for t in ts}
        e_of = {t.name: e_writers[name] for name, ts in e_shards for t in ts}
        try:
            for name, value in scalars.items():
                q_of[name].write(name, 0, value.to(torch.float32))
            fd = os.open(f, os.O_RDONLY)
            try:
                # In file order: the source shard is read front to back.
                for ref in sorted(refs_by_file[f], key=lambda r: r.start):
                    if ref.name in quantized:
                        _quantize_streamed(ref, fd, enc, w_amax.get(ref.name), q_of, e_of)
                        module = ref.name[: -len(".weight")]
                        src_quantized_bytes += ref.nbytes
                        q_quantized_bytes += sum(
                            math.prod(s.shape) * _dtype_size(s.dtype) for s in enc.stored(*ref.shape)
                        )
                    else:
                        for start, stop in _row_blocks(ref):
                            block = read_rows(ref, start, stop, fd) if ref.shape else read_tensor(ref)
                            q_of[ref.name].write(ref.name, start * ref.row_bytes, block)
                            e_of[ref.name].write(ref.name, start * ref.row_bytes, block)
                            del block
                    reporter.advance()
            finally:
                os.close(fd)
        finally:
            for w in (*q_writers.values(), *e_writers.values()):
                w.close()
        for shards, index in ((q_shards, q_index), (e_shards, e_index)):
            for name, ts in shards:
                for t in ts:
                    index[t.name] = name
        q_total += sum(t.nbytes for t in q_entries)
        e_total += sum(t.nbytes for t in e_entries)

    if write_index or n_out_files > 1:
        _write_json(qdir / index_name, {"metadata": {"total_size": q_total}, "weight_map": q_index})
        _write_json(edir / index_name, {"metadata": {"total_size": e_total}, "weight_map": e_index})
    return {"source": src_quantized_bytes, "quark": q_quantized_bytes}


def tensor_inventory(files: list[Path], where: str = "") -> tuple[dict[Path, list[TensorRef]], dict[str, TensorRef]]:
    """Every file's tensors (headers only) and all of them by name; a tensor in two files is a
    UserError (``where`` prefixes the message)."""
    refs_by_file: dict[Path, list[TensorRef]] = {}
    seen: dict[str, str] = {}
    for f in files:
        refs_by_file[f] = tensor_refs(f)
        for ref in refs_by_file[f]:
            if ref.name in seen:
                raise UserError(f"{where}tensor {ref.name!r} appears in both {seen[ref.name]} and {f.name}")
            seen[ref.name] = f.name
    return refs_by_file, {r.name: r for rs in refs_by_file.values() for r in rs}


def quantize_checkpoint(
    src_dir: str | Path,
    quark_dir: str | Path,
    emulated_dir: str | Path,
    *,
    scheme: str = "mxfp4_weight_only",
    scale_mode: str = "even",
    exclude: Sequence[str] = ("lm_head",),
    layout: str | None = None,
    kv_cache: str | None = None,
    calibration: dict[str, Any] | None = None,
    eval_seed: int = 0,
    evaluate: bool = True,
    eval_sequences: int = 8,
    eval_seq_len: int = 48,
    manifest_path: str | Path | None = None,
    mem_mb: float | None = None,
    shard_cap_bytes: int | None = SHARD_CAP_BYTES,
) -> dict[str, Any]:
    """Quantize a HF Llama checkpoint; write both output dirs; return the manifest.

    ``scheme``: one of :data:`mlperf_repro.quant.encodings.SCHEMES` (MXFP4, MXFP6, FP8,
    NVFP4; W+A or weights only). ``scale_mode``: the MX scale rule, ``"even"`` (Quark
    default) or ``"floor"`` (OCP reference). ``layout``: whose tensor names and config to
    write (``quark`` by default; NVFP4 also ``modelopt`` and ``compressed-tensors``).
    ``kv_cache="fp8"``: FP8 KV-cache scales. ``calibration``: ``{"input_ids": [[...], ...],
    ...}`` (:func:`mlperf_repro.quant.calibration.select_calibration`), needed by schemes with
    static activation scales and by the KV cache; its other keys (file, sha256, rows) go into
    the manifest. The checkpoint is streamed: one tensor (a row block of it) in memory at a
    time, output shards written in place from a layout planned from the headers; a source
    shard whose output would pass ``shard_cap_bytes`` is split into
    ``<stem>-part-0000k-of-0000n`` files (``None``: never split). Otherwise shards keep their
    file names; a ``model.safetensors.index.json`` is written when the source has one or
    has, or the output gets, more than one shard.

    Evaluation (:mod:`mlperf_repro.quant.evaluate`): the whole-model logit comparison
    (``logit_error``: two float32 copies of the model on CPU) when it fits in ``mem_mb``
    (no limit when ``None``), otherwise the layer-wise comparison (``layerwise_error``:
    per quantized Linear, output error on calibration activations, one weight at a time).
    Either emulates the scheme's activation quantization on the quantized Linears' inputs.
    ``manifest["evaluation"]`` records which ran and why; ``evaluate=False`` runs neither.
    The manifest is also written as JSON to ``manifest_path`` when given; output hashes are
    taken before that, so a manifest placed inside an output dir is not part of its record.
    """
    src, qdir, edir = Path(src_dir), Path(quark_dir), Path(emulated_dir)
    enc = encoding_for(scheme, layout, scale_mode)
    spec = enc.scheme
    exclude = list(exclude)
    quant_config = build_quantization_config(scheme, scale_mode, exclude, layout=enc.layout, kv_cache=kv_cache)
    config = _read_config(src)
    files = _weight_files(src)
    if qdir.resolve() == edir.resolve():
        raise UserError("quark_dir and emulated_dir must be different directories")
    if shard_cap_bytes is not None and shard_cap_bytes <= 0:
        raise UserError(f"shard_cap_bytes must be positive, got {shard_cap_bytes}")
    tokens = _calibration_tokens(calibration, scheme, kv_cache) if spec.needs_calibration or kv_cache else None

    # Inventory first (headers only), so every user error is raised before any output.
    refs_by_file, refs = tensor_inventory(files)
    where = {ref.name: f.name for f, file_refs in refs_by_file.items() for ref in file_refs}
    shapes = {k: r.shape for k, r in refs.items()}
    quantized = set(select_quantized_tensors(shapes, exclude, group=enc.group, format_name=enc.format.upper()))
    if not quantized:
        raise UserError(
            f"no tensor of {src} matches the quantized projections {list(QUANTIZED_PROJECTIONS)} "
            f"after exclude={exclude}"
        )
    for key in sorted(quantized):
        if refs[key].dtype not in _FLOAT_DTYPES:
            raise UserError(f"tensor {key!r} has dtype {refs[key].torch_dtype}, expected float")
    kv_modules = sorted(
        n[: -len(".weight")] for n in refs if n.endswith((".k_proj.weight", ".v_proj.weight")) and len(shapes[n]) == 2
    )
    input_record = _tree_record(src)

    # Static scales: weight amax (shared over fused shards) and calibrated activation amax.
    w_amax = weight_amax(refs, quantized) if enc.tensor_amax else {}
    calibrated = None
    if tokens is not None:
        from mlperf_repro.quant.evaluate import calibration_amax

        calibrated = calibration_amax(src, tokens, quantized)
        # vLLM keeps one input scale per fused layer (the max over its shards), so share it.
        shared: dict[str, float] = {}
        for module, amax in calibrated["inputs"].items():
            shared[_fused_group(module)] = max(shared.get(_fused_group(module), 0.0), amax)
        calibrated["inputs"] = {m: shared[_fused_group(m)] for m in calibrated["inputs"]}
    act_amax = (calibrated or {}).get("inputs", {})

    _prepare_out_dir(qdir, src)
    _prepare_out_dir(edir, src)

    kv_tensors: dict[str, torch.Tensor] = {}
    kv_file: dict[str, str] = {}  # each scale goes into the shard of its projection's weight
    if kv_cache:
        from mlperf_repro.quant.fp8 import scale_from_amax

        k_name, v_name = KV_SCALE_NAMES[enc.layout]
        shape = (1,) if enc.layout == "compressed-tensors" else ()
        for module in kv_modules:
            attn, _, proj = module.rpartition(".")
            name = f"{attn}.{k_name if proj == 'k_proj' else v_name}"
            kv_tensors[name] = scale_from_amax(calibrated["kv"].get(module, 0.0)).reshape(shape)
            kv_file[name] = where[module + ".weight"]

    written = write_quantized_files(
        files,
        refs_by_file,
        quantized,
        enc,
        qdir,
        edir,
        w_amax=w_amax,
        act_amax=act_amax,
        kv_tensors=kv_tensors,
        kv_file=kv_file,
        shard_cap_bytes=shard_cap_bytes,
        write_index=(src / _INDEX_NAME).is_file() or len(files) > 1,
    )
    src_quantized_bytes, q_quantized_bytes = written["source"], written["quark"]

    _write_json(qdir / "config.json", {**config, "quantization_config": quant_config})
    for name, body in extra_files(quant_config).items():
        _write_json(qdir / name, body)
    shutil.copyfile(src / "config.json", edir / "config.json")
    copied = _copy_side_files(src, (qdir, edir))

    from mlperf_repro.quant.evaluate import choose_evaluation, layerwise_error

    act_modules = sorted(n[: -len(".weight")] for n in quantized) if spec.activations else []
    act_words = _activation_words(enc) if spec.activations else None
    act_eval = f"{enc.format} QDQ ({act_words})" if act_words else None

    def act_qdq(module: str, x: torch.Tensor) -> torch.Tensor:
        return enc.act_qdq(x, act_amax.get(module))

    choice = choose_evaluation(refs.values(), mem_mb, evaluate=evaluate)
    metrics: dict[str, Any] | None = None
    layerwise: dict[str, Any] | None = None
    eval_kwargs = {"seed": eval_seed, "n_sequences": eval_sequences, "seq_len": eval_seq_len}
    if choice["method"] == "logits":
        metrics = logit_error(
            src, edir, act_quant_modules=act_modules, act_qdq=act_qdq, activation_emulation=act_eval, **eval_kwargs
        )
    if choice["method"] == "layerwise" or (choice["method"] == "logits" and choice["per_layer_too"]):
        layerwise = layerwise_error(
            src,
            edir,
            quantized=sorted(quantized),
            act_qdq=act_qdq if spec.activations else None,
            activation_emulation=act_eval,
            **eval_kwargs,
        )

    is_mx = enc.format.startswith("mx")
    manifest = {
        "manifest_version": 1,
        "codec_version": enc.codec_version,
        "scheme": scheme,
        "scheme_description": spec.description,
        "weight_format": _WEIGHT_WORDS[enc.format],
        "layout": enc.layout,
        "activation_format": act_words,
        "scale_mode": scale_mode if is_mx else None,
        "activation_scale_mode": _ACTIVATION_SCALE_MODE if is_mx and spec.activations else None,
        "group_size": enc.group if enc.group > 1 else None,
        "exclude": exclude,
        "quantized_projections": list(QUANTIZED_PROJECTIONS),
        "quantized_tensors": {"count": len(quantized), "names": sorted(quantized)},
        "quantization_config": quant_config,
        "kv_cache": (
            {"dtype": kv_cache, "scales": len(kv_tensors), "measured": "k_proj / v_proj outputs, before RoPE"}
            if kv_cache
            else None
        ),
        "calibration": _calibration_record(calibration, calibrated) if calibrated is not None else None,
        "copied_files": copied,
        "input": input_record,
        "outputs": {"quark_dir": _tree_record(qdir), "emulated_dir": _tree_record(edir)},
        "quantized_weight_bytes": {"source": src_quantized_bytes, "quark": q_quantized_bytes},
        # The bf16 copy that vLLM-CPU serves carries the quantized weights only: activations
        # (W+A schemes) and the KV cache stay in high precision (the eval does emulate activations).
        "cpu_serving_emulation": "weights-only",
        "cpu_serving_matches_scheme": not spec.activations and not kv_cache,
        "emulated_copy": (
            "bfloat16, equal to the checkpoint's decoded values"
            if enc.exact_in_bf16
            else "bfloat16, each decoded value rounded once (the float32 tensor scale)"
        ),
        "evaluation": choice,
        "logit_error": metrics,
        "layerwise_error": layerwise,
        "software": _software_versions(),
        "device": device_record("cpu"),  # the project's codec runs on the CPU
    }
    if manifest_path is not None:
        mpath = Path(manifest_path)
        mpath.parent.mkdir(parents=True, exist_ok=True)
        _write_json(mpath, manifest)
    return manifest


_WEIGHT_WORDS = {
    "mxfp4": "mxfp4 (E2M1 elements, E8M0 scale per 32 along in-features)",
    "mxfp6_e2m3": "mxfp6_e2m3 (E2M3 elements packed 4 in 3 bytes, E8M0 scale per 32 along in-features)",
    "mxfp6_e3m2": "mxfp6_e3m2 (E3M2 elements packed 4 in 3 bytes, E8M0 scale per 32 along in-features)",
    "fp8": "fp8_e4m3 (per-tensor float32 scale, shared by fused shards)",
    "nvfp4": "nvfp4 (E2M1 elements, E4M3 scale per 16 along in-features, float32 tensor scale)",
}


def _activation_words(enc: Encoding) -> str:
    if enc.format.startswith("mx"):
        return f"{enc.format} dynamic per-token 32-blocks"
    if enc.format == "fp8":
        if enc.scheme.activations == "dynamic":
            return "fp8_e4m3 dynamic per-tensor scale (each input's amax at run time)"
        return "fp8_e4m3 static per-tensor scale from calibration"
    return "nvfp4: static tensor scale from calibration, dynamic E4M3 scale per 16"


def _calibration_record(calibration: dict[str, Any] | None, calibrated: dict[str, Any]) -> dict[str, Any]:
    record = {k: v for k, v in (calibration or {}).items() if k != "input_ids"}
    return {
        **record,
        "activation_amax": {m: _sig(a) for m, a in calibrated["inputs"].items()},
        "kv_amax": {m: _sig(a) for m, a in calibrated["kv"].items()},
    }


def _software_versions() -> dict[str, str]:
    import safetensors
    import transformers

    import mlperf_repro

    return {
        "mlperf_repro": mlperf_repro.__version__,
        "safetensors": safetensors.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


# --------------------------------------------------------------------------- reader


def load_quark_checkpoint_dequantized(
    quark_dir: str | Path, dtype: torch.dtype = torch.float32
) -> dict[str, torch.Tensor]:
    """Read a Quark MXFP4 checkpoint back: quantized weights decoded to ``dtype``.

    Every ``<m>.weight`` with a uint8 ``<m>.weight_scale`` companion is decoded with the
    project codec (and the ``weight_scale`` entry dropped); all other tensors are returned
    exactly as stored. Checks ``config.json``'s ``quantization_config`` is Quark OCP MXFP4
    and that shapes agree (``[out, in/2]`` with ``[out, in/32]``).
    """
    qdir = Path(quark_dir)
    try:
        config = json.loads((qdir / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{qdir}: cannot read config.json: {exc}") from None
    qc = config.get("quantization_config") or {}
    weight_spec = (qc.get("global_quant_config") or {}).get("weight") or {}
    if qc.get("quant_method") != "quark" or not (
        weight_spec.get("dtype") == "fp4"
        and weight_spec.get("qscheme") == "per_group"
        and weight_spec.get("group_size") == GROUP_SIZE
        and weight_spec.get("scale_format") == "e8m0"
    ):
        raise UserError(f"{qdir}/config.json is not a Quark MXFP4 (fp4, per_group 32, e8m0) config")
    if qc.get("layer_quant_config"):
        raise UserError(f"{qdir}: per-layer quant configs are not supported by this reader")

    raw: dict[str, torch.Tensor] = {}
    for f in _weight_files(qdir):
        with safe_open(f, framework="pt") as handle:
            for key in handle.keys():
                raw[key] = handle.get_tensor(key)

    out: dict[str, torch.Tensor] = {}
    for key in sorted(raw):
        if key.endswith(".weight_scale"):
            if key[: -len("_scale")] not in raw:
                raise UserError(f"{qdir}: {key} has no matching weight tensor")
            continue
        tensor = raw[key]
        scales = raw.get(key + "_scale")
        if scales is None:
            out[key] = tensor
            continue
        if tensor.dtype != torch.uint8 or scales.dtype != torch.uint8:
            raise UserError(f"{qdir}: {key} ({tensor.dtype}) / {key}_scale ({scales.dtype}) must both be uint8")
        if tensor.dim() != 2 or scales.shape != (tensor.shape[0], tensor.shape[1] * 2 // GROUP_SIZE):
            raise UserError(
                f"{qdir}: {key} shape {tuple(tensor.shape)} and scale shape "
                f"{tuple(scales.shape)} do not form an MXFP4 [out, in/2] + [out, in/32] pair"
            )
        out[key] = dequantize_mxfp4(tensor, scales, dtype=dtype)
    return out


# --------------------------------------------------------------------------- evaluation


def _logit_metrics(ref: torch.Tensor, q: torch.Tensor) -> dict[str, float]:
    ref = ref.to(torch.float64).reshape(-1, ref.shape[-1])
    q = q.to(torch.float64).reshape(-1, q.shape[-1])
    diff = (q - ref).abs()
    log_p = torch.log_softmax(ref, dim=-1)
    log_q = torch.log_softmax(q, dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    cos = torch.dot(ref.flatten(), q.flatten()) / (ref.norm() * q.norm())
    return {
        "rel_mean": _sig((diff.mean() / ref.abs().mean()).item()),
        "rel_max": _sig((diff.max() / ref.abs().max()).item()),
        "cosine": _sig(cos.item()),
        "top1_agreement": _sig((ref.argmax(-1) == q.argmax(-1)).double().mean().item()),
        "kl_ref_q_mean": _sig(kl.mean().item()),
    }


def _load_causal_lm(path: Path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", local_files_only=True
    )
    return model.eval()


def logit_error(
    ref_dir: str | Path,
    quant_dir: str | Path,
    *,
    act_quant_modules: Sequence[str] = (),
    act_qdq: Any = None,
    activation_emulation: str | None = None,
    seed: int = 0,
    n_sequences: int = 8,
    seq_len: int = 48,
) -> dict[str, Any]:
    """Logit error of the model in ``quant_dir`` against ``ref_dir`` on fixed random tokens.

    Both are plain HF checkpoints run with transformers in float32 on CPU. Token ids are
    uniform over the vocabulary from ``torch.Generator().manual_seed(seed)``. Modules named
    in ``act_quant_modules`` get a forward pre-hook that QDQs their input with
    ``act_qdq(module, x)`` (default: MXFP4, 32-blocks along the last dim, dynamic, "even"
    scales, as vLLM runs W4A4); ``activation_emulation`` names it in the result.
    Metrics: ``rel_mean = mean|d|/mean|ref|``, ``rel_max = max|d|/max|ref|``, cosine of the
    flattened logits, top-1 agreement over positions, mean KL(ref || quant) per position.
    """
    ref_model = _load_causal_lm(Path(ref_dir))
    q_model = _load_causal_lm(Path(quant_dir))
    vocab = int(ref_model.config.vocab_size)
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, vocab, (n_sequences, seq_len), generator=gen)

    if act_qdq is None:
        act_qdq, activation_emulation = _mxfp4_act_qdq, activation_emulation or "mxfp4 QDQ"

    def hook(name: str) -> Any:
        return lambda _module, args: (act_qdq(name, args[0]), *args[1:])

    handles = [q_model.get_submodule(name).register_forward_pre_hook(hook(name)) for name in act_quant_modules]
    try:
        with torch.no_grad():
            ref_logits = ref_model(input_ids=input_ids).logits
            q_logits = q_model(input_ids=input_ids).logits
    finally:
        for h in handles:
            h.remove()
    return {
        **_logit_metrics(ref_logits, q_logits),
        "inputs": {
            "seed": seed,
            "n_sequences": n_sequences,
            "seq_len": seq_len,
            "token_ids": "uniform over vocab from torch.Generator().manual_seed(seed)",
        },
        "compute": "transformers AutoModelForCausalLM, float32, CPU, eager attention",
        "activation_emulation": (
            f"{activation_emulation} pre-hooks on {len(act_quant_modules)} Linear inputs" if act_quant_modules else None
        ),
    }


def _mxfp4_act_qdq(_name: str, x: torch.Tensor) -> torch.Tensor:
    return qdq_mxfp4(x, _ACTIVATION_SCALE_MODE)
