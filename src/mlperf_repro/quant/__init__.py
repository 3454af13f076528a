"""Quantize stage: the project's own codecs (MXFP4, MXFP6, FP8, NVFP4), its streaming checkpoint
writer, the tools a recipe may name, and the validator for any quantized checkpoint.

* :mod:`mlperf_repro.quant.mxfp4`, :mod:`~mlperf_repro.quant.mx`, :mod:`~mlperf_repro.quant.fp8`,
  :mod:`~mlperf_repro.quant.nvfp4` - pure-torch codecs written from the OCP MX v1.0 and NVFP4
  specifications (no third-party quantization library).
* :mod:`mlperf_repro.quant.checkpoint` - streams a HF Llama checkpoint to a quantized one in a
  tool's layout (:mod:`~mlperf_repro.quant.encodings`: which tensors each scheme of
  :mod:`~mlperf_repro.quant.schemes` writes), an emulated bf16 copy for CPU serving, and a
  provenance/quality manifest; static scales come from :mod:`~mlperf_repro.quant.calibration` rows.
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
