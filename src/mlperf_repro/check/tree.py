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

from ..accuracy.open_accuracy import UNQUANTIZED_VIDEOS, OpenDeclaration, read_open_accuracy
from ..accuracy.sandbox import UNSANDBOXED_CONFIG_KEY, UNSANDBOXED_NOTE
from ..accuracy.video_quality import OPEN_METRICS, read_video, score_videos
from ..benchmarks import DEFAULT_SYSTEM_TYPE, Benchmark, Round
from ..errors import UserError
from ..loadgen_logs import read_detail
from .endpoints_logs import PART_FILES, endpoints_files, is_endpoints_folder, read_endpoints, score_readings
from .findings import Finding

NOT_SUBMITTABLE_MARK = "NOT_SUBMITTABLE.md"
# LoadGen's detail logs -> the part of an endpoints result that stands for them.
_ENDPOINT_PARTS = {
    "performance/run_1/mlperf_log_detail.txt": "performance",
    "accuracy/mlperf_log_detail.txt": "accuracy",
}
HASH_LINE = re.compile(r"^hash=([\w\d]+)$", re.MULTILINE)


@dataclass
class ScenarioResult:
    system: str
    benchmark: str  # the folder name
    mlperf_benchmark: str
    scenario: str
    path: Path  # results/<system>/<benchmark>/<scenario>
    facts: Benchmark | None
    # Where the round's layout keeps this result's user.conf, README and measurements, and
    # its compliance folders (the scenario folder since v6.0; measurements/... and
    # compliance/... beside results/ before).
    measure_path: Path | None = None
    compliance_path: Path | None = None
    # The measurements file's name in measure_path; older layouts name it after the system
    # and the implementation ("{system}_*.json").
    measurements_name: str = "measurements.json"
    # The round's `endpoints` table when the folder holds an endpoints-harness result
    # (config.yaml, result_summary.json, accuracy_results.json; no LoadGen logs).
    endpoints: dict[str, Any] | None = None
    _details: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.measure_path = self.measure_path or self.path
        self.compliance_path = self.compliance_path or self.path

    def measurements_file(self) -> Path:
        """The result's measurements JSON (the first match of the layout's name)."""
        pattern = self.measurements_name.format(system=self.system)
        found = sorted(self.measure_path.glob(pattern)) if any(c in pattern for c in "*?[") else []
        # As the official checker picks it: "<system>..._<scenario>.json" before any other match.
        found.sort(key=lambda p: not p.name.endswith(f"_{self.measure_path.name}.json"))
        return found[0] if found else self.measure_path / pattern.replace("*", "")

    def result_field(self) -> str:
        """The detail key holding this result's metric (an endpoints result's own field)."""
        if self.is_endpoints:
            return self.endpoints["result_field"][self.scenario]
        return self.facts.result_field(self.scenario)

    @property
    def is_endpoints(self) -> bool:
        """An endpoints-harness result of a benchmark the round accepts them for."""
        return self.endpoints is not None and self.mlperf_benchmark in self.endpoints.get("benchmarks", [])

    def log_path(self, relative: str) -> Path:
        """The file detail(relative) reads: LoadGen's log, or the harness's JSON of that part."""
        part = _ENDPOINT_PARTS.get(relative)
        return self.path / (PART_FILES[part] if self.is_endpoints and part else relative)

    def detail(self, relative: str) -> dict[str, Any] | None:
        """A parsed LoadGen detail log of this result (cached), or None if absent; of an
        endpoints result, the harness's files read under LoadGen's key names."""
        if relative not in self._details:
            part = _ENDPOINT_PARTS.get(relative)
            if self.is_endpoints and part:
                self._details[relative] = read_endpoints(self.path, part, self.endpoints, self.scenario)
            else:
                path = self.path / relative
                self._details[relative] = read_detail(path) if path.is_file() and not self.is_endpoints else None
        return self._details[relative]


@dataclass
class TreeContext:
    """One submitter's folder (``<division>/<submitter>``) of a tree."""

    root: Path
    rules: Round
    division: str
    submitter: str
    model_mapping: dict[str, str]
    results: list[ScenarioResult]
    test_scale: bool
    _systems: dict[str, dict | None] = field(default_factory=dict)

    def system_description(self, system: str) -> dict | None:
        """systems/<system>.json parsed (cached); None if absent or not a JSON object."""
        if system not in self._systems:
            path = self.base / "systems" / f"{system}.json"
            try:
                data = json.loads(path.read_text()) if path.is_file() else None
            except (json.JSONDecodeError, UnicodeDecodeError):
                data = None
            self._systems[system] = data if isinstance(data, dict) else None
        return self._systems[system]

    def system_type(self, system: str) -> str:
        desc = self.system_description(system) or {}
        return str(desc.get("system_type") or DEFAULT_SYSTEM_TYPE)

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


# Since v6.0 a result's measurements and compliance folders are its scenario folder; a
# round table's `layout` says otherwise for older rounds.
RESULT_FOLDER_LAYOUT = {
    "measurements": "{division}/{submitter}/results/{system}/{benchmark}/{scenario}",
    "compliance": "{division}/{submitter}/results/{system}/{benchmark}/{scenario}",
}


