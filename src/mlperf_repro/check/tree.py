"""Checks on a packaged submission tree (the "after" check).

Each rule is a function ``(TreeContext) -> list[Finding]`` registered in :data:`RULES`
under the name its findings carry. The facts come from the round's rules table. The
official checker misses LoadGen-INVALID results, ignores performance-log errors by
default and judges Interactive against Server limits; these rules do not.

A tree marked NOT SUBMITTABLE (test scale, ``NOT_SUBMITTABLE.md`` at its root) is checked
for everything except the round's minimum durations, sample counts and accuracy targets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..benchmarks import Benchmark, Round
from ..errors import UserError
from ..loadgen_logs import read_detail
from .findings import Finding

NOT_SUBMITTABLE_MARK = "NOT_SUBMITTABLE.md"
HASH_LINE = re.compile(r"^hash=([\w\d]+)$", re.MULTILINE)


@dataclass
class ScenarioResult:
    system: str
    benchmark: str  # the folder name
    mlperf_benchmark: str
    scenario: str
    path: Path
    facts: Benchmark | None
    _details: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    def detail(self, relative: str) -> dict[str, Any] | None:
        """A parsed LoadGen detail log of this result (cached), or None if absent."""
        if relative not in self._details:
            path = self.path / relative
            self._details[relative] = read_detail(path) if path.is_file() else None
        return self._details[relative]


@dataclass
class TreeContext:
    root: Path
    rules: Round
    division: str
    submitter: str
    model_mapping: dict[str, str]
    results: list[ScenarioResult]
    test_scale: bool

    @property
    def base(self) -> Path:
        return self.root / self.division / self.submitter

    @property
    def enforces_compliance(self) -> bool:
        return self.division in ("closed", "network")

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


Rule = Callable[[TreeContext], list[Finding]]
RULES: dict[str, Rule] = {}


def rule(name: str):
    def register(function: Rule) -> Rule:
        RULES[name] = function
        return function

    return register


# -- loading ---------------------------------------------------------------------------


def load_context(root: str | Path, rules: Round) -> tuple[TreeContext | None, list[Finding]]:
    root = Path(root)
    if not root.is_dir():
        return None, [Finding("tree-layout", str(root), "the submission tree does not exist")]
    divisions = [d for d in sorted(root.iterdir()) if d.is_dir() and d.name in rules["divisions"]]
    if len(divisions) != 1:
        return None, [
            Finding(
                "tree-layout",
                str(root),
                f"expected exactly one division folder of {rules['divisions']}, found {[d.name for d in divisions]}",
            )
        ]
    submitters = [s for s in sorted(divisions[0].iterdir()) if s.is_dir()]
    if len(submitters) != 1:
        return None, [
            Finding(
                "tree-layout", divisions[0].name, f"expected one submitter folder, found {[s.name for s in submitters]}"
            )
        ]
    base = submitters[0]
    mapping_path = base / "model_mapping.json"
    mapping = json.loads(mapping_path.read_text()) if mapping_path.is_file() else {}
    results: list[ScenarioResult] = []
    for system_dir in sorted(p for p in (base / "results").glob("*") if p.is_dir()):
        for bench_dir in sorted(p for p in system_dir.glob("*") if p.is_dir()):
            official = mapping.get(bench_dir.name, bench_dir.name)
            facts = rules.benchmark(official) if official in rules.benchmark_names else None
            for scenario_dir in sorted(p for p in bench_dir.glob("*") if p.is_dir()):
                results.append(
                    ScenarioResult(system_dir.name, bench_dir.name, official, scenario_dir.name, scenario_dir, facts)
                )
    ctx = TreeContext(
        root, rules, divisions[0].name, base.name, mapping, results, test_scale=(root / NOT_SUBMITTABLE_MARK).is_file()
    )
    return ctx, []


# -- layout and required files -------------------------------------------------------------


@rule("root-files")
def check_root(ctx: TreeContext) -> list[Finding]:
    limits = ctx.rules["tree_limits"]
    findings = []
    for path in sorted(ctx.root.iterdir()):
        if path.is_dir() and path.name not in limits["root_folders"]:
            findings.append(
                Finding(
                    "root-files",
                    path.name,
                    f"only {limits['root_folders']} folders may sit at the root of a submission",
                )
            )
        elif path.is_file() and path.suffix not in limits["root_file_suffixes"]:
            findings.append(
                Finding(
                    "root-files",
                    path.name,
                    f"only {limits['root_file_suffixes']} files may sit at the root of a submission",
                )
            )
    for path in sorted((ctx.root / ctx.division).iterdir()):
        if path.is_file():
            findings.append(Finding("root-files", ctx.rel(path), "no loose files directly under the division"))
    return findings


@rule("required-files")
def check_required_files(ctx: TreeContext) -> list[Finding]:
    findings = []
    for folder in ctx.rules["submitter_folders"]:
        if not (ctx.base / folder).is_dir():
            findings.append(Finding("required-files", ctx.rel(ctx.base), f"missing folder {folder}/"))
    for result in ctx.results:
        for name in ctx.rules["scenario_files"]:
            path = result.path / name
            if not path.is_file() or path.stat().st_size == 0:
                findings.append(Finding("required-files", ctx.rel(path), "missing or empty"))
    return findings


@rule("scenario-set")
def check_scenario_set(ctx: TreeContext) -> list[Finding]:
    findings = []
    by_benchmark: dict[tuple[str, str], list[ScenarioResult]] = {}
    for result in ctx.results:
        by_benchmark.setdefault((result.system, result.benchmark), []).append(result)
    for (system, bench), results in by_benchmark.items():
        folder = f"{ctx.division}/{ctx.submitter}/results/{system}/{bench}"
        facts = results[0].facts
        if facts is None:
            findings.append(
                Finding(
                    "scenario-set",
                    folder,
                    f"'{results[0].mlperf_benchmark}' is not a "
                    f"{ctx.rules.name} benchmark (open division: map it in model_mapping.json)",
                )
            )
            continue
        present = {r.scenario for r in results}
        for unknown in sorted(present - set(facts.scenarios)):
            findings.append(
                Finding(
                    "scenario-set",
                    f"{folder}/{unknown}",
                    f"{facts.name} has no scenario {unknown}; allowed: {facts.scenarios}",
                )
            )
        if ctx.division != "open":
            for missing in facts.required_scenarios:
                if missing not in present:
                    findings.append(Finding("scenario-set", folder, f"required scenario {missing} is missing"))
            one_of = facts.facts["scenarios"].get("at_least_one_of") or []
            if one_of and not present & set(one_of):
                findings.append(Finding("scenario-set", folder, f"needs at least one of {one_of}"))
    return findings


# -- system descriptions and measurements ----------------------------------------------------


@rule("system-description")
def check_systems(ctx: TreeContext) -> list[Finding]:
    fields = ctx.rules["system_description"]
    findings = []
    systems_dir = ctx.base / "systems"
    described = {p.stem for p in systems_dir.glob("*.json")} if systems_dir.is_dir() else set()
    with_results = {r.system for r in ctx.results}
    for system in sorted(with_results - described):
        findings.append(
            Finding(
                "system-description",
                f"{ctx.division}/{ctx.submitter}/systems/{system}.json",
                "results exist but the system description is missing",
            )
        )
    for system in sorted(described - with_results):
        findings.append(
            Finding(
                "system-description",
                f"{ctx.division}/{ctx.submitter}/systems/{system}.json",
                "a system description without results",
            )
        )
    for path in sorted(systems_dir.glob("*.json")) if systems_dir.is_dir() else []:
        where = ctx.rel(path)
        try:
            desc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            findings.append(Finding("system-description", where, f"not valid JSON: {exc}"))
            continue
        for key in fields["required"]:
            if key not in desc:
                findings.append(Finding("system-description", where, f"field {key} is missing"))
            elif key in fields["meaningful"] and not desc[key]:
                findings.append(
                    Finding(
                        "system-description",
                        where,
                        f'field {key} needs a meaningful (non-empty, non-zero) value; write "0" for a zero count',
                    )
                )
        for key in fields["integer"]:
            try:
                int(desc.get(key, 0))
            except (TypeError, ValueError):
                findings.append(
                    Finding("system-description", where, f"field {key} must be an integer, got {desc.get(key)!r}")
                )
        if str(desc.get("status", "")).lower() not in ctx.rules["statuses"]:
            findings.append(
                Finding(
                    "system-description", where, f"status {desc.get('status')!r} is not one of {ctx.rules['statuses']}"
                )
            )
        if desc.get("system_type") not in ctx.rules["system_types"]:
            findings.append(
                Finding(
                    "system-description",
                    where,
                    f"system_type {desc.get('system_type')!r} is not one of {ctx.rules['system_types']}",
                )
            )
        if desc.get("division") != ctx.division or str(desc.get("submitter", "")).lower() != ctx.submitter.lower():
            findings.append(Finding("system-description", where, "division/submitter do not match the folders"))
        if ctx.division != "network":
            for key in fields["network_only"]:
                if key in desc:
                    findings.append(
                        Finding(
                            "system-description",
                            where,
                            f"{key} outside the network division "
                            "(any value makes the checker demand every network field)",
                        )
                    )
    return findings


@rule("measurements")
def check_measurements(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        path = result.path / "measurements.json"
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        for key in ctx.rules["measurements_keys"]:
            if not data.get(key):
                findings.append(Finding("measurements", ctx.rel(path), f"{key} is missing or empty"))
        if ctx.division == "closed" and str(data.get("retraining", "")).lower() not in ("no", ""):
            findings.append(Finding("measurements", ctx.rel(path), "retraining is not allowed in the closed division"))
    return findings


# -- performance logs ------------------------------------------------------------------------

PERF = "performance/run_1/mlperf_log_detail.txt"
ACC = "accuracy/mlperf_log_detail.txt"


def _perf(ctx: TreeContext):
    for result in ctx.results:
        detail = result.detail(PERF)
        if detail is not None:
            yield result, detail, ctx.rel(result.path / PERF)


# LoadGen's reason when an Offline run's one query was done before min_duration.
OFFLINE_TOO_SHORT = "Increase expected QPS"


def _invalid_message(detail: dict) -> str:
    reason = str(detail.get("result_invalid_reason") or "").strip()
    message = f"LoadGen result is {detail.get('result_validity')}" + (f" ({reason})" if reason else "")
    rate = detail.get("result_samples_per_second")
    if detail.get("effective_scenario") == "Offline" and OFFLINE_TOO_SHORT in reason and rate:
        # Offline issues 1.1 x min_duration x target_qps samples: the fix is a config value.
        message += (
            f": its {detail.get('generated_samples_per_query', '?')} samples ran at {float(rate):.1f}/s and "
            f"took less than min_duration; set this Offline scenario's target_qps "
            f"(systems.<system>.benchmarks.<benchmark>.Offline.target_qps) to at least {float(rate):.0f} "
            f"(a higher value only makes the run longer) and rerun it"
        )
    return message


@rule("loadgen-valid")
def check_validity(ctx: TreeContext) -> list[Finding]:
    return [
        Finding("loadgen-valid", where, _invalid_message(detail))
        for _, detail, where in _perf(ctx)
        if str(detail.get("result_validity", "")).upper() != "VALID"
    ]


@rule("loadgen-errors")
def check_loadgen_errors(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        for relative in (PERF, ACC):
            detail = result.detail(relative)
            if detail and detail["errors"]:
                findings.append(
                    Finding(
                        "loadgen-errors",
                        ctx.rel(result.path / relative),
                        f"{len(detail['errors'])} LoadGen error(s): " + "; ".join(detail["errors"][:3]),
                    )
                )
    return findings


@rule("seeds")
def check_seeds(ctx: TreeContext) -> list[Finding]:
    findings = []
    for _, detail, where in _perf(ctx):
        for key, expected in ctx.rules.seeds.items():
            found = detail.get(f"effective_{key}")
            if found is None or int(found) != int(expected):
                findings.append(Finding("seeds", where, f"{key} is {found}, expected {expected} for {ctx.rules.name}"))
        version = str(detail.get("loadgen_version", "")).split(" ")[0]
        if version not in ctx.rules.loadgen_versions:
            findings.append(
                Finding(
                    "seeds",
                    where,
                    f"LoadGen {version or '?'} does not carry the {ctx.rules.name} "
                    f"seeds; install {ctx.rules.loadgen_requirement}",
                )
            )
    return findings


@rule("scenario-match")
def check_scenario_match(ctx: TreeContext) -> list[Finding]:
    """The log was produced for this folder's scenario (Interactive = LoadGen Server)."""
    findings = []
    for result, detail, where in _perf(ctx):
        if result.scenario not in ctx.rules.scenario_folders:
            continue
        expected = ctx.rules.loadgen_scenario(result.scenario)
        if detail.get("effective_scenario") != expected:
            findings.append(
                Finding(
                    "scenario-match",
                    where,
                    f"the log is a {detail.get('effective_scenario')} run; "
                    f"a {result.scenario} folder needs LoadGen {expected}",
                )
            )
    return findings


