"""The evidence map: every field the checker reads from a tree, and what stands behind it.

A submission tree records many facts twice or can rebuild them from others (a verdict and
the numbers beside it, a summary and its detail log, a setting in user.conf and in the log).
For each field a parser reads, the map says one of three things:

- **derived**: recomputed from other evidence (which, in ``basis``), and the rule that reports
  a stated value that disagrees;
- **cross-checked**: compared with another record (``basis``), and the rule that reports a
  disagreement;
- **trusted**: nothing in the tree can check it, and ``basis`` says why.

The rules declare their entries where they are registered (``@rule(name, evidence=[...])``,
:mod:`mlperf_repro.check.model`); the fields nothing checks are declared with their record
kind (:func:`record_kind`). ``docs/checker.md`` renders the table from :data:`EVIDENCE`, and
``bench/evidence_mutations.py`` and the tests generate their mutations from it.

Parsers hand the rules :class:`Record` objects, which note every field read while
:func:`reading` is active: the tests run the checker over generated trees and fail on a field
that was read and has no entry here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

DERIVED, CROSS_CHECKED, TRUSTED = "derived", "cross-checked", "trusted"
HOW = (DERIVED, CROSS_CHECKED, TRUSTED)


@dataclass(frozen=True)
class RecordKind:
    """One kind of record a tree holds (a LoadGen detail log, a verify file, ...)."""

    name: str
    # Where it lives, relative to a result (scenario) folder unless it starts with "/" (the
    # submitter's folder); "*" matches within one name.
    paths: tuple[str, ...]
    # How it is written: "mllog" (LoadGen's :::MLLOG lines), "summary" ("label : value"),
    # "json", "conf" (LoadGen's "model.scenario.key = value"), "text" (lines a parser
    # reads with the patterns of its fields), "listing" (the tree's entries).
    format: str
    what: str


@dataclass(frozen=True)
class Evidence:
    """One field of a record kind and what stands behind it."""

    record: str
    field: str  # a name, or an fnmatch pattern over names ("result_*_percentile_latency_ns")
    how: str  # DERIVED | CROSS_CHECKED | TRUSTED
    basis: str  # derived: from what; cross-checked: against what; trusted: why it cannot be checked
    rule: str | None = None  # the rule reporting a disagreement (None for trusted)
    severity: str = "error"  # how the rule reports it; "warning" says why in ``basis``

    def __post_init__(self) -> None:
        if self.how not in HOW:
            raise ValueError(f"evidence {self.record}:{self.field}: how={self.how!r}, not one of {HOW}")


RECORDS: dict[str, RecordKind] = {}
EVIDENCE: list[Evidence] = []


def record_kind(
    name: str, paths: tuple[str, ...] | str, format: str, what: str, *, trusted: dict[str, str] | None = None
) -> RecordKind:
    """Register a record kind, and the fields of it nothing can check (field -> why)."""
    kind = RecordKind(name, (paths,) if isinstance(paths, str) else tuple(paths), format, what)
    RECORDS[name] = kind
    for name_, why in (trusted or {}).items():
        EVIDENCE.append(Evidence(name, name_, TRUSTED, why))
    return kind


def trust(record: str, fields: dict[str, str]) -> None:
    """Fields of a record kind (registered here or in another module) nothing checks: field -> why."""
    EVIDENCE.extend(Evidence(record, name, TRUSTED, why) for name, why in fields.items())


def derived(record: str, field: str, basis: str, *, severity: str = "error") -> Evidence:
    """An entry for ``@rule(..., evidence=[...])``: the rule recomputes ``field`` from ``basis``."""
    return Evidence(record, field, DERIVED, basis, severity=severity)


def cross_checked(record: str, field: str, basis: str, *, severity: str = "error") -> Evidence:
    """An entry for ``@rule(..., evidence=[...])``: the rule compares ``field`` with ``basis``."""
    return Evidence(record, field, CROSS_CHECKED, basis, severity=severity)


def declare(rule_name: str, entries: list[Evidence]) -> None:
    """The entries a rule declares, registered under its name."""
    for entry in entries:
        if entry.how == TRUSTED:
            raise ValueError(f"rule {rule_name}: a trusted field is declared with its record kind, not a rule")
        EVIDENCE.append(Evidence(entry.record, entry.field, entry.how, entry.basis, rule_name, entry.severity))


def entries_for(record: str, field_name: str) -> list[Evidence]:
    """The map's entries for one field (exact names and patterns)."""
    return [
        e
        for e in EVIDENCE
        if e.record == record and (e.field == field_name or fnmatch.fnmatchcase(field_name, e.field))
    ]


def unmapped(reads: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (record, field) pairs read that have no entry in the map."""
    return sorted((r, f) for r, f in reads if not entries_for(r, f))


# -- what the rules read ----------------------------------------------------------------------------

_reads: set[tuple[str, str]] | None = None


@contextmanager
def reading() -> Iterator[set[tuple[str, str]]]:
    """Note every field read from a :class:`Record` while the block runs (for the tests)."""
    global _reads
    previous, _reads = _reads, set()
    try:
        yield _reads
    finally:
        _reads = previous


def note(record: str, field_name: str) -> None:
    """A field read without a :class:`Record` (a parser reading text with a pattern)."""
    if _reads is not None:
        _reads.add((record, str(field_name)))


class Record(dict):
    """A parsed record of one kind: a dict that notes each field the checker looks up."""

    __slots__ = ("kind",)

    def __init__(self, kind: str, values: dict | None = None) -> None:
        super().__init__(values or {})
        self.kind = kind

    def __getitem__(self, key: Any) -> Any:
        if _reads is not None:
            _reads.add((self.kind, str(key)))
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        if _reads is not None:
            _reads.add((self.kind, str(key)))
        return super().get(key, default)

    def __contains__(self, key: Any) -> bool:
        if _reads is not None:
            _reads.add((self.kind, str(key)))
        return super().__contains__(key)

    def __reduce__(self):  # a Record pickles as what it holds
        return (Record, (self.kind, dict(self)))


def table_rows() -> list[tuple[str, str, str, str, str]]:
    """(record, field, how, basis, rule) for every entry, in the order of :data:`RECORDS`."""
    order = {name: i for i, name in enumerate(RECORDS)}
    rows = [
        (
            e.record,
            e.field,
            e.how + (" (warning)" if e.severity == "warning" else ""),
            e.basis,
            e.rule or "",
        )
        for e in EVIDENCE
    ]
    return sorted(rows, key=lambda r: (order.get(r[0], len(order)), HOW.index(r[2].split(" ")[0]), r[1]))


def markdown_table() -> str:
    """The evidence map as the table docs/checker.md shows."""
    lines = [
        "| record | field | how | from / against / why not | rule |",
        "|---|---|---|---|---|",
    ]
    for record, field_name, how, basis, rule_name in table_rows():
        cell = basis.replace("|", "\\|")
        lines.append(f"| `{record}` | `{field_name}` | {how} | {cell} | {f'`{rule_name}`' if rule_name else ''} |")
    return "\n".join(lines) + "\n"
