"""The quantize stage for one model x recipe (config ``quantization.<recipe>``)."""

from __future__ import annotations

import inspect
import os
import shutil
from pathlib import Path
from typing import Any

from .. import provenance
from ..errors import UserError
from ..fetch import verify_dir
from .calibration import select_calibration
from .checkpoint import _write_json
from .formats import format_for
from .pipeline import is_pipeline_dir
from .schemes import needs_calibration

MANIFEST_NAME = "quant_manifest.json"


def _accepts(func: Any, name: str) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def job_memory_mb() -> tuple[float | None, str]:
    """The memory this job may use, in MB, and where the figure comes from.

    SLURM's allocation (``SLURM_MEM_PER_NODE``), else the cgroup limit (``memory.max``,
    containers and systemd slices), else what the machine has available now (a local run
    shares the machine). ``(None, why)`` when none can be read.
    """
    slurm = os.environ.get("SLURM_MEM_PER_NODE", "")
    if slurm.isdigit() and int(slurm) > 0:
        return float(slurm), "SLURM_MEM_PER_NODE"
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            return int(limit) / 2**20, "cgroup memory.max"
    except OSError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024, "MemAvailable (/proc/meminfo)"
    except (OSError, ValueError, IndexError):
        pass
    return None, "unknown"


def quantize_job(
    model_dir: str,
    quark_dir: str,
    emulated_dir: str,
    recipe: dict[str, Any],
    container_image: str | None = None,
    mem_mb: float | None = None,
    calibration_file: str | None = None,
) -> dict[str, Any]:
    """``container_image``: the image the config names for this job, recorded in the manifest's
    software when the job runs inside it (the torch that wrote the checkpoint). ``mem_mb``: the
    job's memory (the rule's ``resources.mem_mb``); read from the job's environment when not
    given (:func:`job_memory_mb`). It picks the evaluation: whole-model logits when two float32
    copies fit, layer-wise otherwise (the manifest's ``evaluation`` says which and why).
    ``calibration_file``: the benchmark's dataset file, whose rows (``recipe.calibration``)
    static activation and KV-cache scales are measured on (:func:`needs_calibration`). A
    Diffusers pipeline folder (``model_index.json``) goes to the format's ``pipeline_writer``
    (:func:`mlperf_repro.quant.pipeline.quantize_pipeline`: the transformers' block Linears;
    no calibration)."""
    mem_source = "resources.mem_mb"
    if mem_mb is None:
        mem_mb, mem_source = job_memory_mb()
    fmt = format_for(recipe["scheme"])
    # The scheme's format writes the checkpoint: an LLM folder with its writer, a Diffusers
    # pipeline folder (model_index.json: Wan 2.2's transformers) with its pipeline writer.
    pipeline = is_pipeline_dir(model_dir)
    writer = fmt.pipeline_writer if pipeline else fmt.writer
    if writer is None:
        raise UserError(
            f"{model_dir} is a Diffusers pipeline folder and quantization format {fmt.name} (scheme "
            f"{recipe['scheme']}) has no writer for one (QuantFormat.pipeline_writer)"
        )
    verify_dir(model_dir)  # never quantize weights that no longer match their checksums
    for out in (quark_dir, emulated_dir):
        if Path(out).exists():
            shutil.rmtree(out)  # a half-written dir from a killed job
    # A format's writer that picks its evaluation from the job's memory takes mem_mb.
    extra: dict[str, Any] = {"mem_mb": mem_mb} if _accepts(writer, "mem_mb") else {}
    for key in ("layout", "kv_cache"):
        if recipe.get(key):
            extra[key] = recipe[key]
    # A pipeline takes no calibration rows: its writer refuses a static-scale scheme, naming what is missing.
    if needs_calibration(recipe) and not pipeline:
        if not calibration_file:
            raise UserError(
                f"scheme {recipe['scheme']}"
                + (f" with kv_cache {recipe['kv_cache']}" if recipe.get("kv_cache") else "")
                + " needs calibration rows, but no benchmark of this model uses this recipe (its dataset is the "
                "calibration data): add one to benchmarks"
            )
        extra["calibration"] = select_calibration(calibration_file, recipe.get("calibration"))
    manifest = writer(
        model_dir,
        quark_dir,
        emulated_dir,
        scheme=recipe["scheme"],
        scale_mode=recipe.get("scale_mode", "even"),
        exclude=recipe.get("exclude", ["lm_head"]),
        manifest_path=Path(quark_dir) / MANIFEST_NAME,
        **extra,
    )
    if isinstance(manifest.get("evaluation"), dict):
        manifest["evaluation"]["mem_source"] = mem_source
    container = provenance.container(container_image)
    if container is not None:
        manifest["software"]["container"] = container
    _write_json(Path(quark_dir) / MANIFEST_NAME, manifest)
    # The emulated copy carries the same manifest, so a run that served it records which
    # FP4 checkpoint it stands for.
    shutil.copyfile(Path(quark_dir) / MANIFEST_NAME, Path(emulated_dir) / MANIFEST_NAME)
    return manifest
