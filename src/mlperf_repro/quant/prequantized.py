"""The ``prequantized`` tool: pass a published quantized checkpoint through, validated.

The checkpoint was acquired like any model (``models.<name>``: pinned source, sha256
manifest); here it is re-verified against its checksums, validated with our codecs against
the unquantized reference model (:func:`mlperf_repro.quant.validate.validate_checkpoint`;
a layer above the bound fails the stage, the worst layers named), copied unchanged to the
served folder, decoded to a bf16 copy for CPU serving, and described in the manifest
(tool, source, checksums, validation results).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from .. import provenance
from ..errors import UserError
from ..fetch import MANIFEST_NAME as CHECKSUMS_NAME
from ..fetch import RECORD_NAME, STATUS_VERIFIED, verify_dir
from ..fetch._manifest import WORKFLOW_MARKERS, load_record
from ..hashing import sha256_tree
from .formats import format_for
from .schemes import SCHEMES
from .validate import WEIGHT_FORMATS, dequantized_shards, validate_checkpoint

MANIFEST_NAME = "quant_manifest.json"  # the name mlperf_repro.quant.stage writes too
_INDEX_NAME = "model.safetensors.index.json"
_NOT_COPIED = {RECORD_NAME, CHECKSUMS_NAME, MANIFEST_NAME} | set(WORKFLOW_MARKERS)
# Files the emulated (plain bf16) copy must not carry: weights are rewritten, the index is
# rebuilt, and the quantization configs would make a loader expect quantized tensors.
_NOT_EMULATED = {"config.json", "hf_quant_config.json", _INDEX_NAME, "recipe.yaml"}


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _tree(root: Path) -> dict[str, Any]:
    files = {
        rel: {"sha256": h, "bytes": (root / rel).stat().st_size}
        for rel, h in sha256_tree(root).items()
        if rel not in _NOT_COPIED
    }
    return {"files": files, "bytes": sum(f["bytes"] for f in files.values())}


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # same filesystem: no second copy of a large checkpoint
    except OSError:
        shutil.copyfile(src, dst)


def write_emulated_copy(src: Path, edir: Path) -> None:
    """The emulated folder of a quantized checkpoint ``src``: weights decoded by our codecs
    (bf16, bounded parts), the config without ``quantization_config``, the index rebuilt,
    the side files (tokenizer, generation config) copied. ``edir`` must exist, empty."""
    weight_map: dict[str, str] = {}
    from safetensors.torch import save_file

    for shard, tensors in dequantized_shards(src):
        save_file(tensors, edir / shard, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, shard))
        del tensors
    config = json.loads((src / "config.json").read_text())
    config.pop("quantization_config", None)
    _write_json(edir / "config.json", config)
    if (src / _INDEX_NAME).is_file() or len(set(weight_map.values())) > 1:
        total = sum((edir / s).stat().st_size for s in set(weight_map.values()))
        _write_json(edir / _INDEX_NAME, {"metadata": {"total_size": total}, "weight_map": weight_map})
    for path in sorted(src.iterdir()):
        if path.is_file() and path.suffix != ".safetensors" and path.name not in _NOT_COPIED | _NOT_EMULATED:
            shutil.copyfile(path, edir / path.name)


def prequantized_job(
    checkpoint_dir: str,
    model_dir: str,
    quantized_dir: str,
    emulated_dir: str,
    recipe: dict[str, Any],
    container_image: str | None = None,
    mem_mb: float | None = None,
) -> dict[str, Any]:
    """``mem_mb``: the job's memory. Validation and the served copies stay bounded by one shard
    of the checkpoint (decoded to bf16) at a time; the error against the unquantized model is
    the whole-model logit comparison where two float32 copies fit in ``mem_mb`` (or no limit
    is given), else per Linear one weight at a time (:func:`reference_error`)."""
    src, qdir, edir = Path(checkpoint_dir), Path(quantized_dir), Path(emulated_dir)
    verify_dir(src)  # a tampered or damaged file is refused here, named
    record = load_record(src) or {}
    if record.get("status") != STATUS_VERIFIED:
        raise UserError(
            f"{src} was acquired without checksums ({record.get('status')!r}); a prequantized checkpoint "
            "must be pinned: give its models entry sha256 or sha256_manifest"
        )
    verify_dir(model_dir)
    report = validate_checkpoint(src, model_dir, max_error=recipe.get("max_error"))
    if not report.ok:
        worst = "; ".join(f"{e.module} {e.rel_error:.4g}" for e in report.worst())
        raise UserError(
            f"prequantized checkpoint {record.get('source')} fails validation "
            f"({len(report.findings)} finding(s)):\n  - "
            + "\n  - ".join(str(f) for f in report.findings[:20])
            + (f"\nworst layers (relative weight error): {worst}" if worst else "")
        )
    expected = format_for(recipe["scheme"]).name
    if report.weight_format != expected:
        raise UserError(
            f"prequantized checkpoint {record.get('source')} holds {report.weight_format} weights but the "
            f"recipe's scheme {recipe['scheme']!r} is format {expected}"
        )
    _check_activations(report, recipe["scheme"], record.get("source"))
    for out in (qdir, edir):
        if out.exists():
            shutil.rmtree(out)  # a half-written dir from a killed job
        out.mkdir(parents=True)
    # Served folder: the published files, unchanged.
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_file() and rel.as_posix() not in _NOT_COPIED:
            (qdir / rel).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(path, qdir / rel)
    write_emulated_copy(src, edir)

    evaluation, logits, layers = reference_error(Path(model_dir), edir, report, mem_mb)
    manifest: dict[str, Any] = {
        "manifest_version": 1,
        "tool": "prequantized",
        "scheme": recipe["scheme"],
        "weight_format": report.weight_format,
        "quant_method": report.quant_method,
        "codec_version": WEIGHT_FORMATS[report.weight_format].codec_version(),
        "source": {
            "checkpoint": recipe.get("checkpoint"),
            "uri": record.get("source"),
            "status": record.get("status"),
            "files": record.get("files"),
            **({"revision": record["revision"]} if "revision" in record else {}),
        },
        "validation": report.to_dict(),
        "evaluation": evaluation,
        "logit_error": logits,
        "layerwise_error": layers,
        "reference": {"dir": str(model_dir), "record": load_record(Path(model_dir))},
        "outputs": {"quantized_dir": _tree(qdir), "emulated_dir": _tree(edir)},
        "cpu_serving_emulation": "weights-only",
        "software": _software(),
    }
    manifest["reference"]["record"] = {
        k: v for k, v in (manifest["reference"]["record"] or {}).items() if k in ("source", "status")
    }
    container = provenance.container(container_image)
    if container is not None:
        manifest["software"]["container"] = container
    _write_json(qdir / MANIFEST_NAME, manifest)
    shutil.copyfile(qdir / MANIFEST_NAME, edir / MANIFEST_NAME)
    return manifest


def _check_activations(report: Any, scheme_name: str, source: Any) -> None:
    """The checkpoint's declared activations are the recipe scheme's (weights only, dynamic or static)."""
    scheme = SCHEMES.get(scheme_name)
    if scheme is None or report.activations == scheme.activations:
        return  # a plugged-in format's scheme declares nothing here
    declared = report.declared.get("activations")
    said = (
        f"{declared['dtype']} activations, {report.activations} ({declared['config_key']})"
        if declared
        else "no activation quantization"
    )
    fitting = [s.name for s in SCHEMES.values() if s.format == scheme.format and s.activations == report.activations]
    raise UserError(
        f"prequantized checkpoint {source} declares {said}, but the recipe's scheme {scheme_name!r} has "
        f"activations {scheme.activations or 'none (weights only)'}: name the scheme the checkpoint holds"
        + (f" ({' or '.join(fitting)})" if fitting else "")
    )


def reference_error(
    model_dir: Path, emulated_dir: Path, report: Any, mem_mb: float | None
) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """``(evaluation, logit_error, layerwise_error)`` of the served (emulated) copy against the
    unquantized model, chosen from the job's memory as the quantize stage's own writer does.
    Weights only: the checkpoint's activation and KV-cache quantization are not emulated here.
    The per-Linear path reads the Llama layout; for other models that cannot hold two float32
    copies, nothing is measured and the evaluation says why."""
    from .checkpoint import logit_error
    from .evaluate import choose_evaluation, layerwise_error
    from .tensor_files import SUPPORTED_MODEL_TYPES, _weight_files, tensor_refs

    refs = [ref for f in _weight_files(model_dir) for ref in tensor_refs(f)]
    choice = {**choose_evaluation(refs, mem_mb), "emulated": "weights only"}
    model_type = json.loads((model_dir / "config.json").read_text()).get("model_type")
    quantized = sorted(f"{module}.weight" for module in report.quantized)
    if choice["method"] == "logits":
        per_layer = choice["per_layer_too"] and model_type in SUPPORTED_MODEL_TYPES
        layers = layerwise_error(model_dir, emulated_dir, quantized=quantized) if per_layer else None
        return {**choice, "per_layer_too": per_layer}, logit_error(model_dir, emulated_dir), layers
    if model_type not in SUPPORTED_MODEL_TYPES:
        reason = f"{choice['reason']}; the per-Linear evaluation reads the Llama layout, not {model_type!r}"
        return {**choice, "method": None, "reason": reason}, None, None
    return choice, None, layerwise_error(model_dir, emulated_dir, quantized=quantized)


def _software() -> dict[str, str]:
    import safetensors
    import torch

    import mlperf_repro

    return {
        "mlperf_repro": mlperf_repro.__version__,
        "safetensors": safetensors.__version__,
        "torch": torch.__version__,
    }
