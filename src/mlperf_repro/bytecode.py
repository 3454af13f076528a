"""Bytecode for what the workflow's processes import, written once by ``./install.sh``.

uv installs no ``.pyc`` files, and where ``PYTHONDONTWRITEBYTECODE`` is set (as on this
project's machines) Python never writes them, so every process would compile every module it
imports from source (a Snakemake dry run: 13.4 s instead of 5.1 s). Compiling the whole
environment (about 27,700 files) took about 35 s of a 50 s install on 2 cores, while the
default run's processes import about a quarter of those files; this takes about 25 s, most of
it the import of vLLM's server (bench/README.md, first_contact.py).

So the install imports, once, what the workflow's jobs import (``IMPORT_GROUPS``, one child
process per group so that both cores work), with bytecode writing on, then compiles the rest
of every folder those modules came from (a server imports more of the same folders later, at
run time). A module that nothing here covers is only compiled from source in each process that
imports it: slower, never wrong. ``./install.sh --test`` compiles everything (the test suite
imports far more).

    .venv/bin/python -m mlperf_repro.bytecode
"""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# "module" or "module:attribute" (a package that imports lazily: the attribute pulls the code).
# Two groups with little overlap: torch and everything built on it; the rest.
IMPORT_GROUPS: tuple[tuple[str, ...], ...] = (
    (
        "torch",
        "vllm.entrypoints.openai.api_server",
        "vllm.v1.engine.core",
        "vllm.v1.worker.cpu_worker",
        "vllm.v1.attention.backends.cpu_attn",
        "vllm.model_executor.models.llama",
        "diffusers:WanPipeline",
        "diffusers:AutoencoderKLWan",
        "diffusers:WanTransformer3DModel",
        "transformers:UMT5EncoderModel",
        "transformers:AutoTokenizer",
        "mlperf_repro.video",
        "mlperf_repro.quant.checkpoint",
    ),
    (
        "snakemake.cli",
        "snakemake.report",
        "pandas",
        "matplotlib.pyplot",
        "rouge_score.rouge_scorer",
        "nltk",
        "av",
        "mlperf_loadgen",
        "mlperf_repro.cli",
    ),
)

_CHILD = r"""
import importlib, json, sys, warnings
sys.dont_write_bytecode = False
warnings.simplefilter("ignore")
missing = []
for entry in json.loads(sys.argv[1]):
    name, _, attribute = entry.partition(":")
    try:
        module = importlib.import_module(name)
        if attribute:
            getattr(module, attribute)
    except Exception as exc:  # a module that moved in a new pin: noted, never fatal
        missing.append(f"{entry}: {type(exc).__name__}: {exc}"[:300])
files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
print(json.dumps({"files": [f for f in files if f], "missing": missing}))
"""


def _import_group(python: str, group: tuple[str, ...]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [python, "-c", _CHILD, json.dumps(list(group))],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def folders_to_compile(imported_files: list[str], roots: list[Path]) -> list[Path]:
    """The folders (under ``roots``) that imported modules came from, each once."""
    folders = set()
    for name in imported_files:
        path = Path(name).resolve()
        if path.suffix == ".py" and any(path.is_relative_to(root) for root in roots):
            folders.add(path.parent)
    return sorted(folders)


def _compile(path: str) -> bool:
    return bool(compileall.compile_file(path, quiet=2))


def environment_roots() -> list[Path]:
    """Where the workflow's imports live: this environment's site-packages and this package."""
    paths = sysconfig.get_paths()
    return [Path(p).resolve() for p in {paths["purelib"], paths["platlib"]}] + [Path(__file__).resolve().parent]


def warm(
    groups: tuple[tuple[str, ...], ...] = IMPORT_GROUPS,
    python: str = sys.executable,
    roots: list[Path] | None = None,
) -> dict:
    """Import ``groups`` (a child each, side by side) writing bytecode, then compile the rest
    of the folders under ``roots`` they came from; returns counts and what could not be imported."""
    started = time.monotonic()
    children = [_import_group(python, group) for group in groups]
    imported: list[str] = []
    missing: list[str] = []
    for child in children:
        out, _ = child.communicate()
        try:
            report = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            missing.append(f"an import group ended without a report (exit status {child.returncode})")
            continue
        imported += report["files"]
        missing += report["missing"]
    roots = environment_roots() if roots is None else [Path(r).resolve() for r in roots]
    sources = [
        str(entry)
        for folder in folders_to_compile(imported, roots)
        for entry in folder.iterdir()
        if entry.suffix == ".py" and entry.is_file()
    ]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        failed = sum(not ok for ok in pool.map(_compile, sources, chunksize=64))
    return {
        "imported_modules": len(imported),
        "compiled_files": len(sources),
        "failed": failed,
        "missing": missing,
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    report = warm()
    for line in report["missing"]:
        print(f"bytecode: not imported (compiled at first use instead): {line}", file=sys.stderr)
    print(
        f"bytecode: {report['compiled_files']} files of the workflow's imports compiled in {report['seconds']} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
