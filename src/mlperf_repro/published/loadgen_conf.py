"""LoadGen conf files as a submitter wrote them (``user.conf``, ``mlperf.conf``).

Lines are ``<model>.<scenario>.<key> = <value>``; model and scenario may be ``*``. LoadGen
applies the most specific line: ``model.scenario`` over ``model.*`` over ``*.scenario`` over
``*.*`` (test_settings_internal.cc reads the wildcard lines first and lets specific ones
override them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError


@dataclass(frozen=True)
class ConfLine:
    model: str
    scenario: str
    key: str
    value: str
    line_no: int


def read_conf(path: Path, known_keys: list[str] | None = None) -> list[ConfLine]:
    """Every setting line; with ``known_keys``, a key LoadGen does not read is an error (LoadGen
    itself would ignore it silently, so a typo would change nothing without a word)."""
    lines = []
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        if "=" not in text:
            raise UserError(f"{path}:{number}: {raw.strip()!r} is not a '<model>.<scenario>.<key> = <value>' line")
        name, value = (part.strip() for part in text.split("=", 1))
        parts = name.split(".")
        if len(parts) < 3:
            raise UserError(f"{path}:{number}: {name!r} is not '<model>.<scenario>.<key>'")
        model, scenario, key = ".".join(parts[:-2]), parts[-2], parts[-1]
        if known_keys is not None and key not in known_keys:
            raise UserError(
                f"{path}:{number}: {key!r} is not a key LoadGen reads (it would be ignored); known keys: "
                f"{', '.join(known_keys)}"
            )
        lines.append(ConfLine(model, scenario, key, value, number))
    return lines


def effective(lines: list[ConfLine], model: str, scenario: str) -> dict[str, ConfLine]:
    """key -> the line LoadGen applies to this model and scenario."""
    rank = {("*", "*"): 0, ("*", scenario): 1, (model, "*"): 2, (model, scenario): 3}
    chosen: dict[str, tuple[int, ConfLine]] = {}
    for line in lines:
        level = rank.get((line.model, line.scenario))
        if level is not None and level >= chosen.get(line.key, (-1, line))[0]:
            chosen[line.key] = (level, line)
    return {key: line for key, (_, line) in chosen.items()}


def number(value: str) -> int | float:
    """A conf value as LoadGen parses it (integers stay integers)."""
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            raise UserError(f"{value!r} is not a number") from None
