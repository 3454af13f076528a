"""How the checkpoint writer stores each weight format, one Linear at a time, in a tool's layout.

The codecs (:mod:`~mlperf_repro.quant.mx`, :mod:`~mlperf_repro.quant.fp8`,
:mod:`~mlperf_repro.quant.nvfp4`) turn values into codes; this module says which tensors a
quantized ``<module>.weight`` becomes in a checkpoint that vLLM loads, and which
``quantization_config`` describes them:

=================================  ===========================================================
scheme                             stored per quantized Linear (layout ``quark`` unless noted)
=================================  ===========================================================
``mxfp4`` / ``_weight_only``       ``weight`` u8[out, in/2], ``weight_scale`` u8[out, in/32] (E8M0)
``mxfp6_e2m3`` / ``_e3m2`` (+      ``weight`` u8[out, 3*in/4] (four 6-bit codes in three bytes),
``_weight_only``)                  ``weight_scale`` u8[out, in/32]
``fp8``                            ``weight`` f8e4m3[out, in], ``weight_scale`` f32[], ``input_scale`` f32[]
``fp8_dynamic``                    ``weight`` f8e4m3[out, in], ``weight_scale`` f32[] (activation scales at run time)
``nvfp4``                          ``weight`` u8[out, in/2], ``weight_scale`` f8e4m3[out, in/16],
                                   ``weight_scale_2`` f32[], ``input_scale_2`` f32[] (quark);
                                   ``input_scale`` instead (``modelopt``); ``weight_packed``,
                                   ``weight_global_scale`` f32[1] = 1/s and ``input_global_scale``
                                   f32[1] (``compressed-tensors``)
=================================  ===========================================================

Per-tensor scales (FP8 ``weight_scale``, NVFP4's second scale) are shared by the shards vLLM
fuses into one layer (q/k/v, gate/up): vLLM keeps one such scale per fused layer and
re-quantizes (FP8) or loses accuracy (NVFP4) when the shards' scales differ, so the writer
takes the amax over the whole group, as Quark and ModelOpt do. Static activation scales
(FP8 ``input_scale``, NVFP4's input global scale) and FP8 KV-cache scales come from
calibration: the amax of each Linear's input, and of each ``k_proj`` / ``v_proj`` output, on
the calibration tokens (:func:`mlperf_repro.quant.evaluate.calibration_amax`).

Facts: ``shared/spec/fp4-formats.md`` §2 (the three tools' tensors and configs) and vLLM 0.32's
``quark`` / ``modelopt`` / ``compressed-tensors`` loaders (names, shapes, config keys).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import UserError
from . import fp8, mx, mxfp4, nvfp4
from .schemes import KV_CACHE_DTYPES, LAYOUTS, SCHEMES, Scheme, scheme_for

__all__ = [
    "KV_CACHE_DTYPES",
    "LAYOUTS",
    "SCHEMES",
    "Encoding",
    "Scheme",
    "build_quantization_config",
    "encoding_for",
    "scheme_for",
]

#: The MX activation scale rule: vLLM/AITER quantize activations at run time with "even".
ACTIVATION_SCALE_MODE = "even"

# --------------------------------------------------------------------------- encodings


@dataclass(frozen=True)
class Stored:
    """One tensor a quantized Linear is stored as: ``<module>.<suffix>``."""

    suffix: str
    dtype: str  # safetensors dtype
    shape: tuple[int, ...]

    @property
    def per_row(self) -> bool:
        return len(self.shape) == 2


class Encoding:
    """One format in one layout. ``group``: in-features must be a multiple of it;
    ``tensor_amax``: a per-tensor scale derived from the weight's amax (a first pass);
    ``exact_in_bf16``: decoded values are exact in bfloat16 (the emulated copy is then the
    checkpoint to the bit; otherwise each value is rounded once to bfloat16)."""

    format: str = ""
    group: int = 1
    tensor_amax: bool = False
    exact_in_bf16: bool = False
    codec_version: str = ""

    def __init__(self, scheme: Scheme, layout: str, scale_mode: str):
        self.scheme, self.layout, self.scale_mode = scheme, layout, scale_mode

    # names
    weight_suffix = "weight"
    scale_suffix = "weight_scale"

    def stored(self, rows: int, cols: int) -> list[Stored]:
        """The tensors of a quantized ``[rows, cols]`` weight (row tensors, then scalars)."""
        raise NotImplementedError

    def encode(self, block: torch.Tensor, amax: torch.Tensor | None) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """A row block of the weight -> (row tensors by suffix, the decoded float32 block)."""
        raise NotImplementedError

    def scalars(self, amax: torch.Tensor | None, act_amax: float | None) -> dict[str, torch.Tensor]:
        """The per-tensor tensors by suffix (weight and static activation scales)."""
        return {}

    def act_qdq(self, x: torch.Tensor, act_amax: float | None) -> torch.Tensor:
        """Activation quantize-dequantize as the serving kernel does it (W+A schemes)."""
        return x

    def weight_spec(self) -> Any:
        """Quark's weight spec for this format."""
        raise NotImplementedError

    def input_spec(self) -> Any:
        return None


