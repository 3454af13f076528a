"""Checks on a packaged submission tree (the "after" check).

Each rule is a function ``(TreeContext) -> list[Finding]`` registered in :data:`RULES`
under the name its findings carry. The facts come from the round's rules table. The
official checker misses LoadGen-INVALID results, ignores performance-log errors by
default and judges Interactive against Server limits; these rules do not.

A tree marked NOT SUBMITTABLE (test scale, ``NOT_SUBMITTABLE.md`` at its root) is checked
for everything except the round's minimum durations, sample counts and accuracy targets.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..benchmarks import DEFAULT_SYSTEM_TYPE, Benchmark, Round
from ..compliance.verify import test04_score, test06_failures, test06_lines
from ..errors import UserError
from ..loadgen_logs import (
    read_detail,
    result_is_valid,
    summary_disagreements,
    summary_gaps,
    summary_record,
    values_agree,
)
from ..published.loadgen_conf import parse_conf, requested_settings
from .endpoints_logs import PART_FILES, endpoints_files, is_endpoints_folder, read_endpoints, score_readings
from .files import TreeFiles, UnreadableFile, files_of
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
    # The tree's listing: what the result's files are, and how they are read.
    files: TreeFiles | None = None
    _details: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.measure_path = self.measure_path or self.path
        self.compliance_path = self.compliance_path or self.path
        self.files = files_of(self.path, self.files)

    def measurements_file(self) -> Path:
        """The result's measurements JSON (the first match of the layout's name)."""
        pattern = self.measurements_name.format(system=self.system)
        found = (
            sorted(p for p in self.files.files(self.measure_path) if fnmatch.fnmatchcase(p.name, pattern))
            if any(c in pattern for c in "*?[")
            else []
        )
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
                self._details[relative] = read_endpoints(self.path, part, self.endpoints, self.scenario, self.files)
            else:
                path = self.path / relative
                readable = self.files.is_file(path) and not self.is_endpoints
                self._details[relative] = read_detail(self.files.lines(path)) if readable else None
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
    files: TreeFiles | None = None
    _systems: dict[str, dict | None] = field(default_factory=dict)
    _exact: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.files = files_of(self.root, self.files)

    def exact_detail(self, path: Path) -> dict[str, Any]:
        """A detail log read with its numbers as printed (cached: several rules compare them)."""
        key = self.rel(path)
        if key not in self._exact:
            self._exact[key] = read_detail(self.files.lines(path), summary_record, exact=True)
        return self._exact[key]

    def read_json(self, path: Path) -> Any:
        """A JSON file of the tree parsed; raises ValueError (with what is wrong) if it is not JSON."""
        try:
            return json.loads(self.files.read_bytes(path).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except RecursionError:
            raise ValueError("nested too deeply") from None

    def system_description(self, system: str) -> dict | None:
        """systems/<system>.json parsed (cached); None if absent or not a JSON object."""
        if system not in self._systems:
            path = self.base / "systems" / f"{system}.json"
            try:
                data = self.read_json(path) if self.files.is_file(path) else None
            except ValueError:
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
    files = TreeFiles(root)
    divisions = [d for d in files.folders(root) if d.name in rules["divisions"]]
    if not divisions:
        return [], [
            Finding(
                "tree-layout",
                str(root),
                f"not a submission tree: no division folder ({', '.join(rules['divisions'])}) at its root",
            )
        ]
    contexts = []
    test_scale = files.is_file(root / NOT_SUBMITTABLE_MARK)
    scenario_names = {name.lower(): name for name in rules.scenario_folders}
    layout = {**RESULT_FOLDER_LAYOUT, **(rules.data.get("layout") or {})}
    for division in divisions:
        for base in files.folders(division):
            mapping_path = base / "model_mapping.json"
            mapping: dict[str, str] = {}
            if files.is_file(mapping_path):
                try:
                    loaded = json.loads(files.read_bytes(mapping_path).decode("utf-8"))
                    mapping = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
                except (UnreadableFile, UnicodeDecodeError, ValueError, RecursionError):
                    mapping = {}
            results = []
            for system_dir in files.folders(base / "results"):
                for bench_dir in files.folders(system_dir):
                    official = rules.mlperf_benchmark(bench_dir.name, mapping)
                    facts = rules.benchmark(official) if official in rules.benchmark_names else None
                    for scenario_dir in files.folders(bench_dir):
                        # The official checker reads scenario folders case-insensitively ("offline").
                        scenario = scenario_names.get(scenario_dir.name.lower(), scenario_dir.name)
                        endpoints = rules.data.get("endpoints")
                        endpoints = endpoints if is_endpoints_folder(scenario_dir, endpoints, files) else None
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
                                files=files,
                            )
                        )
            contexts.append(TreeContext(root, rules, division.name, base.name, mapping, results, test_scale, files))
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
    files = contexts[0].files if contexts else TreeFiles(root)
    findings = []
    for path in files.children(root):
        if files.is_dir(path) and path.name not in limits["root_folders"]:
            findings.append(
                Finding(
                    "root-files",
                    path.name,
                    f"only {limits['root_folders']} folders may sit at the root of a submission",
                )
            )
        elif files.is_file(path) and path.suffix not in limits["root_file_suffixes"]:
            findings.append(
                Finding(
                    "root-files",
                    path.name,
                    f"only {limits['root_file_suffixes']} files may sit at the root of a submission",
                )
            )
    for division in sorted({c.division for c in contexts}):
        for path in files.children(root / division):
            if files.is_file(path):
                findings.append(
                    Finding("root-files", f"{division}/{path.name}", "no loose files directly under the division")
                )
    return findings


@rule("required-files")
def check_required_files(ctx: TreeContext) -> list[Finding]:
    findings = []
    for folder in ctx.rules["submitter_folders"]:
        kind = ctx.files.kind(ctx.base / folder)
        if kind not in (None, "folder"):
            findings.append(
                Finding(
                    "required-files",
                    ctx.rel(ctx.base / folder),
                    f"a {kind}, not a folder (the checker does not follow it)",
                )
            )
        elif kind is None:
            findings.append(Finding("required-files", ctx.rel(ctx.base), f"missing folder {folder}/"))
    for result in ctx.results:
        if result.endpoints and not result.is_endpoints:
            # The official checker's endpoints model check: only the listed benchmarks.
            shown = result.path / endpoints_files(result.path, result.endpoints, ctx.files)[0]
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
            findings.extend(_required_file(ctx, result.path / name))
        for name in table.get("measurement_files", []):
            path = result.measurements_file() if name == "measurements.json" else result.measure_path / name
            # (measurement_files names the JSON measurements.json whatever the layout calls it)
            findings.extend(_required_file(ctx, path))
    return findings


def _required_file(ctx: TreeContext, path: Path) -> list[Finding]:
    kind = ctx.files.kind(path)
    if kind not in (None, "file"):
        return [
            Finding("required-files", ctx.rel(path), f"a {kind}, not a regular file (the checker does not read it)")
        ]
    if kind is None or ctx.files.size(path) == 0:
        return [Finding("required-files", ctx.rel(path), "missing or empty")]
    return []


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
    system_files = [p for p in ctx.files.files(systems_dir) if p.suffix == ".json"]
    described = {p.stem for p in system_files}
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
    for path in (p for p in system_files if p.stem in with_results):
        where = ctx.rel(path)
        try:
            desc = ctx.read_json(path)
        except ValueError as exc:
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
        if not ctx.files.is_file(path):
            continue
        try:
            data = ctx.read_json(path)
        except ValueError as exc:
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


def number(value: Any) -> float | None:
    """A logged value as a number; None where it is none (absent, text, a list, a bool)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return result if result == result else None  # NaN is no number either


