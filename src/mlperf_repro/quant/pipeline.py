"""Quantize a Diffusers pipeline folder: Wan 2.2's two transformers, everything else unchanged.

Input: a Diffusers folder (``model_index.json``), as Wan-AI/Wan2.2-T2V-A14B-Diffusers and the
demo's ``builtin:tiny-wan``: ``transformer/`` and ``transformer_2/`` (``WanTransformer3DModel``,
``config.json`` + ``diffusion_pytorch_model*.safetensors``), ``vae/``, ``text_encoder/``,
``tokenizer/``, ``scheduler/``.

**What is quantized** (AMD's v6.0 Wan 2.2 scope: every ``nn.Linear`` inside
``transformer.blocks`` and ``transformer_2.blocks``): in each component whose class is in
:data:`TRANSFORMER_CLASSES`, every 2-D ``<module>.weight`` under ``blocks.<i>.`` (the blocks
hold no other 2-D weight: their norms are 1-D, ``scale_shift_table`` is 3-D; a test checks the
selection against the model's ``nn.Linear`` modules) - the self- and cross-attention
``to_q``/``to_k``/``to_v``/``to_out.0`` and the feed-forward ``ffn.net.0.proj`` and
``ffn.net.2`` - minus ``exclude``. Never quantized: the patch embedding (a Conv3d), the
condition embedders (the time and text MLPs), ``proj_out``, every norm and
``scale_shift_table``, the biases, the VAE, the text encoder. :data:`WAN_EXCLUDE` names the
modules outside the blocks and is always part of the written ``exclude``; a recipe's
``exclude`` adds to it (the LLM default ``lm_head``, which names nothing here, is dropped).

**Outputs.** ``quark_dir``: a Diffusers folder in which each quantized transformer's
safetensors hold its Linear weights in the layout the LLM writer uses for the scheme
(:mod:`mlperf_repro.quant.encodings`, through the same streaming writer
:func:`~mlperf_repro.quant.checkpoint.write_quantized_files`: FP8 ``weight`` f8e4m3 +
``weight_scale`` f32[]; MXFP4 ``weight`` u8[out, in/2] + ``weight_scale`` u8[out, in/32]; ...)
and whose ``config.json`` carries the ``quantization_config`` the LLM path writes (Quark's
schema by default); ``model_index.json`` and the other components as acquired (hard links
where the filesystem allows, else copies). ``emulated_dir``: the same folder with every
quantized weight decoded (bfloat16, as the LLM path's emulated copy) and the original
``config.json``, which ``WanPipeline.from_pretrained`` loads and the diffusers backend serves
(the weights' quantization only: activations run unquantized).

**Calibration.** Schemes with static activation scales (``fp8``, ``nvfp4``) would need the
transformers' inputs while generating from the benchmark's prompts; that is not collected, so
they are refused with a :class:`~mlperf_repro.errors.UserError` that names the schemes that
work: ``fp8_dynamic`` (AMD's Wan recipe: FP8 weights, per-tensor activation scales at run
time), the weight-only and the dynamic MX schemes.

**Evaluation** (``quant_manifest.json``): ``weight_error``, per transformer and layer the
relative weight error ``||W_q - W||_F / ||W||_F`` and the max-abs error, measured by the
validator (:func:`mlperf_repro.quant.validate.validate_checkpoint`, our codecs, against the
source), and, where two float32 copies of the pipeline fit in the job's memory,
``video_error`` (:func:`video_error`): one small video from one prompt and one fixed latent
rendered by the unquantized pipeline and by the emulated one (the served weights), and by the
emulated one with the scheme's activation quantization emulated (W+A schemes), compared in
uint8 pixel levels (mean and max absolute difference, PSNR); during the unquantized render,
each quantized Linear's output error on its own inputs.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from mlperf_repro.errors import UserError
from mlperf_repro.quant.checkpoint import (
    _SKIP_COPY_NAMES,
    _WEIGHT_WORDS,
    NOT_CONTENT,
    SHARD_CAP_BYTES,
    _activation_words,
    _copy_side_files,
    _prepare_out_dir,
    _software_versions,
    _tree_record,
    _write_json,
    tensor_inventory,
    weight_amax,
    write_quantized_files,
)
from mlperf_repro.quant.encodings import (
    ACTIVATION_SCALE_MODE,
    build_quantization_config,
    encoding_for,
    extra_files,
)
from mlperf_repro.quant.memory import need_mb
from mlperf_repro.quant.pipeline_scope import (
    PIPELINE_INDEX,
    TRANSFORMER_CLASSES,
    WAN_EXCLUDE,
    WEIGHTS_INDEX,
    pipeline_exclude,
)
from mlperf_repro.quant.tensor_files import (
    _FLOAT_DTYPES,
    TensorRef,
    _is_excluded,
    _sig,
    _weight_files,
    check_exclude,
    tensor_refs,
)
from mlperf_repro.quant.validate import read_json_object

__all__ = [
    "EVAL_PROMPT",
    "PIPELINE_INDEX",
    "TRANSFORMER_CLASSES",
    "WAN_EXCLUDE",
    "WEIGHTS_INDEX",
    "calibration_error",
    "eval_settings",
    "is_pipeline_dir",
    "pipeline_components",
    "quantize_pipeline",
    "select_pipeline_tensors",
    "transformer_components",
    "video_error",
    "video_metrics",
]

#: The prompt of the video error (one of the demo's sentences, a plain scene description).
EVAL_PROMPT = "A cat walks along the beach at sunset, waves rolling in behind it."
#: The video error's settings: the round's guidance, seed and expert boundary (the folder's
#: ``boundary_ratio`` where it has one), at a size a CPU renders quickly.
EVAL_VIDEO: dict[str, Any] = {
    "height": 64,
    "width": 64,
    "num_frames": 9,
    "num_inference_steps": 4,
    "guidance_scale": 4.0,
    "guidance_scale_2": 3.0,
    "seed": 42,
}

#: ``act_qdq(x) -> x``: the scheme's activation quantize-dequantize (what its kernel does at run time).
ActQDQ = Callable[[torch.Tensor], torch.Tensor]


# --------------------------------------------------------------------------- folder


def is_pipeline_dir(path: str | Path) -> bool:
    """A Diffusers pipeline folder: it has ``model_index.json``."""
    return (Path(path) / PIPELINE_INDEX).is_file()


def pipeline_components(src: str | Path) -> dict[str, tuple[str, str]]:
    """The components ``model_index.json`` lists: ``{name: (library, class)}`` (unset ones left out)."""
    index = read_json_object(Path(src) / PIPELINE_INDEX)
    return {
        name: (str(value[0]), str(value[1]))
        for name, value in index.items()
        if not name.startswith("_") and isinstance(value, list) and len(value) == 2 and value[1] is not None
    }


def transformer_components(src: str | Path) -> dict[str, str]:
    """``{component: block prefix regex}`` of the components the writer quantizes (their class
    in :data:`TRANSFORMER_CLASSES`); a UserError when there is none or one is already quantized."""
    src = Path(src)
    out: dict[str, str] = {}
    for name, (_library, cls) in pipeline_components(src).items():
        if cls not in TRANSFORMER_CLASSES:
            continue
        config_path = src / name / "config.json"
        if not config_path.is_file():
            raise UserError(f"{src}: model_index.json lists {name} ({cls}) but {config_path} is missing")
        config = read_json_object(config_path)
        if config.get("_class_name") not in (None, cls):
            raise UserError(f"{config_path}: _class_name {config.get('_class_name')!r}, model_index.json says {cls}")
        if config.get("quantization_config"):
            raise UserError(
                f"{config_path} already has a quantization_config; quantize the unquantized pipeline instead"
            )
        out[name] = TRANSFORMER_CLASSES[cls]
    if not out:
        classes = ", ".join(sorted({c for _, c in pipeline_components(src).values()})) or "none"
        raise UserError(
            f"{src}: no component of this Diffusers pipeline can be quantized (its classes: {classes}; "
            f"supported: {', '.join(TRANSFORMER_CLASSES)})"
        )
    return out


def select_pipeline_tensors(
    shapes: dict[str, Sequence[int]],
    exclude: Sequence[str] = WAN_EXCLUDE,
    *,
    blocks: str = TRANSFORMER_CLASSES["WanTransformer3DModel"],
    group: int = 1,
    format_name: str = "",
) -> list[str]:
    """Names (``<module>.weight``) of a transformer's tensors to quantize, sorted: the 2-D
    weights under a block (``re.match(blocks, module)``) not matched by ``exclude`` (exact
    module names or ``re:<regex>``, vLLM's Quark rule). A UserError for an in-features size
    that is not a multiple of the format's ``group``."""
    check_exclude(exclude)
    chosen = []
    for name in sorted(shapes):
        if not name.endswith(".weight") or len(shapes[name]) != 2:
            continue
        module = name[: -len(".weight")]
        if not re.match(blocks, module) or _is_excluded(module, exclude):
            continue
        in_features = int(shapes[name][1])
        if in_features % group:
            raise UserError(
                f"tensor {name!r} has in-features {in_features}, not a multiple of the {format_name} "
                f"group size {group}; add {module!r} to the quantization exclude list"
            )
        chosen.append(name)
    return chosen


def _link_or_copy(src: Path, dst: Path) -> bool:
    """Hard-link ``src`` to ``dst`` (True), or copy it where the filesystem refuses (False)."""
    try:
        os.link(src, dst)
        return True
    except OSError:
        shutil.copyfile(src, dst)
        return False


def _copy_component(src: Path, dests: Sequence[Path]) -> dict[str, Any]:
    """An unchanged component folder (every file, subfolders too) into each of ``dests``."""
    files = sorted(p for p in src.rglob("*") if p.is_file() and p.name not in NOT_CONTENT)
    linked = 0
    for dest in dests:
        for p in files:
            target = dest / p.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            linked += _link_or_copy(p, target)
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "linked": linked == len(files) * len(dests),
    }


