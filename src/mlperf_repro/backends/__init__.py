"""Inference backends the LoadGen SUT drives.

A backend accepts token-id prompts and reports, per request, the first generated token
(so LoadGen can time TTFT) and the complete list of generated token ids. It reports them in
lists, everything one engine step or one event-loop iteration produced in one call, so the SUT
makes one LoadGen call per list: each LoadGen call releases and retakes the GIL, a hand-over to
LoadGen's issue thread at thousands of queries per second (bench/README.md). The same interface
serves vLLM in-process and remote OpenAI-compatible endpoints (backends.endpoints).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from ..generation import GenerationSettings

__all__ = ["Backend", "CompleteCallback", "FirstTokenCallback", "GenerationSettings", "Request", "make_backend"]


class Request(NamedTuple):
    """One query (a named tuple: made once per query on LoadGen's issue thread, it costs a
    quarter of a frozen dataclass there)."""

    request_id: int  # LoadGen's query-sample id
    prompt_token_ids: Sequence[int]


FirstTokenCallback = Callable[[list[tuple[int, int]]], None]  # [(request_id, first token id)]
CompleteCallback = Callable[[list[tuple[int, list[int]]]], None]  # [(request_id, all generated ids)]


class Backend(Protocol):
    def start(self) -> None:
        """Load the model / connect; runs before LoadGen's clock starts."""

    def submit(self, requests: Sequence[Request]) -> None:
        """Accept requests; called from LoadGen's issue thread, must not block."""

    def serve_until(self, done: threading.Event) -> None:
        """Do the work on the calling (main) thread until ``done`` is set and all is answered."""

    def stop(self) -> None:
        """Release resources."""


def make_backend(
    engine: dict,
    *,
    model_path: str,
    generation: GenerationSettings,
    stream: bool,
    on_first_tokens: FirstTokenCallback | None,
    on_completions: CompleteCallback,
) -> Backend:
    """The backend a system's ``engine`` config names (already schema-validated)."""
    kind = engine["backend"]
    common = dict(generation=generation, stream=stream, on_first_tokens=on_first_tokens, on_completions=on_completions)
    if kind == "vllm":
        from .vllm_engine import VllmEngineBackend

        return VllmEngineBackend(model_path=model_path, engine_args=engine.get("engine_args", {}), **common)
    if kind == "endpoints":
        from .endpoints import EndpointBackend, dispatch_settings, endpoint_specs
        from .split_head import SplitEndpointBackend, head_workers

        endpoints, dispatch = endpoint_specs(engine), dispatch_settings(engine)
        workers = head_workers(dispatch, endpoints)
        if workers:
            return SplitEndpointBackend(
                endpoints=endpoints, dispatch=dispatch, servers=engine.get("servers"), workers=workers, **common
            )
        return EndpointBackend(endpoints=endpoints, dispatch=dispatch, servers=engine.get("servers"), **common)
    from ..errors import UserError

    raise UserError(f"unknown backend '{kind}' (systems.<name>.engine.backend); allowed: vllm, endpoints")