def plain(value: float | None) -> str:
    """A number as LoadGen logs it (integers without a fraction); "absent" for None."""
    if value is None:
        return "absent"
    return str(int(value)) if value == int(value) else f"{value:g}"


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
    rate = number(detail.get("result_samples_per_second"))
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
        judged = number(detail.get("effective_target_latency_ns"))
        p99 = number(detail.get("result_99.00_percentile_latency_ns"))
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
            requested = number(detail.get(requested_key))
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
            measured = number(detail.get(measured_key))
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
        duration = number(detail.get("effective_min_duration_ms"))
        # A benchmark may set its own (e2e-rag runs one pass over its dataset: 0).
        minimum = int((result.facts.facts if result.facts else {}).get("min_duration_ms", ctx.rules.min_duration_ms))
        if duration is None or duration < minimum:
            findings.append(Finding("run-length", where, f"min_duration {plain(duration)} ms < {minimum} ms"))
        if result.facts is None or result.is_endpoints:
            # The harness has no performance sample count, query minimum or samples per
            # query (the official checker skips these for endpoints results).
            continue
        needed = result.facts.facts.get(
            "checker_min_performance_sample_count", result.facts.facts["performance_sample_count"]
        )
        found = number(detail.get("effective_performance_sample_count"))
        if found is None or found < needed:
            findings.append(Finding("run-length", where, f"performance_sample_count {plain(found)} < {needed}"))
        minimum_queries = (result.facts.facts.get("min_query_count") or {}).get(result.scenario)
        queries = number(detail.get("effective_min_query_count"))
        if (
            minimum_queries
            and not _early_stopping(ctx, result.scenario)
            and queries is not None
            and queries < minimum_queries
        ):
            findings.append(Finding("run-length", where, f"min_query_count {plain(queries)} < {minimum_queries}"))
        if ctx.division != "open" and result.scenario == "Offline" and detail.get("effective_scenario") == "Offline":
            spq = number(detail.get("effective_samples_per_query"))
            minimum = result.facts.facts["offline_min_samples_per_query"]
            if spq is None or spq < minimum:
                findings.append(Finding("run-length", where, f"Offline samples_per_query {plain(spq)} < {minimum}"))
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
        if ctx.files.is_file(log) and ctx.files.size(log) > limit:
            findings.append(
                Finding("accuracy-log", ctx.rel(log), f"{ctx.files.size(log)} bytes > {limit}: not truncated")
            )
        txt = folder / "accuracy.txt"
        if ctx.files.is_file(txt):
            text = ctx.files.read_text(txt)
            if not HASH_LINE.search(text):
                findings.append(Finding("accuracy-log", ctx.rel(txt), "no hash=<sha256> line"))
            if result.facts:
                values = result.facts.accuracy_values(text)
                for metric in result.facts.absolute_targets(result.scenario):
                    not_computed = re.search(rf"^{re.escape(metric)}: not computed here: (.*)$", text, re.MULTILINE)
                    if metric not in values and not_computed:
                        # The evaluator could not compute it on this machine and said so
                        # (text-to-video without VBench's checkpoints): not a format fault.
                        findings.append(
                            Finding(
                                "accuracy-log",
                                ctx.rel(txt),
                                f"{metric} was not computed here ({not_computed.group(1).strip()}); "
                                "the result cannot be submitted until it is",
                            )
                        )
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
            count = number(detail.get("effective_accuracy_sample_count", detail.get("qsl_reported_total_count")))
            expected = result.facts.accuracy_sample_count(result.scenario)
            if count is None or count != expected:
                findings.append(
                    Finding(
                        "accuracy-log",
                        ctx.rel(result.log_path(ACC)),
                        f"the accuracy run covered {plain(count)} samples; the dataset has {expected}",
                    )
                )
    return findings


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
            if not ctx.files.is_dir(folder):
                findings.append(
                    Finding("accuracy-files", ctx.rel(folder), f"missing: the outputs of samples {', '.join(stems)}")
                )
                continue
            present = {p.name.split(".")[0] for p in ctx.files.files(folder)}
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
        if not ctx.files.is_file(log):
            continue
        seq_ids: dict[int, set[int]] = {}
        for line in ctx.files.lines(log):
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
        if not ctx.files.is_file(txt) or result.facts is None:
            continue
        readings = result.facts.accuracy_readings(ctx.files.read_text(txt))
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


