"""One LoadGen head, many inference endpoints: balancing, a ledger, and failover.

The rules allow one LoadGen instance per result, so one process sends every query to the
endpoints (vLLM OpenAI-compatible servers, one or more per node). Design:

* **Pull by capacity.** Queries wait in one central queue; each endpoint takes at most
  ``max_concurrency`` at a time. Among endpoints with a free slot the one with the least
  work per unit of measured capacity gets the next query, so faster nodes get more work
  (MI300X + MI325X + MI355X in one system). Capacity starts from the configured hint and
  is then measured (generated tokens/s while busy).
* **Ledger.** Every query LoadGen issued is in the ledger until it is answered; the first
  token and the completion are reported to LoadGen exactly once, whatever happens to
  the attempts behind them.
* **Faults.** A connection error, a 5xx, a malformed response or an endpoint that goes
  silent for ``stall_timeout_s`` while it holds queries takes the endpoint out; its
  in-flight queries go back to the front of the queue for healthy endpoints. Endpoints
  that are out are probed with a tiny real completion and come back when it succeeds.
  If fewer than ``min_healthy_endpoints`` stay up for ``down_grace_s`` the run stops
  with the reason. A 4xx means the request itself is wrong (model name, prompt length):
  resending cannot help, so the run stops at once.
* **Streaming.** Each request streams with ``stream_interval = max_tokens`` (vLLM sends
  the first and last chunks immediately), so an answer is three small events: the first
  token for TTFT, then every token id at once, which is all LoadGen needs. Offline has no
  first token to time, so its requests ask for whole responses (``offline_stream: false``,
  the default), which cost vLLM's server a sixth less CPU than streamed ones and brought
  Offline level with the MLCommons reference harness (bench/README.md). A whole response
  sends no bytes until it ends, so an endpoint silent for ``stall_timeout_s`` is then judged
  by its ``/metrics``: ``vllm:generation_tokens_total`` still advancing means busy.
* **Several prompts per request when queries wait.** Queries that are waiting when an
  endpoint has free slots go out together, up to ``max_prompts_per_request``, as one
  multi-prompt completion (vLLM runs each prompt as its own sequence and streams choices
  by index). Each query is answered as soon as its own choice finishes. Nothing is held
  back to form a batch: at light load a request carries one prompt, and batches grow only
  when the head has queries queued, which is when the per-request cost matters.
* **Reports in lists.** First tokens and answers read in one loop iteration go to LoadGen
  together at its end (one FirstTokenComplete, one QuerySamplesComplete): each LoadGen call
  releases and retakes the GIL, and at thousands of queries per second every release hands
  the GIL to LoadGen's waiting issue thread and back (bench/README.md: the TTFT the head adds).
"""

from __future__ import annotations

import asyncio
import errno
import resource
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from ..generation import sampling_values
from . import CompleteCallback, FirstTokenCallback, GenerationSettings, Request
from .http import ConnectionPool, HttpError, SseEvents, request

POLICIES = ("capacity", "round_robin")


@dataclass(frozen=True)
class EndpointSpec:
    name: str
    host: str
    port: int
    accelerator: str = "unknown"
    accelerator_count: int = 1
    max_concurrency: int = 256
    capacity: float | None = None  # relative speed hint; default: accelerator_count

    @property
    def capacity_hint(self) -> float:
        return float(self.capacity if self.capacity is not None else max(self.accelerator_count, 1))


@dataclass(frozen=True)
class DispatchSettings:
    model: str  # the served model name endpoints expect in requests
    policy: str = "capacity"
    stall_timeout_s: float = 60.0
    probe_interval_s: float = 2.0
    probe_timeout_s: float = 10.0
    down_grace_s: float = 60.0
    min_healthy_endpoints: int = 1
    connect_timeout_s: float = 5.0
    capacity_window_s: float = 1.0
    warm_connections: int = 256  # per endpoint, opened before LoadGen starts (capped by max_concurrency)
    max_prompts_per_request: int = 16  # queries that are waiting go out together, up to this many
    max_idle_connection_s: float = 4.0  # below the servers' keep-alive timeout (vLLM/uvicorn: 5 s)
    offline_stream: bool = False  # True: Offline requests stream too (see the module doc)
    # Dispatch worker processes of a split head (backends.split_head): 0 = everything in
    # LoadGen's process; "auto" = split_head.head_workers decides from the system and the host.
    head_workers: int | str = "auto"
    head_tick_ms: float = 1.0  # a split head under load reads its workers and sends them queries this often


