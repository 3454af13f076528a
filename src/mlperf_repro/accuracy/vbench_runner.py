"""VBench, run for the text-to-video benchmark's vbench_score inside its own environment (envs/vbench.txt).

Executed by path, ``VBENCH_ENV/bin/python .../vbench_runner.py ARGS.json``, never imported by
the package (not ``-m mlperf_repro.accuracy.vbench_runner`` either: that would import the
package's ``accuracy/__init__``, whose evaluators need the workflow's environment). It imports
only the standard library, torch (through the torchvision shim) and vbench. ARGS.json::

    {"action": "evaluate",                   # or "info": VBench's version and full-info json
     "videos_path": "videos/",               # <prompt>-<i>.mp4 files
     "dimensions": ["temporal_flickering"],
     "mode": "standard" | "custom_input",    # VBench's vbench_standard | custom_input
     "cache_dir": ..., "torch_home": ..., "hf_home": ...,
     "required_files": ["/abs/ckpt.pth", ...],   # the caller's checkpoint table, checked first
     "output_dir": "out/", "name": "mlperf", "device": "cpu",
     "result": "result.json"}

The result (written to ``result``, and printed as the last stdout line)::

    {"temporal_flickering": 0.93, "videos": {"temporal_flickering": 4},
     "runner": {"vbench": "0.1.5", "mode": "custom_input", "seconds": {...}, ...}}

Each score is VBench's own aggregate, the first element of ``<name>_eval_results.json``'s entry
(VBench aggregates each dimension its own way: a mean over videos, frame-weighted, ...); a NaN
(no readable video) becomes null.

VBench downloads any checkpoint it does not find (wget, git clone, torch.hub, the Hugging Face
hub), even with ``local=True``, and writes nothing when a download fails. Here the network is
never tried: every file in ``required_files`` must exist before vbench is imported (the caller,
mlperf_repro.accuracy.vbench, lists each dimension's files), the Hugging Face libraries are put
offline, and VBench's ``subprocess`` and torch.hub's downloader are replaced by ones that refuse.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Run by path, Python puts this folder first on sys.path, and its modules would shadow VBench's
# dependencies (tokenizers.py here against Hugging Face's tokenizers, which transformers imports).
if sys.path and Path(sys.path[0] or ".").resolve() == HERE:
    sys.path.pop(0)

MODES = {"standard": "vbench_standard", "custom_input": "custom_input"}
# VBench.check_dimension_requires_extra_info: these need the auxiliary info of VBench_full_info.json.
CUSTOM_INPUT_REFUSES = (
    "object_class",
    "multiple_objects",
    "scene",
    "appearance_style",
    "color",
    "spatial_relationship",
)
NETWORK_TOOLS = ("wget", "git", "curl", "unzip")


class RunnerError(Exception):
    pass


def info() -> dict[str, Any]:
    """VBench's version and where its VBench_full_info.json is, without importing vbench (fast)."""
    from importlib.metadata import version

    spec = importlib.util.find_spec("vbench")
    if spec is None or not spec.submodule_search_locations:
        raise RunnerError(f"vbench is not installed in {sys.prefix}")
    package = Path(list(spec.submodule_search_locations)[0])
    return {
        "vbench": version("vbench"),
        "full_info": str(package / "VBench_full_info.json"),
        "python": sys.version.split()[0],
        "prefix": sys.prefix,
    }


