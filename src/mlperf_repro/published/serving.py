"""The serving setup a submitter's published code states for one result.

A result folder's README.md carries the command that produced it; for the harness AMD
publishes (and partners reuse: ``harness_llm`` with one YAML per benchmark and scenario,
run as ``main.py --config-path <dir> --config-name <name> key=value ...``) that command names
the YAML file. The harness merges its ``harness_llm/common/config.yaml`` under that file and
the command's ``key=value`` overrides on top (OmegaConf), so the reader does the same and
returns the engine arguments, environment, sampling, parallel layout and checkpoint that ran.

Readers are registered in :data:`READERS` (a function of the submitter folder and the result
folder that returns a :class:`ServingSetup` or None); a harness with another layout plugs in
there.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import UserError
from ..generation import GenerationSettings, sampling_values


@dataclass
class ServingSetup:
    harness: str  # which reader understood it
    source: Path  # the harness config file
    backend: str  # vllm, sglang, ...
    engine_args: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    # tensor_parallel_size, devices (GPUs the run used), servers (engines)
    parallel: dict[str, int] = field(default_factory=dict)
    checkpoint: str | None = None  # the model path the engine loaded
    # Harness settings with no engine meaning (dataset paths, sorting, warm-up, ...), as written.
    harness_settings: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    # Files the setup was read from (the YAML, the common defaults, the README).
    files: list[Path] = field(default_factory=list)
    # This workflow's own engine section as a run recorded it (provenance), when that is the source.
    config_engine: dict[str, Any] | None = None
    # The LoadGen head that ran it (this workflow's endpoints backend): dispatch worker
    # processes (0: one process) and its tick; published harnesses state none.
    head: dict[str, Any] = field(default_factory=dict)

    def flat(self) -> dict[str, str]:
        """Namespaced key -> value text, for a key-by-key comparison."""
        out: dict[str, str] = {"serving.backend": self.backend}
        for prefix, values in (
            ("serving.engine", self.engine_args),
            ("serving.env", self.env),
            ("serving.sampling", self.sampling),
            ("serving.parallel", self.parallel),
            ("serving.head", self.head),
        ):
            for key, value in values.items():
                out[f"{prefix}.{key}"] = _text(value)
        if self.checkpoint:
            out["serving.checkpoint"] = self.checkpoint
        return out


def _text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(_plain(value), sort_keys=True)
    return str(value)


def _plain(value: Any) -> Any:
    """JSON's own types all the way down (YAML also makes dates, and keys of any type)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _set_dotted(config: dict, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = config
    for key in keys[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key), dict) or key not in node else {}
    node[keys[-1]] = value


def _load_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(errors="replace")) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not readable YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a harness config is a YAML mapping")
    return data


# --- the AMD harness_llm layout --------------------------------------------------------------

MAIN_COMMAND = re.compile(r"python3?\s+\S*main\.py\b")
# Partners that reuse the harness through its submission wrapper (``submission.py --model
# <benchmark> experiment --scenario S --model-conf <dir>/<name>.yaml --user-conf ...``) name the
# same YAML by its path; the wrapper runs main.py on it with no overrides.
WRAPPER_COMMAND = re.compile(r"python3?\s+\S*submission\.py\b")


def _override_value(text: str) -> Any:
    """A ``key=value`` override's value as the harness reads it (YAML); text where it is not YAML."""
    if not text:
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


@dataclass
class HarnessCommand:
    config_path: str
    config_name: str
    backend: str | None
    overrides: dict[str, Any]
    text: str
    scenario: str | None = None  # where the command names one (a README may list every scenario's)


