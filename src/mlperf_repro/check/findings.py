"""A finding names the file, the rule it breaks and what to do."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    message: str
    severity: str = "error"  # error | warning

    def line(self) -> str:
        return f"[{self.severity.upper()}] {self.rule}: {self.path}: {self.message}"
