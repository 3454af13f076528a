"""The checker's model of a tree: its results (:class:`ScenarioResult`), one submitter's
folder (:class:`TreeContext`), how a tree is loaded, and the registry of rules.

Each rule is a function ``(TreeContext) -> list[Finding]`` registered in :data:`RULES`
under the name its findings carry (``@rule("name")``); the modules of ``check/rules/``
register them, one module per record the rules read, and ``check_tree`` runs the registry.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..benchmarks import DEFAULT_SYSTEM_TYPE, Benchmark, Round
from ..loadgen_logs import finite_number as number  # noqa: F401  (the rules read numbers through it)
from ..loadgen_logs import read_detail, summary_record
from .endpoints_logs import PART_FILES, is_endpoints_folder, read_endpoints
from .evidence import Evidence, Record, declare
from .files import TreeFiles, UnreadableFile, files_of
from .findings import Finding

NOT_SUBMITTABLE_MARK = "NOT_SUBMITTABLE.md"

# Record kinds of the evidence map that this module parses (see check/evidence.py).
DETAIL_LOG = "mlperf_log_detail.txt"
SYSTEM_JSON = "systems/<system>.json"
ENDPOINTS_RESULT = "endpoints result"


# LoadGen's detail logs -> the part of an endpoints result that stands for them.
_ENDPOINT_PARTS = {
    "performance/run_1/mlperf_log_detail.txt": "performance",
    "accuracy/mlperf_log_detail.txt": "accuracy",
}


HASH_LINE = re.compile(r"^hash=([\w\d]+)$", re.MULTILINE)
# An accuracy log entry's first two fields, as LoadGen writes them (read line by line: a
# full-scale tree keeps only a truncated log's two ends).
ACCURACY_ENTRY = re.compile(r'\{\s*"seq_id"\s*:\s*(\d+)\s*,\s*"qsl_idx"\s*:\s*(\d+)')


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
                found = read_endpoints(self.path, part, self.endpoints, self.scenario, self.files)
                self._details[relative] = None if found is None else Record(ENDPOINTS_RESULT, found)
            else:
                path = self.path / relative
                readable = self.files.is_file(path) and not self.is_endpoints
                self._details[relative] = Record(DETAIL_LOG, read_detail(self.files.lines(path))) if readable else None
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
    _logs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.files = files_of(self.root, self.files)

    def exact_detail(self, path: Path) -> dict[str, Any]:
        """A detail log read with its numbers as printed (cached: several rules compare them)."""
        key = self.rel(path)
        if key not in self._exact:
            self._exact[key] = Record(DETAIL_LOG, read_detail(self.files.lines(path), summary_record, exact=True))
        return self._exact[key]

    def detail_at(self, path: Path) -> dict[str, Any]:
        """Any detail log of the tree parsed (cached: several rules read the compliance runs')."""
        key = self.rel(path)
        if key not in self._logs:
            self._logs[key] = Record(DETAIL_LOG, read_detail(self.files.lines(path)))
        return self._logs[key]

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
            self._systems[system] = Record(SYSTEM_JSON, data) if isinstance(data, dict) else None
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


def rule(name: str, evidence: list[Evidence] | None = None):
    """Register a rule under the name its findings carry, with the evidence-map entries of
    the fields it derives or cross-checks (:mod:`mlperf_repro.check.evidence`)."""

    def register(function: Rule) -> Rule:
        RULES[name] = function
        declare(name, evidence or [])
        return function

    return register


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


PERF = "performance/run_1/mlperf_log_detail.txt"


ACC = "accuracy/mlperf_log_detail.txt"


SUMMARY_LOG = "mlperf_log_summary.txt"


def plain(value: float | None) -> str:
    """A number as LoadGen logs it (integers without a fraction); "absent" for None."""
    if value is None:
        return "absent"
    return str(int(value)) if value == int(value) else f"{value:g}"


# The records a performance run's token rate and sample rate are logged under, by LoadGen
# scenario (Interactive runs are LoadGen Server runs): their ratio is the mean output length.
TOKEN_RATES = {
    "Offline": ("result_tokens_per_second", "result_samples_per_second"),
    "Server": ("result_completed_tokens_per_second", "result_completed_samples_per_sec"),
    "Interactive": ("result_completed_tokens_per_second", "result_completed_samples_per_sec"),
}


def performance_logs(ctx: TreeContext):
    for result in ctx.results:
        detail = result.detail(PERF)
        if detail is not None:
            yield result, detail, ctx.rel(result.log_path(PERF))


@dataclass(frozen=True)
class RunLog:
    """One LoadGen detail log a result holds, and what made it: the result's own performance or
    accuracy run (``test`` None), or the run of one compliance test."""

    path: Path
    test: str | None


_COMPLIANCE_FOLDER = re.compile(r"^TEST\d\d$")


def run_logs(ctx: TreeContext, result: ScenarioResult) -> list[RunLog]:
    """Every detail log of a result: performance/, accuracy/ and each TESTxx folder's (in the
    scenario folder since v6.0, under compliance/ before), wherever in them it lies."""
    found: dict[Path, RunLog] = {}
    for folder in dict.fromkeys((result.path, result.compliance_path)):
        inside = len(Path(ctx.rel(folder)).parts)
        for rel, entry in ctx.files.walk(folder):
            if entry.kind == "file" and Path(rel).name == DETAIL_LOG:
                tests = [part for part in Path(rel).parts[inside:] if _COMPLIANCE_FOLDER.match(part)]
                found.setdefault(ctx.root / rel, RunLog(ctx.root / rel, tests[0] if tests else None))
    return sorted(found.values(), key=lambda log: log.path)


def run_identity(detail: dict[str, Any]) -> tuple | None:
    """What tells a run from any other (its start and every figure it measured; no two
    runs share all of them); None for a log without a start time."""
    started = detail.get("test_datetime")
    if not isinstance(started, str):
        return None
    measured = sorted((key, repr(value)) for key, value in detail.items() if key.startswith(("result_", "generated_")))
    return (started, tuple(measured))


# How LoadGen stamps the wall clock (power_begin, power_end), as the power daemon stamps its
# samples: the host's local time, to the millisecond.
POWER_TIME = "%m-%d-%Y %H:%M:%S.%f"


def power_time(value: Any) -> datetime.datetime | None:
    """A LoadGen wall-clock stamp ("02-05-2026 16:39:10.680") read; None where it is not one."""
    try:
        return datetime.datetime.strptime(value.strip(), POWER_TIME) if isinstance(value, str) else None
    except ValueError:
        return None


def run_start(detail: dict[str, Any]) -> str | None:
    """The instant a run began measuring (``power_begin``, to the millisecond): two logs
    naming one are one run, whatever else they say (a copy with its test_datetime or one
    figure edited). Over both published corpora no two runs of a submitter share one."""
    begin = detail.get("power_begin")
    return begin if isinstance(begin, str) and begin.strip() else None


def result_logs(ctx: TreeContext, *, compliance_only: bool = False):
    """(result, detail, where) of each result's performance run, then, for a LoadGen result,
    of its other runs: every one (accuracy and compliance), or the compliance runs' only."""
    for result, detail, where in performance_logs(ctx):
        yield result, detail, where
        if result.is_endpoints:
            continue
        for log in run_logs(ctx, result):
            if log.path != result.log_path(PERF) and (log.test or not compliance_only):
                yield result, ctx.detail_at(log.path), ctx.rel(log.path)


def round_percentile(ctx: TreeContext, result, scenario: Any) -> float | None:
    """The percentile the round's mlperf.conf judges a run of this LoadGen scenario at: the
    benchmark's own (pointpainting's SingleStream p99.9), else the scenario's. The folder's
    entry where its run is of its own LoadGen scenario (Interactive is a Server run), else
    the logged scenario's (an edge MultiStream folder may hold a SingleStream run)."""
    if not isinstance(scenario, str):
        return None
    folder = result.scenario
    if folder not in ctx.rules.scenario_folders or ctx.rules.loadgen_scenario(folder) != scenario:
        folder = scenario
    own = ((result.facts.facts if result.facts else {}).get("target_latency_percentile") or {}).get(folder)
    return own if own is not None else (ctx.rules["scenarios"].get(folder) or {}).get("target_latency_percentile")


def early_stopping(ctx: TreeContext, scenario_folder: str) -> bool:
    """LoadGen judges this scenario by early stopping (its table entry says so)."""
    entry = ctx.rules["scenarios"].get(scenario_folder) or {}
    return bool(entry.get("early_stopping"))


def accuracy_entries(ctx: TreeContext, path: Path) -> list[dict] | None:
    """A whole accuracy log's entries; None where it is not a complete JSON list (truncated)."""
    try:
        data = json.loads(ctx.files.read_bytes(path).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, list) and all(isinstance(e, dict) for e in data) else None


def as_logged(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return format(value, "g") if isinstance(value, Decimal) else str(value)


def issued_accuracy_samples(detail: dict[str, Any] | None) -> Any:
    """How many samples an accuracy run covered, from its detail log: LoadGen issues every
    sample of the QSL once, so the QSL's total where ``effective_accuracy_sample_count``
    (the setting, e.g. gpt-oss-120b's 4,395) asks for more than the QSL holds (a test-scale
    dataset). None where the log records neither."""
    if not detail:
        return None
    setting, total = detail.get("effective_accuracy_sample_count"), detail.get("qsl_reported_total_count")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (setting, total)):
        return min(setting, total)
    return setting if setting is not None else total