@rule("token-latencies")
def check_token_latencies(ctx: TreeContext) -> list[Finding]:
    return [
        Finding("token-latencies", where, "use_token_latencies was not requested (LLM results report tokens)")
        for result, detail, where in _perf(ctx)
        if result.facts
        and result.facts.facts.get("use_token_latencies")
        and not detail.get("requested_use_token_latencies")
    ]


@rule("latency")
def check_latency(ctx: TreeContext) -> list[Finding]:
    """p99 TTFT/TPOT against this folder's limits (Interactive's own, not Server's), and the
    limits LoadGen was asked to enforce must be this scenario's (else an Interactive run was
    made under the Server model name)."""
    findings = []
    for result, detail, where in _perf(ctx):
        limits = result.facts.latency_limits_ms(result.scenario) if result.facts else None
        if not limits:
            continue
        for name, requested_key, measured_key in (
            ("ttft", "requested_server_ttft_latency", "result_first_token_99.00_percentile_latency_ns"),
            ("tpot", "requested_server_tpot_latency", "result_time_per_output_token_99.00_percentile_ns"),
        ):
            limit_ns = limits[name] * 1_000_000
            requested = detail.get(requested_key)
            if requested is not None and int(requested) != limit_ns:
                findings.append(
                    Finding(
                        "latency",
                        where,
                        f"LoadGen enforced a {name.upper()} limit of "
                        f"{int(requested) / 1e6:g} ms; {result.scenario} requires {limits[name]} ms "
                        f"(run it under the model name {result.facts.loadgen_model(result.scenario)})",
                    )
                )
            measured = detail.get(measured_key)
            if measured is None:
                findings.append(Finding("latency", where, f"no p99 {name.upper()} in the log"))
            elif float(measured) >= limit_ns:
                findings.append(
                    Finding(
                        "latency",
                        where,
                        f"p99 {name.upper()} {float(measured) / 1e6:.1f} ms is not "
                        f"below the {result.scenario} limit {limits[name]} ms",
                    )
                )
        if detail.get("early_stopping_met") is False:
            findings.append(Finding("latency", where, "early stopping was not met"))
    return findings


