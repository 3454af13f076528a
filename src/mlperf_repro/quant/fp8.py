"""FP8 E4M3 (OCP "e4m3fn") codec with per-tensor (or per-channel) scales and FP8 KV-cache scales.

Pure torch, no quantization library; ``torch.float8_e4m3fn`` is used only as the storage
dtype (a bit-for-bit view of the codes), never for the rounding.

E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits. Subnormals down to ``2**-9``, largest
value 448 (code 0x7E), NaN = 0x7F / 0xFF, **no Inf**. :func:`e4m3_encode` rounds to
nearest, ties to even, keeps the sign of negative values that round to zero (IEEE, like
torch), **saturates** everything beyond +-448 (+-inf included) to +-448, and maps NaN to NaN.

Compared with ``x.to(torch.float8_e4m3fn)`` (tests/test_quant_codecs.py): bit-for-bit equal
on every finite value in [-448, 448] (all codes, all midpoints and their float32 neighbours,
random values). Beyond the range, torch 2.13 on CPU saturates too (measured: 449, 464, 480,
1e6 and +-inf all give +-448), so the two agree there as well. A non-saturating conversion
(OCP FP8 allows both) would give NaN there instead; the test accepts either answer from
torch there (a documented difference, not a failure). This
codec always saturates, as the quantization tools do (they clamp to +-448 before casting).

**Call shape** (as mxfp4's)::

    stored, scale = quantize_fp8(w, scale_mode)        # stored: float8_e4m3fn, same shape as w
    w_hat = dequantize_fp8(stored, scale, dtype)

``scale_mode``: ``"tensor"`` (one float32 scale, shape ``[]``: ``amax / 448``; what
compressed-tensors ``FP8`` / ModelOpt ``FP8`` write as ``weight_scale``) or ``"channel"``
(``amax`` per row of the last dim, shape ``[..., 1]``). Elements are
``E4M3(float32(w / scale))``; decoding is ``E4M3 * scale`` in float32. A static activation
scale from calibration is ``scale_from_amax(calibration_amax)``; pass it as ``scale=`` to
quantize activations with it (values beyond ``448 * scale`` saturate). KV-cache scales:
:func:`kv_cache_scales` (``k_scale = k_amax / 448``, ``v_scale = v_amax / 448`` per layer,
what vLLM reads as ``k_scale`` / ``v_scale``).

An all-zero tensor (amax 0) gets scale 1.0, so that nothing divides by zero and it decodes
to zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .minifloat import MiniFloat

__all__ = [
    "CODEC_VERSION",
    "E4M3",
    "E4M3_MAX",
    "SCALE_MODES",
    "dequantize_fp8",
    "e4m3_decode",
    "e4m3_encode",
    "kv_cache_scales",
    "quantize_fp8",
    "scale_from_amax",
]

CODEC_VERSION = "fp8-codec/1"

E4M3 = MiniFloat("e4m3fn", ebits=4, mbits=3, bias=7, nan_magnitude=0x7F)
#: Largest finite E4M3 value.
E4M3_MAX = 448.0
SCALE_MODES: tuple[str, ...] = ("tensor", "channel")


def e4m3_encode(x: torch.Tensor) -> torch.Tensor:
    """Round ``x`` to E4M3 (nearest, ties to even, saturating to +-448); return uint8 codes."""
    return E4M3.encode(x, negative_zero=True)


def e4m3_decode(codes: torch.Tensor) -> torch.Tensor:
    """E4M3 codes (uint8 or ``torch.float8_e4m3fn``) -> float32; 0x7F/0xFF decode to NaN."""
    if codes.dtype == torch.float8_e4m3fn:
        codes = codes.view(torch.uint8)
    return E4M3.decode(codes)


def _as_fp8(codes: torch.Tensor) -> torch.Tensor:
    return codes.view(torch.float8_e4m3fn)


def scale_from_amax(amax: float | torch.Tensor) -> torch.Tensor:
    """float32 scale ``amax / 448`` (elementwise); ``amax == 0`` gives 1.0. ``amax`` must be finite, >= 0."""
    a = torch.as_tensor(amax, dtype=torch.float32)
    if not torch.isfinite(a).all() or (a < 0).any():
        raise ValueError(f"scale_from_amax: amax must be finite and >= 0, got {a}")
    return torch.where(a == 0, torch.ones_like(a), a / E4M3_MAX)


def _amax(w: torch.Tensor, scale_mode: str) -> torch.Tensor:
    x = w.detach().to(torch.float32)
    if scale_mode == "tensor":
        return x.abs().amax() if x.numel() else torch.zeros((), dtype=torch.float32)
    return x.abs().amax(dim=-1, keepdim=True)


def quantize_fp8(
    w: torch.Tensor, scale_mode: str = "tensor", *, scale: torch.Tensor | float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``w`` to FP8 E4M3 with a per-tensor (``"tensor"``) or per-row (``"channel"``) scale.

    Returns ``(stored float8_e4m3fn, same shape as w; scale float32)``. ``scale`` (static,
    e.g. from calibration) replaces the amax-derived one; it must broadcast against ``w``.
    NaN or Inf in ``w`` -> ``ValueError``.
    """
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"unknown scale_mode {scale_mode!r}; expected one of {SCALE_MODES}")
    if not w.is_floating_point():
        raise ValueError(f"quantize_fp8 expects a floating-point tensor, got {w.dtype}")
    if scale_mode == "channel" and w.dim() == 0:
        raise ValueError("quantize_fp8: scale_mode 'channel' needs at least one dimension")
    x = w.detach().to(torch.float32)
    if not torch.isfinite(x).all():
        raise ValueError(f"quantize_fp8: input contains NaN or Inf (shape {tuple(w.shape)})")
    if scale is None:
        s = scale_from_amax(_amax(x, scale_mode))
    else:
        s = torch.as_tensor(scale, dtype=torch.float32)
        if not torch.isfinite(s).all() or (s <= 0).any():
            raise ValueError(f"quantize_fp8: scale must be finite and > 0, got {s}")
    codes = e4m3_encode(x / s)
    return _as_fp8(codes), s


def dequantize_fp8(stored: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``E4M3(stored) * scale`` in float32, cast to ``dtype``. ``stored``: float8_e4m3fn or uint8 codes."""
    if stored.dtype not in (torch.float8_e4m3fn, torch.uint8):
        raise ValueError(f"dequantize_fp8 expects float8_e4m3fn or uint8, got {stored.dtype}")
    return (e4m3_decode(stored) * torch.as_tensor(scale, dtype=torch.float32)).to(dtype)


def kv_cache_scales(amax_by_layer: Mapping[Any, tuple[float, float]]) -> dict[Any, tuple[torch.Tensor, torch.Tensor]]:
    """Per layer ``(k_amax, v_amax)`` from calibration -> ``(k_scale, v_scale)`` float32 scalars.

    ``k_scale = k_amax / 448`` and ``v_scale = v_amax / 448`` (1.0 for an amax of 0, vLLM's
    default scale): the FP8 KV cache stores ``E4M3(k / k_scale)``. Keys (layer index or
    name) are kept as given; naming the checkpoint tensors is the writer's business.
    """
    return {layer: (scale_from_amax(k), scale_from_amax(v)) for layer, (k, v) in amax_by_layer.items()}
