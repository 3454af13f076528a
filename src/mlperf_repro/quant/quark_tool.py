"""The ``quark`` tool: the vendor's quantizer, AMD Quark, run for real in its own environment.

Quark's pins (its transformers range, onnx, ...) are kept apart from the workflow's vLLM
stack: ``./install.sh --quark`` builds ``.venv-quark`` from ``envs/quark.txt`` (or point
``MLPERF_REPRO_QUARK_ENV`` at another environment). The job

1. picks the calibration rows: ``recipe.calibration.samples`` rows of the calibration file
   (the benchmark's dataset file, its ``tok_input`` / ``input_tokens`` column), chosen by
   ``random.Random(seed).sample``; their tokens, concatenated in row order, are cut into
   sequences of ``seq_len`` tokens (the last, shorter piece dropped unless it is the only one),
   as Quark's own pile-val loader does: every sequence has one length, which Quark's layer-wise
   replay (AutoSmoothQuant, GPTQ) needs, and no padding token enters the statistics. With
   ``packing: per_row`` the rows keep their own lengths; when the recipe has algorithms they are
   right-padded to the longest (:func:`.calibration.fixed_length`; the padding goes into the
   manifest). The file's sha256, the seed and the row indices go into the manifest;
2. runs :mod:`mlperf_repro.quant.quark_runner` by path in the Quark environment
   (``LLMTemplate.get_config`` for OCP MXFP4 weights and activations, ``kv_cache: fp8``,
   ``algorithms``, then ``export_safetensors``: ``quant_method: quark``);
3. validates the export with :func:`mlperf_repro.quant.validate.validate_checkpoint`
   against the unquantized model (our codecs; a layer above ``max_error`` fails the stage);
4. writes the emulated bf16 copy for CPU serving (decoded by our codecs) and the manifest
   (tool quark, Quark's version, the recipe, the calibration file's hash, validation).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .. import provenance
from ..errors import UserError
from .calibration import fixed_length, pad_token_id, select_calibration
from .formats import format_for
from .prequantized import (
    _NOT_COPIED,
    MANIFEST_NAME,
    _link_or_copy,
    _software,
    _tree,
    _write_json,
    reference_error,
    write_emulated_copy,
)
from .tools import recipe_device
from .validate import WEIGHT_FORMATS, validate_checkpoint

ENV_VARIABLE = "MLPERF_REPRO_QUARK_ENV"
# The largest MXFP4 fake-quantize call the runner lets through; larger ones are cut into exact
# row chunks (quark_runner.py): amd-quark 0.13's AutoSmoothQuant hands the kernel a whole
# calibration set's activations, and on an H200 calls of 2**31 elements or more failed.
QDQ_MAX_ELEMENTS = 2**30
RUNNER = Path(__file__).with_name("quark_runner.py")
# Quark writes these itself; the rest of the model folder's small files (tokenizer) are copied.
_FROM_QUARK = {"config.json", "generation_config.json", "model.safetensors.index.json"}


def quark_env() -> Path:
    """The Quark environment's root: ``$MLPERF_REPRO_QUARK_ENV``, else ``.venv-quark`` in the checkout."""
    configured = os.environ.get(ENV_VARIABLE)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / ".venv-quark"


def quark_python() -> Path | None:
    python = quark_env() / "bin" / "python"
    return python if python.is_file() else None


def run_quark(
    model_dir: str | Path,
    output_dir: str | Path,
    recipe: dict[str, Any],
    calibration: dict[str, Any],
    *,
    work_dir: str | Path,
    qdq_reference: str | Path | None = None,
    device: str | None = None,
    qdq_max_elements: int = QDQ_MAX_ELEMENTS,
) -> dict[str, Any]:
    """Run quark_runner in the Quark environment; return its report. Raises UserError with the log's tail.
    ``qdq_max_elements``: the largest MXFP4 fake-quantize call before it is cut into row chunks."""
    python = quark_python()
    if python is None:
        raise UserError(f"the Quark environment {quark_env()} is not built: build it with ./install.sh --quark")
    fmt = format_for(recipe["scheme"])
    if fmt.name != "mxfp4":
        raise UserError(f"tool quark quantizes to MXFP4 only; the recipe's scheme {recipe['scheme']!r} is {fmt.name}")
    work = Path(work_dir)
    input_ids, padding = calibration["input_ids"], None
    if recipe.get("algorithms") and len({len(ids) for ids in input_ids}) > 1:
        input_ids, padding = fixed_length(input_ids, pad_token_id(model_dir))
    (work / "calibration.json").write_text(json.dumps({"input_ids": input_ids}))
    args = {
        "model_dir": str(model_dir),
        "output_dir": str(output_dir),
        "report": str(work / "report.json"),
        "calibration": str(work / "calibration.json"),
        "scheme": recipe["scheme"],  # a Quark template name (mxfp4, mxfp4_weight_only, mxfp4_fp8)
        "kv_cache": recipe.get("kv_cache"),
        "algorithms": list(recipe.get("algorithms") or []),
        "exclude": list(recipe.get("exclude") or ["lm_head"]),
        "device": device,  # None: the runner takes CUDA/ROCm when torch sees one, else the CPU
        "qdq_max_elements": qdq_max_elements,
        "seed": calibration["seed"],
        "qdq_reference": str(qdq_reference) if qdq_reference else None,
    }
    (work / "args.json").write_text(json.dumps(args, indent=2))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # Quark's torch compiles with inductor: its own cache, since another torch build's (vLLM's,
    # in /tmp/torchinductor_<user>) made its C++ compile fail ("'at::vec' has not been declared").
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(work_dir) / "inductor-cache"))
    if device == "cpu":
        # Quark's GPTQ synchronises CUDA whenever torch sees a GPU, also for a model on the CPU
        # ("Expected a cuda device, but got: cpu", amd-quark 0.13 on an H200 host): hide the GPUs.
        env.update(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="")
    log = work / "quark.log"
    with open(log, "w") as handle:
        proc = subprocess.run(
            [str(python), str(RUNNER), str(work / "args.json")], stdout=handle, stderr=subprocess.STDOUT, env=env
        )
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise UserError(f"Quark failed (exit {proc.returncode}, log {log}):\n  " + "\n  ".join(tail))
    report = json.loads((work / "report.json").read_text())
    if padding:
        report["calibration_padding"] = padding
    return report


