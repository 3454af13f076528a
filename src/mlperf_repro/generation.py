"""Decoding settings: a foundation type shared by the plan (which reads them from the
benchmark table) and the backends (which apply them). No imports of the project's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings from the benchmark table (never per run, never per query)."""

    max_new_tokens: int
    min_new_tokens: int = 1
    greedy: bool = True
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None


def sampling_values(settings: GenerationSettings) -> dict[str, Any]:
    """The sampling parameters these settings send, under vLLM's names (``SamplingParams`` and the
    OpenAI API share them); ``compare`` names a run's sampling the same way as a harness config's."""
    values: dict[str, Any] = {"max_tokens": settings.max_new_tokens, "min_tokens": settings.min_new_tokens}
    if settings.greedy:
        values["temperature"] = 0.0
    else:
        values.update(temperature=settings.temperature, top_p=settings.top_p, seed=settings.seed)
    return values