def _torchvision_shim() -> bool:
    """Load vbench_torchvision_shim.py from this folder (not as part of the package) and install it."""
    spec = importlib.util.spec_from_file_location("mlperf_vbench_torchvision_shim", HERE / "vbench_torchvision_shim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.install()


class _NoDownloads:
    """Stands in for the ``subprocess`` module inside vbench.utils: its downloads (wget, git
    clone, unzip) are refused; anything else runs."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def run(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        program = Path(str(command[0] if isinstance(command, list | tuple) else command).split()[0]).name
        if program in NETWORK_TOOLS:
            raise RunnerError(f"VBench tried to run {' '.join(map(str, command))}: a checkpoint is missing")
        return self._real.run(command, *args, **kwargs)


def _refuse_download(url: str, *args: Any, **kwargs: Any) -> None:
    raise RunnerError(f"VBench tried to download {url}: a checkpoint is missing (torch.hub)")


def _environment(args: dict[str, Any]) -> None:
    """Point VBench, torch.hub and the Hugging Face libraries at the checked folders, offline.
    Before vbench is imported: vbench.utils reads VBENCH_CACHE_DIR once, at import."""
    os.environ["VBENCH_CACHE_DIR"] = str(args["cache_dir"])
    os.environ["TORCH_HOME"] = str(args["torch_home"])
    os.environ["HF_HOME"] = str(args["hf_home"])
    for variable in (
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "TRANSFORMERS_CACHE",
        "PYTORCH_TRANSFORMERS_CACHE",
        "PYTORCH_PRETRAINED_BERT_CACHE",
    ):
        os.environ.pop(variable, None)  # would override HF_HOME/hub, where the caller checked
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    # MLPerf's reference runs VBench on torch 2.5.1, whose torch.load defaulted to
    # weights_only=False; torch 2.6+ defaults to True, which AMT's checkpoint load (VBench 0.1.5,
    # motion_smoothness.py) does not override (VBench's later commit that MLPerf pins does).
    # The checkpoints are the caller's checked files (sha256 where configured).
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"


def _score(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return None if math.isnan(value) else float(value)
    return None


def evaluate(args: dict[str, Any]) -> dict[str, Any]:
    dimensions = list(args["dimensions"])
    mode = args.get("mode", "standard")
    if mode not in MODES:
        raise RunnerError(f"mode {mode!r} is not one of {sorted(MODES)}")
    if not dimensions:
        raise RunnerError("no dimensions to evaluate")
    refused = [d for d in dimensions if mode == "custom_input" and d in CUSTOM_INPUT_REFUSES]
    if refused:
        raise RunnerError(
            f"VBench's custom_input mode cannot score {refused}: they need VBench_full_info.json's prompts"
        )
    missing = [f for f in args.get("required_files", []) if not Path(f).is_file()]
    if missing:
        raise RunnerError(
            "checkpoint file(s) missing; VBench would try to download them, so nothing was run:\n  "
            + "\n  ".join(missing)
        )
    videos = Path(args["videos_path"]).resolve()
    if not videos.is_dir() or not any(videos.iterdir()):
        raise RunnerError(f"the videos folder {videos} is missing or empty")
    output = Path(args["output_dir"]).resolve()
    name = args.get("name") or "mlperf"
    _environment(args)
    started = time.time()
    shim = _torchvision_shim()
    import torch
    import torch.hub
    import vbench
    import vbench.utils
    from vbench import VBench

    torch.hub.download_url_to_file = _refuse_download
    vbench.utils.subprocess = _NoDownloads(vbench.utils.subprocess)
    imported = time.time()
    full_info = args.get("full_info") or str(Path(vbench.__file__).with_name("VBench_full_info.json"))
    VBench(args.get("device") or "cpu", full_info, str(output)).evaluate(
        videos_path=str(videos), name=name, dimension_list=dimensions, mode=MODES[mode], local=True
    )
    results_file = output / f"{name}_eval_results.json"
    if not results_file.is_file():
        raise RunnerError(f"VBench wrote no {results_file}")
    results = json.loads(results_file.read_text())  # VBench writes a bare NaN token; json reads it
    report: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for dimension in dimensions:
        value = results.get(dimension)
        if not isinstance(value, list) or not value:
            raise RunnerError(f"{results_file} has no result for {dimension}")
        report[dimension] = _score(value[0])
        counts[dimension] = len(value[1]) if len(value) > 1 and isinstance(value[1], list) else 0
    report["videos"] = counts
    report["runner"] = {
        **info(),
        "torch": torch.__version__,
        "torchvision_shim": shim,
        "mode": MODES[mode],
        "device": args.get("device") or "cpu",
        "results_file": str(results_file),
        "seconds": {"import": round(imported - started, 2), "evaluate": round(time.time() - imported, 2)},
    }
    return report


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: vbench_runner.py ARGS.json", file=sys.stderr)
        return 2
    args = json.loads(Path(argv[1]).read_text())
    try:
        report = info() if args.get("action") == "info" else evaluate(args)
    except RunnerError as exc:
        print(f"vbench_runner: {exc}", file=sys.stderr)
        return 3
    text = json.dumps(report, sort_keys=True)
    if args.get("result"):
        Path(args["result"]).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
