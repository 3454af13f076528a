"""MXFP4 (OCP Microscaling, FP4 E2M1 elements + E8M0 block scales) codec in plain torch.

Written from the OCP Microscaling Formats (MX) v1.0 specification, not from any
quantization library, so that the project can check and decode FP4 checkpoints from any
tool on any hardware, CPU included.

Format summary (what every function below relies on):

* **E2M1** element, 4 bits ``s ee m``: codes 0-7 are the magnitudes
  ``0, 0.5, 1, 1.5, 2, 3, 4, 6`` and ``code | 8`` is the negative. No Inf/NaN.
  Encoding rounds to nearest, ties to the code whose mantissa bit is 0 ("even"),
  and saturates to +-6.
* **E8M0** scale, 8 bits: value ``2**(e - 127)`` for ``e`` in 0..254, ``0xFF`` is NaN.
* **MXFP4 block**: 32 consecutive elements along the last (K / input) dimension share
  one E8M0 scale ``X``; element ``i`` decodes to ``X * E2M1(P_i)``.
* **Packing**: two codes per byte along the last dimension, element ``2i`` in the LOW
  nibble and ``2i+1`` in the HIGH nibble (what Quark, compressed-tensors and ModelOpt
  write). A ``[out, in]`` weight becomes ``uint8[out, in/2]`` plus ``uint8[out, in/32]``.

All arithmetic is exact: E2M1 values have two significant bits and scales are powers of
two, so ``V / X`` (a division by a power of two) and ``code_value * X`` introduce no
rounding except the one E2M1 rounding step itself (and float32 overflow at the very top
of the E8M0 range, see :func:`dequantize_mxfp4`).
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = [
    "CODEC_VERSION",
    "E2M1_MAGNITUDES",
    "GROUP_SIZE",
    "SCALE_MODES",
    "ScaleMode",
    "dequantize_mxfp4",
    "e2m1_decode",
    "e2m1_encode",
    "e8m0_decode",
    "e8m0_encode",
    "pack_fp4",
    "qdq_mxfp4",
    "quantize_mxfp4",
    "scale_exponents",
    "unpack_fp4",
]

#: Bumped whenever the bytes this codec produces for a given input could change.
CODEC_VERSION = "mxfp4-codec/1"

#: MX block size along the last dimension (OCP MX v1.0 uses 32 for every element type).
GROUP_SIZE = 32

#: Largest E2M1 exponent (6 = 1.5 * 2**2): the OCP rule takes ``floor(log2 amax) - 2``.
_E2M1_EMAX = 2

#: Unbiased E8M0 exponent range that encodes to a number (0xFF is NaN).
_E8M0_MIN_EXP = -127
_E8M0_MAX_EXP = 127
_E8M0_BIAS = 127

#: Magnitudes of E2M1 codes 0..7 (code | 8 is the negative).
E2M1_MAGNITUDES: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

# Code -> value for all 16 codes. Code 8 decodes to -0.0 (IEEE signed zero); it compares
# equal to 0.0, so decoded tensors do not depend on which zero code a tool wrote.
_E2M1_TABLE = torch.tensor(list(E2M1_MAGNITUDES) + [-v for v in E2M1_MAGNITUDES], dtype=torch.float32)


def _e8m0_table() -> torch.Tensor:
    """float32 value of every E8M0 byte, built from bit patterns so it is exact.

    ``e << 23`` is the float32 with biased exponent ``e`` and zero mantissa, i.e. exactly
    ``2**(e - 127)`` for e = 1..254. e = 0 (2**-127) is a float32 subnormal: bit 22 set.
    0xFF is NaN by the MX spec (float32 would make it +inf).
    """
    bits = torch.arange(256, dtype=torch.int32) << 23
    bits[0] = 0x00400000
    bits[255] = 0x7FC00000
    return bits.view(torch.float32).clone()


_E8M0_TABLE = _e8m0_table()

ScaleMode = Literal["even", "floor"]
#: ``"floor"``: OCP MX v1.0 reference conversion (spec section 6.3),
#: ``X = 2**(floor(log2 amax) - 2)``; block maxima in (6, 8)*X saturate.
#: ``"even"``: what Quark (its default ``scale_calculation_mode``) and compressed-tensors
#: do, and what vLLM's own MXFP4 quantizers do for activations: round ``amax`` to one
#: mantissa bit first (half-even; with one kept bit the tie at mantissa 1.75 goes up to
#: 2.0), then ``floor(log2) - 2``. Net effect: one exponent higher than "floor" when
#: ``amax / 2**floor(log2 amax) >= 1.75``.
SCALE_MODES: tuple[str, ...] = ("even", "floor")

# Rows are processed in chunks of about this many elements: bounds temporary memory
# (a few float32/int32 copies of the chunk) independently of the tensor size.
_CHUNK_ELEMENTS = 1 << 22


# --------------------------------------------------------------------------- E2M1


def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """Round every element of ``x`` to the nearest E2M1 value; return uint8 codes 0..15.

    Round to nearest, ties to the code with mantissa bit 0 (even code), saturating to
    +-6 beyond the range (+-inf saturates too). Anything that rounds to magnitude 0,
    including -0.0 and small negatives, gets code 0 (+0), as Quark writes it.
    NaN has no E2M1 encoding: ``ValueError``.
    """
    if x.is_floating_point() is False:
        raise ValueError(f"e2m1_encode expects a floating-point tensor, got {x.dtype}")
    xf = x.to(torch.float32)
    if torch.isnan(xf).any():
        raise ValueError("e2m1_encode: input contains NaN, which E2M1 cannot represent")
    return _e2m1_encode_f32(xf)


def _e2m1_encode_f32(xf: torch.Tensor, *, overwrite: bool = False) -> torch.Tensor:
    """:func:`e2m1_encode` on a NaN-free float32 tensor (callers have checked).

    ``overwrite=True`` lets it reuse ``xf``'s memory for ``|xf|`` (saves one float32
    temporary per chunk on large tensors); only for temporaries the caller owns.
    """
    negative = xf < 0
    mag = xf.abs_() if overwrite else xf.abs()
    # Count the rounding midpoints that |x| has passed. A tie (|x| exactly on a midpoint)
    # must go to the even code: the midpoints above an even code (0.25, 1.25, 2.5, 5.0)
    # use ">" (tie stays down), those above an odd code (0.75, 1.75, 3.5) use ">="
    # (tie goes up). Everything above 5.0 (inf included) ends at code 7 = 6.0: saturation.
    code = (mag > 0.25).to(torch.uint8)
    code += mag >= 0.75
    code += mag > 1.25
    code += mag >= 1.75
    code += mag > 2.5
    code += mag >= 3.5
    code += mag > 5.0
    # Sign bit only for values that did not round to zero (so -0 and -0.1 give code 0).
    code |= (negative & (code != 0)).to(torch.uint8) << 3
    return code


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """Decode uint8 E2M1 codes (low 4 bits used; values above 15 are rejected) to float32."""
    if codes.dtype != torch.uint8:
        raise ValueError(f"e2m1_decode expects uint8 codes, got {codes.dtype}")
    if codes.numel() and int(codes.max()) > 15:
        raise ValueError("e2m1_decode: codes must be in 0..15 (one nibble each)")
    return _E2M1_TABLE[codes.to(torch.int64)]


# --------------------------------------------------------------------------- E8M0


def e8m0_decode(scales: torch.Tensor) -> torch.Tensor:
    """Decode raw E8M0 bytes to float32: ``2**(e - 127)``; 0xFF decodes to NaN."""
    if scales.dtype != torch.uint8:
        raise ValueError(f"e8m0_decode expects uint8 scales, got {scales.dtype}")
    return _E8M0_TABLE[scales.to(torch.int64)]


def e8m0_encode(exponent: int | torch.Tensor) -> torch.Tensor:
    """Encode unbiased exponent(s) ``k`` (value ``2**k``) as E8M0 bytes ``k + 127``.

    ``k`` must be an integer in -127..127; 0xFF (NaN) is never produced.
    """
    exp = torch.as_tensor(exponent)
    if exp.is_floating_point():
        if not torch.equal(exp, exp.round()):
            raise ValueError("e8m0_encode: exponents must be integers")
        exp = exp.to(torch.int64)
    if exp.dtype == torch.bool or exp.is_complex():
        raise ValueError(f"e8m0_encode: unsupported dtype {exp.dtype}")
    exp = exp.to(torch.int64)
    if exp.numel() and (int(exp.min()) < _E8M0_MIN_EXP or int(exp.max()) > _E8M0_MAX_EXP):
        raise ValueError(
            f"e8m0_encode: exponent out of range [{_E8M0_MIN_EXP}, {_E8M0_MAX_EXP}] "
            f"(got min {int(exp.min())}, max {int(exp.max())})"
        )
    return (exp + _E8M0_BIAS).to(torch.uint8)


# --------------------------------------------------------------------------- packing


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Pack uint8 codes ``[..., K]`` into ``uint8[..., K/2]``: element 2i low, 2i+1 high."""
    if codes.dtype != torch.uint8:
        raise ValueError(f"pack_fp4 expects uint8 codes, got {codes.dtype}")
    if codes.dim() == 0 or codes.shape[-1] % 2 != 0:
        raise ValueError(
            f"pack_fp4: last dimension must be even to pack two codes per byte, got shape {tuple(codes.shape)}"
        )
    if codes.numel() and int(codes.max()) > 15:
        raise ValueError("pack_fp4: codes must be in 0..15")
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_fp4`: ``uint8[..., K/2]`` -> codes ``uint8[..., K]``."""
    if packed.dtype != torch.uint8:
        raise ValueError(f"unpack_fp4 expects uint8, got {packed.dtype}")
    if packed.dim() == 0:
        raise ValueError("unpack_fp4: expects at least one dimension")
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack([low, high], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


# --------------------------------------------------------------------------- MXFP4


def _check_scale_mode(scale_mode: str) -> None:
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"unknown scale_mode {scale_mode!r}; expected one of {SCALE_MODES}")


def scale_exponents(amax: torch.Tensor, scale_mode: str = "even") -> torch.Tensor:
    """Unbiased shared exponent (int32) for blocks whose largest magnitude is ``amax``.

    ``amax`` must be finite and >= 0 (float32). The exponent is clamped to the E8M0
    range -127..127. **All-zero blocks** (amax == 0) get -127, i.e. E8M0 byte 0
    (2**-127): any scale decodes a zero block correctly, and byte 0 is what the eps-guarded
    ``floor(log2(0 + 2**-126)) - 2`` of Quark / vLLM's MXFP4 quantizers yields after the
    same clamp, so zero blocks match their bytes too.
    """
    _check_scale_mode(scale_mode)
    amax = amax.to(torch.float32)
    # frexp is exact (also for subnormals): amax = m * 2**e with m in [0.5, 1),
    # so floor(log2 amax) = e - 1 without any log2 rounding near powers of two.
    mant, exp = torch.frexp(amax)
    floor_log2 = exp.to(torch.int32) - 1
    if scale_mode == "even":
        # One kept mantissa bit: significand 2*m in [1, 2) rounds up to 2.0 when
        # >= 1.75 (the 1.75 tie goes to the even significand 2.0), i.e. m >= 0.875.
        floor_log2 = floor_log2 + (mant >= 0.875).to(torch.int32)
    unbiased = floor_log2 - _E2M1_EMAX
    unbiased = torch.where(amax == 0, torch.full_like(unbiased, _E8M0_MIN_EXP), unbiased)
    return unbiased.clamp(_E8M0_MIN_EXP, _E8M0_MAX_EXP)


def _quantize_rows(rows: torch.Tensor, scale_mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a 2-D ``[R, K]`` chunk; returns (codes uint8[R, K], scale bytes uint8[R, K/32])."""
    r, k = rows.shape
    x = rows.to(torch.float32).reshape(r, k // GROUP_SIZE, GROUP_SIZE)
    # max |x| per block without materialising |x| (saves a full-size temporary)
    amax = torch.maximum(x.amax(dim=-1), x.amin(dim=-1).neg())
    # amax is NaN/Inf iff the block holds a NaN/Inf: one cheap check per block.
    if not torch.isfinite(amax).all():
        raise ValueError(f"quantize_mxfp4: input contains NaN or Inf (chunk of shape {tuple(rows.shape)})")
    unbiased = scale_exponents(amax, scale_mode)
    scale_bytes = (unbiased + _E8M0_BIAS).to(torch.uint8)
    # V / X with X a power of two is exact (no underflow that could matter: anything
    # that would underflow is far below the smallest E2M1 rounding boundary 0.25).
    scaled = x / _E8M0_TABLE[scale_bytes.to(torch.int64)].unsqueeze(-1)
    codes = _e2m1_encode_f32(scaled, overwrite=True).reshape(r, k)
    return codes, scale_bytes


def _row_chunks(n_rows: int, k: int) -> list[tuple[int, int]]:
    step = max(1, _CHUNK_ELEMENTS // max(k, 1))
    return [(s, min(s + step, n_rows)) for s in range(0, n_rows, step)]


def quantize_mxfp4(w: torch.Tensor, scale_mode: str = "even") -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``w[..., K]`` to MXFP4 with blocks of 32 along the last dimension.

    Returns ``(packed uint8[..., K/2], scales uint8[..., K/32])`` in the checkpoint layout
    (raw E8M0 bytes). ``w`` may be float32/bfloat16/float16 (converted to float32 exactly);
    float64 input is first rounded to float32. NaN or Inf -> ``ValueError``.
    """
    _check_scale_mode(scale_mode)
    if not w.is_floating_point():
        raise ValueError(f"quantize_mxfp4 expects a floating-point tensor, got {w.dtype}")
    if w.dim() == 0 or w.shape[-1] % GROUP_SIZE != 0:
        raise ValueError(
            f"quantize_mxfp4: last dimension must be a multiple of {GROUP_SIZE}, got shape {tuple(w.shape)}"
        )
    k = w.shape[-1]
    lead = tuple(w.shape[:-1])
    flat = w.detach().reshape(-1, k)
    n = flat.shape[0]
    packed = torch.empty((n, k // 2), dtype=torch.uint8)
    scales = torch.empty((n, k // GROUP_SIZE), dtype=torch.uint8)
    for start, stop in _row_chunks(n, k):
        try:
            codes, sc = _quantize_rows(flat[start:stop].to("cpu"), scale_mode)
        except ValueError as exc:
            raise ValueError(f"{exc}; tensor shape {tuple(w.shape)}, rows {start}..{stop - 1}") from None
        packed[start:stop] = pack_fp4(codes)
        scales[start:stop] = sc
    return packed.reshape(*lead, k // 2), scales.reshape(*lead, k // GROUP_SIZE)


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Decode ``packed uint8[..., K/2]`` + E8M0 ``scales uint8[..., K/32]`` to ``dtype``.

    Computed in float32 (exact for every value below 2**128) and then cast. A 0xFF
    scale decodes its block to NaN, as the MX spec says. Note: the top E8M0 bytes can
    encode values beyond float32/bfloat16 range (6 * 2**127); those decode to +-inf.
    """
    if packed.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ValueError(f"dequantize_mxfp4 expects uint8 tensors, got {packed.dtype} and {scales.dtype}")
    if packed.dim() == 0 or packed.shape[:-1] != scales.shape[:-1]:
        raise ValueError(
            f"dequantize_mxfp4: leading dimensions differ: packed {tuple(packed.shape)} vs scales {tuple(scales.shape)}"
        )
    k = packed.shape[-1] * 2
    if scales.shape[-1] * GROUP_SIZE != k:
        raise ValueError(
            f"dequantize_mxfp4: packed {tuple(packed.shape)} holds {k} elements per row "
            f"but scales {tuple(scales.shape)} cover {scales.shape[-1] * GROUP_SIZE}"
        )
    lead = tuple(packed.shape[:-1])
    flat_p = packed.reshape(-1, k // 2)
    flat_s = scales.reshape(-1, k // GROUP_SIZE)
    n = flat_p.shape[0]
    out = torch.empty((n, k), dtype=dtype)
    for start, stop in _row_chunks(n, k):
        codes = unpack_fp4(flat_p[start:stop])  # nibbles: always 0..15, no range check
        values = _E2M1_TABLE[codes.to(torch.int64)]
        values = values.reshape(stop - start, k // GROUP_SIZE, GROUP_SIZE)
        values = values * _E8M0_TABLE[flat_s[start:stop].to(torch.int64)].unsqueeze(-1)
        out[start:stop] = values.reshape(stop - start, k).to(dtype)
    return out.reshape(*lead, k)


def qdq_mxfp4(x: torch.Tensor, scale_mode: str = "even") -> torch.Tensor:
    """Quantize-dequantize ``x`` through MXFP4 (per 32-block along the last dim).

    Used to emulate dynamic MXFP4 activation quantization; returns ``x``'s dtype.
    """
    packed, scales = quantize_mxfp4(x, scale_mode)
    return dequantize_mxfp4(packed, scales, dtype=torch.float32).to(x.dtype)
