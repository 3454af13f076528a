"""The text-to-video system under test: LoadGen queries in, prompts to the backend, one video
per sample back.

A sample's response is its video as an mp4 file's bytes (what the vendor's and Krai's v6.0
harnesses return), so the accuracy log holds every video whole and the evaluate stage writes
them back out for the reviewers and VBench. There are no token latencies: a sample completes
once, with its whole video.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dataset import PromptDataset
from .sut import SutBase


@dataclass(frozen=True)
class VideoRequest:
    request_id: int  # LoadGen's query-sample id
    sample_index: int  # the prompt's line in the prompt file
    prompt: str


class VideoSut(SutBase):
    def __init__(self, dataset: PromptDataset, *, report_first_token: bool = False) -> None:
        super().__init__(dataset)
        self.video_bytes = 0

    def request(self, query_sample) -> VideoRequest:
        return VideoRequest(query_sample.id, query_sample.index, self.dataset.prompts[query_sample.index])

    # -- backend callback ------------------------------------------------------------
    def complete(self, request_id: int, video: bytes) -> None:
        """``video``: the sample's mp4 file, whole."""
        import numpy as np

        data = np.frombuffer(video, dtype=np.uint8)  # stays referenced until LoadGen has copied it
        with self._lock:
            if not self._settle(request_id):
                return
            self.video_bytes += len(video)
        self.lg.QuerySamplesComplete(
            [self.lg.QuerySampleResponse(request_id, data.ctypes.data if len(data) else 0, len(data))]
        )