def harness_commands(readme: Path) -> list[HarnessCommand]:
    """Every ``main.py --config-path ... --config-name ...`` command in a README, and every
    ``submission.py ... --model-conf <file>.yaml`` wrapper command (its shell continuation
    lines joined)."""
    if not readme.is_file():
        return []
    joined = re.sub(r"\\\s*\n", " ", readme.read_text(errors="replace"))
    commands = []
    for line in joined.splitlines():
        match = MAIN_COMMAND.search(line) or WRAPPER_COMMAND.search(line)
        if not match:
            continue
        try:
            words = shlex.split(line[match.end() :], comments=True)
        except ValueError:
            continue
        options: dict[str, str] = {}
        overrides: dict[str, Any] = {}
        index = 0
        while index < len(words):
            word = words[index]
            if word.startswith("--"):
                name, _, value = word[2:].partition("=")
                if not value and index + 1 < len(words) and not words[index + 1].startswith("--"):
                    index += 1
                    value = words[index]
                options[name.replace("-", "_")] = value
            elif "=" in word:
                key, value = word.split("=", 1)
                overrides[key] = _override_value(value)
            index += 1
        model_conf = options.get("model_conf", "")
        if "config_name" not in options and model_conf.endswith((".yaml", ".yml")):
            folder, _, name = model_conf.rpartition("/")
            options.update(config_path=folder or ".", config_name=name.rsplit(".", 1)[0])
        if "config_path" in options and "config_name" in options:
            commands.append(
                HarnessCommand(
                    options["config_path"],
                    options["config_name"],
                    options.get("backend"),
                    overrides,
                    line.strip(),
                    options.get("scenario"),
                )
            )
    return commands


def result_commands(result_folder: Path) -> list[HarnessCommand]:
    """The performance commands of a result folder's README, those of its own scenario first
    when the README runs several scenarios."""
    commands = [c for c in harness_commands(result_folder / "README.md") if c.overrides.get("test_mode") != "accuracy"]
    scenario = result_folder.name.lower()
    if any(c.scenario for c in commands):
        commands = [c for c in commands if (c.scenario or "").lower() == scenario]
    return commands


def _find_config(code_roots: list[Path], config_path: str, config_name: str) -> Path | None:
    """The YAML a container path names, inside the published code: the path's tail after its
    ``code/`` (or ``src/``) folder, under each code root."""
    parts = [p for p in config_path.split("/") if p]
    tails = [parts[i + 1 :] for i, part in enumerate(parts) if part in ("code", "src")] or [parts[-1:]]
    for root in code_roots:
        for tail in tails:
            candidate = root.joinpath(*tail, f"{config_name}.yaml")
            if candidate.is_file():
                return candidate
            # Published trees made on case-insensitive storage name files in another case
            # than the command (offline_MI355X.yaml for --config-name offline_mi355x).
            folder = root.joinpath(*tail)
            if folder.is_dir():
                for other in sorted(folder.glob("*.yaml")):
                    if other.name.lower() == f"{config_name}.yaml".lower():
                        return other
    return None


# OmegaConf's interpolations and MISSING markers are not values a partner can use.
def _clean(values: dict) -> dict:
    return {k: v for k, v in values.items() if v is not None and v != "MISSING"}


# Keys of vllm_engine_config that are not vLLM arguments but the harness's own (resolved here).
CAPTURE_RANGE = "cudagraph_capture_range"


MAX_CAPTURE_SIZES = 10_000  # engines capture a few hundred graphs; more is a typo, not a setting


def capture_sizes(spec: Any) -> list[int]:
    """The harness's cudagraph_capture_range: ``[[start, stop, step], extra, ...]`` -> sizes."""
    if not isinstance(spec, list):
        raise UserError(f"{CAPTURE_RANGE}: {spec!r} is not a list of [start, stop, step] ranges and sizes")
    sizes: set[int] = set()
    for item in spec:
        if isinstance(item, list) and len(item) == 3 and all(_is_int(v) for v in item) and item[2] != 0:
            span = range(item[0], item[1], item[2])
            if len(sizes) + len(span) > MAX_CAPTURE_SIZES:
                raise UserError(f"{CAPTURE_RANGE}: {item!r} makes more than {MAX_CAPTURE_SIZES} sizes")
            sizes.update(span)
        elif _is_int(item):
            sizes.add(item)
        else:
            raise UserError(
                f"{CAPTURE_RANGE}: {item!r} is neither [start, stop, step] (whole numbers, a step other than 0) nor a size"
            )
    return sorted(sizes)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Values the importer and compare compute with: each must be a number where a harness config
