"""NVFP4 codec: E2M1 elements, one FP8 E4M3 ("UE4M3") scale per 16 elements, one FP32 tensor scale.

Pure torch, written from ``shared/spec/fp4-formats.md`` §1.3; no quantization library.

Decoding: ``v = E2M1(q) * s_block * s_tensor`` with, when quantizing,
``s_tensor = amax(tensor) / (448 * 6)`` and ``s_block = E4M3(amax(block) / (6 * s_tensor))``
(ModelOpt's order of operations; a block of zeros gets ``s_block = 1.0`` as in ModelOpt).
Elements are ``E2M1(x / float32(s_block * s_tensor))``, rounded to nearest even and
saturated to +-6; -0 is written as +0. A non-zero block whose scale underflows E4M3 (block
amax below about ``2.2e-6 * amax``) gets ``s_block = 0`` and all-zero codes (ModelOpt would
divide by zero there). Packing: as MXFP4, element ``2i`` in the low nibble.

**Two storage conventions for the per-tensor scale** (``scale_mode``):

* ``"weight_scale_2"`` (ModelOpt, Quark): the checkpoint holds ``s_tensor``; decode multiplies.
* ``"weight_global_scale"`` (compressed-tensors / llm-compressor): the checkpoint holds
  ``g = 1 / s_tensor`` (``2688 / amax``); decoding divides.

Here both decode through the same float32 number, ``s_eff = s`` or ``s_eff = float32(1 / g)``
(what vLLM's compressed-tensors NVFP4 schemes do at load: ``weight_scale_2 = 1 /
weight_global_scale`` in float32), and
``v = float32(E2M1(q) * s_block) * s_eff`` (the first product is exact, so each value is
rounded once). Decoding both conventions gives identical values when ``s == float32(1 / g)``.

Exact conversion between the conventions: ``g -> s = float32(1 / g)`` is always exact (by the
definition above). ``s -> g`` needs a float32 ``g`` with ``float32(1 / g) == s``; about 17 %
of float32 values are not the float32 reciprocal of any float32 (measured over one binade),
so for those no exact ``g`` exists. The quantizer therefore, by default
(``exact_reciprocal=True``), moves ``s_tensor`` to ``float32(1 / float32(1 / (amax / 2688)))``,
which is at most 1 ulp (relative 1.2e-7) from ``amax / 2688`` and always converts exactly;
``exact_reciprocal=False`` keeps ModelOpt's ``amax / 2688`` to the bit. With the default,
``quantize(w, "weight_scale_2")`` and ``quantize(w, "weight_global_scale")`` write the same
codes and block scales, and :func:`convert_global_scale` maps each global scale to the other
exactly. compressed-tensors computes its block scales as ``amax_b / 6 * g`` (and
llm-compressor rounds ``g`` to bfloat16 first), so its bytes can differ from these in a few
percent of blocks; any such checkpoint still decodes exactly with this module.

**Call shape** (as mxfp4's, with the global scale as the third part)::

    packed, block_scales, global_scale = quantize_nvfp4(w, scale_mode)
    w_hat = dequantize_nvfp4(packed, block_scales, dtype, global_scale, scale_mode=scale_mode)

``packed uint8[..., K/2]``, ``block_scales float8_e4m3fn[..., K/16]`` (the checkpoint's
``weight_scale``), ``global_scale`` float32 ``[]`` named by ``scale_mode``. For activations
(W4A4) the per-tensor scale is static: pass the calibration amax as ``amax=``.
"""

from __future__ import annotations

import torch

from .fp8 import E4M3, E4M3_MAX
from .mx import E2M1
from .mxfp4 import pack_fp4, unpack_fp4

__all__ = [
    "BLOCK_SIZE",
    "CODEC_VERSION",
    "FP4_MAX",
    "SCALE_MODES",
    "convert_checkpoint_tensors",
    "convert_global_scale",
    "dequantize_nvfp4",
    "effective_tensor_scale",
    "quantize_nvfp4",
    "tensor_scale",
]

CODEC_VERSION = "nvfp4-codec/1"
BLOCK_SIZE = 16
FP4_MAX = 6.0
#: ``"weight_scale_2"`` (multiply; ModelOpt, Quark) or ``"weight_global_scale"`` (reciprocal; compressed-tensors).
SCALE_MODES: tuple[str, ...] = ("weight_scale_2", "weight_global_scale")
# Rows are processed in chunks of about this many elements (bounded temporary memory).
_CHUNK_ELEMENTS = 1 << 22


def _check_mode(scale_mode: str) -> None:
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"unknown scale_mode {scale_mode!r}; expected one of {SCALE_MODES}")


def _recip(x: torch.Tensor) -> torch.Tensor:
    """Correctly rounded float32 ``1 / x`` (IEEE division)."""
    return torch.div(torch.ones_like(x), x)