def _spec(
    dtype: str,
    qscheme: str,
    *,
    dynamic: bool,
    group: int | None = None,
    scale_format: str | None = None,
    scale_mode: str | None = None,
    observer: str = "PerTensorMinMaxObserver",
    scale_quant: bool = False,
) -> dict:
    """One tensor spec in Quark's export schema (keys as Quark writes them)."""
    return {
        "block_size": None,
        "ch_axis": -1 if group else None,
        "dtype": dtype,
        "group_size": group,
        "is_dynamic": dynamic,
        "is_scale_quant": scale_quant,
        "mx_element_dtype": None,
        "observer_cls": observer,
        "qscheme": qscheme,
        "round_method": "half_even",
        "scale_calculation_mode": scale_mode,
        "scale_format": scale_format,
        "scale_type": "float",
        "symmetric": None if group else True,
    }


class MXEncoding(Encoding):
    group = mx.GROUP_SIZE
    exact_in_bf16 = True  # elements have at most 4 significant bits, scales are powers of two
    codec_version = mx.CODEC_VERSION

    def __init__(self, scheme: Scheme, layout: str, scale_mode: str):
        super().__init__(scheme, layout, scale_mode)
        self.format = scheme.format
        self.codec = mx.CODECS[scheme.format]
        self.quark_dtype = {"mxfp4": "fp4", "mxfp6_e2m3": "fp6_e2m3", "mxfp6_e3m2": "fp6_e3m2"}[scheme.format]
        self.bits = 4 if scheme.format == "mxfp4" else 6
        if scheme.format == "mxfp4":  # the workflow's own MXFP4 codec (same bytes as mx's E2M1, tested)
            self.codec, self.codec_version = mxfp4, mxfp4.CODEC_VERSION

    def stored(self, rows: int, cols: int) -> list[Stored]:
        return [
            Stored(self.weight_suffix, "U8", (rows, cols * self.bits // 8)),
            Stored(self.scale_suffix, "U8", (rows, cols // self.group)),
        ]

    def encode(self, block, amax):
        if self.codec is mxfp4:
            codes, scales = mxfp4.quantize_mxfp4(block, self.scale_mode)
            return {self.weight_suffix: codes, self.scale_suffix: scales}, mxfp4.dequantize_mxfp4(codes, scales)
        codes, scales = self.codec.quantize(block, self.scale_mode)
        return {self.weight_suffix: codes, self.scale_suffix: scales}, self.codec.dequantize(codes, scales)

    def act_qdq(self, x, act_amax):
        if not self.scheme.activations:
            return x
        if self.codec is mxfp4:
            return mxfp4.qdq_mxfp4(x, ACTIVATION_SCALE_MODE)
        return self.codec.qdq(x, ACTIVATION_SCALE_MODE)

    def _mx(self, dynamic: bool, scale_mode: str) -> dict:
        return _spec(
            self.quark_dtype,
            "per_group",
            dynamic=dynamic,
            group=self.group,
            scale_format="e8m0",
            scale_mode=scale_mode,
            observer="PerBlockMXObserver",
        )

    def weight_spec(self):
        return self._mx(False, self.scale_mode)

    def input_spec(self):
        return self._mx(True, ACTIVATION_SCALE_MODE) if self.scheme.activations else None


class FP8Encoding(Encoding):
    """FP8 e4m3 weights with a per-tensor scale; activations with a static per-tensor scale from
    calibration (``fp8``: an ``input_scale`` per Linear) or a per-tensor scale computed from
    each input at run time (``fp8_dynamic``: no ``input_scale``; vLLM's Quark W8A8 FP8 reads a
    dynamic input spec so)."""

    format = "fp8"
    tensor_amax = True
    codec_version = fp8.CODEC_VERSION

    @property
    def static_inputs(self) -> bool:
        return self.scheme.activations == "static"

    def stored(self, rows, cols):
        out = [Stored("weight", "F8_E4M3", (rows, cols)), Stored("weight_scale", "F32", ())]
        return out + ([Stored("input_scale", "F32", ())] if self.static_inputs else [])

    def encode(self, block, amax):
        codes, scale = fp8.quantize_fp8(block, "tensor", scale=fp8.scale_from_amax(amax))
        return {"weight": codes}, fp8.dequantize_fp8(codes, scale)

    def scalars(self, amax, act_amax):
        out = {"weight_scale": fp8.scale_from_amax(amax)}
        if self.static_inputs:
            out["input_scale"] = fp8.scale_from_amax(act_amax or 0.0)
        return out

    def act_qdq(self, x, act_amax):
        if not self.static_inputs:  # dynamic: the input's own amax, per call
            return fp8.dequantize_fp8(*fp8.quantize_fp8(x, "tensor")).to(x.dtype)
        return fp8.dequantize_fp8(*fp8.quantize_fp8(x, "tensor", scale=fp8.scale_from_amax(act_amax or 0.0))).to(
            x.dtype
        )

    def weight_spec(self):
        return _spec("fp8_e4m3", "per_tensor", dynamic=False)

    def input_spec(self):
        return _spec("fp8_e4m3", "per_tensor", dynamic=not self.static_inputs)


class NVFP4Encoding(Encoding):
    format = "nvfp4"
    group = nvfp4.BLOCK_SIZE
    tensor_amax = True
    codec_version = nvfp4.CODEC_VERSION

    def __init__(self, scheme: Scheme, layout: str, scale_mode: str):
        super().__init__(scheme, layout, scale_mode)
        # compressed-tensors stores the reciprocal tensor scale (weight_global_scale = 1/s).
        self.convention = "weight_global_scale" if layout == "compressed-tensors" else "weight_scale_2"
        self.weight_suffix = "weight_packed" if layout == "compressed-tensors" else "weight"
        self.global_suffix = self.convention
        self.input_suffix = {"quark": "input_scale_2", "modelopt": "input_scale"}.get(layout, "input_global_scale")
        self.scalar_shape = (1,) if layout == "compressed-tensors" else ()

    def stored(self, rows, cols):
        return [
            Stored(self.weight_suffix, "U8", (rows, cols // 2)),
            Stored("weight_scale", "F8_E4M3", (rows, cols // self.group)),
            Stored(self.global_suffix, "F32", self.scalar_shape),
            Stored(self.input_suffix, "F32", self.scalar_shape),
        ]

    def encode(self, block, amax):
        packed, scales, global_scale = nvfp4.quantize_nvfp4(block, self.convention, amax=amax)
        decoded = nvfp4.dequantize_nvfp4(packed, scales, torch.float32, global_scale, scale_mode=self.convention)
        return {self.weight_suffix: packed, "weight_scale": scales}, decoded

    def _global(self, amax: Any) -> torch.Tensor:
        s = nvfp4.tensor_scale(amax)
        return s if self.convention == "weight_scale_2" else torch.div(torch.ones_like(s), s)

    def scalars(self, amax, act_amax):
        return {
            self.global_suffix: self._global(amax).reshape(self.scalar_shape),
            self.input_suffix: self._global(act_amax or 0.0).reshape(self.scalar_shape),
        }

    def act_qdq(self, x, act_amax):
        flat = x.reshape(-1, x.shape[-1])
        packed, scales, g = nvfp4.quantize_nvfp4(flat, "weight_scale_2", amax=act_amax or 0.0)
        return nvfp4.dequantize_nvfp4(packed, scales, torch.float32, g).reshape(x.shape).to(x.dtype)

    def _specs(self, dynamic_blocks: bool) -> list[dict]:
        """Quark's NVFP4 spec pair: the FP4 group-16 spec and the static FP8 per-tensor scale's."""
        fp4 = _spec(
            "fp4",
            "per_group",
            dynamic=dynamic_blocks,
            group=self.group,
            scale_format="fp8_e4m3",
            observer="PerBlockNVFP4Observer",
        )
        return [fp4, _spec("fp8_e4m3", "per_tensor", dynamic=False, scale_quant=True)]

    def weight_spec(self):
        return self._specs(dynamic_blocks=False)

    def input_spec(self):
        return self._specs(dynamic_blocks=True)  # activation block scales are computed at run time


def encoding_for(scheme: str, layout: str | None = None, scale_mode: str = "even") -> Encoding:
    """The encoding that writes ``scheme`` in ``layout`` (default: the scheme's first)."""
    spec = scheme_for(scheme)
    layout = layout or spec.layouts[0]
    if layout not in spec.layouts:
        raise UserError(
            f"scheme {scheme!r} cannot be written in layout {layout!r}; it can be written in: {', '.join(spec.layouts)}"
        )
    if spec.format.startswith("mx"):
        if scale_mode not in mx.SCALE_MODES:
            raise UserError(f"unknown scale_mode {scale_mode!r}; expected one of {list(mx.SCALE_MODES)}")
        return MXEncoding(spec, layout, scale_mode)
    return {"fp8": FP8Encoding, "nvfp4": NVFP4Encoding}[spec.format](spec, layout, scale_mode)


# --------------------------------------------------------------------------- configs

#: KV-cache scale tensors by layout: (attention-relative name of k's scale, of v's).
KV_SCALE_NAMES: dict[str, tuple[str, str]] = {
    # vLLM maps Quark's .k_proj.output_scale -> .attn.k_scale (QuarkConfig.get_cache_scale_mapper)
    "quark": ("k_proj.output_scale", "v_proj.output_scale"),
    "modelopt": ("k_proj.k_scale", "v_proj.v_scale"),
    "compressed-tensors": ("k_scale", "v_scale"),
}


def _kv_spec() -> dict:
    return _spec("fp8_e4m3", "per_tensor", dynamic=False)


def build_quantization_config(
    scheme: str = "mxfp4_weight_only",
    scale_mode: str = "even",
    exclude: Sequence[str] = ("lm_head",),
    *,
    layout: str | None = None,
    kv_cache: str | None = None,
) -> dict[str, Any]:
    """The ``quantization_config`` written to the checkpoint's ``config.json`` (for layout
    ``modelopt`` also the body of ``hf_quant_config.json``, see :func:`extra_files`).

    Quark (what vLLM's ``QuarkConfig`` reads): ``export.kv_cache_group`` and
    ``export.pack_method``, ``exclude``, ``global_quant_config.{weight,input_tensors,
    output_tensors,bias}``, ``layer_quant_config`` and ``layer_type_quant_config`` (both dicts).
    An FP8 KV cache is ``kv_cache_group: ["*k_proj", "*v_proj"]`` with a matching
    ``layer_quant_config`` entry whose ``output_tensors`` is the FP8 per-tensor spec. No
    ``version`` key: we are not Quark, and provenance lives in the manifest.
    """
    enc = encoding_for(scheme, layout, scale_mode)
    if kv_cache is not None and kv_cache not in KV_CACHE_DTYPES:
        raise UserError(f"unknown kv_cache {kv_cache!r}; expected one of {list(KV_CACHE_DTYPES)}")
    if enc.layout == "compressed-tensors":
        return _compressed_tensors_config(enc, exclude, kv_cache)
    if enc.layout == "modelopt":
        return _modelopt_config(enc, exclude, kv_cache)
    global_config = {
        "weight": enc.weight_spec(),
        "input_tensors": enc.input_spec(),
        "output_tensors": None,
        "bias": None,
        "target_device": None,
    }
    # k/v_proj differ from the global config by their output (the KV cache) only: vLLM drops
    # that output spec and then requires q/k/v, which it fuses, to have equal configs.
    layer_quant = {proj: {**global_config, "output_tensors": _kv_spec()} for proj in ("*k_proj", "*v_proj")}
    return {
        "quant_method": "quark",
        "global_quant_config": global_config,
        "exclude": list(exclude),
        "layer_quant_config": layer_quant if kv_cache else {},
        "layer_type_quant_config": {},
        "kv_cache_quant_config": {},
        "kv_cache_post_rope": False,
        "softmax_quant_spec": None,
        "algo_config": None,
        "quant_mode": "eager_mode",
        "export": {
            "kv_cache_group": ["*k_proj", "*v_proj"] if kv_cache else [],
            "min_kv_scale": 0.0,
            "pack_method": "reorder",
            "weight_format": "real_quantized",
            "weight_merge_groups": None,
        },
    }


def _ct_args(group: int, *, dynamic: Any, observer: str) -> dict:
    return {
        "num_bits": 4,
        "type": "float",
        "symmetric": True,
        "group_size": group,
        "strategy": "tensor_group",
        "dynamic": dynamic,
        "observer": observer,
        "scale_dtype": "torch.float8_e4m3fn",
        "actorder": None,
        "block_structure": None,
    }


def _compressed_tensors_config(enc: Encoding, exclude: Sequence[str], kv_cache: str | None) -> dict[str, Any]:
    config = {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized",
        "quantization_status": "compressed",
        "ignore": list(exclude),
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": _ct_args(enc.group, dynamic=False, observer="memoryless_minmax"),
                "input_activations": _ct_args(enc.group, dynamic="local", observer="static_minmax"),
                "output_activations": None,
                "format": "nvfp4-pack-quantized",
            }
        },
        "kv_cache_scheme": None,
    }
    if kv_cache:
        config["kv_cache_scheme"] = {
            "num_bits": 8,
            "type": "float",
            "symmetric": True,
            "strategy": "tensor",
            "dynamic": False,
        }
    return config


def _modelopt_config(enc: Encoding, exclude: Sequence[str], kv_cache: str | None) -> dict[str, Any]:
    return {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "kv_cache_quant_algo": "FP8" if kv_cache else None,
        "group_size": enc.group,
        "exclude_modules": list(exclude),
    }


def extra_files(quantization_config: Mapping[str, Any]) -> dict[str, Any]:
    """Files a layout writes next to ``config.json`` (ModelOpt's ``hf_quant_config.json``)."""
    if quantization_config.get("quant_method") != "modelopt":
        return {}
    body = {k: v for k, v in quantization_config.items() if k != "quant_method"}
    return {"hf_quant_config.json": {"producer": {"name": "mlperf-repro"}, "quantization": body}}
