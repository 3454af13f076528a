"""FP8 e4m3 (OCP "e4m3fn") weights and activations with per-tensor static scales, AMD's FP8
recipe (Quark layout, vLLM ``QuarkW8A8Fp8``); codec :mod:`mlperf_repro.quant.fp8`, writer
:mod:`mlperf_repro.quant.checkpoint`. Activation scales come from calibration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import QuantFormat, register_format
from ._common import excluded, kv_cache_line, static_calibration_lines, write_checkpoint


def _quantize(w: Any, scale_mode: str = "tensor") -> tuple[Any, Any]:
    from ..fp8 import quantize_fp8

    return quantize_fp8(w, scale_mode if scale_mode in ("tensor", "channel") else "tensor")


def _dequantize(stored: Any, scale: Any, dtype: Any = None) -> Any:
    import torch

    from ..fp8 import dequantize_fp8

    return dequantize_fp8(stored, scale, torch.float32 if dtype is None else dtype)


def _transformations(recipe: Mapping[str, Any]) -> str:
    return (
        "post-training quantization to FP8 e4m3 (weights and activations, per-tensor static scales; "
        f"activation scales calibrated on rows of the benchmark's dataset), project codec; excluded: {excluded(recipe)}"
    )


def _calibration(recipe: Mapping[str, Any]) -> list[str]:
    return [
        f"- Scheme: `{recipe['scheme']}` (OCP FP8 e4m3fn weights and activations, round-to-nearest-even, "
        "saturating at ±448).",
        "- Weight scales: one float32 per tensor, amax / 448, the amax taken over the shards vLLM fuses "
        "(q/k/v, gate/up) so they share it.",
        "- Activation scales: one float32 per Linear input, static.",
        f"- Excluded modules: {excluded(recipe)}.",
        *kv_cache_line(recipe),
        *static_calibration_lines(recipe, "each activation (and KV-cache) scale's amax"),
    ]


FP8 = register_format(
    QuantFormat(
        name="fp8",
        schemes=("fp8",),
        quantize=_quantize,
        dequantize=_dequantize,
        writer=write_checkpoint,
        bytes_per_param=1.0,  # one byte per element; the per-tensor scales are negligible
        size_note="FP8 = 1 byte per quantized parameter (per-tensor scales)",
        weight_data_types="fp8",
        transformations=_transformations,
        calibration=_calibration,
    )
)