def compliance_passed(
    test: str, folder: Path, rules: Round, facts: Benchmark | None = None, files: TreeFiles | None = None
) -> tuple[bool, str]:
    """A compliance folder's verdict, from the table's test entry (for this benchmark):
    ``required_files`` exist, and each verify file (``verify_files``, or the one
    ``verify_file``) holds, for every group of ``pass_lines``, one of the group's lines. A
    verify_accuracy.txt that fails still passes where the entry has an accuracy fallback
    (TEST01: non-deterministic outputs) and the compliance run's accuracy is within
    ``max_accuracy_delta_percent`` of the baseline's."""
    files = files_of(folder, files)
    entry = rules.compliance_test(test, facts.name if facts else None)
    for relative in entry.get("required_files", []):
        if not files.is_file(folder / relative):
            return False, f"{relative} is missing"
    for name in entry.get("verify_files") or [entry["verify_file"]]:
        verify = folder / name
        if not files.is_file(verify):
            return False, f"{name} is missing"
        lines = {line.strip() for line in files.read_text(verify).splitlines()}
        groups = (entry.get("pass_lines") or {}).get(name, DEFAULT_PASS_LINES)
        for group in groups:
            if lines & set(group):
                continue
            if name == "verify_accuracy.txt" and entry.get("accuracy_fallback_files"):
                ok, why = _accuracy_fallback(folder, entry, facts, files)
                if ok:
                    break
                return False, f"{name} has no {' or '.join(repr(g) for g in group)} line and {why}"
            return False, f"{name} has no {' or '.join(repr(g) for g in group)} line"
    return True, ""


def _accuracy_fallback(folder: Path, entry: dict, facts: Benchmark | None, files: TreeFiles) -> tuple[bool, str]:
    """The compliance run's accuracy against the baseline's, metric by metric."""
    missing = [f for f in entry["accuracy_fallback_files"] if not files.is_file(folder / f)]
    if missing:
        return False, f"the accuracy fallback lacks {', '.join(missing)}"
    if facts is None:
        return False, "the benchmark is unknown, so the accuracy fallback cannot be judged"
    by_name = {Path(f).name: folder / f for f in entry["accuracy_fallback_files"]}
    baseline = facts.accuracy_values(files.read_text(by_name["baseline_accuracy.txt"]))
    compliance = facts.accuracy_values(files.read_text(by_name["compliance_accuracy.txt"]))
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
            if not ctx.files.is_dir(folder):
                if ctx.enforces_compliance:
                    findings.append(
                        Finding("compliance", ctx.rel(folder), f"{test} is required in the {ctx.division} division")
                    )
                continue
            ok, why = compliance_passed(test, folder, ctx.rules, result.facts, ctx.files)
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
            if not ctx.files.is_file(path):
                if test in table.get("required_audits", []) and ctx.enforces_compliance:
                    findings.append(Finding("compliance", ctx.rel(path), f"{test} ({expected}) is missing"))
                continue
            try:
                audit = ctx.read_json(path)
            except ValueError as exc:
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
            mean = number(detail.get("mean_output_tokens"))
            if mean is None or not low <= mean <= high:
                findings.append(
                    Finding(
                        "compliance",
                        ctx.rel(result.log_path(PERF)),
                        f"TEST09: mean output length {plain(mean)} tokens is outside [{low}, {high}]",
                    )
                )
    return findings


