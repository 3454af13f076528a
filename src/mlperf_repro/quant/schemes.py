"""The quantization schemes a recipe may name (``quantization.<recipe>.scheme``), their weight
format, activation handling and checkpoint layouts: one table, read by config validation (so no
torch here) and by the checkpoint writer (:mod:`mlperf_repro.quant.encodings`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError

__all__ = ["KV_CACHE_DTYPES", "LAYOUTS", "SCHEMES", "Scheme", "needs_calibration", "scheme_for"]

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
    ``layouts``: the layouts it can be written in, the first the default.
    """

    name: str
    format: str
    activations: str | None
    description: str
    layouts: tuple[str, ...] = ("quark",)

    @property
    def needs_calibration(self) -> bool:
        return self.activations == "static"


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("mxfp4", "mxfp4", "dynamic", "W4A4: MXFP4 weights, dynamic MXFP4 activations"),
        Scheme("mxfp4_weight_only", "mxfp4", None, "W4A16: MXFP4 weights, bf16 activations"),
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


def scheme_for(name: str) -> Scheme:
    if name not in SCHEMES:
        raise UserError(f"unknown quantization scheme {name!r}; expected one of {sorted(SCHEMES)}")
    return SCHEMES[name]


def needs_calibration(recipe: dict) -> bool:
    """The native writer measures static scales on calibration rows for this recipe: a scheme
    with static activation scales (FP8, NVFP4) or an FP8 KV cache."""
    scheme = SCHEMES.get(recipe["scheme"])  # a plugged-in format's scheme is not in this table
    return bool(scheme and scheme.needs_calibration) or bool(recipe.get("kv_cache"))
