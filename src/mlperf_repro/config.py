"""Config loading and validation.

The JSON Schema (workflow/schemas/config.schema.yaml) checks shape, types and allowed
values and fills defaults; :func:`check_references` checks what a schema cannot express
(names that must refer to other entries, round rules). Every problem becomes one line
naming the key path and what is allowed, collected into a single :class:`UserError`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from . import yamlio
from .benchmarks import load_round
from .errors import UserError

BUILTIN_MODEL_KINDS = ("tiny-llama", "tiny-gpt-oss", "tiny-wan")
BUILTIN_DATASET_KINDS = ("openorca-synthetic", "gpt-oss-synthetic", "vbench-prompts-synthetic")
# Builtin datasets of plain text: no model's tokenizer is involved (builtin.model unused).
TEXT_BUILTIN_DATASETS = ("builtin:vbench-prompts-synthetic",)


def load_yaml(path: str | Path) -> Any:
    path = Path(path)
    try:
        return yamlio.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"config file {path} is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8"
        ) from None
    except OSError as exc:
        raise UserError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"config file {path} is not valid YAML: {exc}") from None


def key_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _with_defaults(validator_class):
    """A validator that also writes each property's ``default`` into the instance."""
    from jsonschema import validators

    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


def _option(schema: dict, root: dict) -> str:
    """A oneOf alternative in words: 'an integer >= 1', "'auto'"."""
    if "const" in schema:
        return repr(schema["const"])
    if "$ref" in schema:
        if schema["$ref"].endswith("positive_integer"):
            return "a positive integer"
        return "a number > 0" if schema["$ref"].endswith("positive_number") else "a value as documented"
    if "enum" in schema:
        return "one of " + ", ".join(map(repr, schema["enum"]))
    kind = schema.get("type", "value")
    if "minimum" in schema:
        return f"an {kind} >= {schema['minimum']}" if kind == "integer" else f"a {kind} >= {schema['minimum']}"
    return f"a {kind}"


def _describe(error) -> str:
    """One line: where, what is wrong, what is allowed."""
    path = list(error.absolute_path)
    where = key_path(path)
    value = error.instance
    kind = error.validator
    hint = error.schema.get("description") if isinstance(error.schema, dict) else None
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(value) - set(allowed)) if isinstance(value, dict) else []
        unknown = ", ".join(repr(k) for k in extra)
        where_extra = key_path(path + [extra[0]]) if len(extra) == 1 else where
        if allowed:
            return f"{where_extra}: unknown key {unknown}; allowed keys here: {', '.join(allowed)}"
        return f"{where_extra}: unknown key {unknown}"
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return f"{key_path(path + [missing])}: required key is missing"
    if kind == "propertyNames":
        return f"{where}: {error.message}"
    if kind == "enum":
        return f"{where}: {value!r} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
    if kind == "const":
        return f"{where}: {value!r} is not allowed; expected {error.validator_value!r}"
    if kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return f"{where}: must be of type {expected}, got {type(value).__name__} {value!r}"
    if kind in (
        "minimum",
        "exclusiveMinimum",
        "maximum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "minProperties",
    ):
        text = {
            "minimum": f"must be >= {error.validator_value}",
            "exclusiveMinimum": f"must be > {error.validator_value}",
            "maximum": f"must be <= {error.validator_value}",
            "exclusiveMaximum": f"must be < {error.validator_value}",
            "multipleOf": f"must be a multiple of {error.validator_value}",
            "minLength": "must not be empty",
            "minProperties": f"needs at least {error.validator_value} entr{'y' if error.validator_value == 1 else 'ies'}",
        }[kind]
        return f"{where}: {text} (got {value!r})"
    if kind == "pattern":
        suffix = f" ({' '.join(hint.split())})" if hint else ""  # one line, whatever the YAML style
        return f"{where}: {value!r} does not have the expected form{suffix}"
    if kind == "oneOf" and isinstance(value, (int, float)) and not isinstance(value, bool):
        # A number that fails its numeric alternative (a rate of 0): say what is wrong with it.
        numeric = [e for e in error.context or [] if e.validator not in ("const", "type", "enum")]
        if numeric:
            return _describe(numeric[0])
    if kind == "oneOf":
        options = " or ".join(_option(o, error.schema) for o in error.validator_value)
        hint = " ".join((hint or "").split())
        # The options say what is allowed; a long description would bury them.
        suffix = f" ({hint})" if hint and len(hint) <= 120 else ""
        return f"{where}: {value!r} is not allowed; expected {options}{suffix}"
    return f"{where}: {error.message}"


