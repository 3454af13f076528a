"""The quantize stage for one model x recipe (config ``quantization.<recipe>``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..fetch import verify_dir
from .checkpoint import quantize_checkpoint

MANIFEST_NAME = "quant_manifest.json"


def quantize_job(model_dir: str, quark_dir: str, emulated_dir: str, recipe: dict[str, Any]) -> dict[str, Any]:
    verify_dir(model_dir)  # never quantize weights that no longer match their checksums
    for out in (quark_dir, emulated_dir):
        if Path(out).exists():
            shutil.rmtree(out)  # a half-written dir from a killed job
    manifest = quantize_checkpoint(
        model_dir,
        quark_dir,
        emulated_dir,
        scheme=recipe["scheme"],
        scale_mode=recipe.get("scale_mode", "even"),
        exclude=recipe.get("exclude", ["lm_head"]),
        manifest_path=Path(quark_dir) / MANIFEST_NAME,
    )
    # The emulated copy carries the same manifest, so a run that served it records which
    # FP4 checkpoint it stands for.
    shutil.copyfile(Path(quark_dir) / MANIFEST_NAME, Path(emulated_dir) / MANIFEST_NAME)
    return manifest
