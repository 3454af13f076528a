"""Decoding settings: a foundation type shared by the plan (which reads them from the
benchmark table) and the backends (which apply them). No imports of the project's own."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings from the benchmark table (never per run, never per query)."""

    max_new_tokens: int
    min_new_tokens: int = 1
    greedy: bool = True
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
