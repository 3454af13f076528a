"""The quantization tools a config recipe may name (``quantization.<recipe>.tool``): one registry.

``native`` (the default when ``tool`` is absent): the project's own codec quantizes the
acquired model (:func:`mlperf_repro.quant.stage.quantize_job`). ``prequantized``: a published
quantized checkpoint, acquired like a model (``checkpoint:`` names a ``models`` entry, pinned
and checksummed), is validated with our codecs against the unquantized model and passed
through (:func:`mlperf_repro.quant.prequantized.prequantized_job`). ``quark``: AMD Quark
quantizes the acquired model in its own environment (``./install.sh --quark``), calibrated
on rows of the benchmark's dataset (:func:`mlperf_repro.quant.quark_tool.quark_job`). The config schema's
``tool`` enum equals :data:`TOOLS` (tests/test_quant_validate.py). Light module: config
validation may import it, so no torch here; jobs are imported when they run.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from .schemes import activation_words

__all__ = [
    "DEFAULT_TOOL",
    "QUARK_FUSED_MXFP4_KERNEL",
    "TOOLS",
    "Tool",
    "calibration_lines",
    "needed_device",
    "quantize_recipe",
    "recipe_device",
    "tool_for",
    "transformations",
]


@dataclass(frozen=True)
class Tool:
    name: str
    job: str  # "module:function" under mlperf_repro.quant
    description: str
    needs_checkpoint: bool = False  # the recipe names a models entry holding a quantized checkpoint


TOOLS: dict[str, Tool] = {
    "native": Tool("native", "stage:quantize_job", "quantized by the project's own codec"),
    "prequantized": Tool(
        "prequantized",
        "prequantized:prequantized_job",
        "a published quantized checkpoint, validated with the project's codecs and passed through",
        needs_checkpoint=True,
    ),
    "quark": Tool(
        "quark",
        "quark_tool:quark_job",
        "quantized by AMD Quark (the vendor's tool) in its own environment, calibrated on the benchmark's "
        "calibration rows, validated with the project's codecs",
    ),
}
DEFAULT_TOOL = "native"

#: Quark algorithms that, with an MXFP4 scheme, call Quark's fused MXFP4 quantize-dequantize
#: kernel (amd-quark 0.13), which exists for CUDA/HIP only. Such a recipe runs on a GPU unless it
#: says ``device: cpu``; there the quark runner emulates the kernel with Quark's own reference
#: code (quant/quark_runner.py), slowly at a real model's size.
QUARK_FUSED_MXFP4_KERNEL = {
    "autosmoothquant": "its scale search calls Quark's fused qdq_mxfp4 kernel (quark/torch/kernel/mx/hip.py), "
    "implemented for CUDA/HIP devices only (on a CPU, device: cpu, Quark's emulation of it runs instead, slowly)",
}


def needed_device(recipe: dict[str, Any]) -> tuple[str, str | None]:
    """``("gpu", why)`` where the recipe's tool runs it on a GPU unless told otherwise (its
    algorithm calls a GPU kernel), else ``("cpu", None)``."""
    if tool_for(recipe.get("tool")).name == "quark" and str(recipe.get("scheme", "")).startswith("mxfp4"):
        for algorithm in recipe.get("algorithms") or []:
            if algorithm.lower() in QUARK_FUSED_MXFP4_KERNEL:
                return "gpu", f"Quark's {algorithm} with MXFP4: {QUARK_FUSED_MXFP4_KERNEL[algorithm.lower()]}"
    return "cpu", None


def recipe_device(recipe: dict[str, Any]) -> str:
    """Where the quantize job runs: the recipe's ``device``, else what its tool needs."""
    return recipe.get("device") or needed_device(recipe)[0]


def tool_for(name: str | None) -> Tool:
    name = name or DEFAULT_TOOL
    if name not in TOOLS:
        raise UserError(f"unknown quantization tool {name!r}; known tools: {', '.join(TOOLS)}")
    return TOOLS[name]