def validate_schema(config: dict, schema: dict) -> list[str]:
    from jsonschema import Draft202012Validator

    validator = _with_defaults(Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    # Nested problems inside a oneOf are reported by the oneOf line itself.
    return list(dict.fromkeys(_describe(e) for e in errors))


def _source_kind(source: str) -> str:
    return source.split(":", 1)[0]


def _recipe_problems(where: str, recipe: dict, models: dict, datasets: dict) -> list[str]:
    """A recipe's tool and the keys only some tools take (mlperf_repro.quant.tools)."""
    from .quant.tools import DEFAULT_TOOL, TOOLS

    tool = TOOLS.get(recipe.get("tool") or DEFAULT_TOOL)
    if tool is None:
        return []  # the schema's enum reports it
    checkpoint = recipe.get("checkpoint")
    problems = []
    if "algorithms" in recipe and tool.name != "quark":
        problems.append(f"{where}.algorithms: only for tool quark (this recipe's tool is {tool.name})")
    problems += [
        f"{where}.{key}: only for tools quark and native (this recipe's tool is {tool.name})"
        for key in ("kv_cache", "calibration")
        if key in recipe and tool.name not in ("quark", "native")
    ]
    calibration_dataset = (recipe.get("calibration") or {}).get("dataset")
    if calibration_dataset is not None and calibration_dataset not in datasets:
        problems.append(
            f"{where}.calibration.dataset: '{calibration_dataset}' is not a datasets entry; known: {', '.join(datasets)}"
        )
    from .quant.schemes import SCHEMES

    scheme = SCHEMES.get(recipe.get("scheme"))
    if scheme is not None and scheme.tools is not None and tool.name not in scheme.tools:
        problems.append(
            f"{where}.tool: scheme {scheme.name} is produced by tool {' or '.join(scheme.tools)}, not {tool.name} "
            f"({scheme.description.split(';')[0]})"
        )
    elif tool.name == "native":
        problems += _native_recipe_problems(where, recipe)
    if tool.name != "native" and "layout" in recipe:
        problems.append(f"{where}.layout: only for tool native (tool {tool.name} writes its own layout)")
    if not tool.needs_checkpoint:
        extra = [key for key in ("checkpoint", "max_error") if key in recipe]
        if tool.name == "quark":
            extra = [key for key in extra if key != "max_error"]  # quark validates its output too
        return problems + [
            f"{where}.{key}: only for tool prequantized (this recipe's tool is {tool.name})" for key in extra
        ]
    if problems:
        return problems
    if checkpoint is None:
        return [f"{where}.checkpoint: tool {tool.name} needs the models entry that holds the quantized checkpoint"]
    if checkpoint not in models:
        return [f"{where}.checkpoint: '{checkpoint}' is not a models entry; known: {', '.join(models)}"]
    entry = models[checkpoint]
    if entry["source"].startswith("builtin:") or entry.get("allow_unverified"):
        return [f"{where}.checkpoint: models.{checkpoint} must be pinned by sha256 or sha256_manifest"]
    return []


def _pipeline_recipe_problems(where: str, name: str, recipe: dict) -> list[str]:
    """A text-to-video benchmark's model is a Diffusers pipeline: only the native writer
    quantizes it (its transformers' block Linears), with no calibration rows and no KV cache."""
    from .quant.formats import FORMATS
    from .quant.schemes import needs_calibration

    tool = recipe.get("tool") or "native"
    if tool != "native":
        return [
            f"{where}: recipe {name} uses tool {tool}, which quantizes LLM checkpoints; a Diffusers pipeline "
            "(text-to-video) is quantized by tool native only"
        ]
    if recipe.get("kv_cache"):
        return [f"{where}: recipe {name} sets kv_cache, but a diffusion transformer keeps no KV cache"]
    if needs_calibration(recipe):
        return [
            f"{where}: recipe {name}'s scheme {recipe['scheme']} needs static activation scales from calibration, "
            "which the quantize stage does not measure for a Diffusers pipeline (that data would be the "
            "transformers' inputs while generating from the benchmark's prompts); use fp8_dynamic (AMD's Wan 2.2 "
            "recipe: per-tensor activation scales at run time), mxfp4, mxfp4_weight_only or an mxfp6 scheme"
        ]
    fmt = next((f for f in FORMATS.values() if recipe["scheme"] in f.schemes), None)
    if fmt is not None and fmt.pipeline_writer is None:
        return [f"{where}: recipe {name}'s format {fmt.name} has no writer for a Diffusers pipeline"]
    return []


def _native_recipe_problems(where: str, recipe: dict) -> list[str]:
    """The layout the scheme can be written in, and calibration rows only where something is measured."""
    from .quant.schemes import SCHEMES, needs_calibration

    scheme = SCHEMES.get(recipe["scheme"])
    if scheme is None:
        return []  # a plugged-in format's scheme: its writer judges its keys
    problems = []
    layout = recipe.get("layout")
    if layout and layout not in scheme.layouts:
        problems.append(
            f"{where}.layout: scheme {scheme.name} cannot be written in layout {layout}; "
            f"it can be written in: {', '.join(scheme.layouts)}"
        )
    if "calibration" in recipe and not needs_calibration(recipe):
        problems.append(
            f"{where}.calibration: scheme {scheme.name} measures nothing on calibration rows (no static "
            "activation scales, no kv_cache); remove calibration, or use a static scheme (fp8, nvfp4) or kv_cache: fp8"
        )
    return problems


def check_references(config: dict) -> list[str]:
    """Cross-key rules: names that must exist, round rules, division rules."""
    problems: list[str] = []
    try:
        rules = load_round(config["round"])
    except UserError as exc:
        return [f"round: {exc}"]
    models, datasets = config["models"], config["datasets"]
    quantization = config.get("quantization") or {}
    test_scale = (config.get("test_scale") or {}).get("enabled", False)
    closed = config["division"] == "closed"

    for kind, entries, builtins in (
        ("models", models, BUILTIN_MODEL_KINDS),
        ("datasets", datasets, BUILTIN_DATASET_KINDS),
    ):
        for name, entry in entries.items():
            source = entry["source"]
            if source.startswith("builtin:"):
                builtin = source.split(":", 1)[1]
                if builtin not in builtins:
                    problems.append(
                        f"{kind}.{name}.source: unknown builtin '{builtin}'; allowed: "
                        + ", ".join(f"builtin:{b}" for b in builtins)
                    )
            elif not (entry.get("sha256") or entry.get("sha256_manifest") or entry.get("allow_unverified")):
                problems.append(
                    f"{kind}.{name}: no checksums; add sha256 (file -> hash) or sha256_manifest "
                    f"(or allow_unverified: true to record hashes on first use)"
                )
            if source.startswith("hf://") and "@" not in source:
                problems.append(f"{kind}.{name}.source: pin a revision: hf://org/name@<commit>")
            if "builtin" in entry and not source.startswith("builtin:"):
                problems.append(f"{kind}.{name}.builtin: only used with a builtin: source")
    for name, entry in datasets.items():
        builtin_model = (entry.get("builtin") or {}).get("model")
        if entry["source"].startswith("builtin:") and entry["source"] not in TEXT_BUILTIN_DATASETS:
            if builtin_model is None:
                problems.append(
                    f"datasets.{name}.builtin.model: required for builtin datasets "
                    f"(the model whose tokenizer tokenises the prompts); known models: {', '.join(models)}"
                )
            elif builtin_model not in models:
                problems.append(
                    f"datasets.{name}.builtin.model: '{builtin_model}' is not a models entry; "
                    f"known: {', '.join(models)}"
                )

    for name, recipe in quantization.items():
        problems += _recipe_problems(f"quantization.{name}", recipe, models, datasets)

    for name, bench in config["benchmarks"].items():
        where = f"benchmarks.{name}"
        official = bench["mlperf_benchmark"]
        runnable = [b for b in rules.benchmark_names if rules.benchmark(b).runnable]
        if official not in rules.benchmark_names:
            problems.append(
                f"{where}.mlperf_benchmark: '{official}' is not a {rules.name} benchmark; "
                f"the workflow runs: {', '.join(runnable)}"
            )
        elif official not in runnable:
            problems.append(
                f"{where}.mlperf_benchmark: the workflow cannot run {official} yet (its rules are known, so "
                f"`mlperf-repro check` judges a tree that holds it); the workflow runs: {', '.join(runnable)}"
            )
        if bench["model"] not in models:
            problems.append(f"{where}.model: '{bench['model']}' is not a models entry; known: {', '.join(models)}")
        if bench["dataset"] not in datasets:
            problems.append(
                f"{where}.dataset: '{bench['dataset']}' is not a datasets entry; known: {', '.join(datasets)}"
            )
        recipe = bench.get("quantization")
        if recipe is not None and recipe not in quantization:
            known = ", ".join(quantization) or "none defined"
            problems.append(f"{where}.quantization: '{recipe}' is not a quantization entry; known: {known}")
        elif recipe is not None and official in rules.benchmark_names:
            if rules.benchmark(official).facts.get("task") == "text-to-video":
                problems += _pipeline_recipe_problems(f"{where}.quantization", recipe, quantization[recipe])
        if bench.get("accuracy_target") == "measured" and recipe is None:
            problems.append(
                f"{where}.accuracy_target: 'measured' compares against the unquantized model, "
                f"so it needs a quantization recipe; use 'reference' instead"
            )
        problems += _open_accuracy_problems(where, bench, closed, rules, official)
        release = bench.get("livecodebench_release")
        if release is not None:
            has_release = official in rules.benchmark_names and rules.benchmark(official).facts.get("dataset", {}).get(
                "livecodebench_release"
            )
            if not has_release:
                problems.append(
                    f"{where}.livecodebench_release: {official} scores no LiveCodeBench items "
                    f"(its rules table names no LiveCodeBench release); remove the key"
                )
            elif release not in datasets:
                problems.append(
                    f"{where}.livecodebench_release: '{release}' is not a datasets entry; known: {', '.join(datasets)}"
                )
        if closed:
            if name != official:
                problems.append(
                    f"{where}: in the closed division the result name must be the benchmark name '{official}'"
                )
            if bench.get("accuracy_target") == "measured":
                problems.append(
                    f"{where}.accuracy_target: the closed division uses the round's reference targets; "
                    f"set it to 'reference'"
                )

    for system, entry in config["systems"].items():
        for bench_name, scenarios in entry["benchmarks"].items():
            where = f"systems.{system}.benchmarks.{bench_name}"
            bench = config["benchmarks"].get(bench_name)
            if bench is None:
                problems.append(
                    f"{where}: '{bench_name}' is not a benchmarks entry; known: {', '.join(config['benchmarks'])}"
                )
                continue
            if bench["mlperf_benchmark"] not in rules.benchmark_names:
                continue
            facts = rules.benchmark(bench["mlperf_benchmark"])
            for scenario in scenarios:
                if scenario not in facts.scenarios:
                    problems.append(
                        f"{where}.{scenario}: {bench['mlperf_benchmark']} has no {scenario} scenario; "
                        f"allowed: {', '.join(facts.scenarios)}"
                    )
                else:
                    problems += _auto_target_problems(f"{where}.{scenario}", scenario, scenarios, facts)
                    problems += _repeat_problems(f"{where}.{scenario}", scenarios[scenario])
            if closed:
                missing = [s for s in facts.required_scenarios if s not in scenarios]
                if missing:
                    problems.append(f"{where}: the closed division requires scenario(s) {', '.join(missing)}")
        problems += _endpoint_problems(system, entry["engine"])
        if "launch" in entry["engine"] and entry["engine"]["backend"] != "diffusers":
            problems.append(
                f"systems.{system}.engine.launch: only backend diffusers reads it; backend "
                f"{entry['engine']['backend']} "
                + (
                    "sets how its servers start in engine.endpoints.launch"
                    if entry["engine"]["backend"] == "endpoints"
                    else "runs in each LoadGen process (backend endpoints with launch: shared shares one server)"
                )
            )
        problems += _software_problems(system, entry.get("software") or {})
        problems += _kubernetes_image_problems(system, entry)
        if (entry["engine"].get("endpoints") or {}).get("launch") == "kubernetes":
            measured = [
                b
                for b in entry["benchmarks"]
                if (config["benchmarks"].get(b) or {}).get("accuracy_target") == "measured"
            ]
            if measured:
                problems.append(
                    f"systems.{system}.engine.endpoints.launch: benchmark(s) {', '.join(measured)} use "
                    f"accuracy_target: measured, whose reference runs vLLM inside the run pod, which "
                    f"holds no GPUs with launch: kubernetes; use accuracy_target: reference"
                )
        problems += _screening_problems(system, entry)
        if entry["engine"]["backend"] != "endpoints":
            for key in ("number_of_nodes", "accelerators_per_node", "accelerator_model_name"):
                if entry["description"].get(key) == "auto":
                    problems.append(
                        f"systems.{system}.description.{key}: 'auto' takes the value from "
                        f"engine.endpoints, which only backend: endpoints has; give the value"
                    )
        if closed and test_scale:
            problems.append(
                "test_scale.enabled: test-scale runs cannot form a closed submission; "
                "set division: open or disable test_scale"
            )
    problems += _scaling_problems(config)
    return problems


def _auto_target_problems(where: str, scenario: str, scenarios: dict, facts) -> list[str]:
    """target_qps: auto needs a search that can work (mlperf_repro.find_performance)."""
    from .find_performance import AUTO, LATENCY_SCENARIOS, SCENARIOS

    settings = scenarios[scenario]
    if settings["target_qps"] != AUTO:
        if "start_qps" in settings:
            return [f"{where}.start_qps: only used with target_qps: auto (the search's starting rate); remove it"]
        return []
    if scenario not in SCENARIOS:
        return [f"{where}.target_qps: auto is implemented for {', '.join(SCENARIOS)}, not {scenario}; give a number"]
    if scenario not in LATENCY_SCENARIOS:
        return []
    limits = facts.latency_limits_ms(scenario) or {}
    if not ({"ttft", "tpot"} & set(limits)):
        return [
            f"{where}.target_qps: auto searches the highest rate within the round's TTFT/TPOT limits, and the "
            f"rules table gives none for {facts.name} {scenario}; give a number"
        ]
    if "start_qps" not in settings and "Offline" not in scenarios:
        return [
            f"{where}.start_qps: a {scenario} search with target_qps auto starts from start_qps or from the "
            f"Offline scenario of the same system and benchmark, and there is none; set start_qps"
        ]
    return []


def _repeat_problems(where: str, settings: dict) -> list[str]:
    """packaged_repeat names one of the scenario's repeats."""
    repeats, packaged = int(settings.get("repeats", 1)), settings.get("packaged_repeat")
    if packaged is not None and int(packaged) > repeats:
        return [
            f"{where}.packaged_repeat: {packaged} is not one of the scenario's repeats "
            f"(repeats: {repeats}); give 1 to {repeats}"
        ]
    return []


def _scaling_problems(config: dict) -> list[str]:
    study = config.get("scaling_study")
    if not study:
        return []
    system = config["systems"].get(study["system"])
    if system is None:
        return [
            f"scaling_study.system: '{study['system']}' is not a systems entry; known: {', '.join(config['systems'])}"
        ]
    if system["engine"]["backend"] != "endpoints":
        return [
            f"scaling_study.system: '{study['system']}' uses backend {system['engine']['backend']}; "
            f"a scaling study needs backend: endpoints"
        ]
    scenarios = system["benchmarks"].get(study["benchmark"])
    if scenarios is None:
        return [
            f"scaling_study.benchmark: system '{study['system']}' does not run '{study['benchmark']}'; "
            f"it runs: {', '.join(system['benchmarks'])}"
        ]
    problems = [
        f"scaling_study.scenarios: {s} is not configured for {study['system']} / {study['benchmark']}; "
        f"configured: {', '.join(scenarios)}"
        for s in study.get("scenarios") or []
        if s not in scenarios
    ]
    total = len((system["engine"].get("endpoints") or {}).get("list") or [])
    too_many = [n for n in study.get("endpoint_counts") or [] if n > total]
    if too_many:
        problems.append(f"scaling_study.endpoint_counts: {too_many} exceed the {total} endpoint(s) listed")
    return problems


# Marks a value an example or an imported config could not know (a checkpoint commit, a container
# digest): validation lets it through, preflight refuses to run until it is replaced.
PLACEHOLDER = "TODO:"

# A content address in a value: a sha256 digest (a container's, "sha256:<64 hex>") or a commit
# ("@<40 hex>" after a model or dataset repository, or a value of exactly 40 or 64 hex digits).
CONTENT_ADDRESS = re.compile(
    r"(?:sha256:|@)([0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?)(?![0-9a-fA-F])|^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$"
)


def made_up_hex(digits: str) -> bool:
    """Whether a 40- or 64-digit hex address was typed, not computed: fewer than 8 distinct
    digits, or a pattern of at most 16 digits repeated (all zeros with a few digits at the end,
    "deadbeef" x 8, "0123456789abcdef" x 4). A real sha256 or commit is one of the first kind
    with probability below 1e-10 and of the second below 1e-20."""
    digits = digits.lower()
    if len(set(digits)) < 8:
        return True
    return any(digits == (digits[:period] * (len(digits) // period + 1))[: len(digits)] for period in range(1, 17))


def is_placeholder(value: str) -> bool:
    """``value`` is still a placeholder: it holds ``TODO:`` or a made-up digest or commit
    (:func:`made_up_hex`). Preflight refuses such a value (check/preflight.py ``placeholders``);
    an offline bundle leaves its artifact out, listed as missing."""
    if PLACEHOLDER in value:
        return True
    return any(made_up_hex(m.group(1) or m.group(2)) for m in CONTENT_ADDRESS.finditer(value))


# A container reference Snakemake's apptainer support can pull, pinned by content digest: a tag
# (":latest", ":v0.10") can be moved to other bytes, which would silently change the software.
CONTAINER_SCHEMES = ("docker://", "oras://", "library://")
CONTAINER_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")


def container_problem(where: str, image: str) -> str | None:
    """Why an image reference is not usable, or None (a placeholder is preflight's to refuse)."""
    if PLACEHOLDER in image:
        return None
    if not image.startswith(CONTAINER_SCHEMES):
        return (
            f"{where}: {image!r} needs a scheme apptainer pulls from: {', '.join(s + '...' for s in CONTAINER_SCHEMES)}"
        )
    if not CONTAINER_DIGEST.match(image.split("://", 1)[1]):
        return (
            f"{where}: {image!r} is not pinned by digest; write it as <scheme>://<repo>@sha256:<64 hex digits> "
            f"(get the digest with `skopeo inspect docker://<repo>:<tag>` or `docker buildx imagetools inspect`)"
        )
    return None


def _software_problems(system: str, software: dict) -> list[str]:
    image = software.get("container")
    problem = container_problem(f"systems.{system}.software.container", image) if image else None
    return [problem] if problem else []


# srun flags that bind GPUs to tasks; with allocation screening the head assigns them instead.
SLURM_GPU_BINDING_FLAGS = ("--gpus-per-task", "--gpu-bind", "--gres", "--gpus", "--gpus-per-node", "-G")


def _screening_problems(system: str, entry: dict) -> list[str]:
    screening = entry.get("gpu_screening") or {}
    if not screening.get("enabled"):
        return []
    where = f"systems.{system}.gpu_screening"
    engine, desc = entry["engine"], entry["description"]
    endpoints = engine.get("endpoints") or {}
    if engine["backend"] == "endpoints":
        launch = endpoints.get("launch", "external")
        if launch in ("slurm", "slurm-shared"):
            binding = [
                a
                for a in (endpoints.get("allocation") or {}).get("srun_args", [])
                if a.split("=")[0] in SLURM_GPU_BINDING_FLAGS
            ]
            if binding:
                return [
                    f"systems.{system}.engine.endpoints.allocation.srun_args: {', '.join(binding)} lets SLURM "
                    f"hand out the GPUs, but with gpu_screening the run gives each server its screened GPUs "
                    f"itself; remove the flag(s)"
                ]
            return []
        if launch == "kubernetes":
            return [
                f"{where}.enabled: GPU screening is not implemented for launch: kubernetes (the server pods get "
                f"their GPUs from the device plugin); disable it, or screen the nodes with "
                f"python -m mlperf_repro.cluster.screen in the server image"
            ]
        if launch not in ("local", "shared"):
            return [
                f"{where}.enabled: the servers of launch: external run elsewhere, so this run host has no GPUs "
                f"to screen; screen the nodes where the servers start (python -m mlperf_repro.cluster.screen) "
                f"or disable it"
            ]
        expected = sum(
            e.get("accelerator_count", 1) for e in endpoints.get("list") or [] if e.get("accelerator", "N/A") != "N/A"
        )
    else:
        expected = desc["accelerators_per_node"] if isinstance(desc["accelerators_per_node"], int) else 0
    if expected == 0:
        return [
            f"{where}.enabled: the system has no accelerators (accelerators_per_node 0), nothing to screen; disable it"
        ]
    problems = []
    minimum = screening.get("min_devices")
    if minimum is not None and minimum > expected:
        problems.append(f"{where}.min_devices: {minimum} is more than the {expected} accelerator(s) the run host has")
    args = engine.get("engine_args") or {}
    parallel = int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))
    if screening.get("policy") == "exclude" and parallel > 1 and (minimum or max(1, expected - 1)) < parallel:
        problems.append(
            f"{where}.min_devices: with policy exclude a run may be left with "
            f"{minimum or max(1, expected - 1)} GPU(s), fewer than tensor_parallel_size x "
            f"pipeline_parallel_size = {parallel}; set min_devices to {parallel} or more (or use "
            f"policy refuse)"
        )
    return problems


# Accelerator vendors (first word of allocation.accelerator) and the extended resource their
# Kubernetes device plugin offers.
GPU_RESOURCE_OF_VENDOR = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}


def kubernetes_gpu_resource(allocation: dict, settings: dict) -> str | None:
    """The extended resource each server pod requests accelerator_count of; None when the
    servers have no accelerators or the vendor is unknown (the config check names that)."""
    if allocation.get("accelerator", "N/A") == "N/A" or allocation.get("accelerator_count", 1) == 0:
        return None
    if settings.get("gpu_resource"):
        return settings["gpu_resource"]
    vendor = allocation["accelerator"].split()[0].lower()
    return GPU_RESOURCE_OF_VENDOR.get(vendor)


def _kubernetes_launch_problems(system: str, engine: dict) -> list[str]:
    where = f"systems.{system}.engine.endpoints"
    endpoints = engine["endpoints"]
    allocation, settings = endpoints["allocation"], endpoints.get("kubernetes")
    if not settings:
        return [
            f"{where}.kubernetes: launch: kubernetes needs kubernetes.model_volume (the claim with the models "
            f"and where the run pod mounts it), so the server pods can read the checkpoint"
        ]
    problems = []
    if allocation.get("srun_args"):
        problems.append(f"{where}.allocation.srun_args: only used with launch: slurm or slurm-shared; remove it")
    if (
        allocation.get("accelerator", "N/A") != "N/A"
        and allocation.get("accelerator_count", 1) > 0
        and kubernetes_gpu_resource(allocation, settings) is None
    ):
        problems.append(
            f"{where}.kubernetes.gpu_resource: cannot tell the GPU resource from accelerator "
            f"{allocation['accelerator']!r} (known vendors: AMD, NVIDIA); set it to "
            f"{' or '.join(GPU_RESOURCE_OF_VENDOR.values())}"
        )
    args = engine.get("engine_args") or {}
    parallel = int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))
    if kubernetes_gpu_resource(allocation, settings) and parallel != allocation.get("accelerator_count", 1):
        problems.append(
            f"{where}.allocation.accelerator_count: each server container gets exactly "
            f"{allocation.get('accelerator_count', 1)} GPU(s), but tensor_parallel_size x "
            f"pipeline_parallel_size = {parallel}; make them equal"
        )
    return problems


