"""OCP Microscaling (MX v1.0) codecs for any element type: MXFP4 (E2M1), MXFP6 (E2M3, E3M2).

Pure torch, written from the OCP MX v1.0 specification and the facts in
``shared/spec/fp4-formats.md``; no quantization library. :mod:`~mlperf_repro.quant.mxfp4`
stays the MXFP4 codec the workflow uses; this module generalises it, and for E2M1 its bytes
are identical to :func:`~mlperf_repro.quant.mxfp4.quantize_mxfp4`'s (tested).

**Call shape** (the same as mxfp4's, so a codec plugs into the format registry)::

    stored, scales = codec.quantize(w, scale_mode)          # w: float [..., K], K % 32 == 0
    w_hat = codec.dequantize(stored, scales, dtype)         # -> dtype [..., K]

with ``codec`` one of :data:`CODECS` (``MXFP4``, ``MXFP6_E2M3``, ``MXFP6_E3M2``), or the
module functions :func:`quantize_mx` / :func:`dequantize_mx` with ``element=``.

Element types (each: no Inf, no NaN, subnormals, round to nearest even, saturation to +-max):

======  ====  ====  ===========================  ==========  =============  ============
name    ebits mbits values                       max normal  min subnormal  emax_elem
======  ====  ====  ===========================  ==========  =============  ============
e2m1    2     1     0, 0.5 .. 6                  6           0.5            2
e2m3    2     3     0, 0.125 .. 7.5              7.5         0.125          2
e3m2    3     2     0, 0.0625 .. 28              28          0.0625         4
======  ====  ====  ===========================  ==========  =============  ============

Scale: one E8M0 byte per 32 consecutive elements along the last dim, value
``2**(byte - 127)`` (0xFF = NaN). Two rules for choosing it (``scale_mode``):

* ``"floor"``: the spec's reference conversion, ``X = 2**(floor(log2 amax) - emax_elem)``;
  block maxima above ``max_normal * X`` saturate.
* ``"even"`` (default; Quark's ``scale_calculation_mode: even``, compressed-tensors, vLLM):
  round ``amax`` to the element's mantissa width first (half-even), then
  ``floor(log2) - emax_elem``. The exponent goes one up exactly when the significand of
  ``amax`` is ``>= 2 - 2**-(mbits + 1)`` (the tie between the all-ones mantissa, odd, and 2.0,
  even, goes up): 1.75 for E2M1, 1.9375 for E2M3, 1.875 for E3M2. This is Quark's
  ``(bits + (1 << (23 - mbits - 1))) & exponent_mask`` trick on float32.

All-zero blocks get byte 0 (2**-127) in both modes, as the eps-guarded tools write them.
Exponents are clamped to -127..127.

Storage (``stored``):

* FP4: two codes per byte, element ``2i`` in the low nibble, ``2i+1`` in the high nibble
  (:func:`~mlperf_repro.quant.mxfp4.pack_fp4`): ``uint8[..., K/2]``.
* FP6: **packed, four codes in three bytes** (:func:`pack_fp6`): the layout of AMD Quark's
  ``Pack_fp6`` (amd-quark >= 0.10, ``quark/torch/utils/pack.py``), which vLLM's
  ``dequant_mxfp6`` unpacks (``create_pack_method(None, dtype="fp6_e2m3"|"fp6_e3m2")``) and
  which Quark documents as the layout the gfx950 ``mfma_scale_f32_16x16x128_f8f6f4``
  instruction reads: codes ``v0..v3`` form the little-endian 24-bit word
  ``v0 | v1 << 6 | v2 << 12 | v3 << 18``, i.e. element ``i`` sits at bit ``6*i`` of an
  LSB-first bit stream. ``uint8[..., 3K/4]``. (amd-quark 0.9 used a different, plane-split
  layout; checkpoints from it are not readable with :func:`unpack_fp6`.) Each 6-bit code is
  ``sign(bit 5) | exponent | mantissa``; -0 is written as +0 (code 0), as Quark does.

All arithmetic is exact: scales are powers of two, so ``V / X`` and ``value * X`` do not round
(values are at most 4 significant bits); the only rounding is the element rounding itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .minifloat import MiniFloat
from .mxfp4 import _E8M0_TABLE, pack_fp4, unpack_fp4

__all__ = [
    "CODECS",
    "CODEC_VERSION",
    "E2M1",
    "E2M3",
    "E3M2",
    "ELEMENTS",
    "GROUP_SIZE",
    "MXFP4",
    "MXFP6_E2M3",
    "MXFP6_E3M2",
    "SCALE_MODES",
    "MXCodec",
    "dequantize_mx",
    "element_format",
    "pack_fp6",
    "quantize_mx",
    "scale_exponents",
    "unpack_fp6",
]

#: Bumped whenever the bytes this codec produces for a given input could change.
CODEC_VERSION = "mx-codec/1"

#: MX block size along the last dimension (OCP MX v1.0: 32 for every element type).
GROUP_SIZE = 32

#: ``"even"`` (the tools' default) and ``"floor"`` (the spec's reference rule), see above.
SCALE_MODES: tuple[str, ...] = ("even", "floor")

E2M1 = MiniFloat("e2m1", ebits=2, mbits=1, bias=1)
E2M3 = MiniFloat("e2m3", ebits=2, mbits=3, bias=1)
E3M2 = MiniFloat("e3m2", ebits=3, mbits=2, bias=3)

#: Element types by name; Quark's dtype names are accepted as aliases.
ELEMENTS: dict[str, MiniFloat] = {"e2m1": E2M1, "e2m3": E2M3, "e3m2": E3M2}
_ALIASES = {"fp4": "e2m1", "fp4_e2m1": "e2m1", "fp6_e2m3": "e2m3", "fp6_e3m2": "e3m2"}

_E8M0_MIN_EXP = -127
_E8M0_MAX_EXP = 127
_E8M0_BIAS = 127
_CHUNK_ELEMENTS = 1 << 22


def element_format(element: str | MiniFloat) -> MiniFloat:
    """The :class:`MiniFloat` for ``element`` (``"e2m1"``, ``"e2m3"``, ``"e3m2"`` or a Quark alias)."""
    if isinstance(element, MiniFloat):
        if element not in ELEMENTS.values():
            raise ValueError(f"{element.name} is not an MX element type")
        return element
    name = _ALIASES.get(element, element)
    if name not in ELEMENTS:
        raise ValueError(f"unknown MX element type {element!r}; expected one of {sorted(ELEMENTS)}")
    return ELEMENTS[name]


def _check_scale_mode(scale_mode: str) -> None:
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"unknown scale_mode {scale_mode!r}; expected one of {SCALE_MODES}")


# --------------------------------------------------------------------------- scales


def scale_exponents(amax: torch.Tensor, element: str | MiniFloat = "e2m1", scale_mode: str = "even") -> torch.Tensor:
    """Unbiased shared exponent (int32, -127..127) for blocks with largest magnitude ``amax``.

    ``amax`` must be finite and >= 0. See the module docstring for the two rules. For E2M1
    this equals :func:`mlperf_repro.quant.mxfp4.scale_exponents`.
    """
    _check_scale_mode(scale_mode)
    fmt = element_format(element)
    amax = amax.to(torch.float32)
    # frexp is exact: amax = m * 2**e, m in [0.5, 1), so floor(log2 amax) = e - 1.
    mant, exp = torch.frexp(amax)
    floor_log2 = exp.to(torch.int32) - 1
    if scale_mode == "even":
        # significand 2m >= 2 - 2**-(mbits+1)  <=>  m >= 1 - 2**-(mbits+2)
        floor_log2 = floor_log2 + (mant >= 1.0 - 2.0 ** -(fmt.mbits + 2)).to(torch.int32)
    unbiased = floor_log2 - fmt.emax
    unbiased = torch.where(amax == 0, torch.full_like(unbiased, _E8M0_MIN_EXP), unbiased)
    return unbiased.clamp(_E8M0_MIN_EXP, _E8M0_MAX_EXP)


# --------------------------------------------------------------------------- FP6 packing


def pack_fp6(codes: torch.Tensor) -> torch.Tensor:
    """Pack 6-bit codes ``uint8[..., K]`` (K % 4 == 0) into ``uint8[..., 3K/4]`` (Quark >= 0.10 layout)."""
    if codes.dtype != torch.uint8:
        raise ValueError(f"pack_fp6 expects uint8 codes, got {codes.dtype}")
    if codes.dim() == 0 or codes.shape[-1] % 4 != 0:
        raise ValueError(f"pack_fp6: last dimension must be a multiple of 4, got shape {tuple(codes.shape)}")
    if codes.numel() and int(codes.max()) > 63:
        raise ValueError("pack_fp6: codes must be in 0..63")
    c = codes.reshape(*codes.shape[:-1], -1, 4).to(torch.int32)
    word = c[..., 0] | (c[..., 1] << 6) | (c[..., 2] << 12) | (c[..., 3] << 18)
    out = torch.stack([word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF], dim=-1).to(torch.uint8)
    return out.reshape(*codes.shape[:-1], codes.shape[-1] // 4 * 3)


def unpack_fp6(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_fp6`: ``uint8[..., 3K/4]`` -> codes ``uint8[..., K]``."""
    if packed.dtype != torch.uint8:
        raise ValueError(f"unpack_fp6 expects uint8, got {packed.dtype}")
    if packed.dim() == 0 or packed.shape[-1] % 3 != 0:
        raise ValueError(f"unpack_fp6: last dimension must be a multiple of 3, got shape {tuple(packed.shape)}")
    b = packed.reshape(*packed.shape[:-1], -1, 3).to(torch.int32)
    word = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)
    out = torch.stack([(word >> s) & 0x3F for s in (0, 6, 12, 18)], dim=-1).to(torch.uint8)
    return out.reshape(*packed.shape[:-1], packed.shape[-1] // 3 * 4)


def _pack(codes: torch.Tensor, fmt: MiniFloat) -> torch.Tensor:
    return pack_fp4(codes) if fmt.bits == 4 else pack_fp6(codes)


def _unpack(stored: torch.Tensor, fmt: MiniFloat) -> torch.Tensor:
    return unpack_fp4(stored) if fmt.bits == 4 else unpack_fp6(stored)


def _stored_width(k: int, fmt: MiniFloat) -> int:
    return k * fmt.bits // 8


# --------------------------------------------------------------------------- codec


def _row_chunks(n_rows: int, k: int) -> list[tuple[int, int]]:
    step = max(1, _CHUNK_ELEMENTS // max(k, 1))
    return [(s, min(s + step, n_rows)) for s in range(0, n_rows, step)]


def quantize_mx(
    w: torch.Tensor, scale_mode: str = "even", *, element: str | MiniFloat = "e2m1"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``w[..., K]`` (K % 32 == 0) to MX with ``element`` codes.

    Returns ``(stored uint8[..., K*bits/8], scales uint8[..., K/32])`` (raw E8M0 bytes); FP4
    and FP6 packing as in the module docstring. NaN or Inf in ``w`` -> ``ValueError``.
    """
    _check_scale_mode(scale_mode)
    fmt = element_format(element)
    if not w.is_floating_point():
        raise ValueError(f"quantize_mx expects a floating-point tensor, got {w.dtype}")
    if w.dim() == 0 or w.shape[-1] % GROUP_SIZE != 0:
        raise ValueError(f"quantize_mx: last dimension must be a multiple of {GROUP_SIZE}, got {tuple(w.shape)}")
    k = w.shape[-1]
    lead = tuple(w.shape[:-1])
    flat = w.detach().reshape(-1, k)
    n = flat.shape[0]
    stored = torch.empty((n, _stored_width(k, fmt)), dtype=torch.uint8)
    scales = torch.empty((n, k // GROUP_SIZE), dtype=torch.uint8)
    for start, stop in _row_chunks(n, k):
        x = flat[start:stop].to("cpu", torch.float32).reshape(stop - start, k // GROUP_SIZE, GROUP_SIZE)
        amax = torch.maximum(x.amax(dim=-1), x.amin(dim=-1).neg())
        if not torch.isfinite(amax).all():
            raise ValueError(f"quantize_mx: input contains NaN or Inf (tensor shape {tuple(w.shape)})")
        sc = (scale_exponents(amax, fmt, scale_mode) + _E8M0_BIAS).to(torch.uint8)
        scaled = x / _E8M0_TABLE[sc.to(torch.int64)].unsqueeze(-1)
        codes = fmt.encode(scaled, negative_zero=False).reshape(stop - start, k)
        stored[start:stop] = _pack(codes, fmt)
        scales[start:stop] = sc
    return stored.reshape(*lead, stored.shape[-1]), scales.reshape(*lead, k // GROUP_SIZE)


def dequantize_mx(
    stored: torch.Tensor,
    scales: torch.Tensor,
    dtype: torch.dtype = torch.float32,
    *,
    element: str | MiniFloat = "e2m1",
) -> torch.Tensor:
    """Decode ``stored`` + E8M0 ``scales`` (as :func:`quantize_mx` returns them) to ``dtype``.

    Computed in float32 (exact below 2**128) and then cast; a 0xFF scale decodes its block
    to NaN; scales near the top of E8M0 overflow float32 to +-inf.
    """
    fmt = element_format(element)
    if stored.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ValueError(f"dequantize_mx expects uint8 tensors, got {stored.dtype} and {scales.dtype}")
    if stored.dim() == 0 or stored.shape[:-1] != scales.shape[:-1]:
        raise ValueError(f"dequantize_mx: leading dims differ: {tuple(stored.shape)} vs {tuple(scales.shape)}")
    k = scales.shape[-1] * GROUP_SIZE
    if stored.shape[-1] != _stored_width(k, fmt):
        raise ValueError(
            f"dequantize_mx: scales {tuple(scales.shape)} cover {k} elements per row, which {fmt.name} "
            f"stores in {_stored_width(k, fmt)} bytes, but stored has {stored.shape[-1]}"
        )
    lead = tuple(stored.shape[:-1])
    flat_p = stored.reshape(-1, stored.shape[-1])
    flat_s = scales.reshape(-1, k // GROUP_SIZE)
    n = flat_p.shape[0]
    out = torch.empty((n, k), dtype=dtype)
    table = fmt.decode_table()
    for start, stop in _row_chunks(n, k):
        values = table[_unpack(flat_p[start:stop], fmt).to(torch.int64)]
        values = values.reshape(stop - start, k // GROUP_SIZE, GROUP_SIZE)
        values = values * _E8M0_TABLE[flat_s[start:stop].to(torch.int64)].unsqueeze(-1)
        out[start:stop] = values.reshape(stop - start, k).to(dtype)
    return out.reshape(*lead, k)


@dataclass(frozen=True)
class MXCodec:
    """One MX format bound to its element type, with the registry call shape."""

    name: str
    element: MiniFloat

    def quantize(self, w: torch.Tensor, scale_mode: str = "even") -> tuple[torch.Tensor, torch.Tensor]:
        return quantize_mx(w, scale_mode, element=self.element)

    def dequantize(
        self, stored: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        return dequantize_mx(stored, scales, dtype, element=self.element)

    def qdq(self, x: torch.Tensor, scale_mode: str = "even") -> torch.Tensor:
        """Quantize-dequantize (dynamic activation emulation); returns ``x``'s dtype."""
        return self.dequantize(*self.quantize(x, scale_mode)).to(x.dtype)


MXFP4 = MXCodec("mxfp4", E2M1)
MXFP6_E2M3 = MXCodec("mxfp6_e2m3", E2M3)
MXFP6_E3M2 = MXCodec("mxfp6_e3m2", E3M2)

#: The MX codecs by name.
CODECS: dict[str, MXCodec] = {c.name: c for c in (MXFP4, MXFP6_E2M3, MXFP6_E3M2)}
