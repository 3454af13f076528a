"""Quantize stage: the project's own MXFP4 codec and the MXFP4 checkpoint writer.

* :mod:`mlperf_repro.quant.mxfp4` - pure-torch E2M1 / E8M0 / MXFP4 codec (no third-party
  quantization library), written from the OCP Microscaling Formats (MX) v1.0 specification.
* :mod:`mlperf_repro.quant.checkpoint` - turns a HF Llama checkpoint into a Quark-layout
  MXFP4 checkpoint (what vLLM loads with ``quant_method: quark``), an emulated bf16 copy
  for CPU serving, and a provenance/quality manifest.
* :mod:`mlperf_repro.quant.formats` - the registry of quantization formats (schemes, codec,
  writer, size per parameter, description texts) that the rest of the workflow reads.
"""

# Imported on first use (PEP 562): the format registry (mlperf_repro.quant.formats) is read
# by config validation and the plan view, which must not pay for importing torch.
_LAZY = {
    "SCHEMES": "checkpoint",
    "build_quantization_config": "checkpoint",
    "load_quark_checkpoint_dequantized": "checkpoint",
    "logit_error": "checkpoint",
    "quantize_checkpoint": "checkpoint",
    "select_quantized_tensors": "checkpoint",
    "CODEC_VERSION": "mxfp4",
    "dequantize_mxfp4": "mxfp4",
    "qdq_mxfp4": "mxfp4",
    "quantize_mxfp4": "mxfp4",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