# --------------------------------------------------------------------------- writer


def _inventory(folder: Path) -> tuple[list[Path], dict[Path, list[TensorRef]], dict[str, TensorRef]]:
    files = _weight_files(folder)
    return (files, *tensor_inventory(files, f"{folder}: "))


def calibration_error(scheme: str) -> UserError:
    """Why a scheme with static activation scales cannot quantize a Diffusers pipeline (yet)."""
    return UserError(
        f"scheme {scheme} needs static activation scales measured on calibration data, and for a Diffusers "
        "pipeline (text-to-video) that data is the transformers' inputs while generating videos from the "
        "benchmark's prompts, which the quantize stage does not collect: use scheme fp8_dynamic (FP8 weights, "
        "per-tensor activation scales at run time: AMD's Wan 2.2 recipe), mxfp4 (dynamic MXFP4 activations), "
        "mxfp4_weight_only or an mxfp6 scheme"
    )


def quantize_pipeline(
    src_dir: str | Path,
    quark_dir: str | Path,
    emulated_dir: str | Path,
    *,
    scheme: str = "mxfp4_weight_only",
    scale_mode: str = "even",
    exclude: Sequence[str] | None = None,
    layout: str | None = None,
    kv_cache: str | None = None,
    calibration: dict[str, Any] | None = None,
    evaluate: bool = True,
    manifest_path: str | Path | None = None,
    mem_mb: float | None = None,
    shard_cap_bytes: int | None = SHARD_CAP_BYTES,
    video_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Quantize a Diffusers pipeline folder (see the module doc); write both output folders;
    return the manifest (also written to ``manifest_path`` when given, after the outputs are hashed).

    ``scheme``, ``scale_mode``, ``layout``: as :func:`~mlperf_repro.quant.checkpoint.quantize_checkpoint`.
    ``exclude``: modules (of each transformer) left unquantized besides :data:`WAN_EXCLUDE`.
    ``kv_cache`` and static-scale schemes are refused (no KV cache; no calibration data);
    ``calibration`` is accepted for the stage's call shape and unused. ``mem_mb``: the job's
    memory; the video error runs when two float32 copies of the pipeline fit (no limit when
    None), ``evaluate=False`` skips it. ``video_settings``: overrides of :data:`EVAL_VIDEO`.
    """
    del calibration  # no scheme this writer accepts measures anything on it
    src, qdir, edir = Path(src_dir), Path(quark_dir), Path(emulated_dir)
    if not is_pipeline_dir(src):
        raise UserError(f"{src} is not a Diffusers pipeline folder (no {PIPELINE_INDEX})")
    enc = encoding_for(scheme, layout, scale_mode)
    spec = enc.scheme
    if kv_cache:
        raise UserError(
            f"kv_cache {kv_cache}: a diffusion transformer keeps no KV cache; remove kv_cache from the recipe"
        )
    if spec.needs_calibration:
        raise calibration_error(scheme)
    if qdir.resolve() == edir.resolve():
        raise UserError("quark_dir and emulated_dir must be different directories")
    if shard_cap_bytes is not None and shard_cap_bytes <= 0:
        raise UserError(f"shard_cap_bytes must be positive, got {shard_cap_bytes}")
    exclude_all = pipeline_exclude(exclude)
    check_exclude(exclude_all)
    quant_config = build_quantization_config(scheme, scale_mode, exclude_all, layout=enc.layout)

    # Inventory and selection first (headers only): every user error before any output.
    transformers = transformer_components(src)
    plans: dict[str, dict[str, Any]] = {}
    for name, blocks in transformers.items():
        files, refs_by_file, refs = _inventory(src / name)
        shapes = {k: r.shape for k, r in refs.items()}
        quantized = set(
            select_pipeline_tensors(shapes, exclude_all, blocks=blocks, group=enc.group, format_name=enc.format.upper())
        )
        if not quantized:
            raise UserError(f"{src / name}: no Linear weight inside its blocks is left to quantize after {exclude_all}")
        for key in sorted(quantized):
            if refs[key].dtype not in _FLOAT_DTYPES:
                raise UserError(f"{src / name}: tensor {key!r} has dtype {refs[key].torch_dtype}, expected float")
        plans[name] = {"files": files, "refs_by_file": refs_by_file, "refs": refs, "quantized": quantized}
    input_record = _tree_record(src)

    _prepare_out_dir(qdir, src)
    _prepare_out_dir(edir, src)
    copied = []
    for p in sorted(src.iterdir()):
        if p.is_file() and not p.name.startswith(".") and p.name not in _SKIP_COPY_NAMES | NOT_CONTENT:
            for dest in (qdir, edir):
                shutil.copyfile(p, dest / p.name)
            copied.append(p.name)
    unchanged: dict[str, Any] = {}
    for d in sorted(p for p in src.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if d.name not in transformers:
            unchanged[d.name] = _copy_component(d, (qdir / d.name, edir / d.name))

    components: dict[str, Any] = {}
    src_bytes = q_bytes = 0
    for name, plan in plans.items():
        sub, sq, se = src / name, qdir / name, edir / name
        sq.mkdir()
        se.mkdir()
        w_amax = weight_amax(plan["refs"], plan["quantized"]) if enc.tensor_amax else {}
        written = write_quantized_files(
            plan["files"],
            plan["refs_by_file"],
            plan["quantized"],
            enc,
            sq,
            se,
            w_amax=w_amax,
            act_amax={},
            shard_cap_bytes=shard_cap_bytes,
            write_index=(sub / WEIGHTS_INDEX).is_file() or len(plan["files"]) > 1,
            index_name=WEIGHTS_INDEX,
        )
        src_bytes += written["source"]
        q_bytes += written["quark"]
        config = read_json_object(sub / "config.json")
        _write_json(sq / "config.json", {**config, "quantization_config": quant_config})
        for extra, body in extra_files(quant_config).items():
            _write_json(sq / extra, body)
        shutil.copyfile(sub / "config.json", se / "config.json")
        side = _copy_side_files(sub, (sq, se), skip=(WEIGHTS_INDEX,))
        components[name] = {
            "class": pipeline_components(src)[name][1],
            "quantized_tensors": {"count": len(plan["quantized"]), "names": sorted(plan["quantized"])},
            "copied_files": side,
        }

    weight_error = {name: _weight_error(qdir / name, src / name) for name in plans}
    all_refs = [r for plan in plans.values() for r in plan["refs"].values()]
    choice = _choose_video_evaluation(src, mem_mb, evaluate=evaluate)
    video = None
    if choice["method"] == "video":
        act = (lambda x: enc.act_qdq(x, None)) if spec.activations else None
        video = video_error(
            src,
            edir,
            quantized={name: sorted(n[: -len(".weight")] for n in plan["quantized"]) for name, plan in plans.items()},
            act_qdq=act,
            activation_emulation=f"{enc.format} QDQ ({_activation_words(enc)})" if act else None,
            settings=video_settings,
        )

    is_mx = enc.format.startswith("mx")
    names = sorted(f"{name}/{n}" for name, plan in plans.items() for n in plan["quantized"])
    manifest = {
        "manifest_version": 1,
        "model_kind": "diffusers-pipeline",
        "codec_version": enc.codec_version,
        "scheme": scheme,
        "scheme_description": spec.description,
        "weight_format": _WEIGHT_WORDS[enc.format],
        "layout": enc.layout,
        "activation_format": _activation_words(enc) if spec.activations else None,
        "scale_mode": scale_mode if is_mx else None,
        "activation_scale_mode": ACTIVATION_SCALE_MODE if is_mx and spec.activations else None,
        "group_size": enc.group if enc.group > 1 else None,
        "exclude": exclude_all,
        "quantized_scope": "every 2-D weight (nn.Linear) under blocks.<i>. of "
        + ", ".join(f"{n} ({components[n]['class']})" for n in plans),
        "quantized_tensors": {"count": len(names), "names": names},
        "quantization_config": quant_config,
        "pipeline": {
            "class": read_json_object(src / PIPELINE_INDEX).get("_class_name"),
            "quantized_components": components,
            "unchanged_components": unchanged,
        },
        "kv_cache": None,
        "calibration": None,
        "copied_files": copied,
        "input": input_record,
        "outputs": {"quark_dir": _tree_record(qdir), "emulated_dir": _tree_record(edir)},
        "quantized_weight_bytes": {"source": src_bytes, "quark": q_bytes},
        # The diffusers backend serves the emulated copy: the quantized weights, with the
        # activations in the pipeline's precision (the video error emulates them too).
        "cpu_serving_emulation": "weights-only",
        "cpu_serving_matches_scheme": not spec.activations,
        "emulated_copy": (
            "bfloat16, equal to the checkpoint's decoded values"
            if enc.exact_in_bf16
            else "bfloat16, each decoded value rounded once (the float32 tensor scale)"
        ),
        "evaluation": {**choice, "transformer_parameters": sum(math.prod(r.shape) for r in all_refs)},
        "logit_error": None,
        "layerwise_error": None,
        "weight_error": weight_error,
        "video_error": video,
        "software": {**_software_versions(), **_diffusers_version()},
    }
    if manifest_path is not None:
        mpath = Path(manifest_path)
        mpath.parent.mkdir(parents=True, exist_ok=True)
        _write_json(mpath, manifest)
    return manifest


def _diffusers_version() -> dict[str, str]:
    try:
        import diffusers
    except ImportError:
        return {}
    return {"diffusers": diffusers.__version__}


def _weight_error(quantized: Path, reference: Path) -> dict[str, Any]:
    """Per-layer weight error of one written transformer, measured by the validator; a
    UserError when the written folder fails a structural check (a writer fault)."""
    from mlperf_repro.quant.validate import validate_checkpoint

    report = validate_checkpoint(quantized, reference)
    broken = [f for f in report.findings if f.rule != "weight-error"]
    if broken:
        raise UserError(f"{quantized}: the written checkpoint fails validation: {broken[0]}")
    values = [e.rel_error for e in report.errors]
    return {
        "metric": "||W_q - W||_F / ||W||_F per quantized Linear (decoded with the project codec)",
        "count": len(values),
        "mean": _sig(sum(values) / len(values)) if values else None,
        "max": _sig(max(values)) if values else None,
        "bound": report.max_error,
        "above_bound": sorted(f.tensor for f in report.findings),
        "worst": [{"module": e.module, "rel_error": _sig(e.rel_error)} for e in report.worst()],
        "layers": {
            e.module: {"rel_error": _sig(e.rel_error), "max_abs_error": _sig(e.max_abs_error)}
            for e in sorted(report.errors, key=lambda e: e.module)
        },
    }


def _pipeline_tensors(src: Path) -> list[TensorRef]:
    return [r for f in sorted(src.glob("*/*.safetensors")) for r in tensor_refs(f)]


def _choose_video_evaluation(src: Path, mem_mb: float | None, *, evaluate: bool) -> dict[str, Any]:
    refs = _pipeline_tensors(src)
    need = need_mb(max((r.nbytes for r in refs), default=0), sum(math.prod(r.shape) for r in refs))["logits"]
    out = {"mem_mb": mem_mb, "video_need_mb": need}
    if not evaluate:
        return {"method": None, "reason": "evaluation turned off (evaluate=False)", **out}
    if mem_mb is not None and need > mem_mb:
        return {
            "method": None,
            "reason": f"two float32 copies of the pipeline ({need} MB) do not fit in the job's {mem_mb:g} MB: "
            "weight error only",
            **out,
        }
    why = "no memory limit given" if mem_mb is None else f"two float32 copies ({need} MB) fit in {mem_mb:g} MB"
    return {"method": "video", "reason": f"{why}: one video from each pipeline, compared", **out}


# --------------------------------------------------------------------------- video error


def eval_settings(pipeline_dir: str | Path, overrides: dict[str, Any] | None = None):
    """The :class:`~mlperf_repro.video.settings.VideoSettings` of the video error:
    :data:`EVAL_VIDEO` with the folder's ``boundary_ratio`` (None: one transformer, and then
    no ``guidance_scale_2``) and ``overrides`` laid over it."""
    from mlperf_repro.video.settings import VideoSettings

    values = dict(EVAL_VIDEO)
    boundary = read_json_object(Path(pipeline_dir) / PIPELINE_INDEX).get("boundary_ratio")
    values["boundary_ratio"] = boundary
    if boundary is None:
        values.pop("guidance_scale_2")
    values.update(overrides or {})
    return VideoSettings.from_mapping(values, "the video error's settings")


def video_metrics(reference: Any, other: Any) -> dict[str, Any]:
    """Two uint8 videos ``[frames, H, W, 3]`` compared in pixel levels: mean and max absolute
    difference and PSNR in dB (``None`` for identical videos, whose PSNR is infinite)."""
    import numpy as np

    if reference.shape != other.shape:
        raise UserError(f"videos of shapes {reference.shape} and {other.shape} cannot be compared")
    diff = reference.astype(np.float64) - other.astype(np.float64)
    mse = float((diff * diff).mean())
    return {
        "mean_abs_diff": _sig(float(np.abs(diff).mean())),
        "max_abs_diff": int(np.abs(diff).max()),
        "psnr_db": _sig(10 * math.log10(255.0**2 / mse)) if mse > 0 else None,
        "identical": mse == 0,
    }


def _layer_stats(errors: dict[str, dict[str, float]]) -> dict[str, Any]:
    rel = {
        f"{comp}/{module}": _sig(math.sqrt(e["err"] / e["ref"])) if e["ref"] > 0 else 0.0
        for comp, modules in errors.items()
        for module, e in sorted(modules.items())
        if e["calls"]
    }
    values = list(rel.values())
    return {
        "metric": "||W_q q(x) - W x||_F / ||W x||_F per quantized Linear over every call while the unquantized "
        "pipeline renders the video (x: its own inputs; q: the scheme's activation QDQ, identity for weight-only)",
        "count": len(values),
        "mean": _sig(sum(values) / len(values)) if values else None,
        "max": _sig(max(values)) if values else None,
        "worst": [{"module": m, "rel_error": e} for m, e in sorted(rel.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
        "layers": rel,
        "calls": {comp: sum(e["calls"] for e in modules.values()) for comp, modules in errors.items()},
    }


def video_error(
    ref_dir: str | Path,
    emulated_dir: str | Path,
    *,
    quantized: dict[str, Iterable[str]],
    act_qdq: ActQDQ | None = None,
    activation_emulation: str | None = None,
    prompt: str = EVAL_PROMPT,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One video from ``prompt`` and one fixed latent by the unquantized pipeline (``ref_dir``)
    and by its emulated copy (``emulated_dir``: what the diffusers backend serves), compared
    (:func:`video_metrics`), both in float32 on the CPU; with ``act_qdq`` (a W+A scheme) also
    the emulated pipeline with each quantized Linear's input quantize-dequantized, the scheme
    as its kernels run it. ``quantized``: the quantized modules per component; while the
    unquantized pipeline renders, each one's output error on its own inputs is recorded."""
    from mlperf_repro.video.generate import fixed_latent, generate_video, load_pipeline

    started = time.time()
    video = eval_settings(ref_dir, settings)
    ref = load_pipeline(ref_dir, dtype="float32", vae_dtype="float32")
    emu = load_pipeline(emulated_dir, dtype="float32", vae_dtype="float32")
    transformer = ref.transformer if ref.transformer is not None else ref.transformer_2
    latent = fixed_latent(video, channels=transformer.config.in_channels)

    errors: dict[str, dict[str, dict[str, float]]] = {}
    handles = []

    def measure(comp: str, module: str, emu_module: torch.nn.Module) -> Callable[..., None]:
        slot = errors.setdefault(comp, {}).setdefault(module, {"err": 0.0, "ref": 0.0, "calls": 0})

        def hook(_module: torch.nn.Module, args: tuple, output: torch.Tensor) -> None:
            x = args[0]
            xq = act_qdq(x) if act_qdq is not None else x
            yq = torch.nn.functional.linear(xq, emu_module.weight, emu_module.bias)
            slot["err"] += float((yq.double() - output.double()).pow(2).sum())
            slot["ref"] += float(output.double().pow(2).sum())
            slot["calls"] += 1

        return hook

    def pre_qdq(_module: torch.nn.Module, args: tuple) -> tuple:
        return (act_qdq(args[0]), *args[1:])

    with torch.no_grad():
        try:
            for comp, modules in quantized.items():
                for module in modules:
                    target = getattr(ref, comp).get_submodule(module)
                    handles.append(
                        target.register_forward_hook(measure(comp, module, getattr(emu, comp).get_submodule(module)))
                    )
            reference = generate_video(ref, prompt, settings=video, latent=latent)
        finally:
            for h in handles:
                h.remove()
        served = generate_video(emu, prompt, settings=video, latent=latent)
        scheme_video = None
        if act_qdq is not None:
            handles = [
                getattr(emu, comp).get_submodule(module).register_forward_pre_hook(pre_qdq)
                for comp, modules in quantized.items()
                for module in modules
            ]
            try:
                scheme_video = generate_video(emu, prompt, settings=video, latent=latent)
            finally:
                for h in handles:
                    h.remove()
    return {
        "prompt": prompt,
        "settings": asdict(video),
        "latent": f"fixed_latent(seed {video.seed}), the same for every pipeline",
        "video_shape": list(reference.shape),
        "compute": "diffusers WanPipeline, float32 (VAE float32), CPU",
        "served": video_metrics(reference, served),
        "served_is": "the emulated copy as the diffusers backend serves it (quantized weights, float activations)",
        "scheme": video_metrics(reference, scheme_video) if scheme_video is not None else None,
        "activation_emulation": activation_emulation if act_qdq is not None else None,
        "layer_output_error": _layer_stats(errors),
        "seconds": round(time.time() - started, 2),
    }
