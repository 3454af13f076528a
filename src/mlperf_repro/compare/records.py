"""Read submissions into result records.

Layouts understood:
- v6.0 (this workflow's trees and published v6.0 results): everything of a result in
  ``<division>/<submitter>/results/<system>/<benchmark>/<scenario>/`` (user.conf,
  measurements.json, performance/run_1, accuracy, TEST0x), code in ``src/``.
- v5.x (published v5.1 results): logs in ``results/...``, user.conf and the measurements
  json in ``measurements/<system>/<benchmark>/<scenario>/``, compliance in
  ``compliance/...``, code in ``code/``.
An input may hold several divisions and submitters (a published results repository).

Each record keeps the result (metric, latencies, validity, accuracy) and a flat map of
*settings* - everything that could explain a difference - under namespaced keys
(``loadgen.target_qps``, ``serving.engine.max_num_seqs``, ``system.host_memory_capacity``, ...).
Detail logs are streamed line by line; accuracy logs are never read.

The serving setup has one naming whatever its source, so one of this workflow's trees compares
with a published one key by key: ``serving.backend``, ``serving.engine.*`` (engine arguments),
``serving.env.*``, ``serving.sampling.*`` (vLLM's sampling names), ``serving.parallel.*``
(tensor_parallel_size, servers, devices) and ``serving.checkpoint``. A published result's
setup is what its submitter's harness config states (:mod:`mlperf_repro.published.serving`,
found through the command in the result's README.md); one of ours is its provenance record.
user.conf and mlperf.conf contribute only the lines LoadGen applies to the result's model and
scenario (a Server line is no cause of an Offline gap).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..benchmarks import Round, load_round
from ..check.endpoints_logs import is_endpoints_folder, read_endpoints
from ..errors import UserError
from ..hashing import sha256_file
from ..loadgen_logs import read_detail
from ..published.loadgen_conf import ConfLine, effective
from ..published.serving import ServingSetup, provenance_serving, read_serving_setup, result_commands

DIVISIONS = ("closed", "open", "network")
# LoadGen's effective settings worth comparing (the rest of the detail log is results,
# timestamps and bookkeeping).
LOADGEN_KEYS = (
    "effective_target_qps",
    "effective_min_duration_ms",
    "effective_max_duration_ms",
    "effective_min_query_count",
    "effective_max_query_count",
    "effective_samples_per_query",
    "effective_performance_sample_count",
    "effective_accuracy_sample_count",
    "effective_sample_concatenate_permutation",
    "effective_target_latency_ns",
    "effective_qsl_rng_seed",
    "effective_sample_index_rng_seed",
    "effective_schedule_rng_seed",
    "effective_max_async_queries",
    "requested_server_ttft_latency",
    "requested_server_tpot_latency",
    "requested_use_token_latencies",
    "qsl_reported_total_count",
    "qsl_reported_performance_count",
)
RESULT_FIELDS = (
    "result_tokens_per_second",
    "result_completed_tokens_per_second",
    "result_samples_per_second",
    "result_completed_samples_per_sec",
    "early_stopping_latency_ss",
)
DETAIL_KEYS = frozenset(
    LOADGEN_KEYS
    + RESULT_FIELDS
    + (
        "loadgen_version",
        "sut_name",
        "result_validity",
        "effective_scenario",
        "result_first_token_99.00_percentile_latency_ns",
        "result_time_per_output_token_99.00_percentile_ns",
    )
)
ACCURACY_PATTERN = re.compile(r"'(\w+)':\s+'?(-?[\d.]+(?:[eE][-+]?\d+)?)")


@dataclass
class Record:
    source: str  # the input's label
    division: str
    submitter: str
    system: str
    benchmark: str  # folder name
    mlperf_benchmark: str
    scenario: str
    metric: float | None = None
    unit: str = ""
    valid: bool | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    accelerators: int = 1
    accuracy: dict[str, float] = field(default_factory=dict)
    accuracy_targets: dict[str, float] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    # src/ (or code/) and documentation/ files -> sha256: the submitter's, less other benchmarks' folders
    code: dict[str, str] = field(default_factory=dict)
    path: str = ""
    # Where the serving.* settings come from (a code file, provenance.json), or why there are none.
    serving_source: str = ""
    # The code files (keys of ``code``) the serving setup was read from.
    serving_files: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.mlperf_benchmark, self.scenario)

    @property
    def per_accelerator(self) -> float | None:
        return None if self.metric is None else self.metric / max(1, self.accelerators)


# The comment a find-performance pass writes into user.conf (userconf.user_conf_from_request).
FIND_PERFORMANCE_MARK = "target_qps auto:"
# Host-fact keys that are explanations, not facts.
HOST_PROSE = frozenset({"unknown"})


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif isinstance(value, list):
        out[prefix] = json.dumps(value, sort_keys=True)
    elif value is not None:
        out[prefix] = str(value)


def _dict(value: Any) -> dict:
    """``value`` where it is a JSON object, else {} (a record of the wrong type reads as empty)."""
    return value if isinstance(value, dict) else {}


def _json_object(path: Path) -> tuple[dict, str | None]:
    """A JSON object file: (its content, None), or ({}, why it cannot be read)."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return {}, f"not readable JSON ({exc})"
    return (data, None) if isinstance(data, dict) else ({}, f"not a JSON object but a {type(data).__name__}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _conf(path: Path) -> dict[str, str]:
    """key = value lines of a LoadGen conf file (comments dropped)."""
    values = {}
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                key, value = (part.strip() for part in line.split("=", 1))
                values[key] = value
    return values


def _code_hashes(base: Path) -> dict[str, str]:
    """src/ (v6.0) or code/ (v5.x) and documentation/ files, keyed 'src/...' either way so
    the two layouts compare."""
    hashes = {}
    for folder, prefix in (("src", "src"), ("code", "src"), ("documentation", "documentation")):
        root = base / folder
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    hashes.setdefault(f"{prefix}/{path.relative_to(root).as_posix()}", sha256_file(path))
    return hashes


def _code_of_benchmark(code: dict[str, str], benchmark: str, benchmark_folders: set[str]) -> dict[str, str]:
    """The submitter's code less the folders of its other benchmarks (a llama2-70b result does
    not run src/gpt-oss-120b/)."""
    return {
        key: digest
        for key, digest in code.items()
        if not (key.startswith("src/") and key.split("/")[1] in benchmark_folders - {benchmark})
    }


def applicable_conf(values: dict[str, str], model: str, scenario: str) -> dict[str, str]:
    """The ``model.scenario.key`` lines of a conf file LoadGen applies to this model and scenario
    (the most specific of each key, see :func:`mlperf_repro.published.loadgen_conf.effective`)."""
    lines = []
    for name, value in values.items():
        parts = name.split(".")
        if len(parts) >= 3:
            lines.append(ConfLine(".".join(parts[:-2]), parts[-2], parts[-1], value, 0))
    return {
        f"{line.model}.{line.scenario}.{line.key}": line.value for line in effective(lines, model, scenario).values()
    }


def published_serving(code_roots: list[Path], scenario_dir: Path) -> tuple[ServingSetup | None, str]:
    """The serving setup the submitter's code states for this result, or None and why not."""
    try:
        setup = read_serving_setup(code_roots, scenario_dir)
    except UserError as exc:
        return None, f"not read: {exc}"
    if setup is not None:
        return setup, ""
    commands = result_commands(scenario_dir)
    if commands:
        named = f"{commands[0].config_path.rstrip('/')}/{commands[0].config_name}.yaml"
        return None, f"not stated: README.md runs {named}, which the published code lacks"
    return None, "not stated: README.md runs no harness config a reader understands"


def _code_keys(paths: list[Path], code_roots: list[Path]) -> list[str]:
    """Files as keys of Record.code ('src/...', for src/ and code/ alike)."""
    keys = []
    for path in paths:
        for root in code_roots:
            if path.is_relative_to(root):
                keys.append(f"src/{path.relative_to(root).as_posix()}")
                break
    return keys


def find_submitters(root: Path) -> Iterator[tuple[str, Path]]:
    """(division, submitter folder) under ``root``; the root may be a tree, a folder holding
    one (our results/package), or a published results repository."""
    for depth in range(0, 3):
        found = False
        for candidate in sorted(root.glob("/".join(["*"] * depth)) if depth else [root]):
            for division in DIVISIONS:
                division_dir = candidate / division
                if division_dir.is_dir():
                    for submitter in sorted(p for p in division_dir.iterdir() if p.is_dir()):
                        if (submitter / "results").is_dir():
                            found = True
                            yield division, submitter
        if found:
            return


def _measurements(scenario_dir: Path, v5_measure_dir: Path | None) -> tuple[dict, Path]:
    """measurements.json and the folder holding user.conf (v6.0: the scenario folder)."""
    if (scenario_dir / "user.conf").is_file() or v5_measure_dir is None or not v5_measure_dir.is_dir():
        folder = scenario_dir
    else:
        folder = v5_measure_dir
    data: dict = {}
    candidates = [folder / "measurements.json"] + sorted(folder.glob("*.json"))
    for path in candidates:
        if path.is_file() and path.name != "provenance.json":
            data, problem = _json_object(path)
            if problem is None:
                break
    return data, folder


class EndpointsFacts:
    """A benchmark's facts for an endpoints-harness result: the harness's result fields."""

    def __init__(self, facts, endpoints: dict) -> None:
        self._facts, self._fields = facts, endpoints.get("result_field", {})
        self.facts = {**facts.facts, "result_field": self._fields}

    def result_field(self, scenario: str) -> str:
        return self._fields[scenario]

    def __getattr__(self, name: str):
        return getattr(self._facts, name)


def _metric(detail: dict, facts, scenario: str) -> tuple[float | None, str]:
    if facts is not None and scenario in facts.facts.get("result_field", {}):
        field_name = facts.result_field(scenario)
        raw = _number(detail.get(field_name))
        return (None if raw is None else facts.result_value(scenario, raw)), facts.result_unit(scenario)
    for field_name in RESULT_FIELDS:
        if _number(detail.get(field_name)) is not None:
            unit = "Tokens/s" if "token" in field_name else "Samples/s"
            return _number(detail[field_name]), unit
    return None, ""


def read_submission(root: str | Path, label: str, rules: Round | None = None) -> list[Record]:
    root = Path(root)
    rules = rules or load_round("v6.0")
    records: list[Record] = []
    for division, base in find_submitters(root):
        mapping_path = base / "model_mapping.json"
        mapping = _json_object(mapping_path)[0] if mapping_path.is_file() else {}
        mapping = {str(k): str(v) for k, v in mapping.items() if isinstance(v, str)}
        code = _code_hashes(base)
        code_roots = [base / name for name in ("src", "code") if (base / name).is_dir()]
        benchmark_folders = {p.name for p in (base / "results").glob("*/*") if p.is_dir()} | set(rules.benchmark_names)
        systems = {p.stem: _json_object(p)[0] for p in (base / "systems").glob("*.json") if (base / "systems").is_dir()}
        for scenario_dir in sorted((base / "results").glob("*/*/*")):
            if not scenario_dir.is_dir():
                continue
            system, benchmark, scenario = scenario_dir.parts[-3:]
            official = rules.mlperf_benchmark(benchmark, mapping)
            facts = rules.benchmark(official) if official in rules.benchmark_names else None
            perf_path = scenario_dir / "performance" / "run_1" / "mlperf_log_detail.txt"
            detail = read_detail(perf_path, DETAIL_KEYS) if perf_path.is_file() else {}
            endpoints = rules.data.get("endpoints")
            if not detail and is_endpoints_folder(scenario_dir, endpoints):
                # An endpoints-harness result (v6.1): its files read under LoadGen's key names.
                detail = read_endpoints(scenario_dir, "performance", endpoints, scenario) or {}
                facts = EndpointsFacts(facts, endpoints) if facts is not None else None
            record = Record(
                label,
                division,
                base.name,
                system,
                benchmark,
                official,
                scenario,
                path=str(scenario_dir.relative_to(root)),
            )
            record.metric, record.unit = _metric(detail, facts, scenario)
            record.valid = (str(detail.get("result_validity", "")).upper() == "VALID") if detail else None
            for attr, key in (
                ("ttft_p99_ms", "result_first_token_99.00_percentile_latency_ns"),
                ("tpot_p99_ms", "result_time_per_output_token_99.00_percentile_ns"),
            ):
                if _number(detail.get(key)) is not None:
                    setattr(record, attr, _number(detail[key]) / 1e6)
            desc = systems.get(system, {})
            try:
                record.accelerators = max(1, int(desc.get("number_of_nodes", 1) or 1)) * max(
                    1, int(desc.get("accelerators_per_node", 1) or 1)
                )
            except (TypeError, ValueError, OverflowError):
                record.accelerators = 1
            accuracy_txt = scenario_dir / "accuracy" / "accuracy.txt"
            if accuracy_txt.is_file():
                text = accuracy_txt.read_text(errors="replace")
                # The round's own patterns where it knows the benchmark (as the checker reads it).
                record.accuracy = facts.accuracy_values(text) if facts is not None else {}
                record.accuracy = record.accuracy or {k: float(v) for k, v in ACCURACY_PATTERN.findall(text)}
            if facts is not None:
                record.accuracy_targets = facts.absolute_targets(scenario)
            try:
                conf_scope = (facts.loadgen_model(scenario), rules.loadgen_scenario(scenario)) if facts else None
            except (KeyError, AttributeError):
                conf_scope = None
            record.settings = _settings(scenario_dir, base, system, benchmark, scenario, detail, desc, conf_scope)
            _add_serving(record, scenario_dir, code_roots)
            if benchmark in mapping:
                record.settings["model_mapping"] = mapping[benchmark]
            record.settings.update(
                _compliance(scenario_dir, base / "compliance" / system / benchmark / scenario, rules, facts)
            )
            record.code = _code_of_benchmark(code, benchmark, benchmark_folders)
            records.append(record)
    return records


def _compliance(scenario_dir: Path, v5_dir: Path, rules: Round, facts) -> dict[str, str]:
    """compliance.TEST0x -> pass / fail / absent for the tests the benchmark has."""
    from ..check.tree import compliance_passed

    out = {}
    for test in facts.compliance_tests if facts else []:
        folder = scenario_dir / test if (scenario_dir / test).is_dir() else v5_dir / test
        if folder.is_dir():
            out[f"compliance.{test}"] = "pass" if compliance_passed(test, folder, rules, facts)[0] else "fail"
    return out


def _add_serving(record: Record, scenario_dir: Path, code_roots: list[Path]) -> None:
    """serving.* settings: this workflow's provenance where there is one (what ran), else the
    submitter's published harness config."""
    provenance_path = scenario_dir / "provenance.json"
    if provenance_path.is_file():
        provenance, problem = _provenance(provenance_path)
        perf = provenance.get("performance") or {}
        if not isinstance(perf, dict):
            perf, problem = {}, problem or "has a performance record that is not an object"
        try:
            setup = provenance_serving(perf) if problem is None else None
        except (TypeError, ValueError, OverflowError, AttributeError) as exc:
            # A value of the wrong type inside the engine record.
            setup, problem = None, f"has an engine record that does not read ({exc})"
        engine = perf.get("engine")
        serve_as = engine.get("serve_quantized_as") if isinstance(engine, dict) else None
        if serve_as:
            record.settings["serving.serve_quantized_as"] = str(serve_as)
        record.serving_source = (
            "provenance.json"
            if setup
            else f"not stated: provenance.json {problem}"
            if problem
            else "not stated: provenance.json has no engine"
        )
        files: list[str] = []
    else:
        setup, reason = published_serving(code_roots, scenario_dir)
        files = _code_keys(setup.files, code_roots) if setup else []
        record.serving_source = files[0] if files else reason
    record.serving_files = files
    if setup is not None:
        record.settings.update(setup.flat())


# The parts of a provenance record compare reads, and the JSON type each must have.
PROVENANCE_SHAPE = {
    "performance": dict,
    "quantization": dict,
    "performance.engine": dict,
    "performance.engine.engine_args": dict,
    "performance.engine.env": dict,
    "performance.engine.endpoints": dict,
    "performance.engine.endpoints.list": list,
    "performance.head": dict,
    "performance.packages": dict,
    "performance.container": dict,
    "performance.host": dict,
    "performance.nodes": dict,
    "performance.nodes.nodes": list,
    "performance.lock": dict,
    "performance.generation": dict,
    "performance.environment": dict,
}


def _provenance(path: Path) -> tuple[dict, str | None]:
    """provenance.json, or ({}, why not) where it is not the record this workflow writes."""
    data, problem = _json_object(path)
    if problem:
        return {}, problem
    for dotted, kind in PROVENANCE_SHAPE.items():
        value: Any = data
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value not in (None, {}, []) and not isinstance(value, kind):
            return {}, f"has {dotted} of type {type(value).__name__}, not {kind.__name__}"
    nodes = ((data.get("performance") or {}).get("nodes") or {}).get("nodes") or []
    servers = (((data.get("performance") or {}).get("engine") or {}).get("endpoints") or {}).get("list") or []
    if not all(isinstance(item, dict) for item in [*nodes, *servers]):
        return {}, "lists a node or server that is not a JSON object"
    return data, None


def _settings(
    scenario_dir: Path,
    base: Path,
    system: str,
    benchmark: str,
    scenario: str,
    detail: dict,
    desc: dict,
    conf_scope: tuple[str, str] | None = None,
) -> dict[str, str]:
    """``conf_scope``: (LoadGen model, LoadGen scenario) whose conf lines apply; None: every line."""
    settings: dict[str, str] = {}
    for key in LOADGEN_KEYS:
        if key in detail:
            name = key.replace("effective_", "").replace("requested_", "")
            settings[f"loadgen.{name}"] = str(detail[key])
    if "loadgen_version" in detail:
        settings["loadgen.version"] = str(detail["loadgen_version"]).split(" ")[0]
    if "sut_name" in detail:
        settings["loadgen.sut_name"] = str(detail["sut_name"])
    measurements, measure_dir = _measurements(scenario_dir, base / "measurements" / system / benchmark / scenario)
    for name in ("user.conf", "mlperf.conf"):
        values = _conf(measure_dir / name)
        for key, value in (applicable_conf(values, *conf_scope) if conf_scope else values).items():
            settings[f"{name}.{key}"] = value
    user_conf = measure_dir / "user.conf"
    if user_conf.is_file() and FIND_PERFORMANCE_MARK in user_conf.read_text(errors="replace"):
        # target_qps: auto - the rate was measured on the run host (compare.diff.MEASURED_TARGET).
        settings["loadgen.target_qps_chosen_by"] = "find-performance"
    _flatten("measurements", {k: v for k, v in measurements.items()}, settings)
    _flatten("system", desc, settings)
    provenance_path = scenario_dir / "provenance.json"
    provenance, problem = _provenance(provenance_path) if provenance_path.is_file() else ({}, None)
    if problem is not None:
        settings["provenance"] = f"unreadable: {problem}"
    elif provenance:
        perf = provenance.get("performance") or {}
        # Engine, environment and generation settings: serving.* (see _add_serving).
        _flatten("software", perf.get("packages", {}), settings)
        # The inference image (apptainer runs): its digest is the whole software stack.
        if (perf.get("container") or {}).get("image"):
            settings["software.container_image"] = str(perf["container"]["image"])
        # Host facts, less the reasons a fact is unknown (prose); a launch: slurm run's server nodes too.
        _flatten("host", {k: v for k, v in (perf.get("host") or {}).items() if k not in HOST_PROSE}, settings)
        for node in (perf.get("nodes") or {}).get("nodes") or []:
            facts = {k: v for k, v in node.items() if k not in HOST_PROSE and k != "hostname"}
            _flatten(f"host.nodes.{node.get('hostname', '?')}", facts, settings)
        # The lock check at the run's start: a run that went ahead with an override says so, and why.
        lock = perf.get("lock") or {}
        if lock.get("sha256"):
            settings["lock.sha256"] = str(lock["sha256"])
        if lock.get("override"):
            settings["lock.override"] = str(lock["override"])
        if lock.get("differences"):
            settings["lock.differences"] = json.dumps(lock["differences"])
        for name in ("model_manifest_sha256", "dataset_manifest_sha256"):
            if perf.get(name):
                settings[f"inputs.{name.replace('_manifest_sha256', '')}"] = str(perf[name])
        quant = provenance.get("quantization") or {}
        _flatten("quantization", {k: v for k, v in quant.items() if k not in ("logit_error", "recipe")}, settings)
    return settings
