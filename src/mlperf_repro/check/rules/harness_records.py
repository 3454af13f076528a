"""What a result's harness wrote beside the LoadGen logs, against the tree's own claims.

Some harnesses keep their own record of a run in the result folder. MLCommons' automation
(MLC, GATEOverflow's and others' trees) writes the host it ran on (``cpu_info.json``), the
run's console (``performance_console.out``, whose last lines print the result) and a README
whose "Results" section repeats the precision and the figures; the reference harness of the
vision benchmarks writes ``results.json`` beside its accuracy log (the backend it ran and
its own count of good answers). Each was written by the run, so the system description, the
measurements, the detail log and accuracy.txt must say the same: a system JSON naming
another CPU, a result edited after its console printed it, or scores raised after the
harness counted them, no longer agree. An error in closed; in open (where a tree may hold
a harness's record of another model's run) a warning.
"""

from __future__ import annotations

import re
from typing import Any

from ..evidence import Record, cross_checked, note, record_kind
from ..findings import Finding
from ..model import PERF, SYSTEM_JSON, ScenarioResult, TreeContext, number, rule

CPU_INFO = "cpu_info.json"
OS_INFO = "os_info.json"
ACCURACY_CONSOLE = "accuracy_console.out"
CONSOLE = "performance_console.out"
HARNESS_RESULTS = "results.json"
README = "README.md"
ACCURACY_TXT = "accuracy.txt"

record_kind(CPU_INFO, CPU_INFO, "json", "MLC's record of the host the run ran on")
record_kind(CONSOLE, CONSOLE, "text", "MLC's console of the performance run, ending with its result")
record_kind(OS_INFO, OS_INFO, "json", "MLC's record of the operating system the run ran on")
record_kind(ACCURACY_CONSOLE, ACCURACY_CONSOLE, "text", "MLC's console of the accuracy evaluation")
record_kind(
    HARNESS_RESULTS, f"accuracy/{HARNESS_RESULTS}", "json", "the reference harness's record of the accuracy run"
)

# The console's last result line: "Result: result_samples_per_second: 87945.5, Result is VALID, ..."
_CONSOLE_RESULT = re.compile(r"Result: (\w+): ([-+\d.eE]+)")
# MLC's README: "Model Precision: int8", and the first figure under "### Performance Results".
_PRECISION = re.compile(r"^Model Precision:\s*(\S+)", re.MULTILINE)
_PERFORMANCE_SECTION = re.compile(r"^#+\s*Performance Results\s*$(.*?)(?=^#|\Z)", re.MULTILINE | re.DOTALL)
_README_FIGURE = re.compile(r"`([^`]+)`:\s*`([-+\d.eE]+)`")
# The classification evaluators' line of accuracy.txt.
_GOOD_TOTAL = re.compile(r"accuracy=([\d.]+)%, good=(\d+), total=(\d+)")
# A console or README prints the figure LoadGen logged, rounded to a few digits.
FIGURE_REL = 1e-3


