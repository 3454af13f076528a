"""SIMULATED inference endpoints: they answer like vLLM's OpenAI-compatible server, run no model.

For two purposes only, both named as such where used: measuring the LoadGen head's own
overhead and ceiling (``bench/dispatch.py``: real endpoints on this machine would be the
bottleneck long before the head), and injecting faults that a real server produces
rarely and unpredictably (hangs, malformed bodies, connections closed mid-stream), and the
misbehaviour compliance tests exist to catch (``cache_results``: a prompt seen before is
answered at once from a result cache, which TEST04 must fail).

Each simulated endpoint behaves like continuous batching at a fixed rate: ``slots``
sequences run at once, each producing ``tokens_per_s`` tokens/s after ``ttft_s``; more
requests wait in its queue. Capacity = slots x tokens_per_s. The wire format is vLLM's:
``/v1/completions`` with ``stream``, ``return_token_ids`` and ``stream_interval`` (first
chunk with one token and the prompt ids, the rest in the last chunk, then ``[DONE]``);
a request may carry several token prompts, each answered as its own choice (``index``).
Without ``stream`` the answer is one whole JSON response once every choice is done, and
``/metrics`` reports ``vllm:generation_tokens_total`` (advancing while sequences run), which
the head reads to tell a busy endpoint from a stalled one.
Like an engine step, a clock tick (``tick_s``) sends everything that became due since
the last one, one write per connection.
Output tokens are a deterministic function of the prompt, as with greedy decoding, so a
resent query gets the same answer. The simulator is kept cheap (prompts stay raw JSON, each
prompt's answer is encoded once) because it shares the CPU with the head it measures.

A test and bench tool, kept out of the installed package (``tests/sim_endpoints.py``
starts it). Run ``python tests/simulated_endpoint.py SPEC.json [TIMESTAMPS.json [STATS.json]]``: it serves every
endpoint in the spec from one process, prints ``READY`` and, on SIGTERM/SIGINT, writes
per-request timestamps (time.monotonic, comparable across processes) if asked, and with
a third argument per-endpoint counts (requests, choices answered, tokens).
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import itertools
import json
import signal
import sys
import time
import zlib
from collections import deque
from dataclasses import dataclass

import httptools
import msgspec

FAULTS = ("none", "die", "hang", "malformed", "close_mid_stream", "error_500", "error_400", "cache_results")


@dataclass
class SimulatedEndpointSpec:
    port: int
    host: str = "127.0.0.1"
    slots: int = 256
    tokens_per_s: float = 50.0  # per sequence
    ttft_s: float = 0.05
    output_tokens: int = 0  # 0: derived from the prompt (between 64 and 512), capped by max_tokens
    fault: str = "none"
    fault_after_requests: int = 0  # the fault starts with the request after this many
    fault_after_s: float = 0.0  # ... or this long after start ("die")
    # > 0: a request on a connection idle for longer is dropped unanswered (the connection
    # closes), as when a server's keep-alive timeout fires just as the request arrives.
    keep_alive_s: float = 0.0
    tick_s: float = 0.002  # the engine step: chunks due within it go out together

    def capacity_tokens_per_s(self) -> float:
        return self.slots * self.tokens_per_s


class _Req(msgspec.Struct):
    prompt: msgspec.Raw  # echoed and hashed, never turned into Python ints
    max_tokens: int = 16
    stream: bool = False
    user: str | None = None
    model: str | None = None


_decode_req = msgspec.json.Decoder(_Req).decode
_encode = msgspec.json.Encoder().encode
_HEAD_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
_ANSWER_CACHE_LIMIT = 16384
_answers: dict[tuple, _Answer] = {}  # shared by every endpoint this process serves


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _prompt_json(prompt) -> bytes:
    return bytes(prompt) if isinstance(prompt, (bytes, msgspec.Raw)) else _encode(list(prompt))


def output_token_ids(prompt, max_tokens: int, fixed: int) -> list[int]:
    """The answer to a prompt (token ids, or their JSON text as sent): a function of the prompt."""
    seed = zlib.crc32(_prompt_json(prompt))
    n = fixed or 64 + seed % 449
    n = max(2, min(n, max_tokens))
    return [(seed + 7 * i) % 32000 + 1 for i in range(n)]


class _Answer:
    """One prompt's two stream chunks, encoded once (LoadGen reuses its samples); the
    choice index goes in when the chunk is sent."""

    __slots__ = ("n_tokens", "first", "last", "whole")

    def __init__(self, prompt: bytes, max_tokens: int, model: str | None, fixed: int) -> None:
        tokens = output_token_ids(prompt, max_tokens, fixed)
        self.n_tokens = len(tokens)
        head = b'data: {"id":"cmpl-sim","object":"text_completion","created":0,"model":%s,"choices":[{"index":' % (
            _encode(model or "sim")
        )
        # vLLM's first chunk: one token and, with return_token_ids, the prompt's ids.
        self.first = (
            head,
            b',"text":"","token_ids":%s,"prompt_token_ids":%s,"finish_reason":null}]}\n\n'
            % (_encode(tokens[:1]), prompt),
        )
        self.last = (head, b',"text":"","token_ids":%s,"finish_reason":"length"}]}\n\n' % _encode(tokens[1:]))
        # A choice of a whole (non-streamed) response.
        self.whole = (
            b'{"index":',
            b',"text":"","token_ids":%s,"prompt_token_ids":%s,"finish_reason":"length"}' % (_encode(tokens), prompt),
        )


def _choice_chunk(parts: tuple[bytes, bytes], index: int) -> bytes:
    return _chunked(parts[0] + b"%d" % index + parts[1])


_FIRST, _LAST = 0, 1
_END_OF_STREAM = _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n"
_MALFORMED_WHOLE = b'HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n{"choices": [{"token_ids":'


class _Response:
    """One HTTP response: the choices of one request, sent as they become due."""

    __slots__ = ("conn", "answers", "user_ids", "received", "unfinished", "head_sent", "stream")

    def __init__(self, conn, answers: list[_Answer], user_ids: list[str], received: float, stream: bool) -> None:
        self.conn = conn
        self.answers = answers
        self.user_ids = user_ids
        self.received = received
        self.unfinished = len(answers)
        self.head_sent = False
        self.stream = stream

    def whole(self, model: bytes) -> bytes:
        """The whole response (every choice), as vLLM sends it without ``stream``."""
        choices = b",".join(a.whole[0] + b"%d" % i + a.whole[1] for i, a in enumerate(self.answers))
        body = b'{"id":"cmpl-sim","object":"text_completion","created":0,"model":%s,"choices":[%s],"usage":null}' % (
            model,
            choices,
        )
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class SimulatedEndpoint:
    def __init__(self, spec: SimulatedEndpointSpec, timestamps: list | None = None) -> None:
        self.spec = spec
        self.requests = 0
        self.active = 0
        self.waiting: deque = deque()
        self.connections: set = set()
        self.server: asyncio.AbstractServer | None = None
        self.started = time.monotonic()
        self.timestamps = timestamps
        self.dead = False
        self.died_at: float | None = None
        self.due: list = []  # (time, order, kind, response, choice index), a heap
        self.order = itertools.count()
        self.answered: set = set()  # answers already given ("cache_results")
        self.completed = 0  # choices answered in full on an open connection (for a stats file)
        self.tokens = 0
        self.generated = 0.0  # tokens produced by running sequences (/metrics)
        self.last_tick = time.monotonic()

    def fault_active(self) -> bool:
        spec = self.spec
        if spec.fault == "none":
            return False
        if spec.fault_after_s and time.monotonic() - self.started < spec.fault_after_s:
            return False
        return self.requests > spec.fault_after_requests

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Connection(self), self.spec.host, self.spec.port, backlog=4096)
        if self.spec.fault == "die" and self.spec.fault_after_s:
            loop.call_later(self.spec.fault_after_s, self.die)
        self.clock = loop.create_task(self.run_clock())

    def die(self) -> None:
        """Like a killed server process: the port closes and every connection drops."""
        self.dead = True
        self.died_at = time.monotonic()
        self.server.close()
        for conn in list(self.connections):
            conn.transport.abort()

    # -- the continuous-batching model -----------------------------------------------
    def admit(self, conn: _Connection, req: _Req, received: float) -> None:
        raw = bytes(req.prompt)
        prompts = [bytes(p) for p in _decode_prompts(raw)] if raw[1:].lstrip()[:1] == b"[" else [raw]
        users = (req.user or "").split(",")
        response = _Response(
            conn,
            [self._answer(p, req) for p in prompts],
            users if len(users) == len(prompts) else [""] * len(prompts),
            received,
            req.stream,
        )
        for index in range(len(prompts)):
            self.waiting.append((response, index))
        self._schedule()

    def _schedule(self) -> None:
        now = time.monotonic()
        caching = self.spec.fault == "cache_results" and self.fault_active()
        while self.waiting and self.active < self.spec.slots:
            response, index = self.waiting.popleft()
            self.active += 1
            answer = response.answers[index]
            if caching and answer in self.answered:  # from the result cache: no generation
                first_at = last_at = now
            else:
                first_at = now + self.spec.ttft_s
                last_at = first_at + (answer.n_tokens - 1) / self.spec.tokens_per_s
            if caching:
                self.answered.add(answer)
            heapq.heappush(self.due, (first_at, next(self.order), _FIRST, response, index))
            heapq.heappush(self.due, (last_at, next(self.order), _LAST, response, index))

    def _answer(self, prompt: bytes, req: _Req) -> _Answer:
        key = (prompt, req.max_tokens, req.model, self.spec.output_tokens)
        answer = _answers.get(key)
        if answer is None:
            if len(_answers) >= _ANSWER_CACHE_LIMIT:
                _answers.clear()
            answer = _answers[key] = _Answer(prompt, req.max_tokens, req.model, self.spec.output_tokens)
        return answer

    async def run_clock(self) -> None:
        while True:
            await asyncio.sleep(self.spec.tick_s)
            self.tick()

    def tick(self) -> None:
        """Send every chunk that is due, one write per connection."""
        now = time.monotonic()
        self.generated += self.active * self.spec.tokens_per_s * (now - self.last_tick)
        self.last_tick = now
        due = self.due
        out: dict[_Connection, list[bytes]] = {}
        malformed = self.spec.fault == "malformed" and self.fault_active()
        while due and due[0][0] <= now:
            _, _, kind, response, index = heapq.heappop(due)
            parts = out.setdefault(response.conn, [])
            if kind == _FIRST:
                if not response.stream:
                    continue  # a whole response sends nothing before its end
                if not response.head_sent:
                    response.head_sent = True
                    parts.append(_HEAD_OK)
                parts.append(_choice_chunk(response.answers[index].first, index))
                if self.timestamps is not None and response.user_ids[index]:
                    self.timestamps.append((response.user_ids[index], response.received, now))
                continue
            self.active -= 1
            response.unfinished -= 1
            if not response.conn.transport.is_closing():  # delivered, not generated for nobody
                self.completed += 1
                self.tokens += response.answers[index].n_tokens
            if not response.stream:
                if response.unfinished == 0:
                    parts.append(_MALFORMED_WHOLE if malformed else response.whole(b'"sim"'))
                    response.conn.idle_since = now
                continue
            if malformed:
                parts.append(_chunked(b'data: {"choices": [{"token_ids": "not a list"\n\n'))
            else:
                parts.append(_choice_chunk(response.answers[index].last, index))
            if response.unfinished == 0:
                parts.append(_END_OF_STREAM)
                response.conn.idle_since = now
        close = self.spec.fault == "close_mid_stream" and self.fault_active()
        for conn, parts in out.items():
            conn.write(b"".join(parts))
            if close:
                conn.transport.close()
        if self.waiting:
            self._schedule()


_decode_prompts = msgspec.json.Decoder(list[msgspec.Raw]).decode


class _Connection(asyncio.Protocol):
    def __init__(self, endpoint: SimulatedEndpoint) -> None:
        self.endpoint = endpoint
        self.parser = httptools.HttpRequestParser(self)
        self.transport = None
        self.url = b""
        self.body = bytearray()
        self.idle_since = time.monotonic()

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.endpoint.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.endpoint.connections.discard(self)
        self.parser = None  # it holds this protocol's callbacks: a cycle the (disabled) GC would need

    def data_received(self, data: bytes) -> None:
        if self.parser is None:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def write(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    # httptools callbacks
    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        url, body = self.url, bytes(self.body)
        self.url, self.body = b"", bytearray()
        endpoint = self.endpoint
        if url == b"/health":
            if not (endpoint.spec.fault == "hang" and endpoint.fault_active()):
                self.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return
        if url == b"/metrics":
            if not (endpoint.spec.fault == "hang" and endpoint.fault_active()):
                page = b'vllm:generation_tokens_total{model_name="sim"} %.1f\n' % endpoint.generated
                self.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(page), page))
            return
        if url != b"/v1/completions":
            self.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        received = time.monotonic()
        if endpoint.spec.keep_alive_s and received - self.idle_since > endpoint.spec.keep_alive_s:
            self.transport.close()
            return
        endpoint.requests += 1
        fault = endpoint.spec.fault if endpoint.fault_active() else "none"
        if fault == "hang":
            return  # accepted, never answered
        if fault in ("error_500", "error_400"):
            status = b"500 Internal Server Error" if fault == "error_500" else b"400 Bad Request"
            message = b'{"error": "simulated failure"}'
            self.write(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s" % (status, len(message), message))
            return
        try:
            req = _decode_req(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            message = json.dumps({"error": str(exc)}).encode()
            self.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(message), message))
            return
        endpoint.admit(self, req, received)


async def serve(
    specs: list[SimulatedEndpointSpec], timestamps_path: str | None = None, stats_path: str | None = None
) -> None:
    # A list, not a dict keyed by query: resizing a dict of ~90,000 entries takes 3-4 ms,
    # a stall the measurement would charge to the head it measures.
    timestamps: list | None = [] if timestamps_path else None
    endpoints = [SimulatedEndpoint(spec, timestamps) for spec in specs]
    for endpoint in endpoints:
        await endpoint.start()
    print("READY", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if timestamps_path:
        with open(timestamps_path, "w") as handle:
            json.dump({user: [received, sent] for user, received, sent in timestamps}, handle)
    if stats_path:
        # Per endpoint (by port): what it was asked and what it answered, whoever sent it
        # (a load balancer in front of the endpoints hides this from the head).
        stats = {
            str(e.spec.port): {
                "requests": e.requests,
                "completed": e.completed,
                "tokens": e.tokens,
                "died_at": e.died_at,
            }
            for e in endpoints
        }
        with open(stats_path, "w") as handle:
            json.dump(stats, handle)


def main(argv: list[str]) -> int:
    spec_path = argv[0]
    timestamps_path = argv[1] if len(argv) > 1 and argv[1] else None
    stats_path = argv[2] if len(argv) > 2 else None
    specs = [SimulatedEndpointSpec(**item) for item in json.loads(open(spec_path).read())]
    from mlperf_repro.backends.endpoints import raise_open_file_limit

    raise_open_file_limit()
    # As in the head: no cyclic-GC pauses in the middle of a measurement (connections
    # cut their own cycles when they close).
    gc.freeze()
    gc.disable()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(specs, timestamps_path, stats_path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
