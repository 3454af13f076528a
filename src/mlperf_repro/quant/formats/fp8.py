"""FP8 e4m3 (OCP "e4m3fn") weights and activations with per-tensor scales, AMD's FP8 recipes
(Quark layout, vLLM ``QuarkW8A8Fp8``); codec :mod:`mlperf_repro.quant.fp8`, writer
:mod:`mlperf_repro.quant.checkpoint`. ``fp8``: activation scales from calibration;
``fp8_dynamic``: computed from each input at run time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import QuantFormat, register_format
from ._common import excluded, kv_cache_line, static_calibration_lines, write_checkpoint, write_pipeline


def _quantize(w: Any, scale_mode: str = "tensor") -> tuple[Any, Any]:
    from ..fp8 import quantize_fp8

    return quantize_fp8(w, scale_mode if scale_mode in ("tensor", "channel") else "tensor")


def _dequantize(stored: Any, scale: Any, dtype: Any = None) -> Any:
    import torch

    from ..fp8 import dequantize_fp8

    return dequantize_fp8(stored, scale, torch.float32 if dtype is None else dtype)


def _dynamic(recipe: Mapping[str, Any]) -> bool:
    return recipe.get("scheme") == "fp8_dynamic"


def _transformations(recipe: Mapping[str, Any]) -> str:
    if _dynamic(recipe):
        return (
            "post-training quantization to FP8 e4m3 (weights with per-tensor static scales, activations with a "
            f"per-tensor scale computed at run time; no calibration), project codec; excluded: {excluded(recipe)}"
        )
    return (
        "post-training quantization to FP8 e4m3 (weights and activations, per-tensor static scales; "
        f"activation scales calibrated on rows of the benchmark's dataset), project codec; excluded: {excluded(recipe)}"
    )


def _calibration(recipe: Mapping[str, Any]) -> list[str]:
    lines = [
        f"- Scheme: `{recipe['scheme']}` (OCP FP8 e4m3fn weights and activations, round-to-nearest-even, "
        "saturating at ±448).",
        "- Weight scales: one float32 per tensor, amax / 448; in an LLM the amax is taken over the shards vLLM "
        "fuses (q/k/v, gate/up) so they share it.",
    ]
    if _dynamic(recipe):
        return lines + [
            "- Activation scales: one per Linear input, computed from each input's amax at run time (dynamic).",
            f"- Excluded modules: {excluded(recipe)}.",
            *kv_cache_line(recipe),
            *(
                static_calibration_lines(recipe, "each KV-cache scale's amax")
                if recipe.get("kv_cache")
                else ["- Calibration data: none (weight scales from the weights, activation scales at run time)."]
            ),
        ]
    return lines + [
        "- Activation scales: one float32 per Linear input, static.",
        f"- Excluded modules: {excluded(recipe)}.",
        *kv_cache_line(recipe),
        *static_calibration_lines(recipe, "each activation (and KV-cache) scale's amax"),
    ]


FP8 = register_format(
    QuantFormat(
        name="fp8",
        # fp8: static activation scales from calibration (AMD's LLM recipe); fp8_dynamic:
        # per-tensor activation scales at run time (AMD's Wan 2.2 recipe, no calibration).
        schemes=("fp8", "fp8_dynamic"),
        quantize=_quantize,
        dequantize=_dequantize,
        writer=write_checkpoint,
        pipeline_writer=write_pipeline,
        bytes_per_param=1.0,  # one byte per element; the per-tensor scales are negligible
        size_note="FP8 = 1 byte per quantized parameter (per-tensor scales)",
        weight_data_types="fp8",
        transformations=_transformations,
        calibration=_calibration,
    )
)
