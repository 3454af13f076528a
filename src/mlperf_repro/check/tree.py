"""Checks on a packaged submission tree.

Each check is a function ``(context) -> list[Finding]``; :data:`CHECKS` lists them in the
order reports show them. The official checker misses LoadGen-INVALID results, ignores
performance-log errors by default and judges Interactive against Server limits; these
checks do not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..benchmarks import Round
from ..loadgen_logs import read_detail
from .findings import Finding

REQUIRED_SCENARIO_FILES = (
    "user.conf",
    "README.md",
    "measurements.json",
    "performance/run_1/mlperf_log_summary.txt",
    "performance/run_1/mlperf_log_detail.txt",
    "accuracy/mlperf_log_summary.txt",
    "accuracy/mlperf_log_detail.txt",
    "accuracy/mlperf_log_accuracy.json",
    "accuracy/accuracy.txt",
)
MEASUREMENT_KEYS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                    "weight_transformations")
HASH_LINE = re.compile(r"^hash=([\w\d]+)$", re.MULTILINE)


@dataclass
class ScenarioResult:
    system: str
    benchmark: str  # folder name
    mlperf_benchmark: str
    scenario: str
    path: Path


@dataclass
class TreeContext:
    root: Path
    rules: Round
    division: str
    submitter: str
    model_mapping: dict[str, str]
    results: list[ScenarioResult]

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def load_context(root: str | Path, rules: Round) -> tuple[TreeContext | None, list[Finding]]:
    root = Path(root)
    divisions = [d for d in sorted(root.iterdir()) if d.is_dir()] if root.is_dir() else []
    if len(divisions) != 1 or divisions[0].name not in rules["divisions"]:
        return None, [Finding("tree-layout", str(root), f"expected exactly one division folder of "
                              f"{rules['divisions']}, found {[d.name for d in divisions]}")]
    submitters = [s for s in sorted(divisions[0].iterdir()) if s.is_dir()]
    if len(submitters) != 1:
        return None, [Finding("tree-layout", divisions[0].name, f"expected one submitter folder, found "
                              f"{[s.name for s in submitters]}")]
    base = submitters[0]
    mapping_path = base / "model_mapping.json"
    mapping = json.loads(mapping_path.read_text()) if mapping_path.is_file() else {}
    results: list[ScenarioResult] = []
    for system_dir in sorted((base / "results").glob("*")):
        for bench_dir in sorted(p for p in system_dir.glob("*") if p.is_dir()):
            official = mapping.get(bench_dir.name, bench_dir.name)
            for scenario_dir in sorted(p for p in bench_dir.glob("*") if p.is_dir()):
                results.append(ScenarioResult(system_dir.name, bench_dir.name, official, scenario_dir.name, scenario_dir))
    ctx = TreeContext(root, rules, divisions[0].name, base.name, mapping, results)
    return ctx, []


def check_required_files(ctx: TreeContext) -> list[Finding]:
    findings = []
    base = ctx.root / ctx.division / ctx.submitter
    for folder in ("systems", "src", "results"):
        if not (base / folder).is_dir():
            findings.append(Finding("required-files", ctx.rel(base), f"missing folder {folder}/"))
    for result in ctx.results:
        for name in REQUIRED_SCENARIO_FILES:
            path = result.path / name
            if not path.is_file() or path.stat().st_size == 0:
                findings.append(Finding("required-files", ctx.rel(path), "missing or empty"))
    return findings


def check_systems(ctx: TreeContext) -> list[Finding]:
    from ..package.systems import REQUIRED_FIELDS

    findings = []
    base = ctx.root / ctx.division / ctx.submitter
    systems = {p.stem for p in (base / "systems").glob("*.json")}
    for result_system in {r.system for r in ctx.results} - systems:
        findings.append(Finding("system-description", f"{ctx.division}/{ctx.submitter}/systems/{result_system}.json",
                                "results exist but the system description is missing"))
    for path in sorted((base / "systems").glob("*.json")):
        desc = json.loads(path.read_text())
        for key in REQUIRED_FIELDS:
            if key not in desc:
                findings.append(Finding("system-description", ctx.rel(path), f"field {key} is missing"))
        if desc.get("division") != ctx.division or str(desc.get("submitter", "")).lower() != ctx.submitter.lower():
            findings.append(Finding("system-description", ctx.rel(path), "division/submitter do not match the folders"))
        if "is_network" in desc and ctx.division != "network":
            findings.append(Finding("system-description", ctx.rel(path), "is_network outside the network division"))
    return findings


def check_measurements(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        path = result.path / "measurements.json"
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        for key in MEASUREMENT_KEYS:
            if not data.get(key):
                findings.append(Finding("measurements", ctx.rel(path), f"{key} is missing or empty"))
    return findings


def check_performance_logs(ctx: TreeContext) -> list[Finding]:
    findings = []
    seeds = ctx.rules.seeds
    for result in ctx.results:
        path = result.path / "performance/run_1/mlperf_log_detail.txt"
        if not path.is_file():
            continue
        detail = read_detail(path)
        where = ctx.rel(path)
        if str(detail.get("result_validity", "")).upper() != "VALID":
            findings.append(Finding("loadgen-valid", where, f"LoadGen result is {detail.get('result_validity')}"))
        if detail["errors"]:
            findings.append(Finding("loadgen-errors", where, f"{len(detail['errors'])} LoadGen error(s): "
                                    + "; ".join(detail["errors"][:3])))
        for key, expected in seeds.items():
            found = detail.get(f"effective_{key}")
            if found is not None and int(found) != int(expected):
                findings.append(Finding("seeds", where, f"{key} is {found}, expected {expected} for {ctx.rules.name}"))
        version = str(detail.get("loadgen_version", "")).split(" ")[0]
        if version and version not in ctx.rules.loadgen_versions:
            findings.append(Finding("loadgen-version", where, f"LoadGen {version} does not carry the "
                                    f"{ctx.rules.name} seeds; use {ctx.rules.loadgen_requirement}"))
        if ctx.rules.name and result.mlperf_benchmark in ctx.rules.benchmark_names:
            facts = ctx.rules.benchmark(result.mlperf_benchmark)
            if facts.facts.get("use_token_latencies") and not detail.get("requested_use_token_latencies"):
                findings.append(Finding("token-latencies", where, "use_token_latencies was not requested"))
            limits = facts.latency_limits_ms(result.scenario)
            if limits:
                for name, key in (("ttft", "result_first_token_99.00_percentile_latency_ns"),
                                  ("tpot", "result_time_per_output_token_99.00_percentile_ns")):
                    value = detail.get(key)
                    if value is not None and float(value) >= limits[name] * 1e6:
                        findings.append(Finding("latency", where, f"p99 {name.upper()} {float(value) / 1e6:.1f} ms "
                                                f"exceeds the {result.scenario} limit {limits[name]} ms"))
    return findings


def check_accuracy(ctx: TreeContext) -> list[Finding]:
    findings = []
    limit = int(ctx.rules["accuracy_log_max_bytes"])
    for result in ctx.results:
        folder = result.path / "accuracy"
        log = folder / "mlperf_log_accuracy.json"
        if log.is_file() and log.stat().st_size > limit:
            findings.append(Finding("accuracy-truncated", ctx.rel(log), f"{log.stat().st_size} bytes > {limit}: "
                                    "not truncated"))
        txt = folder / "accuracy.txt"
        if txt.is_file():
            text = txt.read_text()
            if not HASH_LINE.search(text):
                findings.append(Finding("accuracy-hash", ctx.rel(txt), "no hash=<sha256> line"))
            if result.mlperf_benchmark in ctx.rules.benchmark_names:
                patterns = ctx.rules.benchmark(result.mlperf_benchmark).accuracy["regex"]
                for metric, pattern in patterns.items():
                    if metric in ctx.rules.benchmark(result.mlperf_benchmark).accuracy["targets"] and \
                            not re.search(pattern, text):
                        findings.append(Finding("accuracy-format", ctx.rel(txt), f"the checker cannot read {metric}"))
        detail = folder / "mlperf_log_detail.txt"
        if detail.is_file():
            errors = read_detail(detail)["errors"]
            if errors:
                findings.append(Finding("loadgen-errors", ctx.rel(detail), f"{len(errors)} LoadGen error(s)"))
    return findings


def check_hygiene(ctx: TreeContext) -> list[Finding]:
    findings = []
    max_bytes = int(ctx.rules["tree_limits"]["max_file_bytes"])
    base = ctx.root / ctx.division / ctx.submitter
    for path in sorted(base.rglob("*")):
        rel = ctx.rel(path)
        if path.name.startswith("."):
            findings.append(Finding("hygiene", rel, "names starting with '.' are not allowed"))
        if " " in path.name:
            findings.append(Finding("hygiene", rel, "spaces in names are not allowed"))
        if path.name == "__pycache__":
            findings.append(Finding("hygiene", rel, "__pycache__ folders are not allowed"))
        if path.is_symlink() and not path.exists():
            findings.append(Finding("hygiene", rel, "broken symbolic link"))
        elif path.is_file() and path.stat().st_size > max_bytes:
            findings.append(Finding("hygiene", rel, f"file larger than {max_bytes // 2**20} MB"))
        elif path.is_dir() and not any(path.iterdir()):
            findings.append(Finding("hygiene", rel, "empty folder"))
    return findings


CHECKS: tuple[Callable[[TreeContext], list[Finding]], ...] = (
    check_required_files,
    check_systems,
    check_measurements,
    check_performance_logs,
    check_accuracy,
    check_hygiene,
)


def check_tree(root: str | Path, rules: Round) -> list[Finding]:
    ctx, findings = load_context(root, rules)
    if ctx is None:
        return findings
    for check in CHECKS:
        findings.extend(check(ctx))
    return findings
