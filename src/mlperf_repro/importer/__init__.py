"""``mlperf-repro import``: one published system's submission -> one config of this workflow.

The config reproduces that system's results: its description verbatim, each scenario's
LoadGen settings, the serving setup the submitter's code states (mapped onto the engine
keys), the quantization and checkpoints its setup scripts and documentation name, and the
image it builds. Every value's comment names the file it came from; every fact the source
lacks is a ``TODO:`` value preflight refuses by name. Nothing is written unless the whole
import succeeds, and the result is validated against the schema before it is written.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import UserError
from .build import (
    ImportedScenario,
    ImportReport,
    container_value,
    description_section,
    engine_section,
    harness_record,
    lcb_release_entry,
    measure_instead,
    model_sections,
    result_value,
    sampling_differences,
    scenario_settings,
)
from .source import find_system, open_source
from .stand_in import apply_stand_in
from .yaml_text import Noted, dump, plain


@dataclass
class Imported:
    config: dict[str, Any]  # with notes (yaml_text.Noted)
    text: str
    report: ImportReport


def build_import(
    source: str | Path,
    submitter: str,
    system_ids: str | list[str],
    benchmarks: list[str] | None = None,
    scratch: Path | None = None,
    today: date | None = None,
    source_name: str | None = None,
    command: str | None = None,
    stand_in: tuple[str, dict] | None = None,
    auto_qps: bool = False,
    launch: str = "slurm-shared",
) -> Imported:
    """One config for one or more systems of the submitter (say its single-node and its
    multi-node result of the same benchmarks). ``launch``: how a multi-node system's servers
    start (``slurm-shared``, or ``kubernetes``: the same servers as pods)."""
    ids = [system_ids] if isinstance(system_ids, str) else list(system_ids)
    with tempfile.TemporaryDirectory(prefix="mlperf-import-") as tmp:
        root = open_source(source, Path(scratch or tmp))
        systems = [find_system(root, submitter, system_id) for system_id in ids]
        return _build(
            systems, source_name or str(source), benchmarks, today or date.today(), command, stand_in, auto_qps, launch
        )


@dataclass
class _SystemPart:
    entry: dict[str, Any]
    results: dict[str, Any]
    unmapped: dict[str, Any]
    container: Noted | None


def _scenarios_of(
    system, benchmarks: list[str] | None, report: ImportReport, auto_qps: bool = False
) -> list[tuple[str, Any, list]]:
    from ..published.serving import read_serving_setup

    rules = system.rules
    chosen = list(system.results)
    if benchmarks:
        unknown = [b for b in benchmarks if b not in system.results]
        if unknown:
            raise UserError(
                f"--benchmarks {', '.join(unknown)}: {system.system_id} has no results for it; it has: "
                f"{', '.join(system.results)}"
            )
        chosen = list(benchmarks)
    imported: list[tuple[str, Any, list[ImportedScenario]]] = []
    for folder in chosen:
        official = rules.mlperf_benchmark(folder, system.model_mapping)
        if official not in rules.benchmark_names:
            report.note(f"{folder}: not a {rules.name} benchmark; left out")
            continue
        facts = rules.benchmark(official)
        if not facts.runnable:
            report.note(f"{folder}: this workflow cannot run {official} (no task in the {rules.name} table); left out")
            continue
        scenarios = []
        ordered = sorted(system.results[folder].items(), key=lambda kv: _scenario_rank(facts, kv[0]))
        for scenario, result in ordered:
            if scenario not in facts.scenarios:
                report.note(f"{system.relative(result.folder)}: {official} has no scenario {scenario}; left out")
                continue
            settings, unmapped = scenario_settings(system, facts, result, report)
            if auto_qps:
                settings = measure_instead(settings)
            setup = read_serving_setup(system.code_roots, result.folder)
            scenarios.append(ImportedScenario(result, settings, setup, unmapped))
        if scenarios:
            imported.append((folder, facts, scenarios))
    if not imported:
        raise UserError(
            f"{system.system_id}: none of its results is a benchmark this workflow runs ({', '.join(chosen)}); "
            f"nothing to import"
        )
    return imported


def _system_part(
    system, imported, sections: dict[str, dict], report: ImportReport, launch: str = "slurm-shared"
) -> _SystemPart:
    all_scenarios = [s for _, _, group in imported for s in group]
    containers = {}
    for folder, _, _ in imported:
        image = container_value(system, folder, report)
        if image is not None:
            containers[folder] = image
    if len({plain(v) for v in containers.values()}) > 1:
        raise UserError(
            f"{system.system_id}: its benchmarks run in different images ("
            + ", ".join(f"{b}: {plain(v).split('@')[0]}" for b, v in containers.items())
            + "), and a system here has one; import them one at a time with --benchmarks"
        )
    served = sections[imported[0][0]]["model"]
    engine, overrides = engine_section(system, all_scenarios, served, report, launch)
    system_benchmarks: dict[str, Any] = {}
    unmapped: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for folder, facts, scenarios in imported:
        per_scenario = {}
        for item in scenarios:
            settings: dict[str, Any] = dict(item.settings)
            own = overrides.get((folder, item.result.scenario))
            if own:
                settings["engine"] = Noted(
                    {k: v for k, v in own.items() if v},
                    f"this scenario's own engine settings ({system.relative(item.setup.source)})",
                )
            per_scenario[item.result.scenario] = settings
            extra = dict(item.unmapped)
            if item.setup is not None:
                differences = sampling_differences(item.setup.sampling, facts.facts.get("generation") or {})
                if differences:
                    extra["sampling"] = item.setup.sampling
                    report.note(
                        f"{system.relative(item.setup.source)}: sampling differs from the round's generation "
                        f"settings, which this workflow applies: {'; '.join(differences)}"
                    )
                extra["harness_config"] = harness_record(item.setup)
                extra["serving_setup_files"] = [system.relative(p) for p in item.setup.files]
            if extra:
                unmapped.setdefault(folder, {})[item.result.scenario] = extra
            measured = result_value(facts, item.result)
            if measured:
                results.setdefault(folder, {})[item.result.scenario] = measured
        system_benchmarks[folder] = per_scenario
    entry: dict[str, Any] = {"description": description_section(system, report)}
    container = next(iter(containers.values()), None)
    if container is not None:
        entry["software"] = {"container": container}
    entry["engine"] = engine
    entry["benchmarks"] = system_benchmarks
    return _SystemPart(entry, results, unmapped, container)


def _build(
    systems: list,
    source_label: str,
    benchmarks: list[str] | None,
    today: date,
    command: str | None = None,
    stand_in: tuple[str, dict] | None = None,
    auto_qps: bool = False,
    launch: str = "slurm-shared",
) -> Imported:
    report = ImportReport()
    first = systems[0]
    rules = first.rules
    if any(s.rules.name != rules.name for s in systems):
        raise UserError("--system: the systems' results come from different rounds; import them one at a time")
    models: dict[str, Any] = {}
    datasets: dict[str, Any] = {}
    quantization: dict[str, Any] = {}
    benchmark_entries: dict[str, Any] = {}
    parts: dict[str, _SystemPart] = {}
    versions = []
    for system in systems:
        imported = _scenarios_of(system, benchmarks, report, auto_qps)
        sections: dict[str, dict] = {}
        for folder, facts, scenarios in imported:
            versions += [s.result.detail.get("loadgen_version") for s in scenarios]
            checkpoints = sorted({s.setup.checkpoint for s in scenarios if s.setup and s.setup.checkpoint})
            if len(checkpoints) > 1:
                report.note(
                    f"{folder}: the scenarios load different checkpoints ({', '.join(checkpoints)}); the first is used"
                )
            sections[folder] = model_sections(system, folder, facts, checkpoints[0] if checkpoints else None, report)
            models.update(sections[folder]["models"])
            datasets.update(sections[folder]["datasets"])
            quantization.update(sections[folder]["quantization"])
            benchmark_entries.setdefault(
                folder,
                {
                    "mlperf_benchmark": facts.name,
                    "model": sections[folder]["model"],
                    "dataset": sections[folder]["dataset"],
                    "quantization": sections[folder]["recipe"],
                    "accuracy_target": "reference",
                },
            )
            if lcb_release_entry(facts):
                benchmark_entries[folder]["livecodebench_release"] = lcb_release_entry(facts)
        parts[system.system_id] = _system_part(system, imported, sections, report, launch)
    version = next((str(v).split(" ")[0] for v in versions if v), "?")
    config: dict[str, Any] = {
        "round": Noted(rules.name, f"LoadGen {version} in the results' detail logs"),
        "submitter": Noted(first.submitter, "the source's submitter; put your organisation's name when you submit"),
        "division": Noted(first.division, f"{first.division}/{first.submitter}"),
        "test_scale": {"enabled": False},
        "models": models,
        "datasets": datasets,
    }
    if quantization:
        config["quantization"] = quantization
    config["benchmarks"] = benchmark_entries
    config["systems"] = {system_id: part.entry for system_id, part in parts.items()}
    config["imported"] = Noted(
        {
            "source": source_label,
            "submitter": first.submitter,
            "systems": list(parts),
            "round": rules.name,
            "date": today.isoformat(),
            "results": {system_id: part.results for system_id, part in parts.items()},
            "unmapped": {system_id: part.unmapped for system_id, part in parts.items()},
            "notes": report.notes,
        },
        "What the import read and could not map (the workflow does not read this section): the source's "
        "results, for comparing your runs with, and its harness settings that have no key here.",
    )
    if stand_in is not None:
        substituted = apply_stand_in(config, stand_in[1], stand_in[0])
        config["imported"].value["stand_in"] = {"from": stand_in[0], "substituted": substituted}
        config["imported"] = config.pop("imported")  # stays last
    header = (
        f"Imported by `mlperf-repro import` from {first.division}/{first.submitter} (round {rules.name}), "
        f"system(s) {', '.join(parts)}, on {today.isoformat()}. Each value's comment names the file it came from. "
        f"TODO: values are facts the source does not contain: preflight refuses to run until each is replaced."
        + (f"\nRegenerate with: {command}" if command else "")
        + (
            f"\nSTAND-IN: the hardware-bound parts are {stand_in[0]}'s (imported.stand_in lists each); "
            "an open-division, test-scale run of this machine, not the submitter's result."
            if stand_in
            else ""
        )
    )
    return Imported(config, dump(config, header), report)


def _scenario_rank(facts, scenario: str) -> tuple[int, str]:
    order = facts.scenarios
    return (order.index(scenario) if scenario in order else len(order), scenario)


def write_import(imported: Imported, out: str | Path, schema_path: str | Path) -> Path:
    """Validate the config and write it atomically (nothing half-written on any error)."""
    import copy

    from ..config import validate_config
    from ..launch import LAUNCHERS

    validate_config(copy.deepcopy(plain(imported.config)), schema_path, launchers=LAUNCHERS)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    with os.fdopen(handle, "w") as stream:
        stream.write(imported.text)
    os.replace(tmp, out)
    return out
