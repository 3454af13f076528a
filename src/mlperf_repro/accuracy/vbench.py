"""VBench scoring of text-to-video (wan-2.2-t2v-a14b's ``vbench_score``), run in VBench's own environment.

MLPerf's score (text_to_video/wan-2.2-t2v-a14b/run_evaluation.py) is VBench in standard mode
(``vbench_standard``, checkpoints loaded from local files) over six dimensions, the rules
table's ``accuracy.vbench_dimensions``: subject_consistency, dynamic_degree, motion_smoothness,
appearance_style, scene, background_consistency; the score is the unweighted mean of their
aggregates (the first element of each ``*_eval_results.json`` entry) times 100. In standard
mode VBench scores each video only in the dimensions VBench_full_info.json tags its prompt with.

VBench needs numpy<2 and transformers 4.33.2, so it runs in ``.venv-vbench``
(``./install.sh --vbench``, envs/vbench.txt) through :mod:`.vbench_runner`, a script that
imports only the standard library and VBench, talking JSON. Each of the six dimensions needs
checkpoints VBench downloads when it does not find them (even when told to load locally), and
nothing here may touch the network: :func:`missing_checkpoints` lists the files each needs
(:func:`checkpoint_paths`), and a dimension runs only when all are present. CLIP ViT-B/32's
published sha256 is checked; a config may give the others (``sha256``). The one dimension
that needs no weights, ``temporal_flickering``, runs whenever the environment exists: when the
six cannot, :func:`evaluate_vbench` still scores it, as a labelled diagnostic that is not part of
vbench_score, so VBench's plumbing (videos written, the environment, the runner) is exercised
on every run.

``setup`` (the config's ``vbench`` entry, every key optional)::

    python:     VBench's environment's python (default <repo>/.venv-vbench/bin/python)
    cache_dir:  VBench's checkpoint folder, its VBENCH_CACHE_DIR (default $VBENCH_CACHE_DIR, else ~/.cache/vbench)
    torch_home: torch.hub's folder, for DINO's weights (default $TORCH_HOME, else ~/.cache/torch)
    hf_home:    the Hugging Face folder, for bert-base-uncased (default $HF_HOME, else ~/.cache/huggingface)
    sha256:     {path relative to its folder above: sha256}, checked before VBench runs
    device:     cpu (default) or cuda
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..hashing import sha256_file
from .videos import vbench_folder

#: The dimensions that need no downloaded weights (VBench's init_submodules gives them none).
MODEL_FREE = ("temporal_flickering",)
#: VBench.check_dimension_requires_extra_info: custom_input mode refuses these (they need the
#: auxiliary info VBench_full_info.json holds for its own prompts).
CUSTOM_INPUT_REFUSES = frozenset(
    {"object_class", "multiple_objects", "scene", "appearance_style", "color", "spatial_relationship"}
)
MODES = ("standard", "custom_input")
#: In CLIP's download URL and checked by clip._download (VBench's local load checks nothing).
CLIP_VIT_B32 = "clip_model/ViT-B-32.pt"
CLIP_VIT_B32_SHA256 = "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af"
PUBLISHED_SHA256 = {CLIP_VIT_B32: CLIP_VIT_B32_SHA256}
BERT_REPO = "hub/models--bert-base-uncased"

RUNNER = Path(__file__).with_name("vbench_runner.py")
REPO = Path(__file__).resolve().parents[3]
SETUP_KEYS = ("python", "cache_dir", "torch_home", "hf_home", "sha256", "device")
DIAGNOSTIC_NOTE = "not part of vbench_score: VBench's model-free dimension, run so the scoring path is exercised"

# What VBench 0.1.5 (utils.init_submodules, local=True) and the libraries it calls read, per
# dimension: (folder, path inside it). Probed on this project's machines (docs: the VBench notes).
# * subject_consistency: VBench checks the clone of facebookresearch/dino and the .pth under its
#   cache (the .pth only for existence), then torch.hub.load(source="local") runs the clone's
#   hubconf.dino_vitb16(pretrained=True), which reads torch.hub's own copy under TORCH_HOME.
# * scene: Tag2Text also loads bert-base-uncased (BertTokenizer and BertModel.from_pretrained)
#   from the Hugging Face cache; see _bert_files.
_CHECKPOINTS: dict[str, tuple[tuple[str, str], ...]] = {
    "temporal_flickering": (),
    "subject_consistency": (
        ("cache_dir", "dino_model/facebookresearch_dino_main/hubconf.py"),
        ("cache_dir", "dino_model/facebookresearch_dino_main/vision_transformer.py"),
        ("cache_dir", "dino_model/facebookresearch_dino_main/utils.py"),
        ("cache_dir", "dino_model/dino_vitbase16_pretrain.pth"),
        ("torch_home", "hub/checkpoints/dino_vitbase16_pretrain.pth"),
    ),
    "dynamic_degree": (("cache_dir", "raft_model/models/raft-things.pth"),),
    "motion_smoothness": (("cache_dir", "amt_model/amt-s.pth"),),
    "appearance_style": (("cache_dir", CLIP_VIT_B32),),
    "background_consistency": (("cache_dir", CLIP_VIT_B32),),
    "scene": (("cache_dir", "caption_model/tag2text_swin_14m.pth"), ("hf_home", BERT_REPO)),
}
KNOWN_DIMENSIONS = tuple(_CHECKPOINTS)


def _bert_files(hf_home: Path) -> list[tuple[str, Path]]:
    """bert-base-uncased in the Hugging Face cache, as transformers reads it offline: refs/main
    names the snapshot; the tokenizer's vocab.txt, config.json and the weights (model.safetensors,
    else pytorch_model.bin) lie in it."""
    ref = f"{BERT_REPO}/refs/main"
    files = [(ref, hf_home / ref)]
    if not (hf_home / ref).is_file():
        return files  # the snapshot is unknown without it: refs/main is reported missing
    snapshot = f"{BERT_REPO}/snapshots/{(hf_home / ref).read_text().strip()}"
    weights = "model.safetensors"
    if not (hf_home / snapshot / weights).is_file() and (hf_home / snapshot / "pytorch_model.bin").is_file():
        weights = "pytorch_model.bin"
    return files + [(f"{snapshot}/{name}", hf_home / snapshot / name) for name in ("config.json", "vocab.txt", weights)]


def _files(dimension: str, roots: Mapping[str, Path]) -> list[tuple[str, Path]]:
    """``[(path relative to its folder, absolute path)]`` of one dimension."""
    if dimension not in _CHECKPOINTS:
        raise UserError(
            f"VBench dimension {dimension!r} is not one this workflow can check offline; "
            f"known: {', '.join(KNOWN_DIMENSIONS)} (rules table accuracy.vbench_dimensions)"
        )
    files: list[tuple[str, Path]] = []
    for root, relative in _CHECKPOINTS[dimension]:
        if relative == BERT_REPO:
            files += _bert_files(Path(roots[root]))
        else:
            files.append((relative, Path(roots[root]) / relative))
    return files


def checkpoint_paths(dimension: str, cache_dir: str | Path, torch_home: str | Path, hf_home: str | Path) -> list[Path]:
    """The files VBench reads for ``dimension`` (empty for temporal_flickering). ``cache_dir`` is
    VBench's VBENCH_CACHE_DIR, ``torch_home`` torch.hub's TORCH_HOME, ``hf_home`` HF_HOME."""
    roots = {"cache_dir": Path(cache_dir), "torch_home": Path(torch_home), "hf_home": Path(hf_home)}
    return [path for _, path in _files(dimension, roots)]


def resolve_setup(setup: Mapping[str, Any] | None) -> dict[str, Any]:
    """``setup`` with every default filled in (module docstring); an unknown key is an error."""
    setup = dict(setup or {})
    unknown = sorted(set(setup) - set(SETUP_KEYS))
    if unknown:
        raise UserError(f"accuracy vbench setup: unknown key(s) {unknown}; known: {', '.join(SETUP_KEYS)}")

    def folder(key: str, variable: str, default: str) -> Path:
        value = setup.get(key) or os.environ.get(variable) or Path.home() / ".cache" / default
        return Path(value).expanduser().absolute()

    sha256 = setup.get("sha256") or {}
    if not isinstance(sha256, Mapping):
        raise UserError("accuracy vbench setup: sha256 must map a checkpoint's relative path to its sha256")
    for key, value in sha256.items():
        if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value.lower())):
            raise UserError(f"accuracy vbench setup: sha256[{key!r}] = {value!r} is not a 64-digit hex sha256")
    python = setup.get("python") or REPO / ".venv-vbench" / "bin" / "python"
    return {
        "python": Path(python).expanduser(),
        "cache_dir": folder("cache_dir", "VBENCH_CACHE_DIR", "vbench"),
        "torch_home": folder("torch_home", "TORCH_HOME", "torch"),
        "hf_home": folder("hf_home", "HF_HOME", "huggingface"),
        "sha256": {str(k): str(v).lower() for k, v in sha256.items()},
        "device": setup.get("device") or "cpu",
    }


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _sha256(path: Path) -> str:
    """A file's sha256, remembered per (path, size, mtime) for this process: a checkpoint is
    checked before the run and again by run_vbench, and hashing a 2 GB one takes seconds."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(path)
    return _DIGESTS[key]


