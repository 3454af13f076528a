"""Exact encode/decode of small IEEE-like float element types (FP4, FP6, FP8) in plain torch.

One :class:`MiniFloat` describes a sign-exponent-mantissa format without Inf (E2M1, E2M3,
E3M2 of OCP MX v1.0, and OCP FP8 E4M3 "e4m3fn" whose only special code is NaN). The codecs
in :mod:`~mlperf_repro.quant.mx`, :mod:`~mlperf_repro.quant.fp8` and
:mod:`~mlperf_repro.quant.nvfp4` are built on it.

Code layout: ``sign | exponent (ebits) | mantissa (mbits)``, the sign in the top bit. A
magnitude code ``c = E << mbits | M`` is subnormal for ``E == 0`` (value
``M * 2**(1 - bias - mbits)``) and normal otherwise (``(1 + M / 2**mbits) * 2**(E - bias)``).
Magnitude codes increase with the value, and the code's lowest bit is the mantissa's lowest
bit, so "ties to even" means "ties to the even code".

Encoding (:meth:`MiniFloat.encode`) is exact: it counts the rounding midpoints (each exactly
representable in float32, since neighbouring values have at most ``mbits + 1`` significant
bits) that ``|x|`` has passed, with ``torch.bucketize``; an ``|x|`` exactly on a midpoint goes
to the even code. Everything above the largest value (+-inf included) saturates to +-max:
these conversions never produce Inf, and produce NaN only from NaN (formats with a NaN code).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

__all__ = ["MiniFloat"]


@dataclass(frozen=True)
class MiniFloat:
    """A sign + ``ebits`` exponent + ``mbits`` mantissa float type with exponent ``bias``.

    ``nan_magnitude``: the magnitude code reserved for NaN (E4M3: 0x7F, so 0x7F and 0xFF
    are NaN), or ``None`` when every code is a number (MX element types). No format here
    has Inf.
    """

    name: str
    ebits: int
    mbits: int
    bias: int
    nan_magnitude: int | None = None

    # ------------------------------------------------------------------ properties

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.ebits + self.mbits)

    @property
    def n_magnitudes(self) -> int:
        """Number of magnitude codes that are numbers (0 included)."""
        n = 1 << (self.ebits + self.mbits)
        return n - 1 if self.nan_magnitude is not None else n

    def magnitude(self, code: int) -> float:
        """Exact value of magnitude code ``code`` (a Python float; all values fit a float32)."""
        e, m = code >> self.mbits, code & ((1 << self.mbits) - 1)
        if e == 0:
            return m * 2.0 ** (1 - self.bias - self.mbits)
        return (1.0 + m / (1 << self.mbits)) * 2.0 ** (e - self.bias)

    @property
    def magnitudes(self) -> tuple[float, ...]:
        return tuple(self.magnitude(c) for c in range(self.n_magnitudes))

    @property
    def max_value(self) -> float:
        """Largest finite value (E2M1 6, E2M3 7.5, E3M2 28, E4M3 448)."""
        return self.magnitude(self.n_magnitudes - 1)

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.mbits)

    @property
    def emax(self) -> int:
        """Exponent of the largest value, ``floor(log2(max_value))`` (the MX ``emax_elem``)."""
        return ((self.n_magnitudes - 1) >> self.mbits) - self.bias

    # ------------------------------------------------------------------ tables

    def decode_table(self) -> torch.Tensor:
        """float32 value of every code ``0 .. 2**bits - 1`` (negative zero, NaN included)."""
        return _decode_table(self)

    def midpoints(self) -> torch.Tensor:
        """float32 midpoints between neighbouring magnitudes (exact)."""
        return _midpoints(self)

    # ------------------------------------------------------------------ conversion

    def encode(self, x: torch.Tensor, *, negative_zero: bool) -> torch.Tensor:
        """Round ``x`` to nearest (ties to even code), saturating; return uint8 codes.

        ``negative_zero=True`` keeps the sign of everything negative, also of values that
        round to zero and of -0.0 (IEEE behaviour, what ``torch.float8_e4m3fn`` casts do);
        ``False`` writes every zero as code 0 (+0), as Quark writes MX elements.
        NaN: the NaN code (sign kept) if the format has one, else ``ValueError``.
        """
        if not x.is_floating_point():
            raise ValueError(f"{self.name}: expected a floating-point tensor, got {x.dtype}")
        xf = x.to(torch.float32)
        nan = torch.isnan(xf)
        has_nan = bool(nan.any())
        if has_nan and self.nan_magnitude is None:
            raise ValueError(f"{self.name}: input contains NaN, which {self.name} cannot represent")
        mag = xf.abs()
        if has_nan:
            mag = torch.where(nan, torch.zeros_like(mag), mag)
        mids = self.midpoints()
        below = torch.bucketize(mag, mids, right=False)  # midpoints strictly below |x|
        upto = torch.bucketize(mag, mids, right=True)  # midpoints <= |x|
        # |x| exactly on midpoint j (between codes j and j+1): go to the even one.
        code = below + ((upto != below) & (below % 2 == 1)).to(below.dtype)
        code = code.to(torch.uint8)
        negative = torch.signbit(xf)
        if not negative_zero:
            negative = negative & (code != 0)
        if has_nan:
            code = torch.where(nan, torch.full_like(code, self.nan_magnitude), code)
        return code | (negative.to(torch.uint8) << (self.ebits + self.mbits))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """uint8 codes -> float32 values (codes beyond ``2**bits - 1`` are rejected)."""
        if codes.dtype != torch.uint8:
            raise ValueError(f"{self.name}: expected uint8 codes, got {codes.dtype}")
        if codes.numel() and int(codes.max()) >= (1 << self.bits):
            raise ValueError(f"{self.name}: codes must be in 0..{(1 << self.bits) - 1}")
        return self.decode_table()[codes.to(torch.int64)]


@functools.cache
def _decode_table(fmt: MiniFloat) -> torch.Tensor:
    n = 1 << (fmt.ebits + fmt.mbits)
    mags = [fmt.magnitude(c) for c in range(n)]
    if fmt.nan_magnitude is not None:
        mags[fmt.nan_magnitude] = float("nan")
    return torch.tensor(mags + [-v for v in mags], dtype=torch.float32)


@functools.cache
def _midpoints(fmt: MiniFloat) -> torch.Tensor:
    mags = fmt.magnitudes
    mids = [(a + b) / 2 for a, b in zip(mags[:-1], mags[1:], strict=True)]
    out = torch.tensor(mids, dtype=torch.float32)
    # Every midpoint must be exact in float32, or the tie rule would be wrong.
    assert [float(v) for v in out.tolist()] == mids, f"{fmt.name}: midpoints not exact in float32"
    return out