def _integer(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _plain(text: Any) -> str:
    """A processor name without marks and spacing ("Intel(R) Xeon(R) w7-2495X" -> "intel xeon w7-2495x")."""
    return " ".join(re.sub(r"\((?:r|tm)\)|\bcpu\b|@.*$", " ", str(text).lower()).split())


def _read_json(ctx: TreeContext, path, kind: str) -> Record | None:
    try:
        data = ctx.read_json(path)
    except ValueError:
        return None
    return Record(kind, data) if isinstance(data, dict) else None


_HOST_KEYS = ("MLC_HOST_CPU_MODEL_NAME", "MLC_HOST_CPU_SOCKETS", "MLC_HOST_CPU_PHYSICAL_CORES_PER_SOCKET")


def _host_problems(ctx: TreeContext, result: ScenarioResult) -> list[str]:
    path = result.path / CPU_INFO
    desc = ctx.system_description(result.system)
    if desc is None or not ctx.files.is_file(path):
        return []
    host = _read_json(ctx, path, CPU_INFO)
    if host is None:
        return []
    problems = []
    missing = [key for key in _HOST_KEYS if key not in host]
    if missing:
        problems.append(f"{CPU_INFO} lacks {', '.join(missing)}, which MLC writes for every host")
    model, stated = host.get("MLC_HOST_CPU_MODEL_NAME"), desc.get("host_processor_model_name")
    # (Either may say more than the other: MLC "AMD Ryzen 5 4600H with Radeon Graphics" for a
    # system's "AMD Ryzen 5 4600H", a system's "AMD EPYC 9575F 64-Core Processor" for MLC's
    # "AMD EPYC 9575F"; another model is in neither.)
    if model and stated and _plain(model) not in _plain(stated) and _plain(stated) not in _plain(model):
        problems.append(f"{CPU_INFO} says the run's host has a {model!r}; the system description says {stated!r}")
    for mine, theirs, what in (
        ("MLC_HOST_CPU_SOCKETS", "host_processors_per_node", "processors"),
        ("MLC_HOST_CPU_PHYSICAL_CORES_PER_SOCKET", "host_processor_core_count", "cores per processor"),
    ):
        counted, said = _integer(host.get(mine)), _integer(desc.get(theirs))
        if counted is not None and said is not None and counted != said:
            problems.append(f"{CPU_INFO} counts {counted} {what} ({mine}); the system description says {theirs} {said}")
    return problems


def _figure_problems(ctx: TreeContext, result: ScenarioResult) -> list[tuple[str, str]]:
    """(file, problem) for the console's and the README's result against the detail log's."""
    detail = result.detail(PERF) if result.facts else None
    if not detail:
        return []
    try:
        field = result.result_field()
    except KeyError:
        return []  # (a scenario the benchmark does not have: scenario-set names it)
    logged = number(detail.get(field))
    if not logged:
        return []
    problems = []
    console = result.path / CONSOLE
    if ctx.files.is_file(console):
        note(CONSOLE, "Result")
        printed = [_float(v) for k, v in _CONSOLE_RESULT.findall(ctx.files.read_text(console)) if k == field]
        printed = [v for v in printed if v is not None]
        if printed and abs(printed[-1] / logged - 1) > FIGURE_REL:
            problems.append(
                (CONSOLE, f"the run's console printed {field}: {printed[-1]:g}; its detail log records {logged:g}")
            )
    readme = result.path / README
    if ctx.files.is_file(readme):
        note(README, "Performance Results")
        section = _PERFORMANCE_SECTION.search(ctx.files.read_text(readme))
        figures = _README_FIGURE.findall(section.group(1)) if section else []
        if figures:
            label, value = figures[0]
            shown = _float(value)
            if shown is not None and abs(shown / logged - 1) > FIGURE_REL:
                problems.append(
                    (README, f"its Performance Results say {label}: {value}; the detail log records {field} {logged:g}")
                )
    return problems


# LoadGen prints its summary to the console too: the block from "MLPerf Results Summary" to
# "No warnings encountered" (its results, additional stats and the test parameters used).
_SUMMARY_BLOCK = re.compile(r"MLPerf Results Summary\n=+\n(.*?)\nNo (?:warnings|errors) encountered", re.DOTALL)
# The scores an evaluator prints, which accuracy.txt copies from the evaluation's console.
_SCORE_LINES = (
    re.compile(r"accuracy=[\d.]+%, good=\d+, total=\d+"),
    re.compile(r"mAP=[\d.]+%"),
    re.compile(r"\{'rouge1':[^\n]*\}"),
    re.compile(r"Accuracy: mean = [^\n]*"),
)


def _console_problems(ctx: TreeContext, result: ScenarioResult) -> list[tuple[str, str]]:
    """The console's copy of LoadGen's summary against mlperf_log_summary.txt, and the
    accuracy console's scores against accuracy.txt."""
    problems = []
    console, summary = result.path / CONSOLE, result.path / "performance" / "run_1" / "mlperf_log_summary.txt"
    if ctx.files.is_file(console) and ctx.files.is_file(summary):
        note(CONSOLE, "MLPerf Results Summary")
        blocks = _SUMMARY_BLOCK.findall(ctx.files.read_text(console))
        logged = {" ".join(line.split()) for line in ctx.files.read_text(summary).splitlines()}
        if blocks:
            for line in blocks[-1].splitlines():
                shown = " ".join(line.split())
                if shown and ":" in shown and shown not in logged:
                    problems.append(
                        (
                            CONSOLE,
                            f"the run's console printed LoadGen's summary line {shown[:80]!r}, which "
                            "mlperf_log_summary.txt does not hold: the summary was changed after the run",
                        )
                    )
                    break
    scores, txt = result.path / ACCURACY_CONSOLE, result.path / "accuracy" / "accuracy.txt"
    if ctx.files.is_file(scores) and ctx.files.is_file(txt):
        note(ACCURACY_CONSOLE, "scores")
        printed, kept = ctx.files.read_text(scores), ctx.files.read_text(txt)
        for pattern in _SCORE_LINES:
            said, written = pattern.findall(printed), pattern.findall(kept)
            if said and written and said[-1] != written[-1]:
                problems.append(
                    (
                        ACCURACY_CONSOLE,
                        f"the evaluation's console printed {said[-1][:80]!r}; accuracy.txt says {written[-1][:80]!r}",
                    )
                )
    return problems


def _os_problems(ctx: TreeContext, result: ScenarioResult) -> list[str]:
    path, desc = result.path / OS_INFO, ctx.system_description(result.system)
    if desc is None or not ctx.files.is_file(path):
        return []
    host = _read_json(ctx, path, OS_INFO)
    stated = str(desc.get("operating_system") or "")
    if host is None or not stated:
        return []
    problems = []
    for key, what in (("MLC_HOST_OS_VERSION", "version"), ("MLC_HOST_OS_KERNEL_VERSION", "kernel")):
        value = host.get(key)
        if isinstance(value, str) and value.strip() and value.strip() not in stated:
            problems.append(
                f"{OS_INFO} says the run's host ran {what} {value.strip()!r}; the system description's "
                f"operating_system is {stated!r}"
            )
    return problems


def _precision_problem(ctx: TreeContext, result: ScenarioResult) -> str | None:
    readme, measurements = result.path / README, result.measurements_file()
    if not (ctx.files.is_file(readme) and ctx.files.is_file(measurements)):
        return None
    note(README, "Model Precision")
    said = _PRECISION.search(ctx.files.read_text(readme))
    data = _read_json(ctx, measurements, "measurements.json")
    weights = data.get("weight_data_types") if data else None
    if said and weights and said.group(1).lower() not in str(weights).lower():
        return f"says Model Precision: {said.group(1)}; {ctx.rel(measurements)} says weight_data_types {weights!r}"
    return None


def _harness_results_problems(ctx: TreeContext, result: ScenarioResult) -> list[str]:
    path = result.path / "accuracy" / HARNESS_RESULTS
    if not ctx.files.is_file(path):
        return []
    record = _read_json(ctx, path, HARNESS_RESULTS)
    if record is None:
        return []
    problems = []
    note(HARNESS_RESULTS, "TestScenario.*")
    runs = [v for k, v in record.items() if str(k).startswith("TestScenario") and isinstance(v, dict)]
    txt = result.path / "accuracy" / ACCURACY_TXT
    scored = _GOOD_TOTAL.search(ctx.files.read_text(txt)) if ctx.files.is_file(txt) else None
    if runs and scored:
        good, total = _integer(runs[0].get("good_items")), _integer(runs[0].get("total_items"))
        if (good, total) != (int(scored.group(2)), int(scored.group(3))) and None not in (good, total):
            problems.append(
                f"the harness counted {good} good of {total}; {ctx.rel(txt)} says good={scored.group(2)}, "
                f"total={scored.group(3)}"
            )
    args = record.get("args")
    backend = args.get("backend") if isinstance(args, dict) else None
    desc = ctx.system_description(result.system)
    framework = desc.get("framework") if desc else None
    if backend and framework and str(backend).lower() not in str(framework).lower():
        problems.append(f"the harness ran backend {backend!r}; the system description's framework is {framework!r}")
    return problems


@rule(
    "harness-records",
    evidence=[
        cross_checked(CPU_INFO, "MLC_HOST_CPU_MODEL_NAME", "the system description's host_processor_model_name"),
        cross_checked(CPU_INFO, "MLC_HOST_CPU_SOCKETS", "the system description's host_processors_per_node"),
        cross_checked(
            CPU_INFO, "MLC_HOST_CPU_PHYSICAL_CORES_PER_SOCKET", "the system description's host_processor_core_count"
        ),
        cross_checked(CONSOLE, "Result", "the performance run's detail log (its result field)"),
        cross_checked(
            CONSOLE, "MLPerf Results Summary", "mlperf_log_summary.txt: each line of LoadGen's printed summary"
        ),
        cross_checked(ACCURACY_CONSOLE, "scores", "accuracy.txt's score lines (the evaluator printed both)"),
        cross_checked(OS_INFO, "MLC_HOST_OS_VERSION", "the system description's operating_system"),
        cross_checked(OS_INFO, "MLC_HOST_OS_KERNEL_VERSION", "the system description's operating_system"),
        cross_checked(README, "Performance Results", "the performance run's detail log (its result field)"),
        cross_checked(README, "Model Precision", "measurements.json's weight_data_types"),
        cross_checked(
            HARNESS_RESULTS, "TestScenario.*", "accuracy.txt's good= and total= (its good_items, total_items)"
        ),
        cross_checked(HARNESS_RESULTS, "args", "its backend: the system description's framework"),
        cross_checked(SYSTEM_JSON, "host_processor_model_name", "MLC's cpu_info.json of each result, where kept"),
        cross_checked(SYSTEM_JSON, "framework", "the reference harness's backend (accuracy/results.json), where kept"),
    ],
)
def check_harness_records(ctx: TreeContext) -> list[Finding]:
    severity = "warning" if ctx.division == "open" else "error"
    findings = []
    for result in ctx.results:
        if result.is_endpoints:
            continue
        for problem in _host_problems(ctx, result):
            findings.append(Finding("harness-records", ctx.rel(result.path / CPU_INFO), problem, severity))
        for name, problem in _figure_problems(ctx, result):
            findings.append(Finding("harness-records", ctx.rel(result.path / name), problem, severity))
        for name, problem in _console_problems(ctx, result):
            findings.append(Finding("harness-records", ctx.rel(result.path / name), problem, severity))
        for problem in _os_problems(ctx, result):
            findings.append(Finding("harness-records", ctx.rel(result.path / OS_INFO), problem, severity))
        precision = _precision_problem(ctx, result)
        if precision:
            findings.append(Finding("harness-records", ctx.rel(result.path / README), precision, severity))
        for problem in _harness_results_problems(ctx, result):
            findings.append(
                Finding("harness-records", ctx.rel(result.path / "accuracy" / HARNESS_RESULTS), problem, severity)
            )
    return findings