# -- one run's two logs ------------------------------------------------------------------------

SUMMARY_LOG = "mlperf_log_summary.txt"
DETAIL_LOG = "mlperf_log_detail.txt"


def _run_folders(ctx: TreeContext, result: ScenarioResult) -> list[Path]:
    """Every folder of a result holding a summary and a detail log of one run (the
    performance and accuracy runs, the compliance runs), in the scenario folder and in its
    compliance folders where the layout keeps them elsewhere."""
    roots = [result.path]
    if result.compliance_path != result.path and result.facts is not None:
        roots += [result.compliance_path / test for test in result.facts.compliance_tests]
    found = []
    for root in roots:
        if ctx.files.is_file(root / SUMMARY_LOG) and ctx.files.is_file(root / DETAIL_LOG):
            found.append(root)
        for rel, entry in ctx.files.walk(root):
            if entry.kind == "file" and rel.endswith("/" + SUMMARY_LOG):
                folder = ctx.root / rel.rsplit("/", 1)[0]
                if ctx.files.is_file(folder / DETAIL_LOG):
                    found.append(folder)
    return sorted(set(found))


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return format(value, "g") if isinstance(value, Decimal) else str(value)


@rule("summary-detail")
def check_summary_detail(ctx: TreeContext) -> list[Finding]:
    """A run's mlperf_log_summary.txt and mlperf_log_detail.txt are written by one LoadGen
    process from the same numbers: every result and setting the summary prints that the
    detail log records too must agree, up to the printing precision of the two."""
    findings = []
    for result in ctx.results:
        for folder in _run_folders(ctx, result):
            summary, detail_path = folder / SUMMARY_LOG, folder / DETAIL_LOG
            detail = ctx.exact_detail(detail_path)
            text = ctx.files.read_text(summary)
            gaps = summary_gaps(text, folder.parent.name == "performance")
            if gaps:
                findings.append(
                    Finding(
                        "summary-detail",
                        ctx.rel(summary),
                        f"does not print {' or '.join(gaps)}: not LoadGen's summary of the run "
                        f"{ctx.rel(detail_path)} logs",
                    )
                )
            found = summary_disagreements(text, detail)
            if not found:
                continue
            shown = "; ".join(
                f"{d.label} {d.summary_value!r} where {DETAIL_LOG} has {d.key} = {_shown(d.detail_value)!r}"
                for d in found[:4]
            )
            more = f" (and {len(found) - 4} more)" if len(found) > 4 else ""
            findings.append(
                Finding(
                    "summary-detail",
                    ctx.rel(summary),
                    f"disagrees with {ctx.rel(detail_path)}, the other log of the same run: {shown}{more}",
                )
            )
    return findings


# -- the settings: user.conf against what LoadGen logged ------------------------------------------


@rule("user-conf")
def check_user_conf(ctx: TreeContext) -> list[Finding]:
    """Every setting the result's user.conf gives the performance run (for the model name
    the round's mlperf.conf uses for this scenario, as LoadGen looks it up) against the
    value LoadGen logged as requested. A disagreement is a warning: harnesses set settings
    in code as well (23 of the 32 published v6.0 submitters' trees, the vendor's among them,
    hold a user.conf some run disagrees with), so the user.conf does not reproduce the run,
    but the run's own log is what the other rules judge."""
    findings = []
    for result, detail, where in _perf(ctx):
        conf = result.measure_path / "user.conf"
        if result.is_endpoints or result.facts is None or not ctx.files.is_file(conf):
            continue
        scenario = detail.get("requested_scenario") or detail.get("effective_scenario")
        if not isinstance(scenario, str):
            continue
        lines, problems = parse_conf(ctx.files.read_text(conf))
        findings.extend(
            Finding("user-conf", ctx.rel(conf), f"line {problem} (not a LoadGen setting line)", "warning")
            for problem in problems[:3]
        )
        model = _conf_model(result, lines)
        exact = ctx.exact_detail(result.log_path(PERF))
        for key, (line, expected) in requested_settings(lines, model, scenario).items():
            if key not in exact:
                continue
            printed = _shown(expected) if isinstance(expected, bool) else repr(expected)
            if not values_agree(printed, exact[key]):
                findings.append(
                    Finding(
                        "user-conf",
                        ctx.rel(conf),
                        f"line {line.line_no} sets {line.model}.{line.scenario}.{line.key} = {line.value}, so LoadGen "
                        f"would log {key} = {_shown(expected)}; {where} records {key} = {_shown(exact[key])}: "
                        "the run did not use this user.conf (the harness set it otherwise)",
                        "warning",
                    )
                )
    return findings