@rule("run-length")
def check_run_length(ctx: TreeContext) -> list[Finding]:
    """The round's minimum duration, sample counts and Offline samples per query."""
    if ctx.test_scale:
        return []
    findings = []
    for result, detail, where in _perf(ctx):
        duration = detail.get("effective_min_duration_ms")
        if duration is None or int(duration) < ctx.rules.min_duration_ms:
            findings.append(
                Finding("run-length", where, f"min_duration {duration} ms < {ctx.rules.min_duration_ms} ms")
            )
        if result.facts is None:
            continue
        needed = result.facts.facts.get(
            "checker_min_performance_sample_count", result.facts.facts["performance_sample_count"]
        )
        found = detail.get("effective_performance_sample_count")
        if found is None or int(found) < needed:
            findings.append(Finding("run-length", where, f"performance_sample_count {found} < {needed}"))
        if ctx.division != "open" and result.scenario == "Offline":
            spq = detail.get("effective_samples_per_query")
            minimum = result.facts.facts["offline_min_samples_per_query"]
            if spq is None or int(spq) < minimum:
                findings.append(Finding("run-length", where, f"Offline samples_per_query {spq} < {minimum}"))
    return findings


# -- accuracy ------------------------------------------------------------------------------


def _accuracy_values(text: str, facts: Benchmark) -> dict[str, float]:
    values = {}
    for metric, pattern in facts.accuracy["regex"].items():
        match = re.search(pattern, text)
        if match:
            values[metric] = float(match.group(1))
    return values