def tensor_scale(amax: float | torch.Tensor, *, exact_reciprocal: bool = True) -> torch.Tensor:
    """float32 ``s_tensor`` for a tensor (or calibration) amax: ``amax / 2688``, see the module docstring.

    ``amax == 0`` gives 1.0 (an all-zero tensor; nothing divides by zero).
    """
    a = torch.as_tensor(amax, dtype=torch.float32)
    if a.numel() != 1 or not torch.isfinite(a).all() or float(a) < 0:
        raise ValueError(f"tensor_scale: amax must be one finite value >= 0, got {a}")
    a = a.reshape(())
    if float(a) == 0:
        return torch.ones((), dtype=torch.float32)
    s = a / (E4M3_MAX * FP4_MAX)
    if exact_reciprocal:
        s = _recip(_recip(s))
    if not (torch.isfinite(s) and float(s) > 0):
        raise ValueError(f"tensor_scale: amax {float(a)} gives an unusable scale {float(s)}")
    return s


def effective_tensor_scale(global_scale: torch.Tensor, scale_mode: str) -> torch.Tensor:
    """The float32 ``s_eff`` that decoding multiplies by, from a global scale in ``scale_mode``."""
    _check_mode(scale_mode)
    g = torch.as_tensor(global_scale, dtype=torch.float32)
    if g.numel() != 1 or not torch.isfinite(g).all() or float(g.reshape(())) <= 0:
        raise ValueError(f"{scale_mode} must be one finite value > 0, got {g}")
    return g.reshape(()) if scale_mode == "weight_scale_2" else _recip(g.reshape(()))


def convert_global_scale(
    global_scale: torch.Tensor, from_mode: str, to_mode: str, *, exact: bool = True
) -> torch.Tensor:
    """Convert a per-tensor scale between the two conventions (same shape as given).

    ``weight_global_scale -> weight_scale_2`` is exact. ``weight_scale_2 -> weight_global_scale``
    returns ``float32(1 / s)``; if that does not decode identically (``float32(1 / g) != s``,
    i.e. ``s`` is not a float32 reciprocal) it raises ``ValueError`` unless ``exact=False``,
    which accepts a 1-ulp change of the effective scale.
    """
    _check_mode(from_mode)
    _check_mode(to_mode)
    g = torch.as_tensor(global_scale, dtype=torch.float32)
    s_eff = effective_tensor_scale(g, from_mode)
    if to_mode == "weight_scale_2":
        return s_eff.reshape(g.shape).clone()
    out = _recip(s_eff)
    if exact and not torch.equal(_recip(out), s_eff):
        raise ValueError(
            f"weight_scale_2 {float(s_eff)!r} is not the float32 reciprocal of any float32, so no "
            "weight_global_scale decodes identically; pass exact=False to accept a 1-ulp change"
        )
    return out.reshape(g.shape)


def convert_checkpoint_tensors(
    tensors: dict[str, torch.Tensor], from_mode: str, to_mode: str, *, exact: bool = True
) -> dict[str, torch.Tensor]:
    """Rewrite one Linear's NVFP4 tensors from one convention to the other.

    ``tensors`` maps ``weight_scale_2`` (ModelOpt/Quark) or ``weight_global_scale``
    (compressed-tensors) and any other names (``weight``/``weight_packed``, ``weight_scale``,
    ...) to tensors; the global scale is replaced by the other convention's (see
    :func:`convert_global_scale`), everything else is passed through unchanged (packed codes
    and block scales are the same bytes in both). Activation scales are not touched.
    """
    _check_mode(from_mode)
    _check_mode(to_mode)
    if from_mode not in tensors:
        raise ValueError(f"convert_checkpoint_tensors: no {from_mode!r} among {sorted(tensors)}")
    if to_mode != from_mode and to_mode in tensors:
        raise ValueError(f"convert_checkpoint_tensors: both {from_mode!r} and {to_mode!r} present")
    out = {k: v for k, v in tensors.items() if k != from_mode}
    out[to_mode] = convert_global_scale(tensors[from_mode], from_mode, to_mode, exact=exact)
    return out