def quantize_recipe(
    model_dir: str,
    quantized_dir: str,
    emulated_dir: str,
    recipe: dict[str, Any],
    *,
    container_image: str | None = None,
    checkpoint: str | Sequence[str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run the recipe's tool; ``checkpoint``: the acquired quantized checkpoint (prequantized).
    ``options`` (e.g. ``mem_mb``, the job's memory) go to the tool's job as keywords."""
    tool = tool_for(recipe.get("tool"))
    if tool.name != DEFAULT_TOOL and (Path(model_dir) / "model_index.json").is_file():
        raise UserError(
            f"quantization tool {tool.name!r} handles LLM checkpoints; {model_dir} is a Diffusers pipeline "
            f"folder, which only tool {DEFAULT_TOOL!r} quantizes (its transformers' block Linears)"
        )
    module, function = tool.job.split(":")
    job = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    if not tool.needs_checkpoint:
        return job(model_dir, quantized_dir, emulated_dir, recipe, container_image=container_image, **options)
    if checkpoint is not None and not isinstance(checkpoint, str):
        checkpoint = checkpoint[0] if len(checkpoint) else None
    if not checkpoint:
        raise UserError(f"quantization tool {tool.name!r} needs the acquired checkpoint (recipe key 'checkpoint')")
    return job(checkpoint, model_dir, quantized_dir, emulated_dir, recipe, container_image=container_image, **options)


def transformations(recipe: dict[str, Any], models: dict[str, Any], *, pipeline: bool = False) -> str:
    """measurements.json's weight_transformations for a recipe (the format's words, or the published source);
    ``pipeline``: the model is a Diffusers pipeline (its transformers' block Linears quantized, tool native)."""
    from .formats import format_for
    from .pipeline_scope import SCOPE_WORDS, pipeline_exclude

    fmt = format_for(recipe["scheme"])
    if pipeline:
        return f"{fmt.transformations({**recipe, 'exclude': pipeline_exclude(recipe.get('exclude'))})}; {SCOPE_WORDS}"
    if tool_for(recipe.get("tool")).name == "quark":
        algorithms = ", ".join(recipe.get("algorithms") or []) or "none"
        kv = f", KV cache {recipe['kv_cache']}" if recipe.get("kv_cache") else ""
        return (
            f"post-training quantization to MXFP4 ({recipe['scheme']}, OCP MX E2M1 with E8M0 scales per 32 values, "
            f"scales rounded even; activations: {activation_words(recipe['scheme'])}) by AMD Quark{kv}; "
            f"algorithms: {algorithms}; calibrated on rows of the "
            f"benchmark's dataset; excluded: {', '.join(recipe.get('exclude') or ['lm_head'])}"
        )
    if not tool_for(recipe.get("tool")).needs_checkpoint:
        return fmt.transformations(recipe)
    source = (models.get(recipe["checkpoint"]) or {}).get("source", "?")
    return (
        f"none by the submitter: published {fmt.weight_data_types} checkpoint {recipe['checkpoint']} ({source}), "
        "served unchanged; its weights validated with the project codec against the unquantized model"
    )


def calibration_lines(
    recipe: dict[str, Any], models: dict[str, Any], manifest: dict[str, Any], *, pipeline: bool = False
) -> list[str]:
    """documentation/calibration.md's bullet lines for a recipe (``pipeline``: of a Diffusers pipeline)."""
    from .formats import format_for
    from .pipeline_scope import SCOPE_WORDS, pipeline_exclude

    if pipeline:
        lines = format_for(recipe["scheme"]).calibration({**recipe, "exclude": pipeline_exclude(recipe.get("exclude"))})
        return [f"- Quantized: {SCOPE_WORDS}.", *lines]

    if tool_for(recipe.get("tool")).name == "quark":
        return _quark_calibration_lines(recipe, manifest)
    if not tool_for(recipe.get("tool")).needs_checkpoint:
        return format_for(recipe["scheme"]).calibration(recipe)
    source = (models.get(recipe["checkpoint"]) or {}).get("source", "?")
    validation = manifest.get("validation") or {}
    worst = validation.get("worst_layers") or []
    lines = [
        f"- Published pre-quantized checkpoint `{recipe['checkpoint']}` ({source}), acquired against its sha256 "
        "checksums and served unchanged: no quantization or calibration by the submitter.",
        f"- Format: `{validation.get('weight_format', '?')}` (`quant_method: {validation.get('quant_method', '?')}`), "
        f"excluded modules: {', '.join(validation.get('exclude') or []) or 'none'}.",
    ]
    if worst:
        lines.append(
            f"- Validation: {validation.get('quantized_layers')} quantized layers decoded with the project codec; "
            f"worst relative weight error {worst[0]['rel_error']} (`{worst[0]['module']}`), bound "
            f"{validation.get('max_error')}."
        )
    return lines


def _quark_calibration_lines(recipe: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    calibration = manifest.get("calibration") or {}
    validation = manifest.get("validation") or {}
    worst = validation.get("worst_layers") or []
    activations = activation_words(recipe["scheme"])
    lines = [
        f"- Tool: AMD Quark {manifest.get('quark_version', '?')} (`quant_method: quark`), scheme `{recipe['scheme']}`: "
        "every nn.Linear but the excluded ones, OCP MXFP4 weights (E2M1, one E8M0 scale per 32 values, scales "
        f"rounded even), static; activations: {activations}.",
        f"- KV cache: {recipe.get('kv_cache') or 'not quantized'}"
        + (" (FP8 e4m3, per-tensor scales from calibration)." if recipe.get("kv_cache") == "fp8" else "."),
        f"- Algorithms: {', '.join(recipe.get('algorithms') or []) or 'none'}.",
        f"- Excluded modules: {', '.join(recipe.get('exclude') or ['lm_head'])}.",
        f"- Calibration data: {calibration.get('samples', '?')} rows of `{Path(calibration.get('file', '?')).name}` "
        f"(sha256 `{calibration.get('sha256', '?')}`), chosen with seed {calibration.get('seed', '?')}, their prompt "
        f"tokens cut into {calibration.get('sequences', '?')} sequences of {calibration.get('seq_len', '?')} tokens.",
    ]
    if worst:
        lines.append(
            f"- Validation: {validation.get('quantized_layers')} quantized layers decoded with the project codec; "
            f"worst relative weight error {worst[0]['rel_error']} (`{worst[0]['module']}`), bound "
            f"{validation.get('max_error')}."
        )
    return lines
