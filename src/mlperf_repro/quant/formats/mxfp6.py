"""MXFP6 (OCP Microscaling v1.0): 6-bit E2M3 or E3M2 elements packed four in three bytes, one
E8M0 scale per 32 values along the input dimension (Quark's layout, vLLM ``QuarkOCP_MX``);
codec :mod:`mlperf_repro.quant.mx`, writer :mod:`mlperf_repro.quant.checkpoint`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import QuantFormat, register_format
from ._common import excluded, kv_cache_line, static_calibration_lines, write_checkpoint, write_pipeline

GROUP_SIZE = 32


def _element(recipe: Mapping[str, Any]) -> str:
    return "E3M2" if "e3m2" in recipe["scheme"] else "E2M3"


def _quantize(w: Any, scale_mode: str = "even", element: str = "e2m3") -> tuple[Any, Any]:
    from ..mx import quantize_mx

    return quantize_mx(w, scale_mode, element=element)


def _dequantize(stored: Any, scales: Any, dtype: Any = None, element: str = "e2m3") -> Any:
    import torch

    from ..mx import dequantize_mx

    return dequantize_mx(stored, scales, torch.float32 if dtype is None else dtype, element=element)


def _transformations(recipe: Mapping[str, Any]) -> str:
    return (
        f"post-training quantization to MXFP6 ({recipe['scheme']}, OCP MX {_element(recipe)} with E8M0 scales per "
        f"32 values, scale mode {recipe.get('scale_mode', 'even')}), project codec; excluded: {excluded(recipe)}"
    )


def _calibration(recipe: Mapping[str, Any]) -> list[str]:
    weight_only = recipe["scheme"].endswith("_weight_only")
    return [
        f"- Scheme: `{recipe['scheme']}` (OCP Microscaling MXFP6: {_element(recipe)} elements, one E8M0 scale per "
        "32 values along the input dimension, four 6-bit codes packed in three bytes).",
        f"- Scale selection: `{recipe.get('scale_mode', 'even')}`; rounding: round-to-nearest-even; saturation "
        f"at the element's largest value.",
        "- Activations: " + ("bf16." if weight_only else f"MXFP6 {_element(recipe)}, dynamic per 32-value block."),
        f"- Excluded modules: {excluded(recipe)}.",
        *kv_cache_line(recipe),
        *_calibration_data(recipe),
    ]


def _calibration_data(recipe: Mapping[str, Any]) -> list[str]:
    if recipe.get("kv_cache"):
        return static_calibration_lines(recipe, "each KV-cache scale's amax")
    return [
        "- Calibration data: none. MX scales are computed from the weights alone (and per block at run time "
        "for activations).",
    ]


MXFP6 = register_format(
    QuantFormat(
        name="mxfp6",
        schemes=("mxfp6_e2m3", "mxfp6_e2m3_weight_only", "mxfp6_e3m2", "mxfp6_e3m2_weight_only"),
        quantize=_quantize,
        dequantize=_dequantize,
        writer=write_checkpoint,
        pipeline_writer=write_pipeline,
        # 6 bits per element + one 8-bit scale per 32 elements = 6.25 bits.
        bytes_per_param=0.75 + 1 / GROUP_SIZE,
        size_note="MXFP6 = 0.75 byte per quantized parameter + one E8M0 scale byte per 32",
        weight_data_types="mxfp6",
        transformations=_transformations,
        calibration=_calibration,
    )
)