def quantize_nvfp4(
    w: torch.Tensor,
    scale_mode: str = "weight_scale_2",
    *,
    amax: float | torch.Tensor | None = None,
    exact_reciprocal: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Quantize ``w[..., K]`` (K % 16 == 0) to NVFP4.

    Returns ``(packed uint8[..., K/2], block_scales float8_e4m3fn[..., K/16], global_scale
    float32 [])`` with the global scale in ``scale_mode``'s convention. ``amax``: a static
    per-tensor amax (activations from calibration); default ``max |w|``. Values beyond it
    saturate. NaN or Inf in ``w`` -> ``ValueError``.
    """
    _check_mode(scale_mode)
    if not w.is_floating_point():
        raise ValueError(f"quantize_nvfp4 expects a floating-point tensor, got {w.dtype}")
    if w.dim() == 0 or w.shape[-1] % BLOCK_SIZE != 0:
        raise ValueError(f"quantize_nvfp4: last dimension must be a multiple of {BLOCK_SIZE}, got {tuple(w.shape)}")
    k = w.shape[-1]
    lead = tuple(w.shape[:-1])
    flat = w.detach().reshape(-1, k)
    if amax is None:
        amax = _finite_amax(flat, tuple(w.shape))
    s = tensor_scale(amax, exact_reciprocal=exact_reciprocal)
    global_scale = s if scale_mode == "weight_scale_2" else _recip(s)
    s_eff = effective_tensor_scale(global_scale, scale_mode)
    n = flat.shape[0]
    packed = torch.empty((n, k // 2), dtype=torch.uint8)
    scale_codes = torch.empty((n, k // BLOCK_SIZE), dtype=torch.uint8)
    for start, stop in _row_chunks(n, k):
        blocks = flat[start:stop].to("cpu", torch.float32).reshape(stop - start, k // BLOCK_SIZE, BLOCK_SIZE)
        if not torch.isfinite(blocks).all():
            raise ValueError(f"quantize_nvfp4: input contains NaN or Inf (shape {tuple(w.shape)})")
        block_amax = blocks.abs().amax(dim=-1)
        raw = block_amax / (FP4_MAX * s_eff)
        raw = torch.where(block_amax == 0, torch.ones_like(raw), raw)
        sc = E4M3.encode(raw, negative_zero=False)  # >= 0: UE4M3, saturates at 448
        denom = (E4M3.decode(sc) * s_eff).unsqueeze(-1)
        scaled = torch.where(denom == 0, torch.zeros_like(blocks), blocks / denom)
        packed[start:stop] = pack_fp4(E2M1.encode(scaled, negative_zero=False).reshape(stop - start, k))
        scale_codes[start:stop] = sc
    return (
        packed.reshape(*lead, k // 2),
        scale_codes.reshape(*lead, k // BLOCK_SIZE).view(torch.float8_e4m3fn),
        global_scale,
    )


def _row_chunks(n_rows: int, k: int) -> list[tuple[int, int]]:
    step = max(1, _CHUNK_ELEMENTS // max(k, 1))
    return [(s, min(s + step, n_rows)) for s in range(0, n_rows, step)]


def _finite_amax(flat: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    amax = torch.zeros((), dtype=torch.float32)
    for start, stop in _row_chunks(flat.shape[0], flat.shape[1]):
        chunk = flat[start:stop].to("cpu", torch.float32)
        if chunk.numel():
            amax = torch.maximum(amax, torch.maximum(chunk.amax(), chunk.amin().neg()))
    if not torch.isfinite(amax):
        raise ValueError(f"quantize_nvfp4: input contains NaN or Inf (shape {tuple(shape)})")
    return amax


def dequantize_nvfp4(
    packed: torch.Tensor,
    block_scales: torch.Tensor,
    dtype: torch.dtype = torch.float32,
    global_scale: torch.Tensor | float | None = None,
    *,
    scale_mode: str = "weight_scale_2",
) -> torch.Tensor:
    """Decode NVFP4 to ``dtype``: ``float32(E2M1 * s_block) * s_eff``, then cast.

    ``block_scales``: float8_e4m3fn (or its uint8 codes) ``[..., K/16]``, non-negative;
    ``global_scale``: the per-tensor scale in ``scale_mode``'s convention (required).
    A NaN block scale decodes its block to NaN.
    """
    _check_mode(scale_mode)
    if global_scale is None:
        raise ValueError(f"dequantize_nvfp4: the per-tensor scale ({scale_mode}) is required")
    if packed.dtype != torch.uint8:
        raise ValueError(f"dequantize_nvfp4 expects uint8 packed codes, got {packed.dtype}")
    if block_scales.dtype == torch.float8_e4m3fn:
        block_scales = block_scales.view(torch.uint8)
    if block_scales.dtype != torch.uint8:
        raise ValueError(f"dequantize_nvfp4: block scales must be float8_e4m3fn, got {block_scales.dtype}")
    if packed.dim() == 0 or packed.shape[:-1] != block_scales.shape[:-1]:
        raise ValueError(f"dequantize_nvfp4: leading dims differ: {tuple(packed.shape)} vs {tuple(block_scales.shape)}")
    k = packed.shape[-1] * 2
    if block_scales.shape[-1] * BLOCK_SIZE != k:
        raise ValueError(
            f"dequantize_nvfp4: packed holds {k} elements per row, block scales cover {block_scales.shape[-1] * 16}"
        )
    if block_scales.numel() and bool((block_scales & 0x80).any()):
        raise ValueError("dequantize_nvfp4: negative block scale (UE4M3 scales have no sign)")
    s_eff = effective_tensor_scale(torch.as_tensor(global_scale), scale_mode)
    lead = tuple(packed.shape[:-1])
    flat_p = packed.reshape(-1, k // 2)
    flat_s = block_scales.reshape(-1, k // BLOCK_SIZE)
    n = flat_p.shape[0]
    out = torch.empty((n, k), dtype=dtype)
    for start, stop in _row_chunks(n, k):
        values = E2M1.decode(unpack_fp4(flat_p[start:stop])).reshape(stop - start, k // BLOCK_SIZE, BLOCK_SIZE)
        values = values * E4M3.decode(flat_s[start:stop]).unsqueeze(-1)  # exact: 2 x 4 significant bits
        out[start:stop] = (values * s_eff).reshape(stop - start, k).to(dtype)
    return out.reshape(*lead, k)
