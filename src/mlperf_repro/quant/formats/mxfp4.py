"""MXFP4 (OCP Microscaling v1.0): 4-bit E2M1 elements, one E8M0 scale byte per 32 values
along the input dimension; codec in :mod:`mlperf_repro.quant.mxfp4`, checkpoint writer (Quark
layout, what vLLM loads with ``quant_method: quark``) in :mod:`mlperf_repro.quant.checkpoint`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import QuantFormat, register_format
from ._common import kv_cache_line, static_calibration_lines, write_checkpoint, write_pipeline

GROUP_SIZE = 32  # mlperf_repro.quant.mxfp4.GROUP_SIZE (not imported: it pulls in torch)


def _quantize(w: Any, scale_mode: str = "even") -> tuple[Any, Any]:
    from ..mxfp4 import quantize_mxfp4

    return quantize_mxfp4(w, scale_mode)


def _dequantize(packed: Any, scales: Any, dtype: Any = None) -> Any:
    import torch

    from ..mxfp4 import dequantize_mxfp4

    return dequantize_mxfp4(packed, scales, dtype=torch.float32 if dtype is None else dtype)


def _transformations(recipe: Mapping[str, Any]) -> str:
    return (
        f"post-training quantization to MXFP4 ({recipe['scheme']}, OCP MX E2M1 with E8M0 scales "
        f"per 32 values, scale mode {recipe.get('scale_mode', 'even')}), project codec; "
        f"excluded: {', '.join(recipe.get('exclude', []))}"
    )


def _calibration(recipe: Mapping[str, Any]) -> list[str]:
    return [
        f"- Scheme: `{recipe['scheme']}` (OCP Microscaling MXFP4: E2M1 elements, one E8M0 scale per 32 "
        f"values along the input dimension, two elements per byte, low nibble first).",
        f"- Scale selection: `{recipe.get('scale_mode', 'even')}`; rounding: round-to-nearest-even; saturation at ±6.",
        f"- Excluded modules: {', '.join(recipe.get('exclude', [])) or 'none'}.",
        *kv_cache_line(recipe),
        *_calibration_data(recipe),
    ]


def _calibration_data(recipe: Mapping[str, Any]) -> list[str]:
    if recipe.get("kv_cache"):
        return static_calibration_lines(recipe, "each KV-cache scale's amax")
    return [
        "- Calibration data: none. MXFP4 weight scales are computed from the weights alone and MXFP4 "
        "activation scales (W4A4) dynamically per block at run time.",
    ]


MXFP4 = register_format(
    QuantFormat(
        name="mxfp4",
        # mxfp4: W4A4 (dynamic MXFP4 activations); mxfp4_weight_only: W4A16; mxfp4_fp8: W4A8
        # (static FP8 activations; Quark and published checkpoints only). The table of them is
        # mlperf_repro.quant.schemes.SCHEMES.
        schemes=("mxfp4", "mxfp4_weight_only", "mxfp4_fp8"),
        quantize=_quantize,
        dequantize=_dequantize,
        writer=write_checkpoint,
        pipeline_writer=write_pipeline,
        # 4 bits per element + one 8-bit scale per 32 elements = 4.25 bits.
        bytes_per_param=0.5 + 1 / GROUP_SIZE,
        size_note="MXFP4 = 0.5 byte per quantized parameter + one E8M0 scale byte per 32",
        weight_data_types="mxfp4",
        transformations=_transformations,
        calibration=_calibration,
    )
)