def load_contexts(root: str | Path, rules: Round) -> tuple[list[TreeContext], list[Finding]]:
    """Every ``<division>/<submitter>`` folder of a tree (ours holds one; a published
    results repository holds many)."""
    root = Path(root)
    if not root.is_dir():
        return [], [Finding("tree-layout", str(root), "the submission tree does not exist")]
    divisions = [d for d in sorted(root.iterdir()) if d.is_dir() and d.name in rules["divisions"]]
    if not divisions:
        return [], [
            Finding(
                "tree-layout",
                str(root),
                f"not a submission tree: no division folder ({', '.join(rules['divisions'])}) at its root",
            )
        ]
    contexts = []
    test_scale = (root / NOT_SUBMITTABLE_MARK).is_file()
    scenario_names = {name.lower(): name for name in rules.scenario_folders}
    layout = {**RESULT_FOLDER_LAYOUT, **(rules.data.get("layout") or {})}
    for division in divisions:
        for base in sorted(s for s in division.iterdir() if s.is_dir()):
            mapping_path = base / "model_mapping.json"
            mapping: dict[str, str] = {}
            if mapping_path.is_file():
                try:
                    mapping = dict(json.loads(mapping_path.read_text()))
                except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError):
                    mapping = {}
            results = []
            for system_dir in sorted(p for p in (base / "results").glob("*") if p.is_dir()):
                for bench_dir in sorted(p for p in system_dir.glob("*") if p.is_dir()):
                    official = rules.mlperf_benchmark(bench_dir.name, mapping)
                    facts = rules.benchmark(official) if official in rules.benchmark_names else None
                    for scenario_dir in sorted(p for p in bench_dir.glob("*") if p.is_dir()):
                        # The official checker reads scenario folders case-insensitively ("offline").
                        scenario = scenario_names.get(scenario_dir.name.lower(), scenario_dir.name)
                        endpoints = rules.data.get("endpoints")
                        endpoints = endpoints if is_endpoints_folder(scenario_dir, endpoints) else None
                        where = {
                            "division": division.name,
                            "submitter": base.name,
                            "system": system_dir.name,
                            "benchmark": bench_dir.name,
                            "scenario": scenario_dir.name,
                        }
                        results.append(
                            ScenarioResult(
                                system_dir.name,
                                bench_dir.name,
                                official,
                                scenario,
                                scenario_dir,
                                facts,
                                measure_path=root / layout["measurements"].format(**where),
                                compliance_path=root / layout["compliance"].format(**where),
                                measurements_name=layout.get("measurements_file", "measurements.json"),
                                endpoints=endpoints,
                            )
                        )
            contexts.append(TreeContext(root, rules, division.name, base.name, mapping, results, test_scale))
    if not contexts:
        return [], [Finding("tree-layout", str(root), "no submitter folder under the division folder(s)")]
    return contexts, []


def load_context(root: str | Path, rules: Round) -> tuple[TreeContext | None, list[Finding]]:
    """The one submitter of a tree the workflow packaged (exactly one division and submitter)."""
    contexts, findings = load_contexts(root, rules)
    if findings:
        return None, findings
    if len(contexts) != 1:
        return None, [
            Finding(
                "tree-layout",
                str(root),
                f"expected one submitter folder, found {[f'{c.division}/{c.submitter}' for c in contexts]}",
            )
        ]
    return contexts[0], []


# -- layout and required files -------------------------------------------------------------


def check_root(root: Path, rules: Round, contexts: list[TreeContext]) -> list[Finding]:
    """What may sit at the root of the tree and directly under its division folders
    (checked once per tree, not per submitter)."""
    limits = rules["tree_limits"]
    findings = []
    for path in sorted(root.iterdir()):
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
    for division in sorted({c.division for c in contexts}):
        for path in sorted((root / division).iterdir()):
            if path.is_file():
                findings.append(
                    Finding("root-files", f"{division}/{path.name}", "no loose files directly under the division")
                )
    return findings


@rule("required-files")
def check_required_files(ctx: TreeContext) -> list[Finding]:
    findings = []
    for folder in ctx.rules["submitter_folders"]:
        if not (ctx.base / folder).is_dir():
            findings.append(Finding("required-files", ctx.rel(ctx.base), f"missing folder {folder}/"))
    for result in ctx.results:
        if result.endpoints and not result.is_endpoints:
            # The official checker's endpoints model check: only the listed benchmarks.
            shown = result.path / endpoints_files(result.path, result.endpoints)[0]
            findings.append(
                Finding(
                    "required-files",
                    ctx.rel(shown),
                    f"an endpoints-harness result, but {ctx.rules.name} accepts those only for "
                    f"{', '.join(result.endpoints.get('benchmarks', []))}: "
                    f"{result.mlperf_benchmark} needs LoadGen logs",
                )
            )
            continue
        table = result.endpoints if result.is_endpoints else ctx.rules.data
        for name in table["scenario_files"]:
            path = result.path / name
            if not path.is_file() or path.stat().st_size == 0:
                findings.append(Finding("required-files", ctx.rel(path), "missing or empty"))
        for name in table.get("measurement_files", []):
            path = result.measurements_file() if name == "measurements.json" else result.measure_path / name
            # (measurement_files names the JSON measurements.json whatever the layout calls it)
            if not path.is_file() or path.stat().st_size == 0:
                findings.append(Finding("required-files", ctx.rel(path), "missing or empty"))
    return findings


