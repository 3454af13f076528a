"""The import layers of docs/architecture.md: lint-imports keeps the contracts in
pyproject.toml, with no ``ignore_imports`` exceptions, and the project's subpackages import
each other without a cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def importlinter_config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]


def test_lint_imports_keeps_the_contracts(tmp_path):
    command = str(LINT_IMPORTS) if LINT_IMPORTS.exists() else shutil.which("lint-imports")
    if command is None:
        pytest.skip("import-linter is not installed")
    done = subprocess.run([command, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_contracts_list_no_exceptions():
    """Where an import would break a layer, the code moves (docs/architecture.md)."""
    for contract in importlinter_config()["contracts"]:
        assert not contract.get("ignore_imports"), (contract["id"], contract["ignore_imports"])


def subpackage_graph() -> dict[str, set[str]]:
    """``{subpackage or top-level module: what it imports of the others}``, lazy imports included."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("mlperf_repro", cache_dir=None)

    def unit(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else None  # None: the root package's __init__

    edges: dict[str, set[str]] = {}
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = unit(importer), unit(imported)
            if a and b and a != b:
                edges.setdefault(a, set()).add(b)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_among_the_subpackages():
    edges = subpackage_graph()
    assert {"plan", "backends", "launch", "cluster"} <= set(edges) | {x for v in edges.values() for x in v}
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_among_the_modules():
    """Within a subpackage too (quant.checkpoint and quant.evaluate imported each other, the
    one lazily): modules import each other without a cycle, lazy imports included. A package
    and its own submodules aside (its __init__ re-exports them, they import its names)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("mlperf_repro", cache_dir=None)
    edges = {
        importer: {
            imported
            for imported in graph.find_modules_directly_imported_by(importer)
            if imported.startswith("mlperf_repro")
            and not (imported.startswith(importer + ".") or importer.startswith(imported + "."))
        }
        for importer in graph.modules
    }
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_one():
    assert find_cycle({"plan": {"backends"}, "backends": {"launch"}, "launch": {"plan"}}) == [
        "backends",
        "launch",
        "plan",
        "backends",
    ]
    assert find_cycle({"plan": {"generation"}, "backends": {"generation", "launch"}}) is None


def test_the_stage_entry_points_sit_above_the_task_registry():
    edges = subpackage_graph()
    assert "tasks" in edges["stages"]
    for lower in ("harness", "accuracy", "compliance"):
        assert "tasks" not in edges.get(lower, set()), lower
        assert "stages" not in edges.get(lower, set()), lower
    assert "harness" not in edges.get("accuracy", set())


def test_the_plan_no_longer_reaches_the_launchers():
    edges = subpackage_graph()
    assert "backends" not in edges.get("plan", set())
    assert "backends" not in edges.get("launch", set())
    assert "launch" not in edges.get("cluster", set())


def test_every_test_file_has_exactly_one_stage():
    """The stage markers (tests/conftest.py STAGES) cover every test file once, so that
    ``pytest -m <stage>`` runs all of a stage's tests."""
    from conftest import STAGES, stages_of

    files = sorted(p.name for p in (REPO / "tests").glob("test_*.py"))
    assert {name: stages_of(name) for name in files if len(stages_of(name)) != 1} == {}
    declared = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"])
    assert set(STAGES) <= {m.split(":")[0] for m in declared}