def _kubernetes_image_problems(system: str, entry: dict) -> list[str]:
    endpoints = entry["engine"].get("endpoints") or {}
    settings = endpoints.get("kubernetes")
    if entry["engine"]["backend"] != "endpoints" or endpoints.get("launch") != "kubernetes" or not settings:
        return []
    image = settings.get("image")
    where = f"systems.{system}.engine.endpoints.kubernetes.image"
    if not image:
        return [
            f"systems.{system}.software.container: launch: kubernetes runs the servers in this image; set it "
            f"to the digest-pinned vLLM image (docker://<repo>@sha256:<64 hex digits>), or set {where}"
        ]
    if not image.startswith("docker://"):
        return [
            f"{where}: {image!r}: the kubelet pulls server images from a registry; launch: kubernetes needs "
            f"a docker:// reference (from systems.{system}.software.container unless set here)"
        ]
    problem = container_problem(where, image)
    return [problem] if problem else []


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _endpoint_problems(system: str, engine: dict) -> list[str]:
    where = f"systems.{system}.engine"
    endpoints = engine.get("endpoints")
    if engine["backend"] != "endpoints":
        return [f"{where}.endpoints: only used with backend: endpoints"] if endpoints else []
    if not endpoints:
        return [
            f"{where}.endpoints: backend endpoints needs the servers to send queries to "
            f"(endpoints.list with name, host, port)"
        ]
    launch = endpoints.get("launch", "external")
    if endpoints.get("kubernetes") and launch != "kubernetes":
        return [f"{where}.endpoints.kubernetes: only used with launch: kubernetes (launch is {launch})"]
    if launch in ALLOCATION_LAUNCHES:
        if not endpoints.get("allocation"):
            return [
                f"{where}.endpoints.allocation: launch: {launch} starts the servers in the run's allocation; "
                f"say how many nodes (allocation.nodes) and servers per node"
            ]
        if endpoints.get("list") and endpoints["list"] != allocation_endpoints(endpoints["allocation"], launch):
            return [f"{where}.endpoints.list: with launch: {launch} the list is generated from allocation; remove it"]
        allocation = endpoints["allocation"]
        if "servers" in allocation:
            nodes, per_node = allocation["nodes"], allocation.get("servers_per_node", 1)
            low, high = (nodes - 1) * per_node + 1, nodes * per_node
            if not low <= allocation["servers"] <= high:
                return [
                    f"{where}.endpoints.allocation.servers: {allocation['servers']} servers on {nodes} node(s) of "
                    f"at most {per_node} (servers_per_node) must be {low} to {high}, so that every node runs at "
                    "least one; change nodes or servers_per_node"
                ]
        server_job = sorted(set(SERVER_JOB_KEYS) & set(endpoints["allocation"]))
        if server_job and launch != "slurm-shared":
            return [
                f"{where}.endpoints.allocation.{key}: only used with launch: slurm-shared (the server job's "
                f"sbatch settings; launch is {launch})"
                for key in server_job
            ]
        if launch == "kubernetes":
            return _kubernetes_launch_problems(system, engine)
    elif endpoints.get("allocation"):
        return [
            f"{where}.endpoints.allocation: only used with launch: slurm, slurm-shared or kubernetes (launch is {launch})"
        ]
    if not endpoints.get("list"):
        return [
            f"{where}.endpoints.list: name the servers (name, host, port for each), or use launch: slurm "
            f"with allocation"
        ]
    problems = []
    entries = endpoints["list"]
    for kind, values in (
        ("name", [e["name"] for e in entries]),
        ("host:port", [f"{e['host']}:{e['port']}" for e in entries if e["port"]]),
    ):
        duplicates = sorted({v for v in values if values.count(v) > 1})
        if duplicates:
            problems.append(f"{where}.endpoints.list: {kind} {', '.join(duplicates)} appears more than once")
    if launch in ("local", "shared"):
        remote = [e["name"] for e in entries if e["host"] not in LOCAL_HOSTS]
        if remote:
            problems.append(
                f"{where}.endpoints.launch: '{launch}' starts servers on this host, but endpoint(s) "
                f"{', '.join(remote)} name another host; use launch: external for those"
            )
    unset = [e["name"] for e in entries if not e["port"]]
    if unset and launch != "shared":
        problems.append(
            f"{where}.endpoints.list: port 0 (endpoint(s) {', '.join(unset)}) means a free port chosen at start, "
            f"which only launch: shared does; give the port the server listens on"
        )
    if "idle_timeout_s" in endpoints and launch not in ("shared", "slurm-shared"):
        problems.append(
            f"{where}.endpoints.idle_timeout_s: only used with launch: shared or slurm-shared (launch is {launch})"
        )
    minimum = (engine.get("dispatch") or {}).get("min_healthy_endpoints", 1)
    if minimum > len(entries):
        problems.append(
            f"{where}.dispatch.min_healthy_endpoints: {minimum} is more than the {len(entries)} endpoint(s) listed"
        )
    return problems