class EndpointsLost(RuntimeError):
    """Too few endpoints are left to finish the run (or a request is refused outright)."""


class _Chunk(msgspec.Struct):
    choices: list[_Choice]


class _Whole(msgspec.Struct):
    """A whole (non-streamed) completion response: every choice, finished."""

    choices: list[_Choice]


class _Choice(msgspec.Struct):
    index: int = 0
    token_ids: list[int] | None = None
    finish_reason: str | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_decode_whole = msgspec.json.Decoder(_Whole).decode
_PROMPT_IDS = b',"prompt_token_ids":['


def _without_any_prompt_ids(payload: bytes) -> bytes:
    """A whole response without the prompt ids of any of its choices."""
    parts, start = [], 0
    while (found := payload.find(_PROMPT_IDS, start)) >= 0:
        end = payload.find(b"]", found + len(_PROMPT_IDS))
        if end < 0:
            break
        parts.append(payload[start:found])
        start = end + 1
    return b"".join(parts) + payload[start:] if parts else payload


GENERATED_TOKENS_METRIC = b"vllm:generation_tokens_total"


def generated_tokens(metrics: bytes) -> float | None:
    """vLLM's generated-token counter (summed over its label sets) from a /metrics page."""
    total, seen = 0.0, False
    for line in metrics.splitlines():
        if line.startswith(GENERATED_TOKENS_METRIC) and line[
            len(GENERATED_TOKENS_METRIC) : len(GENERATED_TOKENS_METRIC) + 1
        ] in (b"{", b" "):
            try:
                total += float(line.rsplit(None, 1)[1])
                seen = True
            except (IndexError, ValueError):
                continue
    return total if seen else None


def _without_prompt_ids(payload: bytes) -> bytes:
    """The chunk without the prompt's token ids vLLM echoes in a choice's first chunk
    (hundreds of numbers nobody reads; skipping them in the parser costs 5x more than
    cutting them out). Any other layout is left alone for the decoder to handle."""
    start = payload.find(_PROMPT_IDS)
    if start < 0:
        return payload
    end = payload.find(b"]", start + len(_PROMPT_IDS))
    return payload if end < 0 else payload[:start] + payload[end + 1 :]


class _Query:
    __slots__ = ("request", "body", "first_reported", "done", "attempts")

    def __init__(self, request: Request, body: bytes) -> None:
        self.request = request
        self.body = body
        self.first_reported = False
        self.done = False
        self.attempts = 0


class _Endpoint:
    def __init__(self, spec: EndpointSpec, settings: DispatchSettings) -> None:
        self.spec = spec
        self.name = spec.name
        self.pool = ConnectionPool(
            spec.host,
            spec.port,
            on_bytes=self.saw_bytes,
            connect_timeout_s=settings.connect_timeout_s,
            max_idle_s=settings.max_idle_connection_s,
        )
        self.healthy = True
        self.in_flight: dict[int, _Attempt] = {}
        self.last_progress = time.monotonic()
        self.completed = 0
        self.generated_tokens = 0
        self.resent_from = 0
        self.down_events = 0
        self.back_in = 0
        self.failures: list[str] = []
        self.measured_capacity: float | None = None  # generated tokens/s while busy
        self.weight = spec.capacity_hint  # what the capacity policy divides by
        self.max_concurrency = spec.max_concurrency  # lowered when its accept queue overflows
        self.held_back = 0
        self.requests_sent = 0  # HTTP requests; fewer than queries when several went out together
        self.busy_seconds = 0.0
        self._window_tokens = 0
        self._window_busy = True
        self.checking_progress = False  # whole responses: a look at /metrics is under way
        self.progress_mark: float | None = None  # generated tokens at the last look

    def saw_bytes(self) -> None:
        self.last_progress = time.monotonic()

    def stats(self) -> dict:
        return {
            "host": f"{self.spec.host}:{self.spec.port}",
            "accelerator": self.spec.accelerator,
            "accelerator_count": self.spec.accelerator_count,
            "completed": self.completed,
            "generated_tokens": self.generated_tokens,
            "tokens_per_second_busy": round(self.generated_tokens / self.busy_seconds, 1)
            if self.busy_seconds
            else None,
            "resent_from": self.resent_from,
            "held_back": self.held_back,
            "requests_sent": self.requests_sent,
            "connections_opened": self.pool.opened,
            "max_concurrency_at_end": self.max_concurrency,
            "down_events": self.down_events,
            "probed_back_in": self.back_in,
            "failures": self.failures[:20],
        }