@rule("scenario-set")
def check_scenario_set(ctx: TreeContext) -> list[Finding]:
    """The scenarios of each benchmark against the suite of the system's system_type."""
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
        aliases = (ctx.rules.data.get("endpoints") or {}).get("scenario_folder_aliases") or {}
        for unknown in sorted(present - set(facts.scenarios)):
            # The official checker reads an endpoints "online" folder as Server when it
            # judges the result, but its scenario-set check reads the folder's name.
            alias = aliases.get(unknown.lower())
            hint = f" (name the endpoints harness's {unknown} folder {alias})" if alias else ""
            findings.append(
                Finding(
                    "scenario-set",
                    f"{folder}/{unknown}",
                    f"{facts.name} has no scenario {unknown}; allowed: {facts.scenarios}{hint}",
                )
            )
        if ctx.division == "open":
            continue
        system_type = ctx.system_type(system)
        scenario_rule = facts.scenario_rule(system_type)
        if scenario_rule is None:
            findings.append(
                Finding(
                    "scenario-set",
                    folder,
                    f"{facts.name} is not a benchmark of the {system_type} suite "
                    f"(system_type of systems/{system}.json)",
                )
            )
            continue
        for missing in scenario_rule["required"]:
            if missing not in present:
                findings.append(
                    Finding("scenario-set", folder, f"required scenario {missing} ({system_type}) is missing")
                )
        allowed = set(scenario_rule["required"]) | set(scenario_rule["optional"])
        for extra in sorted((present & set(facts.scenarios)) - allowed):
            findings.append(
                Finding("scenario-set", f"{folder}/{extra}", f"{extra} is not a {system_type} scenario of {facts.name}")
            )
        one_of = scenario_rule["at_least_one_of"]
        if one_of and not present & set(one_of):
            findings.append(Finding("scenario-set", folder, f"needs at least one of {one_of}"))
    return findings


# -- system descriptions and measurements ----------------------------------------------------


# A mixed system (nodes of several kinds in one system) gives a count per kind of node:
# "64(AMD EPYC 9534) and 96(AMD EPYC 9655)", "8 (MI300X), 8 (MI325X)".
_COUNT = r"\s*(\d+)\s*(?:\([^()]*\))?\s*"
_PER_NODE_TYPE = re.compile(rf"^{_COUNT}(?:(?:,|;|\+|\band\b){_COUNT})*$")


