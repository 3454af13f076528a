"""System descriptions (systems/<system>.json) and measurements files."""

from __future__ import annotations

import json
import re
from typing import Any

from ...benchmarks import available_rounds, load_round
from ..evidence import Record, cross_checked, record_kind
from ..findings import Finding
from ..model import (
    PERF,
    SYSTEM_JSON,
    TreeContext,
    rule,
    run_identity,
)

MEASUREMENTS = "measurements.json"
# What a measurements file says about the model a result ran: one benchmark's scenarios on
# one system run one model, so these agree across them in all 202 published v6.0 system and
# benchmark folders of two or more scenarios. The rules we hold do not forbid a scenario its
# own quantization, so a disagreement is a warning: a copied file, or a question to ask.
MODEL_FIELDS = (
    "weight_data_types",
    "input_data_types",
    "starting_weights_filename",
    "weight_transformations",
    "retraining",
)


def _round_fields(*path: str) -> set[str]:
    """A list of field names from every round's table (e.g. system_description.required)."""
    names: set[str] = set()
    for name in available_rounds():
        table = load_round(name).data
        for key in path:
            table = table.get(key) or {}
        names |= set(table or [])
    return names


_JUDGED_SYSTEM_FIELDS = {
    "division",
    "submitter",
    "status",
    "system_type",
    "accelerators_per_node",
    "accelerator_model_name",
}
record_kind(
    SYSTEM_JSON,
    "/systems/<system>.json",
    "json",
    "the system's hardware and software",
    trusted={
        key: "a hardware or software fact no other record of the tree states; required, non-empty, no "
        "placeholder (TODO, TBD) and integer where the round's table says (system-description)"
        for key in sorted(_round_fields("system_description", "required") - _JUDGED_SYSTEM_FIELDS)
    },
)
record_kind(
    MEASUREMENTS,
    ("measurements.json", "<system>_*.json"),
    "json",
    "how the result was measured: data types, weights, transformations",
    trusted={
        key: "stated once; present and non-empty as the round's table asks (measurements)"
        for key in sorted(_round_fields("measurements_keys") - {"retraining"} - set(MODEL_FIELDS))
    },
)

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


@rule(
    "system-description",
    evidence=[
        cross_checked(SYSTEM_JSON, "division", "the division folder it is in"),
        cross_checked(SYSTEM_JSON, "submitter", "the submitter folder it is in"),
        cross_checked(SYSTEM_JSON, "status", "the round's statuses"),
        cross_checked(SYSTEM_JSON, "system_type", "the round's system types; the scenario folders (scenario-set)"),
        cross_checked(
            SYSTEM_JSON,
            "accelerators_per_node",
            "accelerator_model_name: no accelerator named with a count above 0, none counted with one named (a "
            "warning in the open division, where v5.1 Lenovo names its SE100's integrated GPU with 0)",
        ),
        cross_checked(SYSTEM_JSON, "accelerator_model_name", "accelerators_per_node (see there)"),
        *(
            cross_checked(SYSTEM_JSON, key, "the division: a network-division field, absent elsewhere")
            for key in sorted(_round_fields("system_description", "network_only"))
        ),
    ],
)
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
        desc = Record(SYSTEM_JSON, desc)
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
        for key in fields["meaningful"]:
            if key in desc and _PLACEHOLDER.fullmatch(str(desc[key]).strip()):
                findings.append(
                    Finding(
                        "system-description", where, f"field {key} is a placeholder ({desc[key]!r}): give its value"
                    )
                )
        accelerators = _accelerator_problem(desc)
        if accelerators:
            severity = "warning" if ctx.division == "open" else "error"
            findings.append(Finding("system-description", where, accelerators, severity=severity))
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


# What a system description writes for "no accelerator" (published: N/A, 0 counted).
NO_ACCELERATOR = ("", "n/a", "na", "none", "-", "not applicable", "null", "0")
# A value left to be filled in: the field says nothing (published closed trees hold "TODO"
# and "TBD" in fields the round requires; the official checker accepts them).
_PLACEHOLDER = re.compile(r"(todo|tbd|tba|tbc|fixme|xxx+|\?+|fill(\s*(me|in))?|placeholder|<[^<>]*>)[.!:]?", re.I)


