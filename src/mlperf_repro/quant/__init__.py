"""Quantize stage: the project's own MXFP4 codec and the MXFP4 checkpoint writer.

* :mod:`mlperf_repro.quant.mxfp4` - pure-torch E2M1 / E8M0 / MXFP4 codec (no third-party
  quantization library), written from ``spec/fp4-formats.md``.
* :mod:`mlperf_repro.quant.checkpoint` - turns a HF Llama checkpoint into a Quark-layout
  MXFP4 checkpoint (what vLLM loads with ``quant_method: quark``), an emulated bf16 copy
  for CPU serving, and a provenance/quality manifest.
"""

from mlperf_repro.quant.checkpoint import (
    SCHEMES,
    build_quantization_config,
    load_quark_checkpoint_dequantized,
    logit_error,
    quantize_checkpoint,
    select_quantized_tensors,
)
from mlperf_repro.quant.mxfp4 import (
    CODEC_VERSION,
    dequantize_mxfp4,
    qdq_mxfp4,
    quantize_mxfp4,
)

__all__ = [
    "CODEC_VERSION",
    "SCHEMES",
    "build_quantization_config",
    "dequantize_mxfp4",
    "load_quark_checkpoint_dequantized",
    "logit_error",
    "qdq_mxfp4",
    "quantize_checkpoint",
    "quantize_mxfp4",
    "select_quantized_tensors",
]