def per_node_type_counts(value: Any) -> list[int] | None:
    """The counts an integer field of a system description holds: [n] for a plain
    integer, one per kind of node for a mixed system; None if it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, float) and value.is_integer():
        return [int(value)]
    text = str(value)
    match = _PER_NODE_TYPE.match(text)
    return [int(n) for n in re.findall(r"(\d+)\s*(?:\([^()]*\))?", text)] if match else None


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
                "a system description without results (remove it, or add the system's results)",
                "warning",
            )
        )
    # A description without results is not published as a system (and the official
    # checker never reads it): only the ones results point at are judged.
    for path in sorted(p for p in systems_dir.glob("*.json") if p.stem in with_results) if systems_dir.is_dir() else []:
        where = ctx.rel(path)
        try:
            desc = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            findings.append(Finding("system-description", where, f"not valid JSON: {exc}"))
            continue
        if not isinstance(desc, dict):
            findings.append(Finding("system-description", where, "not a JSON object"))
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
            if key in desc and per_node_type_counts(desc[key]) is None:
                findings.append(
                    Finding(
                        "system-description",
                        where,
                        f"field {key} must be an integer, or one per kind of node in a mixed system "
                        f'("64(AMD EPYC 9534) and 96(AMD EPYC 9655)"), got {desc[key]!r}',
                    )
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


# How measurements.json says "no retraining" in published trees.
NO_RETRAINING = ("", "no", "none", "n/a", "na", "false", "0")


@rule("measurements")
def check_measurements(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        path = result.measurements_file()
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            findings.append(Finding("measurements", ctx.rel(path), f"not valid JSON: {exc}"))
            continue
        if not isinstance(data, dict):
            findings.append(Finding("measurements", ctx.rel(path), "not a JSON object"))
            continue
        for key in ctx.rules["measurements_keys"]:
            if not data.get(key):
                findings.append(Finding("measurements", ctx.rel(path), f"{key} is missing or empty"))
        if ctx.division == "closed" and str(data.get("retraining", "")).strip().lower() not in NO_RETRAINING:
            findings.append(Finding("measurements", ctx.rel(path), "retraining is not allowed in the closed division"))
    return findings


# -- performance logs ------------------------------------------------------------------------

PERF = "performance/run_1/mlperf_log_detail.txt"
ACC = "accuracy/mlperf_log_detail.txt"


def _perf(ctx: TreeContext):
    for result in ctx.results:
        detail = result.detail(PERF)
        if detail is not None:
            yield result, detail, ctx.rel(result.log_path(PERF))


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
            f"(a higher value only makes the run longer), or to auto (the find-performance pass measures it), "
            f"and rerun it"
        )
    return message


@rule("loadgen-valid")
def check_validity(ctx: TreeContext) -> list[Finding]:
    return [
        Finding("loadgen-valid", where, _invalid_message(detail))
        for result, detail, where in _perf(ctx)
        # The endpoints harness judges no validity (the official checker reads none there).
        if not result.is_endpoints and str(detail.get("result_validity", "")).upper() != "VALID"
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
                        ctx.rel(result.log_path(relative)),
                        f"{len(detail['errors'])} LoadGen error(s): " + "; ".join(detail["errors"][:3]),
                    )
                )
    return findings


def _round_of_seeds(seeds: dict[str, Any]) -> str | None:
    """The known round whose seeds these are, if any (for a helpful message)."""
    from ..benchmarks import available_rounds, load_round

    for name in available_rounds():
        if all(str(seeds.get(k)) == str(v) for k, v in load_round(name).seeds.items()):
            return name
    return None


@rule("seeds")
def check_seeds(ctx: TreeContext) -> list[Finding]:
    """The seeds the log shows LoadGen used; the LoadGen version string is not judged
    (a release from before the round's last one may carry the same seeds)."""
    findings = []
    for result, detail, where in _perf(ctx):
        found = {key: detail.get(f"effective_{key}") for key in ctx.rules.seeds}
        # The endpoints harness logs only its dataloader and scheduler seeds (no QSL seed).
        judged = result.endpoints.get("seeds", []) if result.is_endpoints else list(ctx.rules.seeds)
        wrong = [k for k, v in ctx.rules.seeds.items() if k in judged and (found[k] is None or str(found[k]) != str(v))]
        if not wrong:
            continue
        if result.is_endpoints:
            fields = result.endpoints.get("fields") or {}
            where_set = ", ".join(str(fields.get(f"effective_{k}", {}).get("config", k)) for k in wrong)
            findings.append(
                Finding(
                    "seeds",
                    where,
                    f"the endpoints harness ran with other seeds ({', '.join(f'{k}={found[k]}' for k in wrong)}); "
                    f"{ctx.rules.name} needs {', '.join(f'{k}={ctx.rules.seeds[k]}' for k in wrong)} "
                    f"(config.yaml {where_set})",
                )
            )
            continue
        other = _round_of_seeds(found)
        version = str(detail.get("loadgen_version", "")).split(" ")[0] or "?"
        because = (
            f"LoadGen {version} ran with the {other} seeds" if other else f"LoadGen {version} ran with other seeds"
        )
        findings.append(
            Finding(
                "seeds",
                where,
                f"{because} ({', '.join(f'{k}={found[k]}' for k in wrong)}); {ctx.rules.name} needs "
                f"{', '.join(f'{k}={ctx.rules.seeds[k]}' for k in wrong)}: install {ctx.rules.loadgen_requirement} "
                "and rerun",
            )
        )
    return findings


# The LoadGen test mode each log of a result folder must come from.
TEST_MODES = {PERF: "PerformanceOnly", ACC: "AccuracyOnly"}


@rule("test-mode")
def check_test_mode(ctx: TreeContext) -> list[Finding]:
    """performance/ holds a PerformanceOnly run and accuracy/ an AccuracyOnly one (an
    accuracy folder holding a performance run has not scored every sample once). The
    official checker does not look."""
    findings = []
    for result in ctx.results:
        for relative, mode in TEST_MODES.items():
            detail = result.detail(relative)
            found = (detail or {}).get("effective_test_mode")
            if found is not None and found != mode:
                findings.append(
                    Finding(
                        "test-mode",
                        ctx.rel(result.log_path(relative)),
                        f"the log is of a {found} run; this folder needs a run in {mode} mode",
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
        allowed = [expected]
        if "edge" in ctx.system_type(result.system):
            allowed += (ctx.rules.data.get("inferred_scenarios") or {}).get("edge", {}).get(result.scenario, [])
        if detail.get("effective_scenario") not in allowed:
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
        and not result.is_endpoints
        and result.facts.facts.get("use_token_latencies")
        and not detail.get("requested_use_token_latencies")
    ]


def _early_stopping(ctx: TreeContext, scenario_folder: str) -> bool:
    """LoadGen judges this scenario by early stopping (its table entry says so)."""
    entry = ctx.rules["scenarios"].get(scenario_folder) or {}
    return bool(entry.get("early_stopping"))


@rule("latency")
def check_latency(ctx: TreeContext) -> list[Finding]:
    """Early stopping met where the scenario uses it; the target latency LoadGen judged
    against no looser than the table's; p99 TTFT/TPOT against this folder's limits
    (Interactive's own, not Server's), and the token limits LoadGen was asked to enforce
    must be this scenario's (else an Interactive run was made under the Server model name)."""
    findings = []
    for result, detail, where in _perf(ctx):
        if result.facts is None:
            continue
        if _early_stopping(ctx, result.scenario) and detail.get("early_stopping_met") is False:
            findings.append(Finding("latency", where, "early stopping was not met"))
        limits = result.facts.latency_limits_ms(result.scenario) or {}
        target = limits.get("target")
        judged = detail.get("effective_target_latency_ns")
        p99 = detail.get("result_99.00_percentile_latency_ns")
        if result.is_endpoints and not result.facts.is_llm and target is not None and p99 is not None:
            # No early-stopping verdict from the harness: its p99 estimate against the target.
            if float(p99) > target * 1_000_000:
                findings.append(
                    Finding(
                        "latency",
                        where,
                        f"p99 latency {float(p99) / 1e6:.1f} ms is over the {result.scenario} target {target:g} ms",
                    )
                )
        if target is not None and judged is not None and int(judged) > target * 1_000_000:
            findings.append(
                Finding(
                    "latency",
                    where,
                    f"LoadGen judged latency against {int(judged) / 1e6:g} ms; "
                    f"{result.facts.name} {result.scenario} allows at most {target:g} ms",
                )
            )
        for name, requested_key, measured_key in (
            ("ttft", "requested_server_ttft_latency", "result_first_token_99.00_percentile_latency_ns"),
            ("tpot", "requested_server_tpot_latency", "result_time_per_output_token_99.00_percentile_ns"),
        ):
            if name not in limits:
                continue
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
    return findings


@rule("run-length")
def check_run_length(ctx: TreeContext) -> list[Finding]:
    """The round's minimum duration, sample counts and Offline samples per query."""
    if ctx.test_scale:
        return []
    findings = []
    for result, detail, where in _perf(ctx):
        duration = detail.get("effective_min_duration_ms")
        # A benchmark may set its own (e2e-rag runs one pass over its dataset: 0).
        minimum = int((result.facts.facts if result.facts else {}).get("min_duration_ms", ctx.rules.min_duration_ms))
        if duration is None or int(duration) < minimum:
            findings.append(Finding("run-length", where, f"min_duration {duration} ms < {minimum} ms"))
        if result.facts is None or result.is_endpoints:
            # The harness has no performance sample count, query minimum or samples per
            # query (the official checker skips these for endpoints results).
            continue
        needed = result.facts.facts.get(
            "checker_min_performance_sample_count", result.facts.facts["performance_sample_count"]
        )
        found = detail.get("effective_performance_sample_count")
        if found is None or int(found) < needed:
            findings.append(Finding("run-length", where, f"performance_sample_count {found} < {needed}"))
        minimum_queries = (result.facts.facts.get("min_query_count") or {}).get(result.scenario)
        queries = detail.get("effective_min_query_count")
        if (
            minimum_queries
            and not _early_stopping(ctx, result.scenario)
            and queries is not None
            and int(queries) < minimum_queries
        ):
            findings.append(Finding("run-length", where, f"min_query_count {queries} < {minimum_queries}"))
        if ctx.division != "open" and result.scenario == "Offline" and detail.get("effective_scenario") == "Offline":
            spq = detail.get("effective_samples_per_query")
            minimum = result.facts.facts["offline_min_samples_per_query"]
            if spq is None or int(spq) < minimum:
                findings.append(Finding("run-length", where, f"Offline samples_per_query {spq} < {minimum}"))
    return findings


# -- accuracy ------------------------------------------------------------------------------


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
            text = txt.read_text(errors="replace")
            if not HASH_LINE.search(text):
                findings.append(Finding("accuracy-log", ctx.rel(txt), "no hash=<sha256> line"))
            if result.facts:
                values = result.facts.accuracy_values(text)
                for metric in result.facts.absolute_targets(result.scenario):
                    not_computed = re.search(rf"^{re.escape(metric)}: not computed here: (.*)$", text, re.MULTILINE)
                    if metric not in values and not_computed:
                        # The evaluator could not compute it on this machine and said so
                        # (text-to-video without VBench's checkpoints): not a format fault.
                        findings.append(_not_computed(ctx, result, txt, text, metric, not_computed.group(1).strip()))
                    elif metric not in values:
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
            expected = result.facts.accuracy_sample_count(result.scenario)
            if count is None or int(count) != expected:
                findings.append(
                    Finding(
                        "accuracy-log",
                        ctx.rel(result.log_path(ACC)),
                        f"the accuracy run covered {count} samples; the dataset has {expected}",
                    )
                )
    return findings


def _not_computed(ctx: TreeContext, result: ScenarioResult, txt: Path, text: str, metric: str, why: str) -> Finding:
    """A round's metric the evaluator could not compute here: an error, unless an open-division
    stand-in declares weight-free metrics in its place (accuracy.open_accuracy) consistently
    and they meet their targets; then a warning that says what judged it."""
    declared = read_open_accuracy(text)
    missing = f"{metric} was not computed here ({why})"
    if declared is None:
        return Finding("accuracy-log", ctx.rel(txt), f"{missing}; the result cannot be submitted until it is")
    if ctx.division != "open":
        return Finding(
            "accuracy-log",
            ctx.rel(txt),
            f"{missing}; the open-division metrics it declares ({', '.join(declared.metrics)}) do not replace it "
            f"in the {ctx.division} division: the result cannot be submitted until it is",
        )
    problems = open_accuracy_problems(ctx, result, declared)
    if problems:
        return Finding(
            "accuracy-log",
            ctx.rel(txt),
            f"{missing}, and the open-division metrics declared in its place cannot stand in for it: "
            + "; ".join(problems),
        )
    judged = ", ".join(
        f"{name} {declared.values[name]} >= {target['minimum']}" for name, target in declared.targets.items()
    )
    return Finding(
        "accuracy-log",
        ctx.rel(txt),
        f"{metric} not computed here; judged instead by the open-division metrics it declares ({judged}; "
        f"{len(declared.samples)} packaged samples recomputed from the tree): not comparable with {metric}",
        "warning",
    )


def open_accuracy_problems(ctx: TreeContext, result: ScenarioResult, declared: OpenDeclaration) -> list[str]:
    """What keeps an accuracy.txt's open-division metrics (accuracy.open_accuracy) from standing
    in for the round's score: the result must be a text-to-video stand-in that model_mapping.json
    maps to its benchmark; every judged metric meets its target, a fraction target is that
    fraction of the unquantized value it names; each metric covers every accuracy sample; and the
    values of the packaged samples are what their videos (and the unquantized pipeline's beside
    them) give when recomputed here."""
    problems = list(declared.problems)
    if result.facts is None or result.facts.facts.get("task") != "text-to-video":
        problems.append(f"{result.mlperf_benchmark} is not a text-to-video benchmark")
    mapped = ctx.model_mapping.get(result.benchmark)
    if result.benchmark == result.mlperf_benchmark or mapped != result.mlperf_benchmark:
        problems.append(
            f"model_mapping.json does not declare {result.benchmark} a stand-in for {result.mlperf_benchmark} "
            f"(it maps it to {mapped!r}): the real model is judged by the round's score"
        )
    judged = [m for m in declared.metrics if m in OPEN_METRICS and OPEN_METRICS[m].target]
    if not judged:
        problems.append(f"no judged metric declared ({', '.join(m for m, x in OPEN_METRICS.items() if x.target)})")
    for name in judged:
        value, target = declared.values.get(name), declared.targets.get(name)
        if target is None:
            problems.append(f"{name} has no target")
            continue
        kind = "fraction" if "fraction" in target else "minimum"
        if kind != OPEN_METRICS[name].target:
            problems.append(f"{name}'s target is a {kind}, not a {OPEN_METRICS[name].target}")
        if kind == "fraction":
            expected = round(target["fraction"] * target["unquantized"], 6)
            if not 0 < target["fraction"] <= 1 or abs(target["minimum"] - expected) > 1.5e-6:
                problems.append(
                    f"{name}'s target {target['minimum']} is not {target['fraction']} x {target['unquantized']}"
                )
        if value is None:
            problems.append(f"{name} was not computed")
        elif value < target["minimum"]:
            problems.append(f"{name} {value} < target {target['minimum']}")
    detail = result.detail(ACC)
    samples = (
        None
        if detail is None
        else detail.get("effective_accuracy_sample_count", detail.get("qsl_reported_total_count"))
    )
    for name in declared.metrics:
        count = declared.videos.get(name)
        if samples is not None and count is not None and count != int(samples):
            problems.append(f"{name} covers {count} videos; the accuracy run has {samples} samples")
    problems += _recomputed_samples(ctx, result, declared)
    return problems


def _recomputed_samples(ctx: TreeContext, result: ScenarioResult, declared: OpenDeclaration) -> list[str]:
    """The declared values of each packaged video (accuracy/videos/<sample>.mp4), recomputed from
    it and, for the fidelity metrics, from the unquantized pipeline's video beside it."""
    folder = result.path / "accuracy"
    stems = [
        str(s) for s in ((result.facts.accuracy.get("extra_files") or {}).get("videos", []) if result.facts else [])
    ]
    problems = []
    for stem in stems:
        video = folder / "videos" / f"{stem}.mp4"
        if not video.is_file():
            continue  # accuracy-files reports it
        values = declared.samples.get(int(stem))
        if values is None:
            problems.append(f"no 'open_accuracy sample {stem}' line for the packaged video {stem}.mp4")
            continue
        unquantized = folder / UNQUANTIZED_VIDEOS / f"{stem}.mp4"
        compares = [m for m in declared.metrics if m in OPEN_METRICS and OPEN_METRICS[m].needs_reference_videos]
        if compares and not unquantized.is_file():
            problems.append(
                f"{ctx.rel(unquantized)} is missing: {', '.join(compares)} of sample {stem} cannot be recomputed"
            )
            continue
        try:
            recomputed = score_videos(
                {int(stem): read_video(video, ctx.rel(video))},
                [m for m in declared.metrics if m in OPEN_METRICS],
                {int(stem): read_video(unquantized, ctx.rel(unquantized))} if compares else None,
            )["per_sample"][int(stem)]
        except UserError as exc:
            problems.append(str(exc))
            continue
        for name, value in recomputed.items():
            said = values.get(name)
            if (said is None) != (value is None) or (value is not None and abs(said - value) > 2e-6):
                problems.append(
                    f"sample {stem}: {name} is {value if value is None else round(value, 6)} "
                    f"recomputed from its videos, {said} declared"
                )
    return problems


@rule("accuracy-files")
def check_accuracy_files(ctx: TreeContext) -> list[Finding]:
    """Outputs the accuracy folder must carry for the reviewers (the table's extra_files:
    e.g. the generated videos of named samples), each file named by its sample."""
    findings = []
    for result in ctx.results:
        if result.facts is None:
            continue
        for folder_name, stems in (result.facts.accuracy.get("extra_files") or {}).items():
            folder = result.path / "accuracy" / folder_name
            if not folder.is_dir():
                findings.append(
                    Finding("accuracy-files", ctx.rel(folder), f"missing: the outputs of samples {', '.join(stems)}")
                )
                continue
            present = {p.name.split(".")[0] for p in folder.iterdir() if p.is_file()}
            missing = [stem for stem in stems if stem not in present]
            if missing:
                findings.append(
                    Finding("accuracy-files", ctx.rel(folder), f"no output file for sample(s) {', '.join(missing)}")
                )
    return findings


# The start of one accuracy-log entry (LoadGen writes one per line); a truncated log keeps
# whole entries at its ends and the start of the one cut at its first 4 KB.
ACCURACY_ENTRY = re.compile(r'\{\s*"seq_id"\s*:\s*(\d+)\s*,\s*"qsl_idx"\s*:\s*(\d+)')


@rule("accuracy-duplicates")
def check_accuracy_duplicates(ctx: TreeContext) -> list[Finding]:
    """An accuracy run issues each sample once: no qsl_idx in two entries of the accuracy
    log (the entries a truncated log still shows). The same entry twice (seq_id and
    qsl_idx) is the overlap of a log truncated to its two ends, not a duplicate."""
    findings = []
    for result in ctx.results:
        log = result.path / "accuracy" / "mlperf_log_accuracy.json"
        if not log.is_file():
            continue
        seq_ids: dict[int, set[int]] = {}
        with open(log, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                for seq_id, qsl_idx in ACCURACY_ENTRY.findall(line):
                    seq_ids.setdefault(int(qsl_idx), set()).add(int(seq_id))
        repeated = {qsl: sorted(seqs) for qsl, seqs in sorted(seq_ids.items()) if len(seqs) > 1}
        if repeated:
            shown = "; ".join(
                f"qsl_idx {qsl} in seq_id {', '.join(map(str, seqs))}" for qsl, seqs in list(repeated.items())[:3]
            )
            findings.append(
                Finding(
                    "accuracy-duplicates",
                    ctx.rel(log),
                    f"{len(repeated)} sample(s) logged more than once ({shown}): an accuracy run "
                    "scores each sample once (is this a performance run's log?)",
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
        if result.is_endpoints and result.facts is not None:
            findings.extend(_endpoints_accuracy(ctx, result, severity))
            continue
        if not txt.is_file() or result.facts is None:
            continue
        readings = result.facts.accuracy_readings(txt.read_text(errors="replace"))
        for metric, minimum in result.facts.absolute_targets(result.scenario).items():
            for value in readings.get(metric, []):
                if value < minimum:
                    findings.append(
                        Finding("accuracy-target", ctx.rel(txt), f"{metric} {value} < target {minimum:.4f}", severity)
                    )
        for metric, maximum in result.facts.upper_bounds(result.scenario).items():
            for value in readings.get(metric, []):
                if value > maximum:
                    findings.append(
                        Finding(
                            "accuracy-target", ctx.rel(txt), f"{metric} {value} > upper bound {maximum:.4f}", severity
                        )
                    )
    return findings


@rule("accuracy-isolation")
def check_accuracy_isolation(ctx: TreeContext) -> list[Finding]:
    """An accuracy score whose model-written code ran without namespaces or a system-call filter
    (accepted by the config's sandbox.allow_unsandboxed; its accuracy.txt says so): valid as a
    score, but the machine ran untrusted code unguarded."""
    findings = []
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if txt.is_file() and UNSANDBOXED_NOTE in txt.read_text(errors="replace"):
            findings.append(
                Finding(
                    "accuracy-isolation",
                    ctx.rel(txt),
                    f"accuracy {UNSANDBOXED_NOTE}: model-written code ran without namespaces or a seccomp filter "
                    f"({UNSANDBOXED_CONFIG_KEY})",
                    "warning",
                )
            )
    return findings


def _endpoints_accuracy(ctx: TreeContext, result: ScenarioResult, severity: str) -> list[Finding]:
    """An endpoints result's score (accuracy_results.json): present, and against the
    targets where the table says how the benchmark's score reads (``accuracy_score``)."""
    detail = result.detail(ACC)
    if detail is None:
        return []  # required-files names the missing file
    where = ctx.rel(result.log_path(ACC))
    if detail.get("accuracy_score") is None:
        return [Finding("accuracy-target", where, "no accuracy score (accuracy_scores[].score)")]
    reading = (result.endpoints.get("accuracy_score") or {}).get(result.facts.name)
    targets = result.facts.absolute_targets(result.scenario)
    bounds = result.facts.upper_bounds(result.scenario)
    values = score_readings(detail["accuracy_score"], reading, sorted({*targets, *bounds}))
    findings = []
    for metric, minimum in targets.items():
        if metric in values and values[metric] < minimum:
            findings.append(
                Finding("accuracy-target", where, f"{metric} {values[metric]} < target {minimum:.4f}", severity)
            )
    for metric, maximum in bounds.items():
        if metric in values and values[metric] > maximum:
            findings.append(
                Finding("accuracy-target", where, f"{metric} {values[metric]} > upper bound {maximum:.4f}", severity)
            )
    return findings


# -- compliance --------------------------------------------------------------------------------


# A verify file passes with this line unless the round's table says otherwise.
DEFAULT_PASS_LINES = [["TEST PASS"]]


def compliance_passed(test: str, folder: Path, rules: Round, facts: Benchmark | None = None) -> tuple[bool, str]:
    """A compliance folder's verdict, from the table's test entry (for this benchmark):
    ``required_files`` exist, and each verify file (``verify_files``, or the one
    ``verify_file``) holds, for every group of ``pass_lines``, one of the group's lines. A
    verify_accuracy.txt that fails still passes where the entry has an accuracy fallback
    (TEST01: non-deterministic outputs) and the compliance run's accuracy is within
    ``max_accuracy_delta_percent`` of the baseline's."""
    entry = rules.compliance_test(test, facts.name if facts else None)
    for relative in entry.get("required_files", []):
        if not (folder / relative).is_file():
            return False, f"{relative} is missing"
    for name in entry.get("verify_files") or [entry["verify_file"]]:
        verify = folder / name
        if not verify.is_file():
            return False, f"{name} is missing"
        lines = {line.strip() for line in verify.read_text(errors="replace").splitlines()}
        groups = (entry.get("pass_lines") or {}).get(name, DEFAULT_PASS_LINES)
        for group in groups:
            if lines & set(group):
                continue
            if name == "verify_accuracy.txt" and entry.get("accuracy_fallback_files"):
                ok, why = _accuracy_fallback(folder, entry, facts)
                if ok:
                    break
                return False, f"{name} has no {' or '.join(repr(g) for g in group)} line and {why}"
            return False, f"{name} has no {' or '.join(repr(g) for g in group)} line"
    return True, ""


def _accuracy_fallback(folder: Path, entry: dict, facts: Benchmark | None) -> tuple[bool, str]:
    """The compliance run's accuracy against the baseline's, metric by metric."""
    missing = [f for f in entry["accuracy_fallback_files"] if not (folder / f).is_file()]
    if missing:
        return False, f"the accuracy fallback lacks {', '.join(missing)}"
    if facts is None:
        return False, "the benchmark is unknown, so the accuracy fallback cannot be judged"
    files = {Path(f).name: folder / f for f in entry["accuracy_fallback_files"]}
    baseline = facts.accuracy_values(files["baseline_accuracy.txt"].read_text(errors="replace"))
    compliance = facts.accuracy_values(files["compliance_accuracy.txt"].read_text(errors="replace"))
    limit = entry.get("max_accuracy_delta_percent", 1)
    for metric in facts.absolute_targets():
        base, seen = baseline.get(metric), compliance.get(metric)
        if not base or not seen:
            return False, f"baseline/compliance accuracy lack {metric}"
        allowed = limit.get(metric, 1) if isinstance(limit, dict) else limit
        delta = abs(1 - base / seen) * 100
        if delta > allowed:
            return False, f"{metric} differs by {delta:.3f}% from the baseline (at most {allowed}%)"
    return True, ""


@rule("compliance")
def check_compliance(ctx: TreeContext) -> list[Finding]:
    findings = []
    for result in ctx.results:
        if result.facts is None or (result.endpoints and not result.is_endpoints):
            continue  # (an endpoints result the round does not accept: required-files says so)
        if result.is_endpoints:
            findings.extend(_endpoints_compliance(ctx, result))
            continue
        for test in result.facts.compliance_tests:
            folder = result.compliance_path / test
            if not folder.is_dir():
                if ctx.enforces_compliance:
                    findings.append(
                        Finding("compliance", ctx.rel(folder), f"{test} is required in the {ctx.division} division")
                    )
                continue
            ok, why = compliance_passed(test, folder, ctx.rules, result.facts)
            if not ok:
                findings.append(Finding("compliance", ctx.rel(folder), f"{test} failed: {why}"))
    return findings


def _endpoints_compliance(ctx: TreeContext, result: ScenarioResult) -> list[Finding]:
    """An endpoints result's audits: audit/audit_<name>.json for each of the benchmark's
    tests the harness audits, naming its test and passed; demanded only for the table's
    ``required_audits`` (in the divisions that enforce compliance). TEST09 is judged on
    the performance run's mean output length."""
    table = result.endpoints
    findings = []
    for test in result.facts.compliance_tests:
        name = (table.get("audit_files") or {}).get(test)
        if name:
            path = result.compliance_path / table.get("audit_folder", "audit") / name
            expected = name.removeprefix("audit_").removesuffix(".json")
            if not path.is_file():
                if test in table.get("required_audits", []) and ctx.enforces_compliance:
                    findings.append(Finding("compliance", ctx.rel(path), f"{test} ({expected}) is missing"))
                continue
            try:
                audit = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                findings.append(Finding("compliance", ctx.rel(path), f"{test}: not valid JSON: {exc}"))
                continue
            if not isinstance(audit, dict) or audit.get("test") != expected:
                found = audit.get("test") if isinstance(audit, dict) else None
                findings.append(Finding("compliance", ctx.rel(path), f"{test}: names test {found!r}, not {expected!r}"))
            elif audit.get("passed") is not True:
                findings.append(Finding("compliance", ctx.rel(path), f"{test} ({expected}) did not pass"))
        entry = ctx.rules.compliance_test(test, result.facts.name)
        low, high = entry.get("min_output_tokens"), entry.get("max_output_tokens")
        detail = result.detail(PERF)
        if test == "TEST09" and low is not None and high is not None and detail is not None:
            mean = detail.get("mean_output_tokens")
            if mean is None or not low <= float(mean) <= high:
                findings.append(
                    Finding(
                        "compliance",
                        ctx.rel(result.log_path(PERF)),
                        f"TEST09: mean output length {mean} tokens is outside [{low}, {high}]",
                    )
                )
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
    contexts, findings = load_contexts(root, rules)
    if not contexts:
        return findings
    if only is None or "root-files" in only:
        findings.extend(check_root(Path(root), rules, contexts))
    for ctx in contexts:
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
    known = ["root-files", *RULES]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(f"unknown check rule(s) {unknown}; known: {', '.join(known)}")