# Generated endpoints of a launch: slurm system name their node by index; the run replaces
# this host with the allocation's n-th host name.
ALLOCATION_HOST_PREFIX = "slurm-node-"
# The same for launch: kubernetes: the run replaces it with the DNS name of server pod n.
KUBERNETES_HOST_PREFIX = "k8s-server-pod-"
ALLOCATION_LAUNCHES = {
    "slurm": ALLOCATION_HOST_PREFIX,
    "slurm-shared": ALLOCATION_HOST_PREFIX,
    "kubernetes": KUBERNETES_HOST_PREFIX,
}
# allocation keys of the server job that launch: slurm-shared submits itself.
SERVER_JOB_KEYS = ("time_min", "queue_timeout_s", "sbatch_args")


def allocation_endpoints(allocation: dict, launch: str = "slurm") -> list[dict]:
    """The endpoint list a launch: slurm, slurm-shared or kubernetes system stands for (hosts
    filled in at run time): ``servers_per_node`` on each node, node by node, the first
    ``servers`` of them where the allocation says (87 engines on 11 nodes of 8: 7 on the last)."""
    prefix = ALLOCATION_LAUNCHES[launch]
    every = [
        {
            "name": f"node{i}-{j}",
            "host": f"{prefix}{i}",
            "port": allocation.get("base_port", 8000) + j,
            "node": f"node{i}",
            "accelerator": allocation.get("accelerator", "N/A"),
            "accelerator_count": allocation.get("accelerator_count", 1),
            "max_concurrency": allocation.get("max_concurrency", 256),
        }
        for i in range(allocation["nodes"])
        for j in range(allocation.get("servers_per_node", 1))
    ]
    return every[: allocation.get("servers")]


