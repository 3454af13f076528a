"""What the workflow's compare rule reads and writes, from the config's ``compare`` section
(the rule files hold only rules; this is their logic, testable without Snakemake)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..paths import PATHS
from .cli import stems

REPORT_EXTENSIONS = ("md", "csv", "html")
OWN_TREE = PATHS["package"]


def _joined(entry: str | list[str]) -> str:
    """One input as the CLI takes it: comma-separated paths of repeat runs."""
    return ",".join(entry) if isinstance(entry, list) else entry


def compare_specs(config: dict[str, Any]) -> tuple[str, list[str]]:
    spec = config.get("compare") or {}
    return _joined(spec.get("reference", [])), [_joined(p) for p in spec.get("partners", [])]


def compare_outputs(config: dict[str, Any]) -> list[str]:
    if not config.get("compare"):
        return []
    reference, partners = compare_specs(config)
    return [f"results/compare/{stem}.{ext}" for stem in stems(reference, partners) for ext in REPORT_EXTENSIONS]


def compare_inputs(config: dict[str, Any]) -> list[str]:
    """Archives and this workflow's own tree are inputs (built first, rerun when they change);
    external folders are read as they are."""
    reference, partners = compare_specs(config)
    inputs = []
    for path in (p for spec in [reference, *partners] for p in spec.split(",") if p):
        if path.startswith(OWN_TREE):
            inputs.append(OWN_TREE)
        elif not Path(path).is_dir():
            inputs.append(path)
    return list(dict.fromkeys(inputs))