@rule("accuracy-log")
def check_accuracy_log(ctx: TreeContext) -> list[Finding]:
    """Truncated log, hash line, values the checker's regexes can read, full coverage."""
    findings = []
    limit = int(ctx.rules["accuracy_log_max_bytes"])
    for result in ctx.results:
        folder = result.path / "accuracy"
        log = folder / "mlperf_log_accuracy.json"
        if log.is_file() and log.stat().st_size > limit:
            findings.append(
                Finding("accuracy-log", ctx.rel(log), f"{log.stat().st_size} bytes > {limit}: not truncated")
            )
        txt = folder / "accuracy.txt"
        if txt.is_file():
            text = txt.read_text()
            if not HASH_LINE.search(text):
                findings.append(Finding("accuracy-log", ctx.rel(txt), "no hash=<sha256> line"))
            if result.facts:
                values = _accuracy_values(text, result.facts)
                for metric in result.facts.accuracy["targets"]:
                    if metric not in values:
                        findings.append(
                            Finding(
                                "accuracy-log",
                                ctx.rel(txt),
                                f"the checker's pattern cannot read "
                                f"{metric} (plain floats, as the reference script prints)",
                            )
                        )
        detail = result.detail(ACC)
        if detail is not None and result.facts and not ctx.test_scale:
            count = detail.get("effective_accuracy_sample_count", detail.get("qsl_reported_total_count"))
            expected = result.facts.facts["accuracy_sample_count"]
            if count is None or int(count) != expected:
                findings.append(
                    Finding(
                        "accuracy-log",
                        ctx.rel(result.path / ACC),
                        f"the accuracy run covered {count} samples; the dataset has {expected}",
                    )
                )
    return findings


