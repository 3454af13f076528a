"""Build the comparison of a reference against partners (each possibly several runs)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..archive import ARCHIVE_SUFFIXES, Limits, extract
from ..errors import UserError
from ..stats import Summary, overlaps, summarize
from .diff import Cause, pair_records, rank_causes, timing_only
from .records import Record, read_submission


@dataclass
class Input:
    label: str
    runs: list[list[Record]]  # one list of records per run (repeat runs of one setup)
    notes: list[str] = field(default_factory=list)

    @property
    def records(self) -> list[Record]:
        return self.runs[0]


@dataclass
class Row:
    reference: Record
    partner: Record
    reference_metric: Summary | None
    partner_metric: Summary | None
    ratio: float | None
    per_accelerator_ratio: float | None
    within_tolerance: bool
    noise: bool  # the gap lies within the runs' confidence intervals
    causes: list[Cause]
    identical_settings: int
    # (key, reference, partner): hand-written values that differ only in spelling, not causes
    cosmetic: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    # (key, reference, partner): values both sides measured (target_qps: auto), timings, not causes
    measured: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.partner.mlperf_benchmark} / {self.partner.scenario}"


@dataclass
class Comparison:
    reference: Input
    partner: Input
    tolerance: float
    rows: list[Row]
    unmatched: list[Record]

    @property
    def ok(self) -> bool:
        return all(row.within_tolerance for row in self.rows)


GENERIC_NAMES = ("submission", "package", "results")


def _label(path: Path) -> str:
    """A readable name: the archive's or folder's, skipping generic ones (a workflow's
    results/package/submission is labelled by its working directory)."""
    path = path.resolve()
    for part in [path, *path.parents]:
        name = part.name
        for suffix in ARCHIVE_SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
        if name and name not in GENERIC_NAMES:
            return name
    return "submission"


def input_label(spec: str) -> str:
    paths = [Path(p) for p in spec.split(",") if p]
    return _label(paths[0]) + (f" ({len(paths)} runs)" if len(paths) > 1 else "")


def load_input(spec: str, scratch: Path, limits: Limits, submitter: str | None = None) -> Input:
    """``spec`` is a path, or several comma-separated paths of repeat runs of one setup."""
    paths = [Path(p) for p in spec.split(",") if p]
    runs = []
    for index, path in enumerate(paths):
        if not path.exists():
            raise UserError(f"{path} does not exist (give a submission tree, a results repository or a tarball)")
        if path.is_file():
            if not path.name.endswith(ARCHIVE_SUFFIXES):
                raise UserError(f"{path} is not a folder or a tar archive ({', '.join(ARCHIVE_SUFFIXES)})")
            path = extract(path, scratch / f"{len(list(scratch.iterdir()))}-{_label(path)}", limits)
        records = read_submission(path, _label(Path(paths[index])))
        if submitter:
            records = [r for r in records if r.submitter.lower() == submitter.lower()]
        if not records:
            raise UserError(f"{paths[index]} holds no results (expected <division>/<submitter>/results/...)")
        runs.append(records)
    label = input_label(spec)
    notes = []
    if len(runs) > 1:
        for other in runs[1:]:
            if not timing_only([runs[0][0], *[r for r in other if r.path == runs[0][0].path]]):
                notes.append(f"{label}: the runs differ in more than timing; their statistics mix setups")
                break
    return Input(label, runs, notes)


def _values(inp: Input, record: Record) -> list[float]:
    values = []
    # A results repository holds several submitters' results under one system name.
    identity = (record.division, record.submitter, record.system, record.benchmark, record.scenario)
    for run in inp.runs:
        for candidate in run:
            if (candidate.division, candidate.submitter, candidate.system, candidate.benchmark, candidate.scenario) == (
                identity
            ):
                if candidate.metric is not None:
                    values.append(candidate.metric)
                break
    return values


def compare_inputs(reference: Input, partner: Input, tolerance: float) -> Comparison:
    rows = []
    pairs = pair_records(reference.records, partner.records)
    for ref, other in pairs:
        ref_summary = summarize(_values(reference, ref))
        other_summary = summarize(_values(partner, other))
        ratio = per_acc = None
        within = True
        noise = False
        if ref_summary and other_summary and ref_summary.mean:
            ratio = other_summary.mean / ref_summary.mean
            per_acc = ratio * ref.accelerators / max(1, other.accelerators)
            within = abs(ratio - 1.0) <= tolerance
            noise = ref_summary.n > 1 and other_summary.n > 1 and overlaps(ref_summary, other_summary)
        ranking = rank_causes(ref, other)
        rows.append(
            Row(
                ref,
                other,
                ref_summary,
                other_summary,
                ratio,
                per_acc,
                within,
                noise,
                ranking.causes,
                ranking.identical,
                ranking.cosmetic,
                ranking.measured,
            )
        )
    matched = {id(p) for _, p in pairs}
    unmatched = [r for r in partner.records if id(r) not in matched]
    rows.sort(key=lambda r: (r.partner.mlperf_benchmark, r.partner.scenario, r.partner.system))
    return Comparison(reference, partner, tolerance, rows, unmatched)


def compare_paths(
    reference: str,
    partners: list[str],
    *,
    tolerance: float = 0.04,
    limits: Limits | None = None,
    submitter: str | None = None,
) -> list[Comparison]:
    limits = limits or Limits()
    with tempfile.TemporaryDirectory(prefix="mlperf-compare-") as scratch:
        ref = load_input(reference, Path(scratch), limits, submitter)
        return [compare_inputs(ref, load_input(p, Path(scratch), limits), tolerance) for p in partners]