def missing_checkpoints(dimensions: Iterable[str], setup: Mapping[str, Any] | None) -> list[str]:
    """One line per file the ``dimensions`` need that is absent or does not match its sha256
    (CLIP ViT-B/32's published one, and those ``setup["sha256"]`` gives), naming the dimensions
    that need it. Empty when all can run."""
    resolved = resolve_setup(setup)
    needed: dict[Path, tuple[str, list[str]]] = {}
    dimensions = list(dimensions)
    for dimension in dimensions:
        for relative, path in _files(dimension, resolved):
            needed.setdefault(path, (relative, []))[1].append(dimension)
    every = [file for dim in KNOWN_DIMENSIONS for file in _files(dim, resolved)]
    known = {rel for rel, _ in every} | {str(path) for _, path in every}
    for key in resolved["sha256"]:
        if key not in known and not key.startswith(f"{BERT_REPO}/snapshots/"):
            raise UserError(
                f"accuracy vbench setup: sha256 names {key!r}, which is no checkpoint VBench reads; "
                "give a path relative to cache_dir, torch_home or hf_home: "
                + ", ".join(sorted({rel for rel, _ in every}))
            )
    problems = []
    for path, (relative, users) in needed.items():
        who = ", ".join(users)
        if not path.is_file():
            problems.append(f"{path} ({who})")
            continue
        # A published hash cannot be overridden: a configured one must match as well.
        wants = [PUBLISHED_SHA256.get(relative), resolved["sha256"].get(relative), resolved["sha256"].get(str(path))]
        for want in dict.fromkeys(w for w in wants if w):
            got = _sha256(path)
            if got != want:
                problems.append(f"{path} ({who}): sha256 {got}, expected {want}")
                break
    return problems


