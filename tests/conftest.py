"""Shared test fixtures: the repository root and the default config."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = REPO / "config" / "config.yaml"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


@pytest.fixture
def default_config() -> dict:
    from mlperf_repro.config import load_yaml

    return copy.deepcopy(load_yaml(DEFAULT_CONFIG))


def make_workdir(tmp_path: Path) -> Path:
    """A copy of the workflow's entry files in tmp_path, so runs never touch the checkout."""
    work = tmp_path / "work"
    work.mkdir()
    for item in ("Snakefile", "workflow", "scripts", "config"):
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, work / item)
        else:
            shutil.copyfile(src, work / item)
    return work


def run_snakemake(work: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(SNAKEMAKE + ["--directory", str(work), "--snakefile", str(work / "Snakefile"), *args],
                          cwd=work, capture_output=True, text=True, timeout=timeout, env=env)
