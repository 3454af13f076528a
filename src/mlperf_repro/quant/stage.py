"""The quantize stage for one model x recipe (config ``quantization.<recipe>``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from .. import provenance
from ..fetch import verify_dir
from .checkpoint import _write_json
from .formats import format_for

MANIFEST_NAME = "quant_manifest.json"


def quantize_job(
    model_dir: str, quark_dir: str, emulated_dir: str, recipe: dict[str, Any], container_image: str | None = None
) -> dict[str, Any]:
    """``container_image``: the image the config names for this job, recorded in the manifest's
    software when the job runs inside it (the torch that wrote the checkpoint)."""
    writer = format_for(recipe["scheme"]).writer  # the scheme's format writes the checkpoint
    verify_dir(model_dir)  # never quantize weights that no longer match their checksums
    for out in (quark_dir, emulated_dir):
        if Path(out).exists():
            shutil.rmtree(out)  # a half-written dir from a killed job
    manifest = writer(
        model_dir,
        quark_dir,
        emulated_dir,
        scheme=recipe["scheme"],
        scale_mode=recipe.get("scale_mode", "even"),
        exclude=recipe.get("exclude", ["lm_head"]),
        manifest_path=Path(quark_dir) / MANIFEST_NAME,
    )
    container = provenance.container(container_image)
    if container is not None:
        manifest["software"]["container"] = container
        _write_json(Path(quark_dir) / MANIFEST_NAME, manifest)
    # The emulated copy carries the same manifest, so a run that served it records which
    # FP4 checkpoint it stands for.
    shutil.copyfile(Path(quark_dir) / MANIFEST_NAME, Path(emulated_dir) / MANIFEST_NAME)
    return manifest
