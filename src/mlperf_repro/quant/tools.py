"""The quantization tools a config recipe may name (``quantization.<recipe>.tool``): one registry.

``native`` (the default when ``tool`` is absent): the project's own codec quantizes the
acquired model (:func:`mlperf_repro.quant.stage.quantize_job`). ``prequantized``: a published
quantized checkpoint, acquired like a model (``checkpoint:`` names a ``models`` entry, pinned
and checksummed), is validated with our codecs against the unquantized model and passed
through (:func:`mlperf_repro.quant.prequantized.prequantized_job`). The config schema's
``tool`` enum equals :data:`TOOLS` (tests/test_quant_validate.py). Light module: config
validation may import it, so no torch here; jobs are imported when they run.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UserError

__all__ = ["DEFAULT_TOOL", "TOOLS", "Tool", "quantize_recipe", "tool_for"]


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
}
DEFAULT_TOOL = "native"


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
) -> dict[str, Any]:
    """Run the recipe's tool; ``checkpoint``: the acquired quantized checkpoint (prequantized)."""
    tool = tool_for(recipe.get("tool"))
    module, function = tool.job.split(":")
    job = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    if not tool.needs_checkpoint:
        return job(model_dir, quantized_dir, emulated_dir, recipe, container_image=container_image)
    if checkpoint is not None and not isinstance(checkpoint, str):
        checkpoint = checkpoint[0] if len(checkpoint) else None
    if not checkpoint:
        raise UserError(f"quantization tool {tool.name!r} needs the acquired checkpoint (recipe key 'checkpoint')")
    return job(checkpoint, model_dir, quantized_dir, emulated_dir, recipe, container_image=container_image)
