"""Turn one published system's submission into a config of this workflow.

What the source states becomes a value with a note naming the file it came from; what it does
not state (a checkpoint commit, a container digest, where the partner keeps the dataset)
becomes a ``TODO:`` value that preflight refuses by name; what states something this
workflow has no key for is kept verbatim under ``imported.unmapped`` and listed in the report.

The mapping from the vendor's harness to this workflow's engine: the harness starts one vLLM
engine per group of ``tensor_parallel_size`` GPUs (``harness_config.device_count`` GPUs in
all) and feeds them from one LoadGen process; here that is ``backend: endpoints`` with one
``vllm serve`` per group, started by SLURM on every node of the allocation, and one LoadGen
head. Engine arguments and environment variables the scenarios share are the system's; the
rest are each scenario's ``engine`` overrides.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..benchmarks import Benchmark
from ..errors import UserError
from ..published.loadgen_conf import effective, number, read_conf
from ..published.pins import round_pin
from ..published.serving import ServingSetup
from ..published.setup_scripts import image_facts, model_facts
from .source import PublishedSystem, ScenarioResult
from .yaml_text import Noted

TODO = "TODO:"
# System-description fields the schema reads as counts: digit strings become integers; a
# mixed system's text ("64(AMD EPYC 9534) and 96(...)") stays text.
COUNT_FIELDS = (
    "number_of_nodes",
    "accelerators_per_node",
    "host_processors_per_node",
    "host_processor_core_count",
    "host_processor_vcpu_count",
)
# Fields of the JSON that are the config's own top-level keys.
TOP_LEVEL_FIELDS = ("division", "submitter")

# user.conf key -> scenario setting (the rest have no config key and are reported).
CONF_TO_SETTING = {
    "target_qps": "target_qps",
    "min_duration": "min_duration_ms",
    "max_duration": "max_duration_ms",
    "min_query_count": "min_query_count",
    "max_query_count": "max_query_count",
}
# user.conf keys whose value 0 means "no bound".
ZERO_IS_UNSET = ("max_duration", "max_query_count")

# Quark's quantize_quark.py schemes -> (this workflow's scheme, whether its Quark path
# reproduces the recipe). mxfp4_fp8 (MXFP4 weights, static FP8 activations) is AMD's gpt-oss-120b,
# an MoE whose Quark export this workflow has not run: its published checkpoint is served,
# validated as that scheme (weights and every activation scale).
QUARK_SCHEMES = {
    "w_mxfp4_a_mxfp4": ("mxfp4", True),
    "w_mxfp4": ("mxfp4_weight_only", True),
    "w_fp8_a_fp8": ("fp8", True),
    "mxfp4_fp8": ("mxfp4_fp8", False),
}
QUARK_ALGORITHMS = {"gptq": "gptq", "autosmoothquant": "autosmoothquant"}


@dataclass
class ImportedScenario:
    result: ScenarioResult
    settings: dict[str, Noted]
    setup: ServingSetup | None
    unmapped: dict[str, Any] = field(default_factory=dict)


@dataclass
class ImportReport:
    notes: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _todo(what: str, in_url: bool = False) -> str:
    """A placeholder saying what to put there (hyphenated inside a URL, which holds no spaces;
    preflight reads the hyphens back as spaces)."""
    return TODO + (re.sub(r"\s+", "-", what.strip()) if in_url else " " + what.strip())


# --- LoadGen settings --------------------------------------------------------------------


def scenario_settings(
    system: PublishedSystem, facts: Benchmark, result: ScenarioResult, report: ImportReport
) -> tuple[dict[str, Noted], dict[str, Any]]:
    """The scenario's LoadGen settings from its user.conf, checked against LoadGen's log."""
    rules = system.rules
    conf_path = result.file("user.conf")
    where = system.relative(conf_path)
    model = facts.loadgen_model(result.scenario)
    loadgen_scenario = rules.loadgen_scenario(result.scenario)
    known = rules.data["loadgen"].get("config_keys")
    lines = effective(read_conf(conf_path, known), model, loadgen_scenario) if conf_path.is_file() else {}
    if not conf_path.is_file():
        report.note(f"{system.relative(result.folder)}: no user.conf; LoadGen's log gives the settings")
    settings: dict[str, Noted] = {}
    unmapped: dict[str, Any] = {}
    for key, line in sorted(lines.items()):
        value = number(line.value) if key not in ("mode",) else line.value
        source = f"{where}:{line.line_no} ({line.model}.{line.scenario}.{key})"
        if key in CONF_TO_SETTING:
            if key in ZERO_IS_UNSET and value == 0:
                continue
            settings[CONF_TO_SETTING[key]] = Noted(value, source)
        elif key == "target_latency" and result.scenario == "SingleStream":
            settings["target_qps"] = Noted(round(1000.0 / float(value), 6), f"{source}: 1000 / target_latency ms")
        elif key == "performance_sample_count_override" and value == facts.facts.get("performance_sample_count"):
            continue  # the benchmark's own count: nothing to set
        else:
            unmapped[key] = value
            report.note(f"{source} = {line.value}: no config key for it; kept under imported.unmapped")
    detail = result.detail
    effective_qps = detail.get("effective_target_qps")
    if "target_qps" not in settings and effective_qps:
        settings["target_qps"] = Noted(
            effective_qps, f"{system.relative(result.folder)}/performance/run_1/mlperf_log_detail.txt (effective)"
        )
    elif "target_qps" in settings and effective_qps and float(effective_qps) != float(settings["target_qps"].value):
        # The harness may override user.conf (AMD's harness_config.target_qps > 0): the log is what ran.
        report.note(
            f"{where}: target_qps {settings['target_qps'].value}, but LoadGen's log says {effective_qps} ran; "
            f"the log's value is used"
        )
        settings["target_qps"] = Noted(effective_qps, f"{system.relative(result.folder)} LoadGen log (effective)")
    if "target_qps" not in settings:
        raise UserError(
            f"{system.relative(result.folder)}: neither user.conf nor a performance log states target_qps; "
            f"the result cannot be imported"
        )
    order = ("target_qps", "start_qps", "min_duration_ms", "max_duration_ms", "min_query_count", "max_query_count")
    return {k: settings[k] for k in sorted(settings, key=lambda k: order.index(k) if k in order else 99)}, unmapped


def measure_instead(settings: dict[str, Noted]) -> dict[str, Noted]:
    """``target_qps: auto`` with the submitter's rate as the search's start: a partner's machine
    is not the submitter's, and a wrong Offline target makes an hour's run INVALID."""
    published = settings["target_qps"]
    return {
        "target_qps": Noted("auto", "measured on this machine first (find_performance), from start_qps"),
        "start_qps": Noted(published.value, published.note),
        **{k: v for k, v in settings.items() if k != "target_qps"},
    }


def sampling_differences(sampling: dict[str, Any], generation: dict[str, Any], mode: str = "performance") -> list[str]:
    """Where the harness's sampling differs from the round's generation settings (which the
    workflow applies itself): greedy is temperature 0 or top_k 1; the token bounds must agree."""
    problems = []
    greedy = float(sampling.get("temperature", 1.0)) == 0.0 or int(sampling.get("top_k", -1)) == 1
    if bool(generation.get("greedy")) != greedy:
        problems.append(f"greedy {greedy} (temperature {sampling.get('temperature')}, top_k {sampling.get('top_k')})")
    if not generation.get("greedy"):
        for key in ("temperature", "top_p"):
            if key in generation and key in sampling and float(sampling[key]) != float(generation[key]):
                problems.append(f"{key} {sampling[key]} (the round: {generation[key]})")
    max_new = generation.get("max_new_tokens", generation.get(f"max_new_tokens_{mode}"))
    if max_new is not None and "max_tokens" in sampling and int(sampling["max_tokens"]) != int(max_new):
        problems.append(f"max_tokens {sampling['max_tokens']} (the round: {max_new})")
    if "min_new_tokens" in generation and "min_tokens" in sampling:
        if int(sampling["min_tokens"]) != int(generation["min_new_tokens"]):
            problems.append(f"min_tokens {sampling['min_tokens']} (the round: {generation['min_new_tokens']})")
    if sampling.get("ignore_eos") is True:
        problems.append("ignore_eos true")
    return problems


# Harness settings that are the vendor's container paths or debugging switches, not setup.
HARNESS_NOISE = re.compile(r"(_path$|^output_log_dir$|^debug_)")


def harness_record(setup: ServingSetup) -> dict[str, Any]:
    return {k: v for k, v in setup.harness_settings.items() if not HARNESS_NOISE.search(k) and v != "MISSING"}


def result_value(facts: Benchmark, result: ScenarioResult) -> dict[str, Any] | None:
    detail = result.detail
    if not detail:
        return None
    try:
        field_name = facts.result_field(result.scenario)
    except KeyError:
        return None
    value = detail.get(field_name)
    if value is None:
        return None
    return {
        "value": facts.result_value(result.scenario, value),
        "unit": facts.result_unit(result.scenario),
        "valid": str(detail.get("result_validity", "")).upper() == "VALID",
        "loadgen_version": str(detail.get("loadgen_version", "")).split(" ")[0],
    }


# --- engine ---------------------------------------------------------------------------------


def _common(dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Keys every dict holds with the same value."""
    if not dicts:
        return {}
    first = dicts[0]
    return {k: v for k, v in first.items() if all(k in d and d[k] == v for d in dicts[1:])}


