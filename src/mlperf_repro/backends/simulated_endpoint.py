"""SIMULATED inference endpoints: they answer like vLLM's OpenAI-compatible server, run no model.

For two purposes only, both named as such where used: measuring the LoadGen head's own
overhead and ceiling (``bench/dispatch.py``: real endpoints on this machine would be the
bottleneck long before the head), and injecting faults that a real server produces
rarely and unpredictably (hangs, malformed bodies, connections closed mid-stream).

Each simulated endpoint behaves like continuous batching at a fixed rate: ``slots``
sequences run at once, each producing ``tokens_per_s`` tokens/s after ``ttft_s``; more
requests wait in its queue. Capacity = slots x tokens_per_s. The wire format is vLLM's:
``/v1/completions`` with ``stream``, ``return_token_ids`` and ``stream_interval`` (first
chunk with one token and the prompt ids, the rest in the last chunk, then ``[DONE]``).
Output tokens are a deterministic function of the prompt, as with greedy decoding, so a
resent query gets the same answer. The simulator is kept cheap (prompts stay raw JSON, each
prompt's answer is encoded once) because it shares the CPU with the head it measures.

Run ``python -m mlperf_repro.backends.simulated_endpoint SPEC.json``: it serves every
endpoint in the spec from one process, prints ``READY`` and, on SIGTERM/SIGINT, writes
per-request timestamps (time.monotonic, comparable across processes) if asked.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
import zlib
from collections import deque
from dataclasses import dataclass

import httptools
import msgspec

FAULTS = ("none", "die", "hang", "malformed", "close_mid_stream", "error_500", "error_400")


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
_answers: dict[tuple, "_Answer"] = {}  # shared by every endpoint this process serves


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
    """One prompt's two stream chunks, encoded once (LoadGen reuses its samples)."""

    __slots__ = ("n_tokens", "first", "last")

    def __init__(self, req: _Req, fixed: int) -> None:
        tokens = output_token_ids(req.prompt, req.max_tokens, fixed)
        self.n_tokens = len(tokens)
        model = _encode(req.model or "sim")
        # vLLM's first chunk: one token and, with return_token_ids, the prompt's ids.
        self.first = _HEAD_OK + _chunked(
            b'data: {"id":"cmpl-sim","object":"text_completion","created":0,"model":%s,"choices":'
            b'[{"index":0,"text":"","token_ids":%s,"prompt_token_ids":%s,"finish_reason":null}]}\n\n'
            % (model, _encode(tokens[:1]), bytes(req.prompt)))
        self.last = _chunked(
            b'data: {"id":"cmpl-sim","object":"text_completion","created":0,"model":%s,"choices":'
            b'[{"index":0,"text":"","token_ids":%s,"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
            % (model, _encode(tokens[1:]))) + b"0\r\n\r\n"


class SimulatedEndpoint:
    def __init__(self, spec: SimulatedEndpointSpec, timestamps: dict | None = None) -> None:
        self.spec = spec
        self.requests = 0
        self.active = 0
        self.waiting: deque = deque()
        self.connections: set = set()
        self.server: asyncio.AbstractServer | None = None
        self.started = time.monotonic()
        self.timestamps = timestamps
        self.dead = False

    def fault_active(self) -> bool:
        spec = self.spec
        if spec.fault == "none":
            return False
        if spec.fault_after_s and time.monotonic() - self.started < spec.fault_after_s:
            return False
        return self.requests > spec.fault_after_requests

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Connection(self), self.spec.host, self.spec.port,
                                               backlog=4096)
        if self.spec.fault == "die" and self.spec.fault_after_s:
            loop.call_later(self.spec.fault_after_s, self.die)

    def die(self) -> None:
        """Like a killed server process: the port closes and every connection drops."""
        self.dead = True
        self.server.close()
        for conn in list(self.connections):
            conn.transport.abort()

    # -- the continuous-batching model -----------------------------------------------
    def admit(self, conn: "_Connection", req: _Req, received: float) -> None:
        self.waiting.append((conn, req, received))
        self._schedule()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        while self.waiting and self.active < self.spec.slots:
            conn, req, received = self.waiting.popleft()
            self.active += 1
            answer = self._answer(req)
            first_at = loop.time() + self.spec.ttft_s
            loop.call_at(first_at, self._first, conn, req, answer, received)
            loop.call_at(first_at + (answer.n_tokens - 1) / self.spec.tokens_per_s, self._last, conn, answer)

    def _answer(self, req: _Req) -> _Answer:
        key = (bytes(req.prompt), req.max_tokens, req.model, self.spec.output_tokens)
        answer = _answers.get(key)
        if answer is None:
            if len(_answers) >= _ANSWER_CACHE_LIMIT:
                _answers.clear()
            answer = _answers[key] = _Answer(req, self.spec.output_tokens)
        return answer

    def _first(self, conn: "_Connection", req: _Req, answer: _Answer, received: float) -> None:
        if self.timestamps is not None and req.user is not None:
            self.timestamps[req.user] = (received, time.monotonic())
        conn.write(answer.first)
        if self.spec.fault == "close_mid_stream" and self.fault_active():
            conn.transport.close()

    def _last(self, conn: "_Connection", answer: _Answer) -> None:
        self.active -= 1
        conn.idle_since = time.monotonic()
        self._schedule()
        if self.spec.fault == "malformed" and self.fault_active():
            conn.write(_chunked(b"data: {\"choices\": [{\"token_ids\": \"not a list\"\n\n") + b"0\r\n\r\n")
        else:
            conn.write(answer.last)


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

    def data_received(self, data: bytes) -> None:
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


async def serve(specs: list[SimulatedEndpointSpec], timestamps_path: str | None = None) -> None:
    timestamps: dict | None = {} if timestamps_path else None
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
            json.dump(timestamps, handle)


def main(argv: list[str]) -> int:
    spec_path = argv[0]
    timestamps_path = argv[1] if len(argv) > 1 else None
    specs = [SimulatedEndpointSpec(**item) for item in json.loads(open(spec_path).read())]
    from .endpoints import raise_open_file_limit

    raise_open_file_limit()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(specs, timestamps_path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
