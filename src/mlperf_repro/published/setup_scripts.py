"""Facts in a submitter's setup scripts: which checkpoints it downloads, how it quantizes, which
image it builds.

The scripts are read, never run. A small evaluator walks each script top to bottom keeping
plain ``NAME=value`` assignments (``${1:-default}`` reads as its default, ``$NAME`` and
``${NAME}`` expand), so a command's arguments read as they would at that line, e.g.
``hf download $MODEL --local-dir $OUTPUT_DIR`` or ``python3 quantize_quark.py ... --output_dir
$OUTPUT_ALGO_DIR``. Branches are not evaluated: every command is recorded with the values in
force where it is written, and the import picks the one whose output the engine loads.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
DEFAULTED = re.compile(r"\$\{[0-9A-Za-z_]+:-([^}]*)\}")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class Download:
    repo: str  # Hub repository
    local_dir: str | None
    revision: str | None
    script: Path


@dataclass
class Quantization:
    tool: str  # the script it runs, e.g. quantize_quark.py
    args: dict[str, list[str]]  # --option -> its values (a flag -> [])
    script: Path
    tool_version: str | None = None  # from the folder it runs in (amd_quark-0.10/...)

    def value(self, option: str) -> str | None:
        values = self.args.get(option)
        return values[0] if values else None


@dataclass
class ScriptFacts:
    downloads: list[Download] = field(default_factory=list)
    quantizations: list[Quantization] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)  # last value of every assignment


MAX_VALUE = 4096  # characters of a variable's value worth keeping


def _expand(text: str, env: dict[str, str]) -> str:
    text = DEFAULTED.sub(lambda m: m.group(1), text)
    return VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), text)


def _options(words: list[str]) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    current = None
    for word in words:
        if word.startswith("--"):
            name, _, value = word.partition("=")
            current = name
            options[current] = [value] if value else []
        elif current is not None:
            options[current].append(word)
    return options


def read_script(path: Path, facts: ScriptFacts | None = None) -> ScriptFacts:
    facts = facts or ScriptFacts()
    env = dict(facts.variables)
    text = re.sub(r"\\\s*\n", " ", path.read_text(errors="replace"))
    folder = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = ASSIGNMENT.match(line)
        if match:
            try:
                value = " ".join(shlex.split(match.group(2), comments=True)) if match.group(2) else ""
            except ValueError:
                value = match.group(2)
            # A bare positional argument ($1) is unknown when reading: keep the default set before.
            if not re.search(r"\$\{?[0-9]", DEFAULTED.sub("", value)):
                expanded = _expand(value, env)
                # A=$A$A, line after line, doubles: no path or version is this long.
                if len(expanded) <= MAX_VALUE:
                    env[match.group(1)] = expanded
            continue
        if line.startswith("pushd ") or line.startswith("cd "):
            folder = _expand(line.split(None, 1)[1].split(">")[0].strip().strip('"'), env)
        try:
            words = [_expand(w, env) for w in shlex.split(line, comments=True)]
        except ValueError:
            continue
        if len(words) >= 3 and words[0] in ("hf", "huggingface-cli") and words[1] == "download":
            options = _options(words[3:])
            facts.downloads.append(
                Download(
                    words[2],
                    (options.get("--local-dir") or [None])[0],
                    (options.get("--revision") or [None])[0],
                    path,
                )
            )
        elif len(words) >= 2 and words[0].startswith("python") and words[1].startswith("quantize_"):
            version = re.search(r"(\d+\.\d+(?:\.\d+)?)", folder.split("/")[0]) if folder else None
            facts.quantizations.append(
                Quantization(words[1], _options(words[2:]), path, version.group(1) if version else None)
            )
    facts.variables = env
    return facts


def setup_folder(base: Path, benchmark: str) -> Path | None:
    """The submitter's setup/<benchmark> folder (the longest name the benchmark starts with:
    llama2-70b-99.9 results are made with setup/llama2-70b-99)."""
    setup = base / "setup"
    if not setup.is_dir():
        return None
    names = [p for p in setup.iterdir() if p.is_dir() and benchmark.startswith(p.name)]
    return max(names, key=lambda p: len(p.name)) if names else None


def model_facts(base: Path, benchmark: str) -> ScriptFacts:
    facts = ScriptFacts()
    folder = setup_folder(base, benchmark)
    if folder is None:
        return facts
    for script in sorted(folder.rglob("*.sh")):
        part = read_script(script, ScriptFacts())
        facts.downloads += part.downloads
        facts.quantizations += part.quantizations
    return facts


def image_facts(base: Path, benchmark: str) -> tuple[dict[str, str], Path | None]:
    """The variables of the image build config that setup/<benchmark>/build_docker.sh sources by
    default (DOCKER_RESULT_IMAGE, DOCKER_BASE_IMAGE, VLLM_REV, ...), and that file."""
    folder = setup_folder(base, benchmark)
    if folder is None or not (folder / "build_docker.sh").is_file():
        return {}, None
    build = read_script(folder / "build_docker.sh")
    name = build.variables.get("CONFIG_FILE")
    config = folder / name if name else None
    if config is None or not config.is_file():
        configs = sorted(folder.glob("*.config"))
        config = configs[0] if len(configs) == 1 else None
    if config is None:
        return {}, None
    return read_script(config).variables, config
