"""The LLM system under test: LoadGen queries in, backend requests out, token responses back.

Reporting follows LoadGen's token-latency contract: ``FirstTokenComplete`` with the first
token when it exists (Server/Interactive), then ``QuerySamplesComplete`` with the FULL
output (first token included, ``n_tokens == len(data)``) as int32, which TEST06 verifies.
"""

from __future__ import annotations

import threading
from array import array

from ..backends import Request
from .dataset import TokenDataset

# LoadGen's token responses are int32; array's "i" is C int, 4 bytes on every platform we run.
_INT32 = "i"
assert array(_INT32).itemsize == 4


class SutBase:
    """What every system under test shares: the backend it drives, the queries LoadGen issued
    that are not answered yet, and answering them all with nothing when the backend fails.
    A task's SUT says what request a query sample becomes (:meth:`request`) and how a
    response is reported."""

    def __init__(self, dataset) -> None:
        import mlperf_loadgen as lg

        self.lg = lg
        self.dataset = dataset
        self.backend = None
        self._lock = threading.Lock()
        self.completed = 0
        # The run record's counters (LLM outputs of fewer than two tokens, tokens generated).
        self.single_token_outputs = 0
        self.generated_tokens = 0
        self._outstanding: set[int] = set()
        self._abandoned = False

    def attach(self, backend) -> None:
        self.backend = backend

    @property
    def outstanding(self) -> int:
        """Queries LoadGen issued that are not answered yet (the progress watchdog asks)."""
        return len(self._outstanding)

    def request(self, query_sample):
        """The backend request of one LoadGen query sample."""
        raise NotImplementedError

    # -- LoadGen callbacks ---------------------------------------------------------
    def issue_queries(self, query_samples) -> None:
        with self._lock:
            if self._abandoned:
                self._answer_empty([q.id for q in query_samples])
                return
            self._outstanding.update([q.id for q in query_samples])
        self.backend.submit([self.request(q) for q in query_samples])

    def abandon(self) -> None:
        """The backend failed: answer every outstanding and future query with nothing, so
        LoadGen ends the test (its logs then show the run is broken) instead of hanging."""
        with self._lock:
            self._abandoned = True
            ids, self._outstanding = list(self._outstanding), set()
            self._answer_empty(ids)

    def _answer_empty(self, ids: list[int]) -> None:
        if ids:
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(i, 0, 0) for i in ids])

    def flush_queries(self) -> None:
        """Nothing is buffered on our side: every query is with the backend already."""

    def _settle(self, request_id: int) -> bool:
        """Count a response (call with the lock held); False if the query was answered already
        (abandoned after a backend failure)."""
        if request_id not in self._outstanding:
            return False
        self._outstanding.discard(request_id)
        self.completed += 1
        return True


class LlmSut(SutBase):
    def __init__(self, dataset: TokenDataset, *, report_first_token: bool) -> None:
        super().__init__(dataset)
        self.report_first_token = report_first_token

    def request(self, query_sample) -> Request:
        return Request(query_sample.id, self.dataset.prompts[query_sample.index])

    # -- backend callbacks (one LoadGen call per list) -----------------------------
    def first_tokens(self, firsts: list[tuple[int, int]]) -> None:
        data = array(_INT32, [token for _, token in firsts])
        base, size = data.buffer_info()[0], data.itemsize
        self.lg.FirstTokenComplete(
            [
                self.lg.QuerySampleResponse(request_id, base + i * size, size, 1)
                for i, (request_id, _) in enumerate(firsts)
            ]
        )

    def completions(self, answers: list[tuple[int, list[int]]]) -> None:
        responses, buffers = [], []
        with self._lock:
            for request_id, token_ids in answers:
                if not self._settle(request_id):
                    continue
                self.generated_tokens += len(token_ids)
                if len(token_ids) < 2:
                    # LoadGen logs an error for n_tokens <= 1 (TPOT is undefined); count it so
                    # the run record says why the log carries errors.
                    self.single_token_outputs += 1
                # ~10x cheaper than numpy for a few hundred ids; a split head's answers are int32 arrays already
                data = token_ids if isinstance(token_ids, array) else array(_INT32, token_ids)
                buffers.append(data)
                responses.append(
                    self.lg.QuerySampleResponse(request_id, data.buffer_info()[0], 4 * len(data), len(data))
                )
        # `buffers` stays referenced until LoadGen has copied the data.
        if responses:
            self.lg.QuerySamplesComplete(responses)