def _conf_model(result: ScenarioResult, lines: list) -> str:
    """The LoadGen model name the run used: the round's for this scenario; where the
    user.conf names one other model only, that one (a harness passing its own name)."""
    try:
        model = result.facts.loadgen_model(result.scenario)
    except UserError:
        model = result.mlperf_benchmark
    named = {line.model for line in lines} - {"*"}
    return next(iter(named)) if model not in named and len(named) == 1 else model


# -- compliance verdicts against the compliance runs' logs ---------------------------------------

_SCORE_LINE = re.compile(r"^\s*(reference|test) score\s*=\s*(\S+)", re.IGNORECASE | re.MULTILINE)
_CHECK_LINE = re.compile(
    r"^\s*(First token check pass|EOS check pass|Sample length check pass)\s*:\s*(\S+)", re.MULTILINE
)
_MEAN_TOKENS = re.compile(r"^\s*Mean output tokens\s*:\s*([-+\d.eE]+)", re.MULTILINE)
# The dtypes the reference TEST06 script can decode outputs as (its --dtype): which one a
# submitter used is not recorded, so a verdict stands if one of them gives it.
TEST06_DTYPES = ("int32", "int64", "int16", "float32")


def _first_file(ctx: TreeContext, folder: Path, names: list[str]) -> Path | None:
    return next((folder / n for n in names if ctx.files.is_file(folder / n)), None)


def _compliance_detail(ctx: TreeContext, folder: Path) -> tuple[Path, dict] | None:
    path = _first_file(ctx, folder, [f"performance/run_1/{DETAIL_LOG}", DETAIL_LOG])
    return None if path is None else (path, read_detail(ctx.files.lines(path)))


def _accuracy_entries(ctx: TreeContext, path: Path) -> list[dict] | None:
    """A whole accuracy log's entries; None where it is not a complete JSON list (truncated)."""
    try:
        data = json.loads(ctx.files.read_bytes(path).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, list) and all(isinstance(e, dict) for e in data) else None


def _verdict(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines()]
    if any(line.startswith("TEST FAIL") for line in lines):
        return "TEST FAIL"
    return "TEST PASS" if "TEST PASS" in lines else None