def _strip_count_suffix(name: str) -> str:
    """'AMD Instinct MI355X 288GB HBM3e (x87)' -> the model one server runs on."""
    return re.sub(r"\s*\(x\d+\)\s*$", "", name)


# Where the server pods of an imported launch: kubernetes system read the checkpoint: the claim
# and path of profiles/kubernetes (kubernetes-persistent-volumes), which a site changes together.
KUBERNETES_MODEL_VOLUME = {"claim": "mlperf-data", "mount_path": "/data"}


def engine_section(
    system: PublishedSystem,
    scenarios: list[ImportedScenario],
    model_name: str,
    report: ImportReport,
    launch: str = "slurm-shared",
) -> tuple[Noted, dict[str, dict[str, dict]]]:
    """The system's engine and each scenario's overrides ({(benchmark, scenario): {engine_args, env}});
    ``launch``: how the servers start, ``slurm-shared`` or ``kubernetes`` (``import --launch``)."""
    setups = [s for s in scenarios if s.setup is not None]
    for item in scenarios:
        if item.setup is None:
            report.note(
                f"{system.relative(item.result.folder)}: its README names no harness config this import reads "
                f"(registered readers: AMD harness_llm); its engine settings are TODO"
            )
    description = system.description
    nodes = _count(description.get("number_of_nodes")) or 1
    if not setups:
        engine = {
            "backend": "vllm",
            "engine_args": Noted(
                {"tensor_parallel_size": _todo("the serving setup the source does not state")},
                "The published code states no serving setup this import reads: fill in the engine arguments.",
            ),
        }
        report.todos.append(f"systems.{system.system_id}.engine.engine_args")
        return Noted(engine), {}
    files = sorted({system.relative(s.setup.source) for s in setups})
    if all(s.setup.config_engine for s in setups):
        return _recorded_engine(system, setups, files)
    common_args = _common([s.setup.engine_args for s in setups])
    common_env = _common([s.setup.env for s in setups])
    overrides = {}
    for item in setups:
        own_args = {k: v for k, v in item.setup.engine_args.items() if k not in common_args}
        own_env = {k: v for k, v in item.setup.env.items() if k not in common_env}
        if own_args or own_env:
            overrides[(item.result.benchmark, item.result.scenario)] = {"engine_args": own_args, "env": own_env}
    parallel = [s.setup.parallel for s in setups]
    tensor_parallel = max(p.get("tensor_parallel_size", 1) for p in parallel)
    servers = max(p.get("servers", 1) for p in parallel)
    servers_per_node = math.ceil(servers / nodes)
    # Fewer engines than nodes x servers_per_node: the last node runs the rest (allocation.servers),
    # where that leaves no node empty; else the allocation starts servers_per_node on every node.
    uneven = servers_per_node * (nodes - 1) < servers < servers_per_node * nodes
    if uneven:
        report.note(
            f"the harness ran {servers} engines of {tensor_parallel} GPU(s) on {nodes} node(s) "
            f"(harness_config.device_count): the allocation runs {servers_per_node} per node and "
            f"{servers - servers_per_node * (nodes - 1)} on the last (allocation.servers {servers})"
        )
    elif servers_per_node * nodes != servers:
        report.note(
            f"the harness ran {servers} engines of {tensor_parallel} GPU(s) on {nodes} node(s) "
            f"(harness_config.device_count), which leaves a node without one; the allocation starts "
            f"{servers_per_node} per node, {servers_per_node * nodes} in all"
        )
    max_seqs = max(int(s.setup.engine_args.get("max_num_seqs", 256)) for s in setups)
    gpus = f"--gpus-per-task={tensor_parallel}"
    if launch == "kubernetes":
        start = Noted("kubernetes", "a StatefulSet of server pods, one per node, serves each run: one model load")
        placement: dict[str, Any] = {}
        pods = {
            "kubernetes": {
                "model_volume": Noted(
                    dict(KUBERNETES_MODEL_VOLUME),
                    "site: the claim and path of profiles/kubernetes (kubernetes-persistent-volumes); change both",
                )
            }
        }
    else:
        start = Noted("slurm-shared", "one SLURM server job serves all the system's runs: one model load")
        placement = {"srun_args": [gpus, "--gpu-bind=closest"]}
        pods = {}
    engine = {
        "backend": Noted(
            "endpoints",
            "The vendor's harness runs one vLLM engine per GPU group in one LoadGen process; here one `vllm serve` "
            "per group, driven by one LoadGen head.",
        ),
        "endpoints": {
            "launch": start,
            "served_model_name": model_name,
            "allocation": {
                "nodes": Noted(nodes, f"{system.relative(system.base / 'systems' / (system.system_id + '.json'))}"),
                "servers_per_node": Noted(
                    servers_per_node,
                    f"harness_config.device_count {max(p.get('devices', servers) for p in parallel)} / "
                    f"tensor_parallel_size {tensor_parallel} over {nodes} node(s)",
                ),
                **(
                    {
                        "servers": Noted(
                            servers,
                            f"harness_config.device_count {servers}: {servers_per_node * nodes - servers} GPU(s) "
                            "of the last node unused, as in the vendor's run",
                        )
                    }
                    if uneven
                    else {}
                ),
                "base_port": 8000,
                "accelerator": _strip_count_suffix(str(description.get("accelerator_model_name", "N/A"))),
                "accelerator_count": Noted(tensor_parallel, "vllm_engine_config.tensor_parallel_size"),
                "max_concurrency": Noted(
                    int(max_seqs * 1.5), f"1.5 x the largest max_num_seqs ({max_seqs}): the rest waits at the head"
                ),
                **placement,
            },
            **pods,
            "startup_timeout_s": 1800,
        },
        "dispatch": {"policy": "capacity", "stall_timeout_s": 300, "min_healthy_endpoints": servers},
        "engine_args": Noted(
            dict(common_args),
            "Flags of every `vllm serve`: the vendor's vllm_engine_config that all scenarios share ("
            + ", ".join(files)
            + "); the scenarios' own values are under benchmarks.<b>.<Scenario>.engine",
        ),
        "env": Noted(
            dict(common_env),
            "The harness's environment (env_config and vllm_env_config, with harness_llm/common/config.yaml's "
            "defaults) that all scenarios share",
        ),
        "serve_quantized_as": "native",
    }
    return Noted(engine), overrides


