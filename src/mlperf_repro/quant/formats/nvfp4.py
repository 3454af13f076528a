"""NVFP4: E2M1 elements, one FP8 E4M3 scale per 16 values, one float32 tensor scale; written in
Quark's layout (``weight_scale_2``, vLLM ``QuarkNVFP4``), ModelOpt's (``hf_quant_config.json``)
or compressed-tensors' (``weight_global_scale``, the reciprocal convention), the recipe's
``layout``; codec :mod:`mlperf_repro.quant.nvfp4`, writer :mod:`mlperf_repro.quant.checkpoint`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import QuantFormat, register_format
from ._common import excluded, kv_cache_line, static_calibration_lines, write_checkpoint, write_pipeline

BLOCK_SIZE = 16


def _quantize(w: Any, scale_mode: str = "weight_scale_2") -> tuple[Any, Any]:
    """``(packed, (block_scales, tensor_scale))``: the tensor scale travels with the block scales."""
    from ..nvfp4 import SCALE_MODES, quantize_nvfp4

    packed, scales, global_scale = quantize_nvfp4(w, scale_mode if scale_mode in SCALE_MODES else "weight_scale_2")
    return packed, (scales, global_scale)


def _dequantize(packed: Any, scales: Any, dtype: Any = None) -> Any:
    import torch

    from ..nvfp4 import dequantize_nvfp4

    block_scales, global_scale = scales
    return dequantize_nvfp4(packed, block_scales, torch.float32 if dtype is None else dtype, global_scale)


def _transformations(recipe: Mapping[str, Any]) -> str:
    return (
        "post-training quantization to NVFP4 (E2M1 weights and activations, E4M3 scale per 16 values, float32 "
        "tensor scale; activation tensor scales calibrated on rows of the benchmark's dataset), project codec, "
        f"{recipe.get('layout', 'quark')} layout; excluded: {excluded(recipe)}"
    )


def _calibration(recipe: Mapping[str, Any]) -> list[str]:
    layout = recipe.get("layout", "quark")
    stored = (
        "`weight_global_scale` = 2688 / amax (compressed-tensors' reciprocal convention)"
        if layout == "compressed-tensors"
        else "`weight_scale_2` = amax / 2688"
    )
    return [
        f"- Scheme: `{recipe['scheme']}`, {layout} layout (NVFP4: E2M1 elements two per byte, one E4M3 scale per "
        "16 values along the input dimension, one float32 scale per tensor).",
        f"- Weight tensor scale: {stored}, the amax taken over the shards vLLM fuses (q/k/v, gate/up).",
        "- Activations: NVFP4 with E4M3 block scales computed at run time and a static tensor scale.",
        f"- Excluded modules: {excluded(recipe)}.",
        *kv_cache_line(recipe),
        *static_calibration_lines(recipe, "each activation tensor scale's amax"),
    ]


NVFP4 = register_format(
    QuantFormat(
        name="nvfp4",
        schemes=("nvfp4",),
        quantize=_quantize,
        dequantize=_dequantize,
        writer=write_checkpoint,
        pipeline_writer=write_pipeline,
        # 4 bits per element + one 8-bit scale per 16 elements = 4.5 bits.
        bytes_per_param=0.5 + 1 / BLOCK_SIZE,
        size_note="NVFP4 = 0.5 byte per quantized parameter + one E4M3 scale byte per 16",
        weight_data_types="nvfp4",
        transformations=_transformations,
        calibration=_calibration,
    )
)
