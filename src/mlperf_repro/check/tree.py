"""Checks on a packaged submission tree (the "after" check).

Each rule is a function ``(TreeContext) -> list[Finding]`` registered in :data:`RULES`
under the name its findings carry; the rules live in ``check/rules/``, one module per record
they read (files and structure, systems, run logs, latency, accuracy, compliance,
hygiene), and :func:`check_tree` runs whatever the registry holds. The facts come from the
round's rules table. The official checker misses LoadGen-INVALID results, ignores
performance-log errors by default and judges Interactive against Server limits; these
rules do not.

A tree marked NOT SUBMITTABLE (test scale, ``NOT_SUBMITTABLE.md`` at its root) is checked
for everything except the round's minimum durations, sample counts and accuracy targets.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..benchmarks import Round
from ..errors import UserError
from . import rules as _rules  # noqa: F401  (importing the package registers every rule)
from .files import UnreadableFile
from .findings import Finding
from .model import (
    ACC,
    NOT_SUBMITTABLE_MARK,
    PERF,
    RULES,
    ScenarioResult,
    TreeContext,
    load_context,
    load_contexts,
    rule,
)
from .rules.compliance import compliance_passed
from .rules.structure import check_root
from .rules.systems import per_node_type_counts

__all__ = [
    "ACC",
    "CHECKER_FAULT",
    "NOT_SUBMITTABLE_MARK",
    "PERF",
    "RULES",
    "ScenarioResult",
    "TreeContext",
    "check_tree",
    "compliance_passed",
    "failed_results",
    "load_context",
    "load_contexts",
    "per_node_type_counts",
    "require_known_rules",
    "rule",
]


# The rule name of a finding that reports a rule which stopped on an unexpected value.
CHECKER_FAULT = "checker-fault"
# Set (the test suite sets it): such a rule raises instead, so no test passes over a fault.
RAISE_FAULTS_ENV = "MLPERF_REPRO_RAISE_CHECKER_FAULTS"


def check_tree(root: str | Path, rules: Round, only: list[str] | None = None) -> list[Finding]:
    contexts, findings = load_contexts(root, rules)
    if not contexts:
        return findings
    if only is None or "root-files" in only:
        findings.extend(check_root(Path(root), rules, contexts))
    for ctx in contexts:
        for name, function in RULES.items():
            if only is None or name in only:
                try:
                    findings.extend(function(ctx))
                except UnreadableFile as exc:
                    # A file listed as readable that cannot be read: an error, never a skip.
                    findings.append(Finding(name, exc.path or ctx.rel(ctx.base), f"{exc} (the rule stopped here)"))
                except Exception as exc:  # noqa: BLE001
                    if os.environ.get(RAISE_FAULTS_ENV):
                        raise
                    # A reader that met a value nobody planned for: the tree still fails,
                    # the rest of the check still runs, and the user is told it is our bug.
                    findings.append(
                        Finding(
                            CHECKER_FAULT,
                            ctx.rel(ctx.base),
                            f"rule {name!r} stopped on {type(exc).__name__}: {exc}; a value in this"
                            " submitter's files is one the checker does not read yet (a checker bug:"
                            " please report it with the file)",
                        )
                    )
    return findings


def failed_results(root: str | Path, rules: Round) -> dict[str, list[Finding]]:
    """Scenario folder (relative) -> its error findings; for deciding what may be packaged."""
    out: dict[str, list[Finding]] = {}
    for finding in check_tree(root, rules):
        if finding.severity != "error":
            continue
        parts = finding.path.split("/")
        if len(parts) >= 6 and parts[2] == "results":
            out.setdefault("/".join(parts[:6]), []).append(finding)
    return out


def require_known_rules(names: list[str]) -> None:
    known = ["root-files", *RULES]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(f"unknown check rule(s) {unknown}; known: {', '.join(known)}")
