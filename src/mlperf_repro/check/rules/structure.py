"""Files and structure: what the round's layout demands and names (required files and
folders, the scenario set of each benchmark, what may sit at the root) and nothing that
makes a result ambiguous."""

from __future__ import annotations

from pathlib import Path

from ...benchmarks import Round
from ..endpoints_logs import endpoints_files
from ..evidence import cross_checked, record_kind
from ..files import TreeFiles
from ..findings import Finding
from ..model import (
    ScenarioResult,
    TreeContext,
    rule,
)


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


LISTING = "the tree's entries"
record_kind(LISTING, "/**", "listing", "every entry's kind, name and size, listed once without following links")
record_kind(
    "model_mapping.json",
    "/model_mapping.json",
    "json",
    "an open submitter's own model names -> the round's benchmarks",
    trusted={"<model name>": "the submitter's own naming: nothing else in the tree names the model"},
)
record_kind(
    "README.md",
    ("README.md", "/README.md"),
    "text",
    "how the result was produced",
    trusted={"<text>": "free text; required to exist (required-files)"},
)
record_kind(
    "mlperf.conf",
    "mlperf.conf",
    "conf",
    "the round's settings file where a tree carries one",
    trusted={"<setting>": "LoadGen reads the copy built into it; the seeds it used are judged in the log (seeds)"},
)
record_kind(
    "src/, documentation/",
    ("/src/**", "/documentation/**"),
    "listing",
    "the code and the documentation",
    trusted={"<content>": "source code and prose: required to exist, not judged"},
)


@rule(
    "required-files",
    evidence=[
        cross_checked(
            LISTING, "<required file or folder>", "the round's table (submitter_folders, scenario_files, ...)"
        )
    ],
)
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


@rule(
    "scenario-set",
    evidence=[cross_checked(LISTING, "<scenario folder>", "the round's scenario set for the system's system_type")],
)
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
            # The open division may run a benchmark in another of the round's scenarios
            # (the official checker reads no open scenario set; v5.1 publishes such a
            # pointpainting Offline): a warning there, an error for anything else.
            open_extra = ctx.division == "open" and unknown in ctx.rules.scenario_folders
            findings.append(
                Finding(
                    "scenario-set",
                    f"{folder}/{unknown}",
                    f"{facts.name} has no scenario {unknown}; allowed: {facts.scenarios}{hint}"
                    + (" (accepted in the open division; no closed rule holds it)" if open_extra else ""),
                    severity="warning" if open_extra else "error",
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


@rule(
    "structure",
    evidence=[
        cross_checked(LISTING, "<name>", "the other names (no two differing only in case where results live)"),
        cross_checked(
            LISTING,
            "<result record>",
            "the layout: one performance run, one copy of each record, no stray file in results/",
        ),
    ],
)
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