def _recorded_engine(
    system: PublishedSystem, setups: list[ImportedScenario], files: list[str]
) -> tuple[Noted, dict[tuple[str, str], dict]]:
    """A tree this workflow made: its runs recorded the engine section as configured."""
    engines = [s.setup.config_engine for s in setups]
    common_args = _common([e.get("engine_args") or {} for e in engines])
    common_env = _common([e.get("env") or {} for e in engines])
    engine = {k: v for k, v in engines[0].items() if k not in ("engine_args", "env")}
    engine["engine_args"] = common_args
    engine["env"] = {k: str(v) for k, v in common_env.items()}
    overrides = {}
    for item, recorded in zip(setups, engines):
        own_args = {k: v for k, v in (recorded.get("engine_args") or {}).items() if k not in common_args}
        own_env = {k: str(v) for k, v in (recorded.get("env") or {}).items() if k not in common_env}
        if own_args or own_env:
            overrides[(item.result.benchmark, item.result.scenario)] = {"engine_args": own_args, "env": own_env}
    where = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
    return Noted(engine, f"the engine its runs recorded ({where})"), overrides


def _count(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def description_section(system: PublishedSystem, report: ImportReport) -> Noted:
    desc: dict[str, Any] = {}
    path = system.relative(system.base / "systems" / f"{system.system_id}.json")
    for key, value in system.description.items():
        if key in TOP_LEVEL_FIELDS:
            continue
        if key in COUNT_FIELDS:
            value = _count(value) if _count(value) is not None else value
        desc[key] = value
    # A field the checker needs filled that the source leaves empty is the partner's to state.
    for key in system.rules["system_description"]["meaningful"]:
        if key not in TOP_LEVEL_FIELDS and desc.get(key) in (None, "", 0):
            desc[key] = _todo(f"{key.replace('_', ' ')}: {path} leaves it empty")
            report.note(f"{path}: {key} is empty; the config holds a TODO for it")
    return Noted(desc, f"{path}, verbatim (counts as numbers)")


# --- model, quantization, dataset, image ------------------------------------------------------


def _hf_source(repo: str, revision: str | None, what: str) -> str:
    return f"hf://{repo}@{revision or _todo('the 40 hex commit you verified', in_url=True)}"


def _pinned_source(system: PublishedSystem, download: Any, report: ImportReport) -> Noted:
    """A download's ``hf://repo@commit`` source: its own --revision, made a full commit where the
    round's code pins the repository to one that starts with it (published/pins.py); else the
    round's one pin of it; else a TODO:."""
    where = f"{system.relative(download.script)}: hf download {download.repo}"
    if download.revision:
        where += f" --revision {download.revision}"
    if download.revision and len(download.revision) == 40:
        return Noted(_hf_source(download.repo, download.revision, download.repo), where)
    pin, commits = round_pin(system.root, download.repo, download.revision)
    if pin is None:
        if len(commits) > 1:
            report.note(
                f"{download.repo}: the round's code pins {len(commits)} different commits ({', '.join(commits)}); "
                "the revision is left to you"
            )
        return Noted(_hf_source(download.repo, download.revision, download.repo), where)
    said = "names no revision" if not download.revision else f"names the short commit {download.revision}"
    report.note(f"{download.repo}: {where} {said}; {system.relative(pin.path)}:{pin.line} pins {pin.commit}")
    return Noted(
        _hf_source(download.repo, pin.commit, download.repo),
        f"{where}; the commit as {system.relative(pin.path)}:{pin.line} pins it (the round's code)",
    )


def _exclude(values: list[str]) -> list[str]:
    out = []
    for item in " ".join(values).split():
        name = item.strip("'\"")
        if "*" not in name.lstrip("*"):
            out.append(name.lstrip("*"))  # "*lm_head": the module named lm_head
        else:
            out.append("re:" + re.escape(name).replace(r"\*", ".*"))
    return out


def model_sections(
    system: PublishedSystem,
    benchmark: str,
    facts: Benchmark,
    checkpoint: str | None,
    report: ImportReport,
) -> dict[str, Any]:
    """models, datasets and quantization entries (plain dicts of Noted values) and the names the
    benchmark uses: {'models', 'datasets', 'quantization', 'model', 'dataset', 'recipe'}."""
    scripts = model_facts(system.base, benchmark)
    models: dict[str, Any] = {}
    datasets: dict[str, Any] = {}
    quantization: dict[str, Any] = {}
    published = next((d for d in scripts.downloads if checkpoint and d.local_dir == checkpoint), None)
    recipe = next((q for q in scripts.quantizations if checkpoint and q.value("--output_dir") == checkpoint), None)
    original_dir = recipe.value("--model_dir") if recipe else None
    original = next((d for d in scripts.downloads if original_dir and d.local_dir == original_dir), None) or next(
        (d for d in scripts.downloads if d is not published), None
    )
    model_name = recipe_name = None
    if original is not None:
        model_name = original.repo.split("/")[-1].lower()
        models[model_name] = {
            "source": _pinned_source(system, original, report),
            "sha256_manifest": _todo(f"a sha256sum file of the {original.repo} files you verified"),
        }
    else:
        model_name = f"{benchmark}-model"
        models[model_name] = {
            "source": "file://" + _todo("the folder or hf source of the model", in_url=True),
            "sha256_manifest": _todo("a sha256sum file of the checkpoint you verified"),
        }
        report.note(f"{benchmark}: the setup scripts name no checkpoint download; models.{model_name} is TODO")
    scheme = QUARK_SCHEMES.get(recipe.value("--quant_scheme") or "") if recipe else None
    docs = system.base / "documentation" / "calibration.md"
    doc_text = docs.read_text(errors="replace").lower() if docs.is_file() else ""
    if recipe is not None and scheme is not None and scheme[1]:
        where = system.relative(recipe.script)
        recipe_name = f"{benchmark}-{scheme[0]}".replace("_", "-")
        algorithms = [QUARK_ALGORITHMS[a] for a in recipe.args.get("--quant_algo", []) if a in QUARK_ALGORITHMS]
        if "autosmoothquant" in doc_text and scheme[0].startswith("mx") and "autosmoothquant" not in algorithms:
            algorithms.insert(0, "autosmoothquant")
        entry: dict[str, Any] = {
            "scheme": Noted(scheme[0], f"{where}: {recipe.tool} --quant_scheme {recipe.value('--quant_scheme')}"),
            "tool": Noted(
                "quark", f"{recipe.tool}" + (f" of AMD Quark {recipe.tool_version}" if recipe.tool_version else "")
            ),
        }
        if "even rounding" in doc_text:
            entry["scale_mode"] = Noted("even", f"{system.relative(docs)}: even rounding of the scales")
        if recipe.value("--kv_cache_dtype") == "fp8":
            entry["kv_cache"] = Noted("fp8", "--kv_cache_dtype fp8")
        if algorithms:
            entry["algorithms"] = Noted(
                algorithms,
                "--quant_algo"
                + (f", and {system.relative(docs)} names AutoSmoothQuant" if "autosmoothquant" in algorithms else ""),
            )
        if recipe.args.get("--exclude_layers"):
            entry["exclude"] = Noted(_exclude(recipe.args["--exclude_layers"]), "--exclude_layers")
        calibration: dict[str, Any] = {}
        calib_file = recipe.value("--dataset")
        if calib_file:
            calib_name = f"{facts.facts['dataset']['name']}-calibration"
            datasets[calib_name] = {
                "source": Noted(
                    "file://" + _todo(f"the folder holding {Path(calib_file).name}", in_url=True),
                    f"{where} calibrated on {calib_file}",
                ),
                "file": Path(calib_file).name,
                "sha256_manifest": _todo(f"a sha256sum file of {Path(calib_file).name}"),
            }
            calibration["dataset"] = calib_name
        if recipe.value("--num_calib_data"):
            calibration["samples"] = int(recipe.value("--num_calib_data"))
        if recipe.value("--seq_len"):
            calibration["seq_len"] = int(recipe.value("--seq_len"))
        if "padding and truncation" in doc_text:
            calibration["packing"] = "per_row"
        if calibration:
            entry["calibration"] = Noted(calibration, "--dataset, --num_calib_data, --seq_len; packing from the docs")
        quantization[recipe_name] = entry
        if published is not None:
            report.note(
                f"{benchmark}: the vendor also publishes the result of this recipe, {published.repo} "
                f"({system.relative(published.script)}); to serve it instead, add it as a models entry and use "
                f"tool: prequantized with checkpoint: <that entry>"
            )
    elif published is not None:
        published_name = published.repo.split("/")[-1].lower()
        where = system.relative(published.script)
        models[published_name] = {
            "source": _pinned_source(system, published, report),
            "sha256_manifest": _todo(f"a sha256sum file of the {published.repo} files you verified"),
        }
        if scheme is None:
            # No format to validate it by: serve the published checkpoint as the model itself.
            report.note(f"{benchmark}: {published.repo} is served as acquired (its weights' format is not stated)")
            return {
                "models": models,
                "datasets": _dataset_entries(facts, datasets),
                "quantization": {},
                "model": published_name,
                "dataset": facts.facts["dataset"]["name"],
                "recipe": None,
            }
        recipe_name = f"{benchmark}-published"
        why = (
            f"{recipe.tool} --quant_scheme {recipe.value('--quant_scheme')} is not run by this workflow"
            if recipe is not None
            else "the vendor's checkpoint"
        )
        quantization[recipe_name] = {
            "tool": Noted("prequantized", f"served as published ({why}); it is validated"),
            "checkpoint": published_name,
            "scheme": Noted(scheme[0], "the checkpoint's format, for validation"),
        }
        if recipe is not None and recipe.args.get("--exclude_layers"):
            quantization[recipe_name]["exclude"] = Noted(
                _exclude(recipe.args["--exclude_layers"]), f"{where}: --exclude_layers"
            )
    else:
        what = (
            f"the checkpoint the engine loads ({checkpoint})" if checkpoint else "a checkpoint (the setup names none)"
        )
        report.note(f"{benchmark}: no quantization recipe or published download writes {what}; served as acquired")
    return {
        "models": models,
        "datasets": _dataset_entries(facts, datasets),
        "quantization": quantization,
        "model": model_name,
        "dataset": facts.facts["dataset"]["name"],
        "recipe": recipe_name,
    }


def lcb_release_entry(facts: Benchmark) -> str | None:
    """The datasets entry the import writes for the benchmark's LiveCodeBench release, if it scores one."""
    release = facts.facts["dataset"].get("livecodebench_release")
    return f"livecodebench-{release['version']}".replace("_", "-") if release else None


def _dataset_entries(facts: Benchmark, others: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's MLCommons dataset (where the partner keeps it is theirs to say), the
    LiveCodeBench release its evaluation joins tests from, and the others."""
    dataset_name = facts.facts["dataset"]["name"]
    dataset_file = facts.facts["dataset"].get("file") or facts.facts["dataset"].get("performance_file")
    entries: dict[str, Any] = {
        dataset_name: {
            "source": Noted(
                "file://" + _todo(f"the folder holding {dataset_file}", in_url=True),
                "MLCommons' dataset for the benchmark, where your copy lives",
            ),
            "file": dataset_file,
            "sha256_manifest": _todo(f"a sha256sum file of {dataset_file}"),
        },
    }
    release = facts.facts["dataset"].get("livecodebench_release")
    if release:
        repository = release["repository"]
        entries[lcb_release_entry(facts)] = {
            "source": Noted(
                f"hf://datasets/{repository}@" + _todo("the 40 hex commit you verified", in_url=True),
                f"the rules table: the reference scores code items against {repository} {release['version']} "
                "and pins no revision",
            ),
            "file": "test.jsonl",
            "sha256_manifest": _todo(f"a sha256sum file of the {repository} files you verified"),
        }
    return {**entries, **others}


def container_value(system: PublishedSystem, benchmark: str, report: ImportReport) -> Noted | None:
    variables, config = image_facts(system.base, benchmark)
    image = variables.get("DOCKER_RESULT_IMAGE")
    if not image:
        report.note(f"{benchmark}: the setup names no image; systems.<id>.software.container is left out")
        return None
    repo, _, tag = image.partition(":")
    parts = [f"{system.relative(config)}: the vendor builds {image}"]
    if variables.get("DOCKER_BASE_IMAGE"):
        parts.append(f"from {variables['DOCKER_BASE_IMAGE']}")
    for name in ("VLLM", "AITER"):
        if variables.get(f"{name}_REV"):
            patch = variables.get(f"{name}_CUSTOM_PATCH")
            parts.append(
                f"{name.lower()} {variables.get(f'{name}_URL', '')}@{variables[f'{name}_REV']}"
                + (f" + {patch}" if patch else "")
            )
    return Noted(
        f"docker://{repo}@sha256:" + _todo("the 64 hex digest of your build of the vendor image", in_url=True),
        "; ".join(parts) + ". The digest is not in the source: build or pull it and pin it.",
    )