def vbench_python(setup: Mapping[str, Any] | None) -> Path | None:
    """VBench's environment's python, or None when it is not there."""
    python = resolve_setup(setup)["python"]
    return python if python.is_file() else None


def _not_built(setup: Mapping[str, Any] | None) -> str:
    python = resolve_setup(setup)["python"]
    return (
        f"VBench's environment is not built ({python} is missing): build it with ./install.sh --vbench, "
        "or give accuracy vbench.python"
    )


def _run_runner(python: Path, args: dict[str, Any], work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    args = {**args, "result": str(work / "result.json")}
    (work / "args.json").write_text(json.dumps(args, indent=2))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    log = work / "vbench.log"
    with open(log, "w") as handle:
        proc = subprocess.run(
            [str(python), str(RUNNER), str(work / "args.json")], stdout=handle, stderr=subprocess.STDOUT, env=env
        )
    if proc.returncode != 0:
        lines = log.read_text(errors="replace").splitlines()
        refusal = [line for line in lines if line.startswith("vbench_runner: ")]
        tail = lines[lines.index(refusal[0]) :] if refusal else lines[-15:]
        raise UserError(f"VBench failed (exit {proc.returncode}, log {log}):\n  " + "\n  ".join(tail))
    return json.loads((work / "result.json").read_text())


def vbench_info(setup: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """VBench's version and the path of its VBench_full_info.json, from its environment."""
    python = vbench_python(setup)
    if python is None:
        raise UserError(_not_built(setup))
    with tempfile.TemporaryDirectory(prefix="vbench-info-") as work:
        return _run_runner(python, {"action": "info"}, Path(work))


def full_info_prompts(full_info: str | Path) -> set[str]:
    """The prompts of a VBench_full_info.json (its ``prompt_en`` entries)."""
    return {entry["prompt_en"] for entry in json.loads(Path(full_info).read_text(encoding="utf-8"))}


def choose_mode(prompts: Iterable[str], known_prompts: set[str]) -> str:
    """``standard`` when VBench's standard mode finds every video: each prompt is one of
    VBench_full_info.json's and its file name holds it unchanged (no ``/``); else ``custom_input``."""
    return "standard" if all(p in known_prompts and "/" not in p for p in prompts) else "custom_input"


def run_vbench(
    videos_dir: str | Path,
    dimensions: Sequence[str],
    setup: Mapping[str, Any] | None,
    *,
    mode: str = "standard",
    work_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Score the ``<prompt>-<i>.mp4`` files of ``videos_dir`` in ``dimensions`` with VBench, in
    its environment: ``{dimension: score or None, "videos": {dimension: videos scored},
    "runner": {...}}``. Refuses (UserError) before starting VBench when the environment or a
    checkpoint is missing, or custom_input mode cannot score a dimension. ``work_dir`` keeps
    VBench's outputs and log (default: a temporary folder, gone on return, with the per-video
    results ``runner.results_file`` names)."""
    dimensions = list(dimensions)
    if mode not in MODES:
        raise UserError(f"VBench mode {mode!r} is not one of {', '.join(MODES)}")
    resolved = resolve_setup(setup)
    python = vbench_python(setup)
    if python is None:
        raise UserError(_not_built(setup))
    refused = [d for d in dimensions if mode == "custom_input" and d in CUSTOM_INPUT_REFUSES]
    if refused:
        raise UserError(f"VBench's custom_input mode cannot score {', '.join(refused)} (they need standard mode)")
    missing = missing_checkpoints(dimensions, setup)
    if missing:
        raise UserError(
            f"VBench cannot score {', '.join(dimensions)} here: checkpoint file(s) missing or not matching, "
            "and VBench would try to download them:\n  " + "\n  ".join(missing)
        )
    required = sorted({str(p) for d in dimensions for _, p in _files(d, resolved)})
    with tempfile.TemporaryDirectory(prefix="vbench-") as scratch:
        work = Path(work_dir) if work_dir is not None else Path(scratch)
        args = {
            "action": "evaluate",
            "videos_path": str(Path(videos_dir).absolute()),
            "dimensions": dimensions,
            "mode": mode,
            "cache_dir": str(resolved["cache_dir"]),
            "torch_home": str(resolved["torch_home"]),
            "hf_home": str(resolved["hf_home"]),
            "required_files": required,
            "output_dir": str(work.absolute() / "vbench"),
            "name": "mlperf",
            "device": resolved["device"],
        }
        return _run_runner(python, args, work.absolute())


def _diagnostic(folder: Path, setup: Mapping[str, Any] | None, work: Path) -> dict[str, Any]:
    """temporal_flickering over every video (custom_input: any prompt), when the environment exists."""
    if vbench_python(setup) is None:
        return {"skipped": _not_built(setup)}
    dimension = MODEL_FREE[0]
    try:
        scores = run_vbench(folder, [dimension], setup, mode="custom_input", work_dir=work)
    except UserError as exc:
        return {"dimension": dimension, "error": str(exc), "note": DIAGNOSTIC_NOTE}
    return {
        "dimension": dimension,
        "score": scores[dimension],
        "videos_scored": scores["videos"][dimension],
        "mode": "custom_input",
        "vbench": scores["runner"]["vbench"],
        "part_of_vbench_score": False,
        "note": DIAGNOSTIC_NOTE,
    }


def evaluate_vbench(
    entries: list, prompts: Sequence[str], accuracy_rules: Mapping[str, Any], *, out_dir: str | Path | None = None
) -> dict[str, Any]:
    """vbench_score of an accuracy log's videos: ``entries`` are ``[(qsl_idx, uint8 array of one
    mp4 file)]``, ``prompts`` the dataset's prompts (by qsl index), ``accuracy_rules`` the rules
    table's ``accuracy`` entry with ``dimensions`` (accuracy.vbench_dimensions) and ``vbench``
    (the config's setup, may be empty). ``out_dir`` keeps the videos and VBench's outputs.

    When VBench cannot score every dimension here (its environment or a checkpoint missing, or
    prompts outside VBench_full_info.json, whose custom_input mode refuses scene and
    appearance_style), no score is made up: ``vbench_score`` is None, ``not_computed`` says why,
    ``submittable`` is False and ``diagnostic`` holds temporal_flickering (not part of the score)."""
    dimensions = list(accuracy_rules.get("dimensions") or [])
    if not dimensions:
        raise UserError(
            "the rules table's accuracy.vbench_dimensions is missing or empty: it names the VBench "
            "dimensions vbench_score averages (six for wan-2.2-t2v-a14b)"
        )
    setup = dict(accuracy_rules.get("vbench") or {})
    resolve_setup(setup)  # an unknown key fails before any work
    for dimension in dimensions:
        _files(dimension, resolve_setup(setup))  # an unknown dimension, likewise
    samples = sorted({int(index) for index, _ in entries})
    if not samples:
        raise UserError("the accuracy log holds no video to score")
    beyond = [i for i in samples if not 0 <= i < len(prompts)]
    if beyond:
        raise UserError(f"the accuracy log has sample(s) {beyond[:5]} beyond the dataset's {len(prompts)} prompts")
    reasons: list[str] = []
    mode = None
    vbench_version = None
    if vbench_python(setup) is None:
        reasons.append(_not_built(setup))
    else:
        info = vbench_info(setup)
        vbench_version = info["vbench"]
        known = full_info_prompts(info["full_info"])
        sample_prompts = [prompts[i] for i in samples]
        mode = choose_mode(sample_prompts, known)
        if mode == "custom_input":
            outside = sum(p not in known or "/" in p for p in sample_prompts)
            refused = [d for d in dimensions if d in CUSTOM_INPUT_REFUSES]
            if refused:
                reasons.append(
                    f"{outside} of the {len(samples)} prompts are not VBench_full_info.json's (or hold '/'), so VBench "
                    f"runs in custom_input mode, which cannot score {', '.join(refused)}"
                )
    missing = missing_checkpoints(dimensions, setup)
    if missing:
        reasons.append(f"checkpoint file(s) missing or not matching: {'; '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="vbench-") as scratch:
        work = Path(out_dir) if out_dir is not None else Path(scratch)
        folder = vbench_folder(entries, list(prompts), work / "videos")
        base: dict[str, Any] = {"videos": len(samples), "mode": mode, "vbench": vbench_version}
        if reasons:
            return {
                "vbench_score": None,
                "not_computed": "; ".join(reasons),
                "submittable": False,
                **base,
                "dimensions_requested": dimensions,
                "not_computable": [d for d in dimensions if mode == "custom_input" and d in CUSTOM_INPUT_REFUSES],
                "diagnostic": _diagnostic(folder, setup, work / "diagnostic"),
            }
        scores = run_vbench(folder, dimensions, setup, mode=mode, work_dir=work / "score")
    per_dimension = {d: scores[d] for d in dimensions}
    empty = [d for d, s in per_dimension.items() if s is None or (isinstance(s, float) and math.isnan(s))]
    if empty:
        return {
            "vbench_score": None,
            "not_computed": f"VBench scored no video in {', '.join(empty)} (unreadable videos, or no prompt of the "
            "dimension in standard mode)",
            "submittable": False,
            **base,
            "dimensions": per_dimension,
            "videos_scored": scores["videos"],
        }
    return {
        "vbench_score": round(100 * sum(per_dimension.values()) / len(per_dimension), 4),
        # The round's score: its dimensions (rules table), in standard mode on VBench's prompts.
        "submittable": mode == "standard"
        and sorted(dimensions) == sorted(accuracy_rules.get("vbench_dimensions") or dimensions),
        **base,
        "dimensions": per_dimension,
        "videos_scored": scores["videos"],
        "runner": scores["runner"],
    }


def format_vbench_accuracy_txt(result: Mapping[str, Any]) -> str:
    """accuracy.txt: when computed, ``{'vbench_score': 70.2024}`` (the line the official
    checker's ``'vbench_score':\\s([\\d.]+)`` reads), then one line per dimension; when not,
    ``vbench_score: not computed here: <why>``, which that pattern does not read, and the
    diagnostic."""
    lines = []
    score = result.get("vbench_score")
    if score is not None:
        lines.append(repr({"vbench_score": score}))
        counts = result.get("videos_scored") or {}
        for dimension, value in result["dimensions"].items():
            lines.append(f"  {dimension:<24}: {value:.6f} ({counts.get(dimension, '?')} videos)")
        lines.append(
            f"VBench {result.get('vbench') or ''} mode {result.get('mode')}: {result.get('videos')} videos; "
            f"vbench_score = 100 x the unweighted mean of the {len(result['dimensions'])} dimensions"
        )
    else:
        why = " ".join(str(result.get("not_computed") or "unknown").split()).replace("'vbench_score'", "vbench_score")
        lines.append(f"vbench_score: not computed here: {why}")
        lines.append(f"videos: {result.get('videos')}")
        diagnostic = result.get("diagnostic") or {}
        if "score" in diagnostic:
            value = "NaN (no video read)" if diagnostic["score"] is None else f"{diagnostic['score']:.6f}"
            lines.append(
                f"diagnostic ({DIAGNOSTIC_NOTE}): {diagnostic['dimension']} = {value} over "
                f"{diagnostic['videos_scored']} videos (VBench {diagnostic.get('vbench')}, mode custom_input)"
            )
        elif diagnostic:
            what = diagnostic.get("error") or diagnostic.get("skipped")
            lines.append("diagnostic (not part of vbench_score): not run: " + " ".join(str(what).split()))
    return "\n".join(lines) + "\n"
