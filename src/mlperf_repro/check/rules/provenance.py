"""Each run belongs to one result: a LoadGen run (or an accuracy run's scores) found under
two results of a submitter was made once and claimed twice.

A run is known by when it started and what it measured: its ``test_datetime`` and every
``generated_*`` and ``result_*`` record (two runs do not share all of them). The same run
may stand in two places only where the rules let one run serve both:

- two benchmarks LoadGen runs as one model (``loadgen_model``: llama2-70b-99 and -99.9,
  yolo-95 and -99), of the same system, in the same part of their folders: the run that
  meets the higher accuracy target is the lower one's too;
- the scenarios an edge system's result may be inferred from (the round's
  ``inferred_scenarios``: a SingleStream run in the MultiStream folder), of the same
  benchmark and system; scenario-match judges which scenario the run is;
- the copy a compliance folder keeps of its own run (``TEST04/`` and
  ``TEST04/performance/run_1/``).

Everything else is an error: a run of another system (a 22-node run filed as the 1-node
system's), a TEST04 folder holding the performance run, the TEST01 run of another
benchmark. So is an accuracy.txt whose ``hash=`` line (the sha256 of its accuracy log)
another result's accuracy.txt holds while the two truncated logs differ. The published
trees that share runs otherwise are listed apart in bench/published_corpus.py (one machine
filed under two system names, a compliance folder holding another run).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..evidence import cross_checked
from ..findings import Finding
from ..model import (
    ACC,
    DETAIL_LOG,
    HASH_LINE,
    PERF,
    RunLog,
    ScenarioResult,
    TreeContext,
    accuracy_entries,
    rule,
    run_identity,
    run_logs,
    run_start,
)

ACCURACY_LOG = "mlperf_log_accuracy.json"


def _part(ctx: TreeContext, log: RunLog, result: ScenarioResult) -> str:
    """Which of the result's runs a log is: a compliance test's, or the folder it lies in (a
    power result's performance/ holds two runs, run_1 and ranging; structure names any other)."""
    if log.test:
        return log.test
    folder = result.path if log.path.is_relative_to(result.path) else result.compliance_path
    relative = log.path.relative_to(folder).parts
    runs = (ctx.rules.data.get("tree_layout") or {}).get("performance_folders", [])
    if relative[0] == "performance" and len(relative) > 2 and relative[1] in runs and relative[1] != "run_1":
        return "/".join(relative[:2])
    return relative[0] if len(relative) > 1 else "."


def _one_model(ctx: TreeContext, a: ScenarioResult, b: ScenarioResult) -> bool:
    if a.benchmark == b.benchmark:
        return True
    if a.facts is None or b.facts is None:
        return False
    models = {
        facts.loadgen_model(scenario)
        for facts, scenario in ((a.facts, a.scenario), (b.facts, b.scenario))
        if scenario in facts.facts.get("loadgen_model", {})
    }
    return len(models) == 1


def _may_share(ctx: TreeContext, a: tuple[ScenarioResult, str], b: tuple[ScenarioResult, str]) -> bool:
    (first, part_a), (second, part_b) = a, b
    if first is second:
        return part_a == part_b
    if first.system != second.system or part_a != part_b or not _one_model(ctx, first, second):
        return False
    if first.scenario == second.scenario:
        return True
    inferred = (ctx.rules.data.get("inferred_scenarios") or {}).get("edge", {})
    edge = "edge" in ctx.system_type(first.system)
    return edge and (
        first.scenario in inferred.get(second.scenario, []) or second.scenario in inferred.get(first.scenario, [])
    )


def _shown(ctx: TreeContext, result: ScenarioResult, part: str) -> str:
    return f"{ctx.rel(result.path)}{'' if part == '.' else '/' + part}"


@rule(
    "run-provenance",
    evidence=[
        cross_checked(
            "accuracy.txt",
            "hash",
            "another result's accuracy.txt naming it names the same log: where both are truncated, their kept ends",
        ),
    ],
)
def check_run_provenance(ctx: TreeContext) -> list[Finding]:
    """A run, or an accuracy log's scores, claimed by two results that cannot share it; one
    run (one start) filed twice with two sets of figures."""
    findings = []
    holders: dict[tuple, list[tuple[ScenarioResult, str, Path, tuple]]] = defaultdict(list)
    for result in ctx.results:
        if result.is_endpoints:
            continue
        for log in run_logs(ctx, result):
            detail = ctx.detail_at(log.path)
            identity = run_identity(detail)
            if identity is not None:
                holders[run_start(detail) or identity].append((result, _part(ctx, log, result), log.path, identity))
    for held in holders.values():
        first = held[0]
        for other in held[1:]:
            if not _may_share(ctx, first[:2], other[:2]):
                findings.append(
                    Finding(
                        "run-provenance",
                        ctx.rel(other[2]),
                        f"is the run {ctx.rel(first[2])} holds (it started at the same instant): one run cannot be "
                        f"both {_shown(ctx, *first[:2])} and {_shown(ctx, *other[:2])}",
                    )
                )
            elif other[3] != first[3]:
                figures, others = dict(first[3][1]), dict(other[3][1])
                differ = ["test_datetime"] if other[3][0] != first[3][0] else []
                differ += sorted(k for k in figures.keys() | others.keys() if figures.get(k) != others.get(k))
                findings.append(
                    Finding(
                        "run-provenance",
                        ctx.rel(other[2]),
                        f"is the run {ctx.rel(first[2])} holds (the same power_begin, to the millisecond), but "
                        f"with other {', '.join(differ[:4])}{' ...' if len(differ) > 4 else ''}: one run has one "
                        "set of figures, so one of the two was edited",
                    )
                )
    findings += _shared_scores(ctx)
    findings += _compliance_logs_of_the_accuracy_run(ctx)
    findings += _compliance_logs_shared(ctx)
    return findings


def _compliance_logs_shared(ctx: TreeContext) -> list[Finding]:
    """One compliance run's accuracy log in two results that cannot share a run: a TEST06
    folder copied from another scenario, or from another system (the v5.1 layout's
    compliance/ tree). Another scenario of the same system ran another schedule: an error.
    Two systems may be one deterministic model's twins (v6.0 Dell's and GigaComputing's
    8xMI355X TEST06 logs are the same bytes): a warning. An empty log ("[]") says nothing."""
    by_content: dict[bytes, list[tuple[ScenarioResult, str, Path]]] = defaultdict(list)
    for result in ctx.results:
        if result.is_endpoints:
            continue
        for test, path in _compliance_accuracy_logs(ctx, result):
            content = ctx.files.read_bytes(path)
            if b'"qsl_idx"' in content:
                by_content[hashlib.sha256(content).digest()].append((result, test, path))
    findings = []
    for held in by_content.values():
        first = held[0]
        for other in held[1:]:
            if other[0] is first[0] or _may_share(ctx, first[:2], other[:2]):
                continue
            same_system = first[0].system == other[0].system
            findings.append(
                Finding(
                    "run-provenance",
                    ctx.rel(other[2]),
                    f"is {ctx.rel(first[2])}, byte for byte: {other[1]}'s run of {_shown(ctx, other[0], '.')} "
                    f"cannot be {first[1]}'s run of {_shown(ctx, first[0], '.')}"
                    + ("" if same_system else " (unless a deterministic model wrote the same log on two systems)"),
                    severity="error" if same_system else "warning",
                )
            )
    return findings


def _compliance_logs_of_the_accuracy_run(ctx: TreeContext) -> list[Finding]:
    """A compliance test's accuracy log that is the result's accuracy run's, byte for byte: a
    compliance run samples or covers another set (TEST01's sampled outputs, TEST06's 100
    samples, TEST07's compliance set), so its log is never the accuracy run's."""
    findings = []
    for result in ctx.results:
        own = result.path / "accuracy" / ACCURACY_LOG
        if result.is_endpoints or not ctx.files.is_file(own):
            continue
        scored = ctx.files.read_bytes(own)
        for test, path in _compliance_accuracy_logs(ctx, result):
            if path != own and ctx.files.size(path) == len(scored) and ctx.files.read_bytes(path) == scored:
                findings.append(
                    Finding(
                        "run-provenance",
                        ctx.rel(path),
                        f"is {ctx.rel(own)}, the accuracy run's log, byte for byte: {test}'s run logs other "
                        "samples, so its verdict was not drawn from its own run",
                    )
                )
    return findings


def _compliance_accuracy_logs(ctx: TreeContext, result: ScenarioResult):
    """(test, path) of each accuracy log in a result's compliance folders (TESTxx/...)."""
    for folder in dict.fromkeys((result.path, result.compliance_path)):
        for rel, entry in ctx.files.walk(folder):
            tests = [p for p in Path(rel).parts if p.startswith("TEST")]
            if entry.kind == "file" and Path(rel).name == ACCURACY_LOG and tests:
                yield tests[0], ctx.root / rel


def _shared_scores(ctx: TreeContext) -> list[Finding]:
    """accuracy.txt files naming one accuracy log (the same hash line). One sha256 is one
    log, so where both logs are truncated their kept ends are the same bytes: kept ends that
    differ say one accuracy.txt was copied from the other result (an error). Where the logs
    are the same bytes, their scores are the same (an error otherwise), and unless one
    accuracy run is filed twice: another scenario's run of the same system writes another
    log unless its SUT answers in issue order (a warning); another system's may be a deterministic model's twin
    (resnet50 SingleStream on two systems of one GPU is), or a copy with its scores (a
    warning, for a reviewer to decide)."""
    by_hash: dict[str, list[ScenarioResult]] = defaultdict(list)
    for result in ctx.results:
        txt = result.path / "accuracy" / "accuracy.txt"
        if result.is_endpoints or not ctx.files.is_file(txt):
            continue
        found = HASH_LINE.search(ctx.files.read_text(txt))
        if found:
            by_hash[found.group(1)].append(result)
    findings = []
    for digest, results in by_hash.items():
        first = results[0]
        for other in results[1:]:
            logs = [r.path / "accuracy" / ACCURACY_LOG for r in (first, other)]
            if not all(ctx.files.is_file(log) for log in logs):
                continue  # accuracy-files names a missing log
            contents = [ctx.files.read_bytes(log) for log in logs]
            truncated = all(accuracy_entries(ctx, log) is None for log in logs)
            where = ctx.rel(other.path / "accuracy" / "accuracy.txt")
            named = f"{ctx.rel(first.path / 'accuracy' / 'accuracy.txt')} (hash={digest[:16]}...)"
            if contents[0] != contents[1]:
                if truncated:
                    findings.append(
                        Finding(
                            "run-provenance",
                            where,
                            f"names the accuracy log {named} names, but the two folders' logs differ: one sha256 is "
                            "one log, so these scores were copied from the other result",
                        )
                    )
                continue  # (a whole log: accuracy-evidence compares its sha256 with the hash line)
            findings += _one_log_two_scores(ctx, first, other, where, named)
            first_run, other_run = (_accuracy_run(r) for r in (first, other))
            if first_run is not None and first_run == other_run:
                continue  # one run filed twice: the run's own provenance judges it
            if first.system == other.system and first.scenario != other.scenario:
                # Real SUTs answer in another order in each scenario, so no two published
                # scenarios' logs are the same bytes; an SUT answering in issue order (the
                # test factory's) writes one log in each: a warning, for a reviewer.
                findings.append(
                    Finding(
                        "run-provenance",
                        where,
                        f"holds the accuracy log {named} holds, byte for byte, though it is another scenario's "
                        "accuracy run: only an SUT that answers every scenario in issue order writes the same "
                        "log twice; otherwise it was copied from the other result",
                        severity="warning",
                    )
                )
            elif first.system != other.system and not _may_share(ctx, (first, "accuracy"), (other, "accuracy")):
                findings.append(
                    Finding(
                        "run-provenance",
                        where,
                        f"holds the accuracy log {named} holds, byte for byte, from another accuracy run: a "
                        "deterministic model can write one log twice, or the log was copied with its scores",
                        severity="warning",
                    )
                )
    return findings


def _accuracy_run(result: ScenarioResult) -> Any:
    detail = result.detail(ACC) or {}
    return run_start(detail) or run_identity(detail)


def _one_log_two_scores(
    ctx: TreeContext, first: ScenarioResult, other: ScenarioResult, where: str, named: str
) -> list[Finding]:
    """One accuracy log (the same bytes) scored twice must score alike: the evaluator is a
    function of the log. (No published pair differs.)"""
    if first.facts is None or other.facts is None:
        return []
    scores = [
        r.facts.accuracy_readings(ctx.files.read_text(r.path / "accuracy" / "accuracy.txt")) for r in (first, other)
    ]
    differ = sorted(k for k in scores[0].keys() & scores[1].keys() if scores[0][k] != scores[1][k])
    if not differ:
        return []
    shown = "; ".join(f"{k} {scores[1][k]} against {scores[0][k]}" for k in differ[:3])
    return [
        Finding(
            "run-provenance",
            where,
            f"scores the accuracy log {named} scores, the same bytes, otherwise: {shown}; one log has one "
            "score, so these scores were edited",
        )
    ]


@rule(
    "sut-match",
    evidence=[
        cross_checked(
            DETAIL_LOG,
            "sut_name",
            "the performance run's, for each compliance run of the result: one system under test; all "
            "published v5.1 and v6.0 results agree but v6.0 Lenovo's 3d-unet, whose TEST01 folders hold resnet's run",
        )
    ],
)
def check_sut_match(ctx: TreeContext) -> list[Finding]:
    """Every compliance run of a result names the performance run's system under test: a run
    of another SUT is another system's (or another benchmark's) run."""
    findings = []
    for result in ctx.results:
        if result.is_endpoints:
            continue
        named: dict[str, list[Path]] = defaultdict(list)
        for log in run_logs(ctx, result):
            if not log.test and log.path != result.log_path(PERF):
                continue  # (the accuracy run's: settings-evidence compares it)
            sut = ctx.detail_at(log.path).get("sut_name")
            if isinstance(sut, str):
                named[sut].append(log.path)
        if len(named) < 2:
            continue
        performance = result.log_path(PERF)
        usual = next((s for s, paths in named.items() if performance in paths), None) or max(
            named, key=lambda s: len(named[s])
        )
        for sut, paths in sorted(named.items()):
            if sut != usual:
                findings.append(
                    Finding(
                        "sut-match",
                        ctx.rel(min(paths)),
                        f"ran on SUT {sut!r}, but the result's performance run ({ctx.rel(performance)}) on {usual!r}: "
                        "every run of a result is of the same system under test",
                    )
                )
    return findings