def _accelerator_problem(desc: Record) -> str | None:
    counts = per_node_type_counts(desc.get("accelerators_per_node"))
    name = str(desc.get("accelerator_model_name", "")).strip()
    if counts is None or "accelerator_model_name" not in desc:
        return None  # (a missing or non-integer field has its own message)
    named = name.lower() not in NO_ACCELERATOR
    if named and not any(counts):
        return (
            f"accelerators_per_node is {desc.get('accelerators_per_node')!r} but accelerator_model_name names "
            f"{name!r}: count the accelerators the result ran on, or write N/A for a system without one"
        )
    if not named and any(counts):
        return (
            f"accelerators_per_node is {desc.get('accelerators_per_node')!r} but accelerator_model_name is "
            f"{name!r}: name the accelerator, or count 0 for a system without one"
        )
    return None


# How measurements.json says "no retraining" in published trees.
NO_RETRAINING = ("", "no", "none", "n/a", "na", "false", "0")


@rule(
    "measurements",
    evidence=[cross_checked(MEASUREMENTS, "retraining", "the division (none in the closed division)")],
)
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
        data = Record(MEASUREMENTS, data)
        for key in ctx.rules["measurements_keys"]:
            if not data.get(key):
                findings.append(Finding("measurements", ctx.rel(path), f"{key} is missing or empty"))
        if ctx.division == "closed" and str(data.get("retraining", "")).strip().lower() not in NO_RETRAINING:
            findings.append(Finding("measurements", ctx.rel(path), "retraining is not allowed in the closed division"))
    return findings


@rule(
    "measurements-agree",
    evidence=[
        cross_checked(MEASUREMENTS, key, "the same system's other scenarios of the benchmark", severity="warning")
        for key in MODEL_FIELDS
    ]
    + [
        cross_checked(
            MEASUREMENTS, key, "a result holding the same performance run (llama2-70b-99 and -99.9 share one)"
        )
        for key in MODEL_FIELDS
    ],
)
def check_measurements_agree(ctx: TreeContext) -> list[Finding]:
    """The model a benchmark's scenarios say they ran, compared across the scenarios (a
    warning) and between the results that hold one run (an error: the run is one model's)."""
    described: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    by_run: dict[tuple, list[tuple[str, dict]]] = {}
    for result in ctx.results:
        path = result.measurements_file()
        try:
            data = ctx.read_json(path) if ctx.files.is_file(path) else None
        except ValueError:
            continue  # (measurements names it)
        if isinstance(data, dict):
            entry = (ctx.rel(path), Record(MEASUREMENTS, data))
            described.setdefault((result.system, result.benchmark), []).append(entry)
            run = None if result.is_endpoints else run_identity(result.detail(PERF) or {})
            if run is not None:
                by_run.setdefault(run, []).append(entry)
    findings = []
    for files in described.values():
        findings += _disagreements(
            files,
            "one benchmark's scenarios run one model on a system",
            "warning",
        )
    for files in by_run.values():
        found = _disagreements(files, "both results hold one performance run, which measured one model", "error")
        # (Which of the two was edited the tree cannot say: both files are named.)
        if found:
            first_path, _ = files[0]
            findings.append(
                Finding(
                    "measurements-agree",
                    first_path,
                    f"describes another model than {found[0].path}, which holds the same performance run",
                )
            )
        findings += found
    return findings


def _disagreements(files: list[tuple[str, dict]], why: str, severity: str) -> list[Finding]:
    first_path, first = files[0]
    findings = []
    for path, data in files[1:]:
        differ = [k for k in MODEL_FIELDS if _stated(data.get(k)) != _stated(first.get(k))]
        if differ:
            shown = "; ".join(f"{k} {json.dumps(data.get(k))} against {json.dumps(first.get(k))}" for k in differ)
            findings.append(
                Finding(
                    "measurements-agree",
                    path,
                    f"describes another model than {first_path}: {shown} ({why})",
                    severity=severity,
                )
            )
    return findings


def _stated(value):
    return value.strip() if isinstance(value, str) else value
