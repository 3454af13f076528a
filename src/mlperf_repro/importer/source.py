"""Open a published submission and find one system's results in it.

The source is a published results repository (``closed/<submitter>/...``), one submission
tree, or a tarball of either (extracted with the same limits as ``compare``). A system is
named by its ``systems/<id>.json`` stem; its results are the v6.0 layout's
``results/<id>/<benchmark>/<scenario>/`` folders (user.conf, README.md with the harness
command, performance/run_1/mlperf_log_detail.txt).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..archive import ARCHIVE_SUFFIXES, Limits, extract
from ..benchmarks import Round, available_rounds, load_round
from ..compare.records import find_submitters
from ..errors import UserError
from ..loadgen_logs import read_detail

# What the import reads from a performance run's detail log (LoadGen's effective settings,
# its version and the result).
DETAIL_KEYS = frozenset(
    {
        "loadgen_version",
        "effective_scenario",
        "effective_target_qps",
        "effective_target_latency_ns",
        "effective_min_duration_ms",
        "effective_max_duration_ms",
        "effective_min_query_count",
        "effective_max_query_count",
        "effective_performance_sample_count",
        "effective_samples_per_query",
        "result_validity",
        "result_samples_per_second",
        "result_tokens_per_second",
        "result_completed_tokens_per_second",
        "result_completed_samples_per_sec",
        "result_90.00_percentile_latency_ns",
        "early_stopping_latency_ss",
        "test_datetime",
    }
)


@dataclass
class ScenarioResult:
    benchmark: str  # the results folder name
    scenario: str
    folder: Path
    detail: dict[str, Any] = field(default_factory=dict)

    def file(self, name: str) -> Path:
        return self.folder / name


@dataclass
class PublishedSystem:
    root: Path  # the source as opened (an extracted archive's folder)
    base: Path  # <division>/<submitter>
    division: str
    submitter: str
    system_id: str
    description: dict[str, Any]
    rules: Round
    results: dict[str, dict[str, ScenarioResult]]  # benchmark folder -> scenario -> result
    # The submitter's model_mapping.json (open division: a results folder -> the benchmark it stands for).
    model_mapping: dict[str, str] = field(default_factory=dict)

    def relative(self, path: Path) -> str:
        """A path as the source names it (<division>/<submitter>/...), for the config's comments."""
        try:
            return path.relative_to(self.base.parent.parent).as_posix()
        except ValueError:
            return path.as_posix()

    @property
    def code_roots(self) -> list[Path]:
        """Where the submitter's code lives: src/ (v6.0) or code/ (v5.x and many partners)."""
        return [p for p in (self.base / "src", self.base / "code") if p.is_dir()]


def open_source(source: str | Path, scratch: Path, limits: Limits | None = None) -> Path:
    path = Path(source)
    if not path.exists():
        raise UserError(f"{source} does not exist (give a results repository folder, a submission tree or a tarball)")
    if path.is_file():
        if not path.name.endswith(ARCHIVE_SUFFIXES):
            raise UserError(f"{source} is not a folder or a tar archive ({', '.join(ARCHIVE_SUFFIXES)})")
        return extract(path, scratch / "source", limits or Limits())
    return path


def round_of(version: str | None, where: str) -> Round:
    """The round whose rules table lists this LoadGen version."""
    release = str(version or "").split(" ")[0]
    for name in available_rounds():
        rules = load_round(name)
        if release in rules.loadgen_versions:
            return rules
    raise UserError(
        f"{where}: LoadGen {release or '(no version logged)'} belongs to no round this workflow has a rules table "
        f"for (tables: {', '.join(available_rounds())}); add src/mlperf_repro/rounds/<round>.yaml to import it"
    )


def find_system(root: Path, submitter: str, system_id: str) -> PublishedSystem:
    submitters = list(find_submitters(root))
    if not submitters:
        raise UserError(f"{root} holds no submission (expected <division>/<submitter>/results/...)")
    matching = [(d, b) for d, b in submitters if b.name.lower() == submitter.lower()]
    if not matching:
        names = sorted({b.name for _, b in submitters})
        raise UserError(f"--submitter {submitter}: not in {root}; it holds: {', '.join(names)}")
    found = next(((d, b) for d, b in matching if (b / "systems" / f"{system_id}.json").is_file()), None)
    if found is None:
        known = sorted({p.stem for _, b in matching for p in (b / "systems").glob("*.json")})
        raise UserError(
            f"--system {system_id}: {submitter} has no systems/{system_id}.json; its systems: "
            f"{', '.join(known) or '(none)'}"
        )
    division, base = found
    desc_path = base / "systems" / f"{system_id}.json"
    try:
        description = json.loads(desc_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{desc_path}: not a readable system description ({exc})") from None
    if not isinstance(description, dict):
        raise UserError(f"{desc_path}: a system description is a JSON object")
    results_dir = base / "results" / system_id
    results: dict[str, dict[str, ScenarioResult]] = {}
    for scenario_dir in sorted(results_dir.glob("*/*")):
        if scenario_dir.is_dir():
            benchmark, scenario = scenario_dir.parts[-2:]
            detail_path = scenario_dir / "performance" / "run_1" / "mlperf_log_detail.txt"
            detail = read_detail(detail_path, DETAIL_KEYS) if detail_path.is_file() else {}
            results.setdefault(benchmark, {})[scenario] = ScenarioResult(benchmark, scenario, scenario_dir, detail)
    if not results:
        raise UserError(
            f"--system {system_id}: {division}/{base.name} describes it but has no results for it "
            f"(nothing under results/{system_id}/<benchmark>/<scenario>/)"
        )
    version = next((r.detail.get("loadgen_version") for s in results.values() for r in s.values() if r.detail), None)
    rules = round_of(version, f"{division}/{base.name}/results/{system_id}")
    mapping_path = base / "model_mapping.json"
    try:
        mapping = json.loads(mapping_path.read_text()) if mapping_path.is_file() else {}
    except json.JSONDecodeError as exc:
        raise UserError(f"{mapping_path}: not JSON ({exc})") from None
    return PublishedSystem(root, base, division, base.name, system_id, description, rules, results, mapping)