def _generate_allocation_lists(config: dict) -> None:
    for entry in (config.get("systems") or {}).values():
        endpoints = ((entry or {}).get("engine") or {}).get("endpoints") or {}
        launch = endpoints.get("launch")
        if launch in ALLOCATION_LAUNCHES and endpoints.get("allocation") and not endpoints.get("list"):
            endpoints["list"] = allocation_endpoints(endpoints["allocation"], launch)
        # The server pods run the system's image; the run job gets it with its engine settings.
        settings = endpoints.get("kubernetes")
        if launch == "kubernetes" and settings and not settings.get("image"):
            container = ((entry or {}).get("software") or {}).get("container")
            if container:
                settings["image"] = container


def with_registered_schemes(schema: dict) -> dict:
    """The schema with ``quantization.<recipe>.scheme`` limited to the schemes of the
    registered quantization formats (mlperf_repro.quant.formats), the one list of them; a
    wrong scheme is then reported like any other enum, with its key path and the allowed values."""
    from .quant.formats import schemes

    try:
        scheme = schema["properties"]["quantization"]["additionalProperties"]["properties"]["scheme"]
    except (KeyError, TypeError):
        raise UserError(
            "the config schema has no quantization.<recipe>.scheme property; the quantization formats "
            "cannot be checked against it (see workflow/schemas/config.schema.yaml)"
        ) from None
    scheme["enum"] = list(schemes())
    return schema