def quark_job(
    model_dir: str,
    quantized_dir: str,
    emulated_dir: str,
    recipe: dict[str, Any],
    container_image: str | None = None,
    mem_mb: float | None = None,
    calibration_file: str | None = None,
) -> dict[str, Any]:
    """``calibration_file``: the dataset file the calibration rows come from (the benchmark's).
    ``mem_mb``: the job's memory. Quark holds the whole model in memory (``from_pretrained``),
    so the job needs about its bf16 size plus the calibration; the error of the served copy
    against the unquantized model is measured as for a published checkpoint
    (:func:`.prequantized.reference_error`: logits where two float32 copies fit, else per Linear)."""
    if not calibration_file:
        raise UserError("tool quark needs a calibration file (the benchmark's dataset file)")
    qdir, edir = Path(quantized_dir), Path(emulated_dir)
    calibration = select_calibration(calibration_file, recipe.get("calibration"))
    for out in (qdir, edir):
        if out.exists():
            shutil.rmtree(out)  # a half-written dir from a killed job
    edir.mkdir(parents=True)
    qdir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="quark-", dir=qdir.parent) as work:
        device = "cuda" if recipe_device(recipe) == "gpu" else "cpu"
        report = run_quark(
            model_dir,
            qdir,
            recipe,
            calibration,
            work_dir=work,
            device=device,
            qdq_max_elements=int(recipe.get("qdq_max_elements") or QDQ_MAX_ELEMENTS),
        )
        log = Path(work, "quark.log").read_text(errors="replace")
    (qdir / "quark.log").write_text(log)
    for path in sorted(Path(model_dir).iterdir()):  # tokenizer and other side files
        if path.is_file() and path.suffix != ".safetensors" and path.name not in _FROM_QUARK | _NOT_COPIED:
            if not (qdir / path.name).exists():
                _link_or_copy(path, qdir / path.name)
    validation = validate_checkpoint(qdir, model_dir, max_error=recipe.get("max_error"))
    if not validation.ok:
        worst = "; ".join(f"{e.module} {e.rel_error:.4g}" for e in validation.worst())
        raise UserError(
            f"Quark's checkpoint {qdir} fails validation ({len(validation.findings)} finding(s)):\n  - "
            + "\n  - ".join(str(f) for f in validation.findings[:20])
            + (f"\nworst layers (relative weight error): {worst}" if worst else "")
        )
    write_emulated_copy(qdir, edir)
    evaluation, logits, layers = reference_error(Path(model_dir), edir, validation, mem_mb)
    manifest: dict[str, Any] = {
        "manifest_version": 1,
        "tool": "quark",
        "quark_version": report["quark"],
        "scheme": recipe["scheme"],
        "recipe": recipe,
        "weight_format": validation.weight_format,
        "quant_method": validation.quant_method,
        "codec_version": WEIGHT_FORMATS[validation.weight_format].codec_version(),
        "calibration": {
            **{k: v for k, v in calibration.items() if k != "input_ids"},
            **({"padding": report["calibration_padding"]} if "calibration_padding" in report else {}),
        },
        "quark": report,
        "validation": validation.to_dict(),
        "evaluation": evaluation,
        "logit_error": logits,
        "layerwise_error": layers,
        "outputs": {"quantized_dir": _tree(qdir), "emulated_dir": _tree(edir)},
        "cpu_serving_emulation": "weights-only",
        "software": {**_software(), "amd-quark": report["quark"], "python": sys.version.split()[0]},
        "device": provenance.device_record(
            "gpu" if report.get("device") == "cuda" else "cpu", report.get("device_name")
        ),
    }
    container = provenance.container(container_image)
    if container is not None:
        manifest["software"]["container"] = container
    _write_json(qdir / MANIFEST_NAME, manifest)
    shutil.copyfile(qdir / MANIFEST_NAME, edir / MANIFEST_NAME)
    return manifest
