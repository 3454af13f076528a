"""The text-to-video system under test: LoadGen queries in, prompts to the backend, one video
per sample back.

A sample's response is its video as an mp4 file's bytes (what the vendor's and Krai's v6.0
harnesses return), so the accuracy log holds every video whole and the evaluate stage writes
them back out for the reviewers and VBench. There are no token latencies: a sample completes
once, with its whole video.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .dataset import PromptDataset


@dataclass(frozen=True)
class VideoRequest:
    request_id: int  # LoadGen's query-sample id
    sample_index: int  # the prompt's line in the prompt file
    prompt: str


class VideoSut:
    def __init__(self, dataset: PromptDataset, *, report_first_token: bool = False) -> None:
        import mlperf_loadgen as lg

        self.lg = lg
        self.dataset = dataset
        self.backend = None
        self._lock = threading.Lock()
        self._outstanding: set[int] = set()
        self._abandoned = False
        self.completed = 0
        self.video_bytes = 0
        # The run record's LLM counters, which mean nothing here.
        self.generated_tokens = 0
        self.single_token_outputs = 0

    def attach(self, backend) -> None:
        self.backend = backend

    # -- LoadGen callbacks ---------------------------------------------------------
    def issue_queries(self, query_samples) -> None:
        with self._lock:
            if self._abandoned:
                self._answer_empty([q.id for q in query_samples])
                return
            self._outstanding.update(q.id for q in query_samples)
        self.backend.submit([VideoRequest(q.id, q.index, self.dataset.prompts[q.index]) for q in query_samples])

    def flush_queries(self) -> None:
        """Nothing is buffered on our side: every query is with the backend already."""

    def abandon(self) -> None:
        """The backend failed: answer every outstanding and future query with nothing, so
        LoadGen ends the test instead of waiting forever."""
        with self._lock:
            self._abandoned = True
            ids, self._outstanding = list(self._outstanding), set()
            self._answer_empty(ids)

    def _answer_empty(self, ids: list[int]) -> None:
        if ids:
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(i, 0, 0) for i in ids])

    # -- backend callback ------------------------------------------------------------
    def complete(self, request_id: int, video: bytes) -> None:
        """``video``: the sample's mp4 file, whole."""
        import numpy as np

        data = np.frombuffer(video, dtype=np.uint8)  # stays referenced until LoadGen has copied it
        with self._lock:
            if request_id not in self._outstanding:
                return  # already answered (abandoned after a backend failure)
            self._outstanding.discard(request_id)
            self.completed += 1
            self.video_bytes += len(video)
        self.lg.QuerySamplesComplete(
            [self.lg.QuerySampleResponse(request_id, data.ctypes.data if len(data) else 0, len(data))]
        )