def with_registered_launchers(schema: dict, launchers: Iterable[str]) -> dict:
    """The schema with ``engine.endpoints.launch`` limited to the registered server launchers.
    The registry (mlperf_repro.launch.LAUNCHERS) sits above this module in the layers, so the
    caller hands its names in (the workflow and the plan view do)."""
    endpoints = schema["properties"]["systems"]["additionalProperties"]["properties"]["engine"]["properties"]
    endpoints["endpoints"]["properties"]["launch"]["enum"] = sorted(launchers)
    return schema


def _open_accuracy_problems(where: str, bench: dict[str, Any], closed: bool, rules, official: str) -> list[str]:
    """benchmarks.<name>.open_accuracy: an open-division text-to-video stand-in's metrics, judged
    against the unquantized pipeline (accuracy_target: measured), at least one of them judged."""
    entry = bench.get("open_accuracy")
    if not entry:
        return []
    from .accuracy.video_quality import OPEN_METRICS

    key = f"{where}.open_accuracy"
    problems = []
    if closed:
        problems.append(
            f"{key}: the closed division is judged by the round's score (vbench_score for wan-2.2-t2v-a14b); "
            "open_accuracy is for open-division stand-ins"
        )
    if official in rules.benchmark_names and rules.benchmark(official).facts.get("task") != "text-to-video":
        problems.append(f"{key}: only a text-to-video benchmark has weight-free metrics; {official} has its own score")
    if bench.get("accuracy_target") != "measured":
        problems.append(
            f"{key}: needs accuracy_target: measured (the reference run renders the unquantized pipeline's videos, "
            "which the metrics compare with)"
        )
    if not any(OPEN_METRICS[m].target for m in entry.get("metrics", []) if m in OPEN_METRICS):
        judged = ", ".join(m for m, metric in OPEN_METRICS.items() if metric.target)
        problems.append(f"{key}.metrics: name at least one judged metric ({judged}); the others are only reported")
    return problems


