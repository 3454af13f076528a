"""YAML text with a comment on the values that need one.

PyYAML drops comments, and an imported config's comments are its point: each names the file
a value came from. :class:`Noted` wraps a value with its note; :func:`dump` writes block
mappings (lists and small mappings in flow style) with each note as a comment: beside a
scalar when the line stays short, above the key otherwise.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

import yaml

WIDTH = 118


@dataclass
class Noted:
    value: Any
    note: str | None = None


def plain(node: Any) -> Any:
    """The data without notes (what yaml.safe_load of the text gives back)."""
    if isinstance(node, Noted):
        return plain(node.value)
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    return node


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True, sort_keys=False).strip()
    return text[: -len("...")].strip() if text.endswith("...") else text


def _comment(note: str, indent: str) -> list[str]:
    lines = []
    for paragraph in note.splitlines():
        lines += textwrap.wrap(paragraph, WIDTH - len(indent) - 2, break_on_hyphens=False, break_long_words=False) or [
            ""
        ]
    return [f"{indent}# {line}".rstrip() for line in lines]


def _lines(node: dict, depth: int) -> list[str]:
    indent = "  " * depth
    out: list[str] = []
    for key, entry in node.items():
        note = entry.note if isinstance(entry, Noted) else None
        value = entry.value if isinstance(entry, Noted) else entry
        head = f"{indent}{_scalar(key)}:"
        if depth == 0 and out:
            out.append("")
        if isinstance(value, dict) and value and not _flow(value):
            out += _comment(note, indent) if note else []
            out.append(head)
            out += _lines(value, depth + 1)
            continue
        line = f"{head} {_scalar(plain(value))}"
        if isinstance(value, list) and len(line) > WIDTH and any(isinstance(v, str) for v in value):
            # Sentences read best one per line.
            out += _comment(note, indent) if note else []
            out.append(head)
            out += [f"{indent}  - {_scalar(plain(v))}" for v in value]
            continue
        if isinstance(value, list) and len(line) > WIDTH:
            out += _comment(note, indent) if note else []
            out += _wrapped_list(head, [_scalar(plain(v)) for v in value], indent + "  ")
            continue
        if note and len(line) + len(note) + 3 <= WIDTH and "\n" not in note:
            out.append(f"{line}  # {note}")
        else:
            out += _comment(note, indent) if note else []
            out.append(line)
    return out


def _wrapped_list(head: str, items: list[str], continuation: str) -> list[str]:
    """A long flow sequence over several lines (YAML lets a flow sequence continue on lines
    indented deeper than its key)."""
    lines, current = [], f"{head} ["
    for index, item in enumerate(items):
        piece = item + ("," if index < len(items) - 1 else "]")
        if len(current) + len(piece) + 1 > WIDTH and current.strip() not in ("", f"{head.strip()} ["):
            lines.append(current.rstrip())
            current = continuation
        current += piece if current.endswith(("[", " ")) else " " + piece
    lines.append(current)
    return lines


def _flow(value: dict) -> bool:
    """Small mappings of scalars read best on one line ({target_qps: 370, min_duration_ms: ...})."""
    return (
        all(not isinstance(v, (dict, list, Noted)) for v in value.values())
        and len(_scalar(value)) <= 60
        and len(value) <= 3
    )


def dump(node: dict, header: str = "") -> str:
    lines = _comment(header, "") if header else []
    return "\n".join(lines + _lines(node, 0)) + "\n"
