"""What the formats written by the project's checkpoint writer share: the writer call and the
calibration words (a private helper of this package: the leading underscore keeps discover() off it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def write_checkpoint(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from ..checkpoint import quantize_checkpoint

    return quantize_checkpoint(*args, **kwargs)


def write_pipeline(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from ..pipeline import quantize_pipeline

    return quantize_pipeline(*args, **kwargs)


def excluded(recipe: Mapping[str, Any]) -> str:
    return ", ".join(recipe.get("exclude", [])) or "none"


def static_calibration_lines(recipe: Mapping[str, Any], what: str) -> list[str]:
    """The calibration.md lines of a scheme whose activation (or KV-cache) scales are static."""
    calibration = dict(recipe.get("calibration") or {})
    rows = calibration.get("samples", 32)
    return [
        f"- Calibration data: {rows} rows of the benchmark's dataset (seed {calibration.get('seed', 0)}), their "
        f"prompt tokens cut into sequences of {calibration.get('seq_len', 512)}; {what} is the maximum absolute "
        "value seen on them by the unquantized model (the file's sha256, the rows and every amax are in the "
        "quantization manifest).",
    ]


def kv_cache_line(recipe: Mapping[str, Any]) -> list[str]:
    if recipe.get("kv_cache") != "fp8":
        return ["- KV cache: not quantized."]
    return [
        "- KV cache: FP8 e4m3, one static scale per layer for K and one for V (amax of the k_proj / v_proj "
        "outputs on the calibration data, before RoPE, / 448)."
    ]