def anchor_project_files(config: dict, project_dir: Path, workdir: Path = Path(".")) -> list[str]:
    """Relative paths are read from the workflow's folder (Snakemake's --directory). A relative
    ``file://`` source or ``sha256_manifest`` that is not there but is in the project's own folder
    (the demo checkpoints shipped in artifacts/, read by a config run with --directory elsewhere)
    becomes that absolute path, in place; returns the keys changed."""
    changed = []
    project = project_dir.resolve()
    if project == workdir.resolve():
        return changed
    for kind in ("models", "datasets"):
        for name, entry in (config.get(kind) or {}).items():
            if not isinstance(entry, dict):
                continue
            source = entry.get("source")
            if isinstance(source, str) and source.startswith("file://"):
                absolute = _in_project(source[len("file://") :], project, workdir)
                if absolute:
                    entry["source"] = f"file://{absolute}"
                    changed.append(f"{kind}.{name}.source")
            manifest = entry.get("sha256_manifest")
            if isinstance(manifest, str):
                absolute = _in_project(manifest, project, workdir)
                if absolute:
                    entry["sha256_manifest"] = str(absolute)
                    changed.append(f"{kind}.{name}.sha256_manifest")
    return changed


def _in_project(raw: str, project: Path, workdir: Path) -> Path | None:
    path = Path(raw)
    if not raw or path.is_absolute() or (workdir / path).exists() or not (project / path).exists():
        return None
    return project / path


def validate_config(config: dict, schema_path: str | Path, *, launchers: Iterable[str] | None = None) -> dict:
    """Validate in place (filling defaults) and return the config; raise one UserError listing
    every problem. ``launchers``: the registered server launcher names, which
    ``engine.endpoints.launch`` must be one of (unchecked when None). The project's own files
    named by relative paths are found from any working folder (:func:`anchor_project_files`;
    the project: the folder holding workflow/schemas/ of ``schema_path``)."""
    if not isinstance(config, dict) or not config:
        raise UserError("the config is empty; start from config/config.yaml")
    schema = with_registered_schemes(load_yaml(schema_path))
    if launchers is not None:
        schema = with_registered_launchers(schema, launchers)
    problems = validate_schema(config, schema)
    if not problems:
        _generate_allocation_lists(config)
        problems = check_references(config)
    if problems:
        plural = "s" if len(problems) > 1 else ""
        raise UserError(f"invalid config ({len(problems)} problem{plural}):\n  " + "\n  ".join(problems))
    anchor_project_files(config, Path(schema_path).resolve().parents[2])
    return config