class _Attempt:
    """One request to one endpoint carrying one or more queries (choice i answers
    queries[i]); receives the streamed response."""

    __slots__ = (
        "dispatcher",
        "endpoint",
        "queries",
        "conn",
        "status",
        "error_body",
        "tokens",
        "unfinished",
        "events",
        "cancelled",
        "fresh_retry",
        "whole",
    )

    def __init__(self, dispatcher: Dispatcher, endpoint: _Endpoint, queries: list[_Query]) -> None:
        self.dispatcher = dispatcher
        self.endpoint = endpoint
        self.queries = queries
        self.conn = None
        self.status = 0
        self.error_body = b""
        self.tokens: list[list[int] | None] = [None] * len(queries)
        self.unfinished = len(queries)
        self.events = SseEvents()
        self.cancelled = False
        self.fresh_retry = False
        self.whole = None if dispatcher.streamed else bytearray()  # a whole response, read to its end

    def body(self) -> bytes:
        if len(self.queries) == 1:
            return self.queries[0].body
        return self.dispatcher._batch_body(self.queries)

    def on_status(self, status: int) -> None:
        self.status = status

    def on_body(self, data: bytes) -> None:
        if self.cancelled:
            return
        if self.status != 200:
            self.error_body += data[:2000]
            return
        if self.whole is not None:
            self.whole += data
            return
        for payload in self.events.feed(data):
            if payload == b"[DONE]":
                continue
            try:
                choice = _decode_chunk(_without_prompt_ids(payload)).choices[0]
                tokens = self.tokens[choice.index]
            except (msgspec.DecodeError, msgspec.ValidationError, IndexError) as exc:
                self.dispatcher._attempt_failed(self, HttpError(f"malformed stream chunk: {exc}"))
                return
            if choice.token_ids:
                if tokens is None:
                    tokens = self.tokens[choice.index] = []
                    self.dispatcher._first_token(self.queries[choice.index], choice.token_ids[0])
                tokens.extend(choice.token_ids)
            if choice.finish_reason is not None:
                if not tokens:
                    self.dispatcher._attempt_failed(
                        self,
                        HttpError(
                            "a choice finished without token ids (is the endpoint a vLLM server with "
                            "return_token_ids support?)"
                        ),
                    )
                    return
                self.dispatcher._choice_done(self, choice.index)
                if self.cancelled:
                    return

    def on_end(self) -> None:
        if self.cancelled:
            return
        if self.status == 200 and self.whole is not None and not self._read_whole():
            return
        if self.status != 200:
            detail = self.error_body.decode("utf-8", "replace").strip()[:300]
            self.dispatcher._attempt_failed(self, HttpError(f"HTTP {self.status}: {detail}", status=self.status))
        elif self.unfinished:
            self.dispatcher._attempt_failed(
                self,
                HttpError(
                    f"the response ended with {self.unfinished} of {len(self.queries)} prompt(s) "
                    f"unfinished (no token ids and finish_reason for them)"
                ),
            )
        else:
            self.dispatcher._attempt_done(self)

    def on_error(self, exc: BaseException) -> None:
        if not self.cancelled:
            self.dispatcher._attempt_failed(self, exc)

    def _read_whole(self) -> bool:
        """Answer every choice of a whole response; False when it failed the attempt."""
        try:
            choices = _decode_whole(_without_any_prompt_ids(bytes(self.whole))).choices
            for choice in choices:
                self.tokens[choice.index]  # an index this request has
        except (msgspec.DecodeError, msgspec.ValidationError, IndexError) as exc:
            self.dispatcher._attempt_failed(self, HttpError(f"malformed response: {exc}"))
            return False
        for choice in choices:
            if not choice.token_ids or choice.finish_reason is None:
                self.dispatcher._attempt_failed(
                    self,
                    HttpError(
                        "a choice came back unfinished or without token ids (is the endpoint a vLLM server with "
                        "return_token_ids support?)"
                    ),
                )
                return False
            self.tokens[choice.index] = choice.token_ids
            self.dispatcher._choice_done(self, choice.index)
            if self.cancelled:
                return False
        return True