@rule("accuracy-target")
def check_accuracy_target(ctx: TreeContext) -> list[Finding]:
    """The round's targets and upper bounds; in the open division recorded, not enforced."""
    if ctx.test_scale:
        return []
    severity = "warning" if ctx.division == "open" else "error"
    findings = []
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if not txt.is_file() or result.facts is None:
            continue
        values = _accuracy_values(txt.read_text(), result.facts)
        acc = result.facts.accuracy
        for metric, minimum in result.facts.absolute_targets().items():
            if metric in values and values[metric] < minimum:
                findings.append(
                    Finding(
                        "accuracy-target", ctx.rel(txt), f"{metric} {values[metric]} < target {minimum:.4f}", severity
                    )
                )
        uppers = {m: acc["reference"][m] * f for m, f in acc.get("upper_bound_fraction", {}).items()}
        uppers.update(acc.get("upper_bound", {}))
        for metric, maximum in uppers.items():
            if metric in values and values[metric] > maximum:
                findings.append(
                    Finding(
                        "accuracy-target",
                        ctx.rel(txt),
                        f"{metric} {values[metric]} > upper bound {maximum:.4f}",
                        severity,
                    )
                )
    return findings


# -- compliance --------------------------------------------------------------------------------


def compliance_passed(test: str, folder: Path, rules: Round) -> tuple[bool, str]:
    verify = folder / rules.compliance_test(test)["verify_file"]
    if not verify.is_file():
        return False, f"{verify.name} is missing"
    lines = [line.strip() for line in verify.read_text().splitlines()]
    if test == "TEST06":
        first = "First token check pass: True" in lines or "First token check pass: Skipped" in lines
        ok = first and "EOS check pass: True" in lines and "Sample length check pass: True" in lines
        return ok, "" if ok else "first-token, EOS or sample-length check did not pass"
    ok = "TEST PASS" in lines
    return ok, "" if ok else "no TEST PASS line"


@rule("compliance")
def check_compliance(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        if result.facts is None:
            continue
        for test in result.facts.compliance_tests:
            folder = result.path / test
            if not folder.is_dir():
                if ctx.enforces_compliance:
                    findings.append(
                        Finding("compliance", ctx.rel(folder), f"{test} is required in the {ctx.division} division")
                    )
                continue
            ok, why = compliance_passed(test, folder, ctx.rules)
            if not ok:
                findings.append(Finding("compliance", ctx.rel(folder), f"{test} failed: {why}"))
    return findings


# -- hygiene -----------------------------------------------------------------------------------


@rule("hygiene")
def check_hygiene(ctx: TreeContext) -> list[Finding]:
    findings = []
    max_bytes = int(ctx.rules["tree_limits"]["max_file_bytes"])
    for path in sorted(ctx.base.rglob("*")):
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
        elif path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            findings.append(Finding("hygiene", rel, "empty folder"))
    return findings


@rule("marking")
def check_marking(ctx: TreeContext) -> list[Finding]:
    if ctx.test_scale:
        return [
            Finding(
                "marking",
                NOT_SUBMITTABLE_MARK,
                "test-scale tree: NOT SUBMITTABLE (round minimums not checked)",
                "warning",
            )
        ]
    return []


def check_tree(root: str | Path, rules: Round, only: list[str] | None = None) -> list[Finding]:
    ctx, findings = load_context(root, rules)
    if ctx is None:
        return findings
    for name, function in RULES.items():
        if only is None or name in only:
            findings.extend(function(ctx))
    return findings


def failed_results(root: str | Path, rules: Round) -> dict[str, list[Finding]]:
    """Scenario folder (relative) -> its error findings; for deciding what may be packaged."""
    out: dict[str, list[Finding]] = {}
    for finding in check_tree(root, rules):
        if finding.severity != "error":
            continue
        parts = finding.path.split("/")
        if len(parts) >= 6 and parts[2] == "results":
            out.setdefault("/".join(parts[:6]), []).append(finding)
    return out


def require_known_rules(names: list[str]) -> None:
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise UserError(f"unknown check rule(s) {unknown}; known: {', '.join(RULES)}")