# states it (section -> key -> type).
NUMBERS = {
    "engine": {"tensor_parallel_size": int, "tp_size": int, "max_num_seqs": int},
    "sampling": {"temperature": float, "top_p": float, "top_k": int, "max_tokens": int, "min_tokens": int},
}


def _mapping(config: dict, key: str, source: Path) -> dict:
    """A section of a harness config: a mapping (absent or null: empty), with text keys."""
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(
            f"{source}: {key} is {type(value).__name__} {_short(value)}, not a mapping; "
            "the harness reads it as one (fix the file, or leave this result out)"
        )
    return {str(k): v for k, v in value.items()}


def _numbers(kind_of_section: str, section: str, values: dict, source: Path) -> dict:
    """``values`` (the config's ``section``), once every number NUMBERS names in it is one."""
    for key, kind in NUMBERS[kind_of_section].items():
        value = values.get(key)
        if value is None or value == "MISSING":
            continue
        try:
            number = kind(value)
            ok = not isinstance(value, bool) and math.isfinite(number) and (kind is float or number == float(value))
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise UserError(
                f"{source}: {section}.{key} is {_short(value)}, not a {'whole ' if kind is int else ''}number "
                "(fix the file, or leave this result out)"
            )
    return values


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_amd_harness(code_roots: list[Path], result_folder: Path) -> ServingSetup | None:
    commands = result_commands(result_folder)
    if not commands:
        return None
    command = commands[0]
    path = _find_config(code_roots, command.config_path, command.config_name)
    if path is None:
        return None
    files = [path, result_folder / "README.md"]
    config = _load_yaml(path)
    # The backend is the one whose engine section the result's own YAML fills (the common
    # defaults carry every backend's sections).
    own_backend = next((name for name in ("vllm", "sglang") if config.get(f"{name}_engine_config")), None)
    common = next(
        (
            r / "harness_llm" / "common" / "config.yaml"
            for r in code_roots
            if (r / "harness_llm/common/config.yaml").is_file()
        ),
        None,
    )
    if common is not None:
        config = _merge(_load_yaml(common), config)
        files.insert(1, common)
    for key, value in command.overrides.items():
        _set_dotted(config, key, value)
    backend = command.backend or config.get("backend")
    if backend in (None, "MISSING", "zmq", "ray"):
        # zmq/ray are the harness's multi-node transports around the engines.
        backend = own_backend or "vllm"
    engine_key, env_key, sampling_key = (
        f"{backend}_engine_config",
        f"{backend}_env_config",
        f"{backend}_sampling_config",
    )
    engine_section = engine_key if config.get(engine_key) else "llm_config"
    sampling_section = sampling_key if config.get(sampling_key) else "sampling_params"
    engine = _mapping(config, engine_section, path)
    checkpoint = engine.pop("model", None) or engine.pop("model_path", None)
    compilation = engine.get("compilation_config")
    if isinstance(compilation, dict) and CAPTURE_RANGE in compilation:
        compilation = dict(compilation)
        try:
            compilation["cudagraph_capture_sizes"] = capture_sizes(compilation.pop(CAPTURE_RANGE))
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None
        engine["compilation_config"] = compilation
    _numbers("engine", engine_section, engine, path)
    env = {
        k: str(v)
        for k, v in _clean({**_mapping(config, "env_config", path), **_mapping(config, env_key, path)}).items()
    }
    harness = _mapping(config, "harness_config", path)
    stated = [engine.get(k) for k in ("tensor_parallel_size", "tp_size") if engine.get(k) not in (None, "MISSING")]
    tensor_parallel = max(1, int(stated[0])) if stated and stated[0] else 1
    devices = harness.get("device_count")
    parallel = {"tensor_parallel_size": tensor_parallel}
    if _is_int(devices) and devices > 0:
        parallel["devices"] = devices
        parallel["servers"] = max(1, devices // max(tensor_parallel, 1))
    for name in ("engine_version", "benchmark_name", "scenario"):
        if config.get(name) not in (None, "MISSING"):
            harness[name] = config[name]
    return ServingSetup(
        harness="AMD harness_llm",
        source=path,
        backend=str(backend),
        engine_args=_clean(engine),
        env=env,
        sampling=_numbers(
            "sampling",
            sampling_section,
            _clean(_mapping(config, sampling_section, path)),
            path,
        ),
        parallel=parallel,
        checkpoint=str(checkpoint) if checkpoint else None,
        harness_settings=harness,
        command=command.text,
        files=files,
    )


# --- this workflow's own trees --------------------------------------------------------------


def provenance_serving(perf: dict, source: Path = Path("provenance.json")) -> ServingSetup | None:
    """A run of this workflow (its performance provenance) as a serving setup, named as a
    published harness config's is."""
    engine = perf.get("engine") or {}
    if not engine:
        return None
    args = dict(engine.get("engine_args") or {})
    backend = str(engine.get("backend", ""))
    tensor_parallel = int(args.get("tensor_parallel_size") or 1)
    if backend == "endpoints":
        endpoints = engine.get("endpoints") or {}
        servers = endpoints.get("list") or []
        parallel = {
            "tensor_parallel_size": tensor_parallel,
            "servers": len(servers),
            "devices": sum(int(e.get("accelerator_count", 1)) for e in servers if e.get("accelerator", "N/A") != "N/A"),
        }
        # The launchers start `vllm serve`; what answers an external endpoint is not recorded.
        backend = "vllm" if endpoints.get("launch", "external") != "external" else "endpoints (external)"
    else:
        parallel = {
            "tensor_parallel_size": tensor_parallel,
            "servers": 1,
            "devices": tensor_parallel * int(args.get("pipeline_parallel_size") or 1),
        }
    generation = perf.get("generation") or {}
    try:
        sampling = sampling_values(GenerationSettings(**generation))
    except TypeError:  # not an LLM's decoding settings (text-to-video): as recorded
        sampling = dict(generation)
    # The config's variables, then what the run's environment held (the config's, applied, and the shell's).
    env = {k: str(v) for k, v in {**(engine.get("env") or {}), **(perf.get("environment") or {})}.items()}
    return ServingSetup(
        harness="mlperf-repro provenance",
        source=source,
        backend=backend,
        engine_args=args,
        env=env,
        sampling=sampling,
        parallel=parallel,
        checkpoint=str(perf["model_dir"]) if perf.get("model_dir") else None,
        head=dict(perf.get("head") or {}),
    )


def read_repro_provenance(code_roots: list[Path], result_folder: Path) -> ServingSetup | None:
    """A result this workflow packaged: its provenance.json records the engine that ran it."""
    path = result_folder / "provenance.json"
    if not path.is_file():
        return None
    try:
        perf = (json.loads(path.read_text()) or {}).get("performance") or {}
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from None
    setup = provenance_serving(perf, path)
    if setup is not None:
        setup.files = [path]
        setup.config_engine = dict(perf.get("engine") or {})
    return setup


# A reader: (the submitter's code roots, a result folder) -> its serving setup, or None.
READERS: dict[str, Callable[[list[Path], Path], ServingSetup | None]] = {
    "mlperf-repro-provenance": read_repro_provenance,
    "amd-harness-llm": read_amd_harness,
}


def read_serving_setup(code_roots: list[Path], result_folder: Path) -> ServingSetup | None:
    """The first registered reader that understands this result's published code."""
    for reader in READERS.values():
        setup = reader(code_roots, result_folder)
        if setup is not None:
            return setup
    return None