def _relative_gap(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


@rule("compliance-evidence")
def check_compliance_evidence(ctx: TreeContext) -> list[Finding]:
    """Each compliance verdict redone from the logs in the tree, where they are there:
    TEST01's and TEST04's performance comparisons from the two runs' detail logs, TEST06's
    three checks and TEST09's mean output length from the compliance run's accuracy log.
    A verdict or a number the logs do not give is an error naming both files."""
    findings = []
    for result in ctx.results:
        if result.facts is None or result.is_endpoints:
            continue
        reference = result.detail(PERF)
        for test in result.facts.compliance_tests:
            folder = result.compliance_path / test
            if not ctx.files.is_dir(folder):
                continue
            entry = ctx.rules.compliance_test(test, result.facts.name)
            redo = COMPLIANCE_EVIDENCE.get(test)
            if redo is not None:
                findings.extend(redo(ctx, result, folder, entry, reference))
    return findings


def _performance_comparison(ctx, result, folder, reference, verify_name, check) -> list[Finding]:
    """A verify file comparing the compliance run's performance with the result's:
    its printed scores against the two detail logs, its verdict against ``check``."""
    verify = folder / verify_name
    audit = _compliance_detail(ctx, folder)
    if reference is None or audit is None or not ctx.files.is_file(verify):
        return []
    audit_path, audit_detail = audit
    scenario = reference.get("effective_scenario")
    text = ctx.files.read_text(verify)
    scores, passed, why = check(reference, audit_detail, scenario)
    if scores is None:
        return []
    where, reference_path = ctx.rel(verify), ctx.rel(result.log_path(PERF))
    findings = []
    for name, printed in _SCORE_LINE.findall(text):
        name = name.lower()
        source = reference_path if name == "reference" else ctx.rel(audit_path)
        try:
            value = float(printed)
        except ValueError:
            continue
        if _relative_gap(value, scores[name]) > 1e-4:
            findings.append(
                Finding(
                    "compliance-evidence",
                    where,
                    f"says {name} score = {printed}; {source} gives {scores[name]:.6g}",
                )
            )
    recorded = _verdict(text)
    if recorded == "TEST PASS" and not passed:
        findings.append(
            Finding(
                "compliance-evidence",
                where,
                f"says TEST PASS, but {reference_path} and {ctx.rel(audit_path)} give a fail: {why}",
            )
        )
    return findings


def _test04(ctx, result, folder, entry, reference) -> list[Finding]:
    limits = entry.get("max_speedup") or {}

    def check(ref, audit, scenario):
        ref_score, audit_score = test04_score(ref, str(scenario)), test04_score(audit, str(scenario))
        if ref_score is None or audit_score is None or scenario not in limits:
            return None, False, ""
        limit = float(limits[scenario])
        invalid = [n for n, d in (("the performance run", ref), ("the TEST04 run", audit)) if not result_is_valid(d)]
        ratio = audit_score / ref_score
        why = "; ".join(
            [f"{n} is not VALID" for n in invalid]
            + ([f"the TEST04 run is {ratio:.4f}x the performance run (at most {limit})"] if ratio >= limit else [])
        )
        return {"reference": ref_score, "test": audit_score}, not why, why

    return _performance_comparison(ctx, result, folder, reference, entry["verify_file"], check)


def _test01(ctx, result, folder, entry, reference) -> list[Finding]:
    band = entry.get("performance_band") or {}

    def check(ref, audit, scenario):
        key = (band.get("score_field") or {}).get(scenario)
        try:
            ref_score, audit_score = float(ref[key]), float(audit[key])
        except (KeyError, TypeError, ValueError):
            return None, False, ""
        relaxed = (band.get("relaxed") or {}).get(scenario) or {}
        width = float(relaxed["band"]) if relaxed and ref_score <= float(relaxed["at_most"]) else float(band["band"])
        invalid = [n for n, d in (("the performance run", ref), ("the TEST01 run", audit)) if not result_is_valid(d)]
        inside = ref_score * (1 - width) <= audit_score <= ref_score * (1 + width)
        why = "; ".join(
            [f"{n} is not VALID" for n in invalid]
            + (
                []
                if inside
                else [f"the TEST01 run's {key} {audit_score:.6g} is outside {ref_score:.6g} +/- {width:.0%}"]
            )
        )
        return {"reference": ref_score, "test": audit_score}, not why, why

    if not band:
        return []
    return _performance_comparison(ctx, result, folder, reference, "verify_performance.txt", check)


def _test06(ctx, result, folder, entry, reference) -> list[Finding]:
    verify = folder / entry["verify_file"]
    log = _first_file(ctx, folder, ["accuracy/mlperf_log_accuracy.json", "mlperf_log_accuracy.json"])
    if log is None or not ctx.files.is_file(verify):
        return []
    entries = _accuracy_entries(ctx, log)
    recorded = dict(_CHECK_LINE.findall(ctx.files.read_text(verify)))
    if entries is None or not recorded:
        return []
    import numpy as np

    scenario = (
        ctx.rules.loadgen_scenario(result.scenario)
        if result.scenario in ctx.rules.scenario_folders
        else result.scenario
    )
    eos = result.facts.facts.get("eos_token_id")
    outcomes = []
    for dtype in TEST06_DTYPES:
        failures = test06_failures(entries, scenario, eos, getattr(np, dtype))
        derived = test06_lines(failures)
        # A check the verify file passes that the samples fail (a failed one fails `compliance`).
        differing = {k: (v, derived[k]) for k, v in recorded.items() if v == "True" and derived.get(k) == "False"}
        if not differing:
            return []
        outcomes.append((dtype, differing, failures))
    dtype, differing, failures = outcomes[0]
    shown = "; ".join(f"'{k}: {v}' where the samples give {d}" for k, (v, d) in differing.items())
    failing = {"First token check pass": "first_token", "EOS check pass": "eos", "Sample length check pass": "length"}
    samples = sorted({q for k in differing for q in (failures[failing[k]] or [])}, key=str)[:5]
    return [
        Finding(
            "compliance-evidence",
            ctx.rel(verify),
            f"{shown} (checked again on the {len(entries)} samples of {ctx.rel(log)}, decoded as {dtype} or any "
            f"dtype the reference script takes; qsl_idx {samples})",
        )
    ]


def _test09(ctx, result, folder, entry, reference) -> list[Finding]:
    verify = folder / entry["verify_file"]
    log = _first_file(ctx, folder, ["accuracy/mlperf_log_accuracy.json", "mlperf_log_accuracy.json"])
    if log is None or not ctx.files.is_file(verify):
        return []
    entries = _accuracy_entries(ctx, log)
    if not entries:
        return []
    try:
        lengths = [len(bytes.fromhex(str(e["data"]))) // 4 for e in entries]
    except (KeyError, ValueError):
        return []
    mean = sum(lengths) / len(lengths)
    text = ctx.files.read_text(verify)
    findings = []
    for printed in _MEAN_TOKENS.findall(text)[:1]:
        try:
            if abs(float(printed) - mean) > 0.006:
                findings.append(
                    Finding(
                        "compliance-evidence",
                        ctx.rel(verify),
                        f"says mean output tokens {printed}; the {len(entries)} samples of {ctx.rel(log)} give {mean:.2f}",
                    )
                )
        except ValueError:
            pass
    low, high = entry.get("min_output_tokens"), entry.get("max_output_tokens")
    if _verdict(text) == "TEST PASS" and low is not None and high is not None and not low <= mean <= high:
        findings.append(
            Finding(
                "compliance-evidence",
                ctx.rel(verify),
                f"says TEST PASS, but the samples of {ctx.rel(log)} average {mean:.2f} tokens, outside [{low}, {high}]",
            )
        )
    return findings


# The compliance tests whose verdict the tree holds the evidence for.
COMPLIANCE_EVIDENCE = {"TEST01": _test01, "TEST04": _test04, "TEST06": _test06, "TEST09": _test09}


# -- accuracy.txt against the accuracy run ----------------------------------------------------------

_PRINTED_COUNT = re.compile(r"'(gen_num|gen_tok_len|tokens_per_sample)':\s*'?([\d.]+)")


@rule("accuracy-evidence")
def check_accuracy_evidence(ctx: TreeContext) -> list[Finding]:
    """What accuracy.txt records against what the accuracy run logged: the samples it
    scored (gen_num) against the run's sample count, tokens_per_sample against its own
    gen_tok_len / gen_num, and, where the accuracy log is complete (not truncated: our
    test-scale runs), its hash line against the log's sha256 and the token counts against
    the logged samples."""
    import hashlib

    findings = []
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if result.is_endpoints or not ctx.files.is_file(txt):
            continue
        text = ctx.files.read_text(txt)
        where = ctx.rel(txt)
        printed = {}
        for name, value in _PRINTED_COUNT.findall(text):
            try:
                printed[name] = float(value)
            except ValueError:
                continue
        detail = result.detail(ACC)
        count = (detail or {}).get("effective_accuracy_sample_count", (detail or {}).get("qsl_reported_total_count"))
        if (
            "gen_num" in printed
            and isinstance(count, int)
            and not isinstance(count, bool)
            and printed["gen_num"] != count
        ):
            findings.append(
                Finding(
                    "accuracy-evidence",
                    where,
                    f"scores gen_num {printed['gen_num']:g} samples; {ctx.rel(result.log_path(ACC))} records an "
                    f"accuracy run of {count}",
                )
            )
        if {"gen_num", "gen_tok_len", "tokens_per_sample"} <= printed.keys() and printed["gen_num"] > 0:
            mean = printed["gen_tok_len"] / printed["gen_num"]
            if abs(mean - printed["tokens_per_sample"]) > 0.051:
                findings.append(
                    Finding(
                        "accuracy-evidence",
                        where,
                        f"tokens_per_sample {printed['tokens_per_sample']:g} is not its own gen_tok_len / gen_num "
                        f"= {mean:.2f}",
                    )
                )
        log = result.path / "accuracy" / "mlperf_log_accuracy.json"
        if not ctx.files.is_file(log):
            continue
        raw = ctx.files.read_bytes(log)
        entries = _accuracy_entries(ctx, log)
        if entries is None:
            continue  # truncated: the hash is of the original, which is not in the tree
        digest = HASH_LINE.search(text)
        actual = hashlib.sha256(raw).hexdigest()
        if digest and digest.group(1) != actual:
            findings.append(
                Finding(
                    "accuracy-evidence",
                    where,
                    f"hash={digest.group(1)}, but {ctx.rel(log)} is complete and its sha256 is {actual}",
                )
            )
        if isinstance(count, int) and not isinstance(count, bool) and len(entries) != count:
            findings.append(
                Finding(
                    "accuracy-evidence",
                    ctx.rel(log),
                    f"is complete and logs {len(entries)} samples; {ctx.rel(result.log_path(ACC))} records {count}",
                )
            )
        counts = [e.get("token_count") for e in entries]
        if "tokens_per_sample" in printed and counts and all(isinstance(c, int) for c in counts):
            mean = sum(counts) / len(counts)
            if abs(mean - printed["tokens_per_sample"]) > 0.051:
                findings.append(
                    Finding(
                        "accuracy-evidence",
                        where,
                        f"tokens_per_sample {printed['tokens_per_sample']:g}, but the {len(counts)} samples of "
                        f"{ctx.rel(log)} average {mean:.2f} tokens",
                    )
                )
    return findings


# -- an unambiguous tree -------------------------------------------------------------------------------


@rule("structure")
def check_structure(ctx: TreeContext) -> list[Finding]:
    """Nothing that leaves open which file holds a result: two names in one folder that
    differ only in case (in the folders that hold results and system descriptions); loose
    files in results/ and its system and benchmark folders (beyond what publication adds);
    a second performance run; a record of a result (a log, a verify file, user.conf, ...)
    in a folder of the result the layout does not name. At the submitter folder, what the
    layout does not name is reported as a warning (it holds no result)."""
    layout = ctx.rules.data.get("tree_layout") or {}
    findings = []
    # Where a name picks a result or its description (not src/ or documentation/).
    scope = [ctx.base / name for name in layout.get("result_folders", [])]
    folders = [ctx.rel(ctx.base)] + [
        rel
        for folder in scope
        for rel, entry in [(ctx.rel(folder), None), *ctx.files.walk(folder)]
        if ctx.files.is_dir(ctx.root / rel) and (entry is None or entry.kind == "folder")
    ]
    for rel in folders:
        names = [p.name for p in ctx.files.children(ctx.root / rel)]
        by_case: dict[str, list[str]] = {}
        for name in names:
            by_case.setdefault(name.casefold(), []).append(name)
        for same in by_case.values():
            if len(same) > 1:
                findings.append(
                    Finding(
                        "structure",
                        f"{rel}/{same[0]}",
                        f"{' and '.join(same)} in {rel}/ differ only in case: which holds the result is ambiguous "
                        "(and a case-insensitive file system merges them)",
                    )
                )
    results = ctx.base / "results"
    system_files = set(layout.get("system_folder_files", []))
    for path in ctx.files.children(results):
        if not ctx.files.is_dir(path):
            findings.append(Finding("structure", ctx.rel(path), "results/ holds only system folders"))
            continue
        for inner in ctx.files.children(path):
            if not ctx.files.is_dir(inner) and inner.name not in system_files:
                findings.append(
                    Finding(
                        "structure",
                        ctx.rel(inner),
                        f"a system's results folder holds benchmark folders only (and {', '.join(sorted(system_files))})",
                    )
                )
            elif ctx.files.is_dir(inner):
                for loose in ctx.files.children(inner):
                    if not ctx.files.is_dir(loose):
                        findings.append(
                            Finding("structure", ctx.rel(loose), "a benchmark folder holds scenario folders only")
                        )
    records = set(layout.get("records", []))
    runs = set(layout.get("performance_folders", []))
    for result in ctx.results:
        tests = set(result.facts.compliance_tests) if result.facts else set()
        named = {
            "performance/run_1",
            "accuracy",
            *tests,
            *(f"{t}/performance/run_1" for t in tests),
            *(f"{t}/accuracy" for t in tests),
        }
        # (an endpoints-harness result keeps its own files in performance/)
        for path in [] if result.endpoints else ctx.files.children(result.path / "performance"):
            if path.name not in runs:
                findings.append(
                    Finding(
                        "structure",
                        ctx.rel(path),
                        f"performance/ holds one run, run_1 ({', '.join(sorted(runs - {'run_1'}))} for power): "
                        "a second one leaves open which is the result",
                    )
                )
        base = ctx.rel(result.path)
        for rel, entry in ctx.files.walk(result.path):
            inner = rel[len(base) + 1 :]
            folder, _, name = inner.rpartition("/")
            if (
                entry.kind == "file"
                and name in records
                and folder
                and folder not in named
                and not folder.startswith("performance/")
            ):
                findings.append(
                    Finding(
                        "structure",
                        rel,
                        f"a {name} in {folder}/, which the layout does not name: a second record of the result "
                        "beside the one where the layout keeps it",
                    )
                )
    allowed = set(layout.get("submitter_entries", [])) | set(layout.get("result_folders", []))
    for path in ctx.files.children(ctx.base):
        if path.name not in allowed:
            findings.append(
                Finding(
                    "structure",
                    ctx.rel(path),
                    f"not part of the layout ({', '.join(sorted(allowed))}): code belongs in src/, "
                    "everything else in documentation/",
                    "warning",
                )
            )
    return findings


# -- hygiene -----------------------------------------------------------------------------------


@rule("hygiene")
def check_hygiene(ctx: TreeContext) -> list[Finding]:
    """Names, sizes and empty folders as MLCommons' upload checks want them; and regular
    files and folders only: a link or a special file is refused (and never followed or
    opened: see check/files.py)."""
    findings = []
    max_bytes = int(ctx.rules["tree_limits"]["max_file_bytes"])
    regular_only = "a submitted tree holds regular files and folders only"
    for rel, entry in ctx.files.walk(ctx.base):
        name = rel.rsplit("/", 1)[-1]
        if name.startswith("."):
            findings.append(Finding("hygiene", rel, "names starting with '.' are not allowed"))
        if " " in name:
            findings.append(Finding("hygiene", rel, "spaces in names are not allowed"))
        if name == "__pycache__":
            findings.append(Finding("hygiene", rel, "__pycache__ folders are not allowed"))
        if entry.kind == "symbolic link":
            findings.append(
                Finding(
                    "hygiene",
                    rel,
                    f"symbolic link to {entry.target!r}: {regular_only} (the checker does not follow it; "
                    "put the file itself there)",
                )
            )
        elif entry.kind == "file" and entry.links > 1:
            findings.append(
                Finding(
                    "hygiene",
                    rel,
                    f"hard link (one file under {entry.links} names): {regular_only}; a file must be "
                    "in the tree once (copy it)",
                )
            )
        elif entry.kind not in ("file", "folder"):
            findings.append(Finding("hygiene", rel, f"{entry.kind}: {regular_only} (the checker does not open it)"))
        elif entry.kind == "file" and entry.size > max_bytes:
            findings.append(Finding("hygiene", rel, f"file larger than {max_bytes // 2**20} MB"))
        elif entry.kind == "folder" and not ctx.files.children(ctx.root / rel):
            findings.append(Finding("hygiene", rel, "empty folder"))
    for rel, why in ctx.files.problems:
        if ctx.files.relative(ctx.base) in (rel, ".") or rel.startswith(ctx.rel(ctx.base) + "/"):
            findings.append(Finding("hygiene", rel, why))
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
                try:
                    findings.extend(function(ctx))
                except UnreadableFile as exc:
                    # A file listed as readable that cannot be read: an error, never a skip.
                    findings.append(Finding(name, exc.path or ctx.rel(ctx.base), f"{exc} (the rule stopped here)"))
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
