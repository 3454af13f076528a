"""The quantization schemes a recipe may name (``quantization.<recipe>.scheme``), their weight
format, activation handling and checkpoint layouts: one table, read by config validation (so no
torch here) and by the checkpoint writer (:mod:`mlperf_repro.quant.encodings`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError

__all__ = ["KV_CACHE_DTYPES", "LAYOUTS", "SCHEMES", "Scheme", "activation_words", "needs_calibration", "scheme_for"]

#: Checkpoint layouts (which tool's tensor names and config) the writer can produce.
LAYOUTS: tuple[str, ...] = ("quark", "modelopt", "compressed-tensors")

#: KV-cache quantizations a recipe may ask for (``quantization.<recipe>.kv_cache``).
KV_CACHE_DTYPES: tuple[str, ...] = ("fp8",)


@dataclass(frozen=True)
class Scheme:
    """One quantization recipe; names follow Quark's LLM templates.

    ``format``: the weight format (the names of :data:`mlperf_repro.quant.validate.WEIGHT_FORMATS`);
    ``activations``: ``None`` (weights only: W4A16 and the like), ``"dynamic"`` (scales computed
    at run time: per block for MX, per tensor for FP8) or ``"static"`` (a per-tensor scale from calibration);
    ``layouts``: the layouts it can be written in, the first the default;
    ``activation_format``: the activations' format where it is not the weights' (``mxfp4_fp8``);
    ``tools``: the quantization tools that produce it (``None``: every tool that serves the format).
    """

    name: str
    format: str
    activations: str | None
    description: str
    layouts: tuple[str, ...] = ("quark",)
    activation_format: str | None = None
    tools: tuple[str, ...] | None = None

    @property
    def needs_calibration(self) -> bool:
        return self.activations == "static"


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("mxfp4", "mxfp4", "dynamic", "W4A4: MXFP4 weights, dynamic MXFP4 activations"),
        Scheme("mxfp4_weight_only", "mxfp4", None, "W4A16: MXFP4 weights, bf16 activations"),
        Scheme(
            "mxfp4_fp8",
            "mxfp4",
            "static",
            "W4A8: MXFP4 weights, FP8 e4m3 activations with a per-tensor scale from calibration (Quark's "
            "mxfp4_fp8; AMD's gpt-oss-120b); quantized by Quark or served as published, not by the native writer",
            activation_format="fp8",
            tools=("quark", "prequantized"),
        ),
        Scheme("mxfp6_e2m3", "mxfp6_e2m3", "dynamic", "W6A6: MXFP6 (E2M3) weights, dynamic MXFP6 activations"),
        Scheme("mxfp6_e2m3_weight_only", "mxfp6_e2m3", None, "W6A16: MXFP6 (E2M3) weights, bf16 activations"),
        Scheme("mxfp6_e3m2", "mxfp6_e3m2", "dynamic", "W6A6: MXFP6 (E3M2) weights, dynamic MXFP6 activations"),
        Scheme("mxfp6_e3m2_weight_only", "mxfp6_e3m2", None, "W6A16: MXFP6 (E3M2) weights, bf16 activations"),
        Scheme(
            "fp8",
            "fp8",
            "static",
            "W8A8: FP8 e4m3 weights and activations, per-tensor static scales (activations calibrated)",
        ),
        Scheme(
            "fp8_dynamic",
            "fp8",
            "dynamic",
            "W8A8: FP8 e4m3 weights (per-tensor static scales) and activations with a per-tensor scale computed "
            "at run time (no calibration; AMD's Wan 2.2 recipe)",
        ),
        Scheme(
            "nvfp4",
            "nvfp4",
            "static",
            "W4A4: NVFP4 weights and activations (E2M1, E4M3 scale per 16, FP32 tensor scale; the "
            "activations' tensor scale calibrated, their block scales dynamic)",
            layouts=("quark", "modelopt", "compressed-tensors"),
        ),
    )
}


def activation_words(name: str) -> str:
    """A scheme's activations in words (documentation/calibration.md, measurements.json)."""
    scheme = scheme_for(name)
    fmt = (scheme.activation_format or scheme.format).upper().replace("_", " ")
    if scheme.activations is None:
        return "none (bf16)"
    if scheme.activations == "dynamic":
        per = "per 32-value block" if scheme.format.startswith("mx") else "per tensor"
        return f"{fmt}, scales computed at run time {per}"
    return f"{fmt}, one static per-tensor scale per Linear from calibration"


def scheme_for(name: str) -> Scheme:
    if name not in SCHEMES:
        raise UserError(f"unknown quantization scheme {name!r}; expected one of {sorted(SCHEMES)}")
    return SCHEMES[name]


def needs_calibration(recipe: dict) -> bool:
    """The native writer measures static scales on calibration rows for this recipe: a scheme
    with static activation scales (FP8, NVFP4) or an FP8 KV cache."""
    scheme = SCHEMES.get(recipe["scheme"])  # a plugged-in format's scheme is not in this table
    return bool(scheme and scheme.needs_calibration) or bool(recipe.get("kv_cache"))
