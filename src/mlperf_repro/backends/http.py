"""A lean HTTP/1.1 client for streamed completions: keep-alive connections, SSE events.

Why not aiohttp/httpx: one head process has to carry thousands of queries per second on a
CPU core it shares with LoadGen, so the per-request cost matters (``bench/dispatch.py``
measures both). This client is an asyncio ``Protocol`` over httptools' C parser (shipped
with vLLM's server stack); a request costs one ``write`` and a few callbacks.

One connection carries one request at a time (HTTP/1.1 without pipelining); a pool per
endpoint keeps idle connections for reuse.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Protocol

import httptools


class HttpError(Exception):
    """The endpoint answered, but not with a usable response (status or body)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ResponseSink(Protocol):
    """Receives one response; exactly one of ``on_end`` / ``on_error`` is called."""

    def on_status(self, status: int) -> None: ...
    def on_body(self, data: bytes) -> None: ...
    def on_end(self) -> None: ...
    def on_error(self, exc: BaseException) -> None: ...


class HttpConnection(asyncio.Protocol):
    def __init__(self, on_bytes=None) -> None:
        self.transport: asyncio.Transport | None = None
        self.sink: ResponseSink | None = None
        self.closed = False
        self.keep_alive = True
        self.requests_sent = 0
        self.idle_since = 0.0  # when it last went back to the pool; 0.0: never
        # One parser for the connection's life: llhttp starts over after each message.
        self._parser = httptools.HttpResponseParser(self)
        self._on_bytes = on_bytes  # progress callback (the endpoint's watchdog)

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._on_bytes is not None:
            self._on_bytes()
        if self._parser is None:
            return  # bytes after the connection was lost: nobody is waiting for them
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(
                HttpError(
                    f"unparsable HTTP response: {exc} (request {self.requests_sent} on this "
                    f"connection; bytes: {data[:60]!r})"
                )
            )
            self.close()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._fail(
            ConnectionResetError(
                "the endpoint closed the connection mid-response" if exc is None else f"connection lost: {exc}"
            )
        )
        # The parser holds this protocol's callbacks and the transport holds the protocol:
        # cut both cycles, so a closed connection is freed at once rather than left to the
        # cyclic GC, which the head keeps off during a run (its pauses land in TTFT).
        self._parser = None
        self.transport = None

    # httptools callbacks
    def on_status(self, _status: bytes) -> None:
        if self.sink is not None:
            self.sink.on_status(self._parser.get_status_code())

    def on_headers_complete(self) -> None:
        self.keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self.sink is not None:
            self.sink.on_body(body)

    def on_message_complete(self) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.on_end()
        if not self.keep_alive:
            self.close()

    # client side
    def send(self, request: bytes, sink: ResponseSink) -> None:
        self.sink = sink
        self.requests_sent += 1
        if self.transport is None:  # lost after it was picked: fail like a reset, from the loop
            asyncio.get_running_loop().call_soon(
                self._fail, ConnectionResetError("the connection closed before the request went out")
            )
            return
        self.transport.write(request)

    def _fail(self, exc: BaseException) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.on_error(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class ConnectionPool:
    """Keep-alive connections to one ``host:port``.

    Servers close idle keep-alive connections after a while (uvicorn, under vLLM's
    server, after 5 s by default); a connection idle for longer than ``max_idle_s`` is
    dropped rather than reused, so a request rarely meets a connection the server has
    just closed.
    """

    def __init__(
        self, host: str, port: int, *, on_bytes=None, connect_timeout_s: float = 5.0, max_idle_s: float = 4.0
    ) -> None:
        self.host, self.port = host, port
        self.idle: deque[HttpConnection] = deque()
        self.busy: set[HttpConnection] = set()
        self.on_bytes = on_bytes
        self.connect_timeout_s = connect_timeout_s
        self.max_idle_s = max_idle_s
        self._host_header = f"Host: {host}:{port}\r\n".encode()
        self._heads: dict[tuple[bytes, int], bytes] = {}
        self.opened = 0

    def take_idle(self) -> HttpConnection | None:
        """A reusable idle connection (the most recently used), or None."""
        idle = self.idle
        if not idle:
            return None
        while idle:
            conn = idle[-1]
            if conn.closed:
                idle.pop()
                continue
            if conn.idle_since < time.monotonic() - self.max_idle_s:
                return None  # the newest is stale, so all are: close_stale_idle retires them
            idle.pop()
            self.busy.add(conn)
            return conn
        return None

    def close_stale_idle(self, at_most: int) -> None:
        """Close idle connections the server may be about to drop (they hold descriptors),
        a few per call: closing thousands at once stalls both ends for a noticeable time."""
        oldest_usable = time.monotonic() - self.max_idle_s
        idle = self.idle
        while idle and at_most and (idle[0].closed or idle[0].idle_since < oldest_usable):
            idle.popleft().close()
            at_most -= 1

    async def connect(self) -> HttpConnection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout_s):
            _, conn = await loop.create_connection(lambda: HttpConnection(self.on_bytes), self.host, self.port)
        self.opened += 1
        return conn

    async def acquire(self) -> HttpConnection:
        conn = self.take_idle()
        if conn is None:
            conn = await self.connect()
            self.busy.add(conn)
        return conn

    async def warm(self, count: int) -> None:
        """Open ``count`` connections ahead of a run, so the first queries need no handshake."""
        conns = await asyncio.gather(*(self.connect() for _ in range(count)), return_exceptions=True)
        now = time.monotonic()
        for conn in conns:
            if isinstance(conn, HttpConnection):
                conn.idle_since = now
                self.idle.append(conn)

    def release(self, conn: HttpConnection) -> None:
        self.busy.discard(conn)
        if not conn.closed and conn.keep_alive and conn.sink is None:
            conn.idle_since = time.monotonic()
            self.idle.append(conn)
        else:
            conn.close()

    def discard(self, conn: HttpConnection) -> None:
        self.busy.discard(conn)
        conn.close()

    def close_all(self) -> None:
        """Drop every connection; in-flight responses fail with a connection error."""
        for conn in list(self.busy) + list(self.idle):
            conn.close()
        self.busy.clear()
        self.idle.clear()

    def request(self, method: bytes, path: bytes, body: bytes) -> bytes:
        """The request's bytes; heads are cached per (path, length): prompts repeat."""
        key = (path, len(body))
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) > 65536:
                self._heads.clear()
            head = self._heads[key] = (
                method
                + b" "
                + path
                + b" HTTP/1.1\r\n"
                + self._host_header
                + b"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                + b"Content-Length: %d\r\n\r\n" % len(body)
            )
        return head + body


class SseEvents:
    """Splits a ``text/event-stream`` body into the payloads of its ``data:`` lines."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        if self._buffer:
            data = self._buffer + data
        *events, self._buffer = data.split(b"\n\n")
        payloads = []
        for event in events:
            if event.startswith(b"data: ") and b"\n" not in event:
                payloads.append(event[6:].strip())  # the usual event: one data line
                continue
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    payloads.append(line[5:].strip())
        return payloads


class BufferedResponse:
    """A sink that collects a whole (small) response; for probes and tests."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.body = bytearray()
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()

    def on_status(self, status: int) -> None:
        self.status = status

    def on_body(self, data: bytes) -> None:
        self.body += data

    def on_end(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def on_error(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


async def request(
    pool: ConnectionPool, method: str, path: str, body: bytes = b"", timeout_s: float = 10.0
) -> tuple[int, bytes]:
    """One buffered request (health probes, tests)."""
    conn = await pool.acquire()
    sink = BufferedResponse()
    conn.send(pool.request(method.encode(), path.encode(), body), sink)
    try:
        await asyncio.wait_for(sink.done, timeout_s)
    except BaseException:
        pool.discard(conn)
        raise
    pool.release(conn)
    return sink.status, bytes(sink.body)
