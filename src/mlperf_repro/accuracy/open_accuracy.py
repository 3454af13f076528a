"""The open-division accuracy declaration of a text-to-video stand-in, as accuracy.txt carries it.

A stand-in whose config declares ``open_accuracy`` is judged by weight-free metrics
(:mod:`.video_quality`) where the round's ``vbench_score`` cannot be computed. accuracy.txt
keeps the round's lines (``vbench_score: not computed here: ...``, which the official checker's
pattern does not read) and adds, in this module's format, what our checker
(:mod:`mlperf_repro.check.tree`) reads back and re-derives::

    open_accuracy: temporal_flickering, video_ssim, video_psnr (open division: ...)
    open_accuracy temporal_flickering = 0.872515 over 64 videos; target >= 0.863799 (0.99 x 0.872549, the unquantized pipeline's)
    open_accuracy video_ssim = 0.925633 over 64 videos; target >= 0.850000 (minimum)
    open_accuracy video_psnr = 32.934988 over 64 videos; reported
    open_accuracy sample 130: temporal_flickering = 0.871234, video_ssim = 0.912345, video_psnr = 31.234567

The ``sample`` lines are the videos the package carries (the round's ``accuracy/videos/``),
with the unquantized pipeline's videos of the same samples in ``accuracy/unquantized_videos/``,
so a reader recomputes them from the tree. Values are printed with 6 decimals; ``None``: not
computed (a one-frame video's temporal_flickering, identical videos' PSNR).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .video_quality import OPEN_METRICS

PREFIX = "open_accuracy"
#: The accuracy folder's copy of the unquantized pipeline's videos of the packaged samples.
UNQUANTIZED_VIDEOS = "unquantized_videos"
DIGITS = 6
_DECLARED = re.compile(rf"^{PREFIX}: ([\w, ]+?) \(", re.MULTILINE)
_METRIC = re.compile(rf"^{PREFIX} (\w+) = (\S+) over (\d+) videos; (.*)$", re.MULTILINE)
_FRACTION = re.compile(r"^target >= ([\d.]+) \(([\d.]+) x ([\d.]+), the unquantized pipeline's\)$")
_MINIMUM = re.compile(r"^target >= ([\d.]+) \(minimum\)$")
_SAMPLE = re.compile(rf"^{PREFIX} sample (\d+): (.*)$", re.MULTILINE)
_PAIR = re.compile(r"(\w+) = (\S+?)(?:,|$)")


def _number(value: float | None) -> str:
    return "None" if value is None else f"{value:.{DIGITS}f}"


def _read_number(text: str) -> float | None:
    if text == "None":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # a NaN reads as not computed


def format_open_accuracy(
    result: Mapping[str, Any], targets: Mapping[str, Mapping[str, Any]], replaces: Sequence[str]
) -> str:
    """The declaration's lines: ``result`` from the task's open scorer (values, ``videos_scored``,
    ``samples``), ``targets`` per judged metric ``{"minimum": m}`` or ``{"minimum", "fraction",
    "unquantized"}``, ``replaces`` the round's metric(s) it stands in for."""
    names = list(result["metrics"])
    lines = [
        f"{PREFIX}: {', '.join(names)} (open division: computed here without downloaded weights, judged in place "
        f"of {', '.join(replaces)}; docs/wan.md)"
    ]
    for name in names:
        count = (result.get("videos_scored") or {}).get(name, 0)
        target = targets.get(name)
        if target is None:
            judged = "reported"
        elif "fraction" in target:
            judged = (
                f"target >= {_number(target['minimum'])} ({target['fraction']:g} x {_number(target['unquantized'])}, "
                "the unquantized pipeline's)"
            )
        else:
            judged = f"target >= {_number(target['minimum'])} (minimum)"
        lines.append(f"{PREFIX} {name} = {_number(result[name])} over {count} videos; {judged}")
    for sample, values in sorted((result.get("samples") or {}).items(), key=lambda kv: int(kv[0])):
        pairs = ", ".join(f"{name} = {_number(values.get(name))}" for name in names)
        lines.append(f"{PREFIX} sample {int(sample)}: {pairs}")
    return "\n".join(lines) + "\n"


@dataclass
class OpenDeclaration:
    """What an accuracy.txt declares (:func:`read_open_accuracy`); ``problems`` lists the lines
    that do not read as the format says."""

    metrics: list[str]
    values: dict[str, float | None] = field(default_factory=dict)
    videos: dict[str, int] = field(default_factory=dict)
    # metric -> {"minimum": m} or {"minimum", "fraction", "unquantized"}; absent: reported.
    targets: dict[str, dict[str, float]] = field(default_factory=dict)
    samples: dict[int, dict[str, float | None]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def read_open_accuracy(text: str) -> OpenDeclaration | None:
    """The declaration in an accuracy.txt, or None when it declares none."""
    declared = _DECLARED.search(text)
    if not declared:
        return None
    names = [n.strip() for n in declared.group(1).split(",") if n.strip()]
    found = OpenDeclaration(metrics=names)
    unknown = [n for n in names if n not in OPEN_METRICS]
    if unknown:
        found.problems.append(f"unknown metric(s) {', '.join(unknown)} (known: {', '.join(OPEN_METRICS)})")
    for match in _METRIC.finditer(text):
        name, value, count, judged = match.groups()
        found.values[name] = _read_number(value)
        found.videos[name] = int(count)
        if judged == "reported":
            continue
        fraction = _FRACTION.match(judged)
        minimum = _MINIMUM.match(judged)
        if fraction:
            found.targets[name] = {
                "minimum": float(fraction.group(1)),
                "fraction": float(fraction.group(2)),
                "unquantized": float(fraction.group(3)),
            }
        elif minimum:
            found.targets[name] = {"minimum": float(minimum.group(1))}
        else:
            found.problems.append(f"{name}: its target does not read ({judged!r})")
    for name in names:
        if name not in found.values:
            found.problems.append(f"{name} is declared but has no '{PREFIX} {name} = <value> over <n> videos' line")
    for match in _SAMPLE.finditer(text):
        found.samples[int(match.group(1))] = {k: _read_number(v) for k, v in _PAIR.findall(match.group(2))}
    return found