class Dispatcher:
    """Owns the ledger and the endpoints; all state changes happen on its event loop."""

    def __init__(
        self,
        endpoints: Sequence[EndpointSpec],
        settings: DispatchSettings,
        generation: GenerationSettings,
        *,
        stream: bool,
        on_first_tokens: FirstTokenCallback | None,
        on_completions: CompleteCallback,
    ) -> None:
        if settings.policy not in POLICIES:
            raise ValueError(f"dispatch policy '{settings.policy}' is not one of {POLICIES}")
        if not endpoints:
            raise ValueError("no endpoints to dispatch to")
        self.settings = settings
        self.generation = generation
        self.stream = stream
        # Streamed requests: always where first tokens are timed; Offline unless offline_stream is off.
        self.streamed = stream or settings.offline_stream
        self.on_first_tokens = on_first_tokens
        self.on_completions = on_completions
        # Reports of this loop iteration, sent together at its end (_report_now).
        self._first_tokens: list[tuple[int, int]] = []
        self._completions: list[tuple[int, list[int]]] = []
        self._report_scheduled = False
        self.endpoints = [_Endpoint(spec, settings) for spec in endpoints]
        self.ledger: dict[int, _Query] = {}
        self.pending: deque[_Query] = deque()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._incoming: list[Request] = []
        self._incoming_lock = threading.Lock()
        self._wake_scheduled = False
        self._pump_scheduled = False
        self._fatal: BaseException | None = None
        self._too_few_since: float | None = None
        self._rr_next = 0
        self._encode = msgspec.json.Encoder().encode
        self._fixed = self._fixed_fields()
        self._prompt_json: dict[int, tuple] = {}
        self.resent = 0
        self.in_flight_total = 0
        # One connection per query in flight: never more than the open-file limit allows
        # (an EMFILE is the head's problem, not the endpoint's; it must not fail endpoints).
        self.max_in_flight = max(16, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 256)
        self.first_issue: float | None = None
        self.last_complete: float | None = None

    # -- requests --------------------------------------------------------------------
    def _fixed_fields(self) -> bytes:
        """The request fields every query shares, encoded once: ``{"model":...`` without the closing brace."""
        gen = self.generation
        body = {"model": self.settings.model, **sampling_values(gen), "return_token_ids": True}
        if self.streamed:
            # First and last chunks come at once; nothing in between (LoadGen needs no more).
            body.update(stream=True, stream_interval=gen.max_new_tokens)
        return self._encode(body)[:-1]

    def _body(self, request: Request) -> bytes:
        # LoadGen reuses a few thousand samples: encode each prompt once, keyed by the list
        # object the dataset holds (kept referenced, so its id stays unique).
        prompt = request.prompt_token_ids
        cached = self._prompt_json.get(id(prompt))
        if cached is None or cached[0] is not prompt:
            cached = self._prompt_json[id(prompt)] = (prompt, self._encode(list(prompt)))
        return b'%s,"prompt":%s,"user":"%d"}' % (self._fixed, cached[1], request.request_id)

    def _batch_body(self, queries: list[_Query]) -> bytes:
        """One request for several queries: ``"prompt": [[...], [...]]``, choice i answers query i."""
        prompts = b",".join(self._prompt_json[id(q.request.prompt_token_ids)][1] for q in queries)
        users = b",".join(b"%d" % q.request.request_id for q in queries)
        return b'%s,"prompt":[%s],"user":"%s"}' % (self._fixed, prompts, users)

    def probe_body(self) -> bytes:
        return self._encode(
            {
                "model": self.settings.model,
                "prompt": [1, 2, 3],
                "max_tokens": 2,
                "min_tokens": 2,
                "temperature": 0.0,
                "stream": True,
                "return_token_ids": True,
            }
        )

    # -- entry from LoadGen's thread -------------------------------------------------
    def submit(self, requests: Sequence[Request]) -> None:
        with self._incoming_lock:
            self._incoming.extend(requests)
            if self._wake_scheduled:
                return
            self._wake_scheduled = True
        self.loop.call_soon_threadsafe(self._take_incoming)

    def _take_incoming(self) -> None:
        with self._incoming_lock:
            batch, self._incoming = self._incoming, []
            self._wake_scheduled = False
        self.accept(batch)

    def accept(self, batch: Sequence[Request]) -> None:
        """Take requests on the loop's own thread (a split head's worker reads them there)."""
        if self.first_issue is None and batch:
            self.first_issue = time.monotonic()
        for req in batch:
            query = _Query(req, self._body(req))
            self.ledger[req.request_id] = query
            self.pending.append(query)
        self._pump()

    # -- dispatching -----------------------------------------------------------------
    def _update_weights(self) -> None:
        """Measured capacity where there is one; the hint, scaled to the same units, elsewhere."""
        measured = [(e.measured_capacity, e.spec.capacity_hint) for e in self.endpoints if e.measured_capacity]
        scale = sum(m / h for m, h in measured) / len(measured) if measured else 1.0
        for e in self.endpoints:
            e.weight = e.measured_capacity or e.spec.capacity_hint * scale

    def _choose(self) -> _Endpoint | None:
        if self.settings.policy == "round_robin":
            n = len(self.endpoints)
            for i in range(n):
                e = self.endpoints[(self._rr_next + i) % n]
                if e.healthy and len(e.in_flight) < e.max_concurrency:
                    self._rr_next = (self._rr_next + i + 1) % n
                    return e
            return None
        best, best_score = None, 0.0
        for e in self.endpoints:
            if not e.healthy or len(e.in_flight) >= e.max_concurrency:
                continue
            score = (len(e.in_flight) + 1) / e.weight
            if best is None or score < best_score:
                best, best_score = e, score
        return best

    def _pump(self) -> None:
        """Send what can go out, at the end of this loop iteration: slots freed by every
        answer read in the iteration are then filled together, several prompts per request."""
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self.loop.call_soon(self._pump_now)

    def _pump_now(self) -> None:
        self._pump_scheduled = False
        pending = self.pending
        while pending and self._fatal is None and self.in_flight_total < self.max_in_flight:
            endpoint = self._choose()
            if endpoint is None:
                return
            count = min(
                len(pending),
                self.settings.max_prompts_per_request,
                endpoint.max_concurrency - len(endpoint.in_flight),
                self.max_in_flight - self.in_flight_total,
            )
            self._start(endpoint, [pending.popleft() for _ in range(max(count, 1))])

    def _start(self, endpoint: _Endpoint, queries: list[_Query]) -> None:
        attempt = _Attempt(self, endpoint, queries)
        if not endpoint.in_flight:
            endpoint.last_progress = time.monotonic()  # an idle endpoint gets a full stall timeout
        for query in queries:
            query.attempts += 1
            endpoint.in_flight[query.request.request_id] = attempt
        self.in_flight_total += len(queries)
        conn = endpoint.pool.take_idle()
        if conn is not None:
            self._send(attempt, conn)
        else:
            self.loop.create_task(self._connect_and_send(attempt))

    async def _connect_and_send(self, attempt: _Attempt) -> None:
        pool = attempt.endpoint.pool
        try:
            conn = await pool.connect()
        except (TimeoutError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
                self._hold_back(attempt, head_limit=True)
                return
            endpoint = attempt.endpoint
            if (
                isinstance(exc, asyncio.TimeoutError)
                and len(endpoint.in_flight) > len(attempt.queries)
                and time.monotonic() - endpoint.last_progress < self.settings.stall_timeout_s
            ):
                # The endpoint is answering its other queries: a slow accept queue, not a failure.
                self._hold_back(attempt, head_limit=False)
                return
            self._attempt_failed(attempt, ConnectionError(f"cannot connect: {exc or type(exc).__name__}"))
            return
        pool.busy.add(conn)
        if attempt.cancelled:
            pool.release(conn)
            return
        self._send(attempt, conn)

    def _send(self, attempt: _Attempt, conn) -> None:
        attempt.conn = conn
        attempt.endpoint.requests_sent += 1
        conn.send(attempt.endpoint.pool.request(b"POST", b"/v1/completions", attempt.body()), attempt)

    # -- answers ---------------------------------------------------------------------
    def _first_token(self, query: _Query, token_id: int) -> None:
        if query.first_reported or query.done:
            return
        query.first_reported = True
        if self.stream and self.on_first_tokens is not None:
            self._first_tokens.append((query.request.request_id, token_id))
            self._report()

    def _report(self) -> None:
        if not self._report_scheduled:
            self._report_scheduled = True
            self.loop.call_soon(self._report_now)

    def _report_now(self) -> None:
        """Everything answered in this iteration, first tokens before answers (a query whose
        first token and answer came in the same read is reported in that order)."""
        self._report_scheduled = False
        if self._first_tokens:
            firsts, self._first_tokens = self._first_tokens, []
            self.on_first_tokens(firsts)
        if self._completions:
            completions, self._completions = self._completions, []
            self.on_completions(completions)

    def _choice_done(self, attempt: _Attempt, index: int) -> None:
        """Query ``index`` of the attempt has all its tokens: answer it (once) now."""
        endpoint, query, tokens = attempt.endpoint, attempt.queries[index], attempt.tokens[index]
        qid = query.request.request_id
        if endpoint.in_flight.get(qid) is not attempt:
            return  # a repeated finish for this choice
        del endpoint.in_flight[qid]
        self.in_flight_total -= 1
        attempt.unfinished -= 1
        endpoint.completed += 1
        if endpoint.max_concurrency < endpoint.spec.max_concurrency:
            endpoint.max_concurrency += 1  # held back earlier: win the slots back as it answers
        endpoint.generated_tokens += len(tokens)
        endpoint._window_tokens += len(tokens)
        if not query.done:
            query.done = True
            del self.ledger[qid]
            self.last_complete = time.monotonic()
            self._completions.append((qid, tokens))
            self._report()
        if attempt.unfinished == 0 or len(endpoint.in_flight) < endpoint.max_concurrency:
            self._pump()

    def _attempt_done(self, attempt: _Attempt) -> None:
        attempt.endpoint.pool.release(attempt.conn)
        self._pump()

    def _attempt_failed(self, attempt: _Attempt, exc: BaseException) -> None:
        if attempt.cancelled:
            return
        endpoint = attempt.endpoint
        conn = attempt.conn
        if (
            isinstance(exc, OSError)
            and attempt.status == 0
            and not attempt.fresh_retry
            and conn is not None
            and conn.idle_since
        ):
            # A reused keep-alive connection the server had just closed: not the endpoint's
            # fault. Resend once on a new connection; a real failure shows up there.
            attempt.fresh_retry = True
            attempt.conn = None
            attempt.events = SseEvents()
            endpoint.pool.discard(conn)
            self.loop.create_task(self._connect_and_send(attempt))
            return
        if isinstance(exc, HttpError) and exc.status is not None and 400 <= exc.status < 500:
            self._fatal = EndpointsLost(
                f"endpoint {endpoint.name} ({endpoint.pool.host}:{endpoint.pool.port}) refused a request "
                f"({exc}); resending cannot help: check the served model name and max_model_len"
            )
            return
        self._mark_down(endpoint, f"{type(exc).__name__}: {exc}")

    def _hold_back(self, attempt: _Attempt, *, head_limit: bool) -> None:
        """No new connection now (the head is out of file descriptors, or the endpoint's
        accept queue is full): put the queries back and send no more at once than are in
        flight now, to the head as a whole or to this endpoint. A lower ceiling, not a
        failed endpoint."""
        endpoint = attempt.endpoint
        if attempt.cancelled:
            return
        attempt.cancelled = True
        returned = self._take_back(endpoint, attempt)
        if head_limit:
            self.max_in_flight = max(16, min(self.max_in_flight, self.in_flight_total))
        else:
            endpoint.max_concurrency = max(1, min(endpoint.max_concurrency, len(endpoint.in_flight)))
        endpoint.held_back += len(returned)
        self.pending.extendleft(reversed(returned))
        self._pump()

    def _take_back(self, endpoint: _Endpoint, attempt: _Attempt | None = None) -> list[_Query]:
        """Remove an attempt's (or, with None, every) unanswered query from the endpoint, oldest first."""
        taken = []
        for qid, owner in list(endpoint.in_flight.items()):
            if attempt is None or owner is attempt:
                del endpoint.in_flight[qid]
                self.in_flight_total -= 1
                query = self.ledger.get(qid)
                if query is not None and not query.done:
                    taken.append(query)
        return taken

    def _mark_down(self, endpoint: _Endpoint, reason: str) -> None:
        if not endpoint.healthy:
            return
        endpoint.healthy = False
        endpoint.down_events += 1
        endpoint.failures.append(f"{time.strftime('%H:%M:%S')} {reason}")
        for attempt in set(endpoint.in_flight.values()):
            attempt.cancelled = True
        returned = self._take_back(endpoint)
        # Oldest first, ahead of everything that has not been sent yet.
        self.pending.extendleft(reversed(returned))
        endpoint.resent_from += len(returned)
        self.resent += len(returned)
        endpoint.pool.close_all()
        self._pump()

    # -- background duties -----------------------------------------------------------
    async def _watch(self) -> None:
        """Stall detection, capacity measurement and the too-few-endpoints stop."""
        s = self.settings
        tick = min(0.25, s.stall_timeout_s / 4)
        window_start = time.monotonic()
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for e in self.endpoints:
                if e.healthy and e.in_flight and now - e.last_progress > s.stall_timeout_s:
                    if not self.streamed:
                        if not e.checking_progress:
                            e.checking_progress = True
                            self.loop.create_task(self._check_progress(e))
                        continue
                    self._mark_down(
                        e, f"no response bytes for {s.stall_timeout_s:g} s with {len(e.in_flight)} queries in flight"
                    )
                if not (e.healthy and e.in_flight):
                    e._window_busy = False
            if now - window_start >= s.capacity_window_s:
                elapsed = now - window_start
                for e in self.endpoints:
                    if e._window_busy and e._window_tokens:
                        rate = e._window_tokens / elapsed
                        e.busy_seconds += elapsed
                        e.measured_capacity = (
                            rate if e.measured_capacity is None else 0.7 * e.measured_capacity + 0.3 * rate
                        )
                    e._window_tokens, e._window_busy = 0, True
                self._update_weights()
                window_start = now
            healthy = sum(e.healthy for e in self.endpoints)
            if healthy >= s.min_healthy_endpoints:
                self._too_few_since = None
            elif self._too_few_since is None:
                self._too_few_since = now
            elif now - self._too_few_since > s.down_grace_s and self.ledger:
                self._fatal = EndpointsLost(self._too_few_message(healthy))

    async def _check_progress(self, endpoint: _Endpoint) -> None:
        """Whole responses send nothing until they end: an endpoint silent for stall_timeout_s
        is busy if its generated-token counter moved since the last look (the first look only
        sets the mark), else stalled."""
        s = self.settings
        pool = ConnectionPool(endpoint.spec.host, endpoint.spec.port, connect_timeout_s=s.connect_timeout_s)
        try:
            try:
                status, body = await request(pool, "GET", "/metrics", timeout_s=s.probe_timeout_s)
                count = generated_tokens(body) if status == 200 else None
                problem = (
                    None
                    if count is not None
                    else f"its /metrics (HTTP {status}) has no {GENERATED_TOKENS_METRIC.decode()}"
                )
            except (TimeoutError, OSError, HttpError) as exc:
                count, problem = None, f"its /metrics did not answer ({type(exc).__name__}: {exc})"
            finally:
                pool.close_all()
            if not (endpoint.healthy and endpoint.in_flight):
                return
            if count is not None and (endpoint.progress_mark is None or count > endpoint.progress_mark):
                endpoint.progress_mark = count
                endpoint.last_progress = time.monotonic()
                return
            self._mark_down(
                endpoint,
                f"no answer for {s.stall_timeout_s:g} s with {len(endpoint.in_flight)} queries in flight, and "
                + (problem or f"its {GENERATED_TOKENS_METRIC.decode()} did not advance in that time"),
            )
        finally:
            endpoint.checking_progress = False

    async def _retire_stale_connections(self) -> None:
        """Close idle connections the server may be about to drop, a few at a time: a
        burst of hundreds of closes (the warm connections a run did not need, all idle
        since the same moment) stalls the loop for 15-20 ms, straight into TTFT."""
        while True:
            await asyncio.sleep(0.02)
            for e in self.endpoints:
                e.pool.close_stale_idle(at_most=4)

    def _too_few_message(self, healthy: int) -> str:
        lines = [
            f"only {healthy} of {len(self.endpoints)} endpoints answer (min_healthy_endpoints: "
            f"{self.settings.min_healthy_endpoints}) for more than {self.settings.down_grace_s:g} s; "
            f"{len(self.ledger)} queries unanswered. Last failures:"
        ]
        for e in self.endpoints:
            if not e.healthy:
                lines.append(f"  {e.name} ({e.pool.host}:{e.pool.port}): {e.failures[-1] if e.failures else 'down'}")
        return "\n".join(lines)

    async def probe(self, endpoint: _Endpoint) -> str | None:
        """A tiny real completion; None when the endpoint answers correctly, else why not."""
        pool = ConnectionPool(endpoint.spec.host, endpoint.spec.port, connect_timeout_s=self.settings.connect_timeout_s)
        try:
            status, body = await request(
                pool, "POST", "/v1/completions", self.probe_body(), timeout_s=self.settings.probe_timeout_s
            )
        except (TimeoutError, OSError, HttpError) as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            pool.close_all()
        if status != 200:
            return f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}"
        tokens, finished = [], False
        try:
            for payload in SseEvents().feed(body + b"\n\n"):
                if payload != b"[DONE]":
                    choice = _decode_chunk(payload).choices[0]
                    tokens += choice.token_ids or []
                    finished = finished or choice.finish_reason is not None
        except (msgspec.DecodeError, msgspec.ValidationError, IndexError) as exc:
            return f"malformed probe response: {exc}"
        return None if tokens and finished else "probe response carried no token ids"

    async def _probe_down_endpoints(self) -> None:
        while True:
            await asyncio.sleep(self.settings.probe_interval_s)
            for e in self.endpoints:
                if not e.healthy and await self.probe(e) is None:
                    e.healthy = True
                    e.back_in += 1
                    e.last_progress = time.monotonic()
                    self._pump()

    # -- lifecycle -------------------------------------------------------------------
    async def check_endpoints(self) -> list[str]:
        """Probe every endpoint before the run; the ones that fail start out of service."""
        results = await asyncio.gather(*(self.probe(e) for e in self.endpoints))
        problems = []
        for e, problem in zip(self.endpoints, results):
            if problem is not None:
                e.healthy = False
                e.failures.append(f"before the run: {problem}")
                problems.append(f"{e.name} ({e.spec.host}:{e.spec.port}): {problem}")
        healthy = sum(e.healthy for e in self.endpoints)
        if healthy < self.settings.min_healthy_endpoints:
            raise EndpointsLost(
                f"only {healthy} of {len(self.endpoints)} endpoints answer before the run "
                f"(min_healthy_endpoints: {self.settings.min_healthy_endpoints}):\n  " + "\n  ".join(problems)
            )
        return problems

    async def warm_connections(self) -> None:
        """Open keep-alive connections to every healthy endpoint before the run."""
        await asyncio.gather(
            *(
                e.pool.warm(min(e.spec.max_concurrency, self.settings.warm_connections))
                for e in self.endpoints
                if e.healthy
            )
        )

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    async def run(self, done: threading.Event) -> None:
        """Serve until LoadGen is done and every query is answered; raise when the run cannot finish."""
        duties = [
            self.loop.create_task(self._watch()),
            self.loop.create_task(self._probe_down_endpoints()),
            self.loop.create_task(self._retire_stale_connections()),
        ]
        try:
            while True:
                if self._fatal is not None:
                    raise self._fatal
                if done.is_set() and not self.ledger and not self._incoming:
                    return
                await asyncio.sleep(0.01)
        finally:
            self._report_now()  # answers read in the last iteration
            for task in duties:
                task.cancel()
            for e in self.endpoints:
                e.pool.close_all()

    def stats(self) -> dict:
        elapsed = (self.last_complete - self.first_issue) if self.first_issue and self.last_complete else None
        return {
            "policy": self.settings.policy,
            "resent_queries": self.resent,
            "unanswered_queries": len(self.ledger),
            "seconds_first_issue_to_last_answer": round(elapsed, 3) if elapsed else None,
            "endpoints": {e.name: e.stats() for e in self.endpoints},
        }
