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
        self._parser = httptools.HttpResponseParser(self)
        self._on_bytes = on_bytes  # progress callback (the endpoint's watchdog)

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._on_bytes is not None:
            self._on_bytes()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpError(f"unparsable HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._fail(ConnectionResetError("the endpoint closed the connection mid-response"
                                        if exc is None else f"connection lost: {exc}"))

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
    def send(self, head: bytes, body: bytes, sink: ResponseSink) -> None:
        self.sink = sink
        self._parser = httptools.HttpResponseParser(self)
        self.transport.write(head + body)

    def _fail(self, exc: BaseException) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.on_error(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class ConnectionPool:
    """Keep-alive connections to one ``host:port``."""

    def __init__(self, host: str, port: int, *, on_bytes=None, connect_timeout_s: float = 5.0) -> None:
        self.host, self.port = host, port
        self.idle: deque[HttpConnection] = deque()
        self.busy: set[HttpConnection] = set()
        self.on_bytes = on_bytes
        self.connect_timeout_s = connect_timeout_s
        self._host_header = f"Host: {host}:{port}\r\n".encode()

    async def acquire(self) -> HttpConnection:
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                self.busy.add(conn)
                return conn
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: HttpConnection(self.on_bytes), self.host, self.port),
            self.connect_timeout_s,
        )
        self.busy.add(conn)
        return conn

    def release(self, conn: HttpConnection) -> None:
        self.busy.discard(conn)
        if not conn.closed and conn.keep_alive and conn.sink is None:
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

    def request_head(self, method: str, path: str, body_length: int) -> bytes:
        return (f"{method} {path} HTTP/1.1\r\n".encode() + self._host_header
                + b"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                + f"Content-Length: {body_length}\r\n\r\n".encode())


class SseEvents:
    """Splits a ``text/event-stream`` body into the payloads of its ``data:`` lines."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer + data
        *events, self._buffer = buffer.split(b"\n\n")
        payloads = []
        for event in events:
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


async def request(pool: ConnectionPool, method: str, path: str, body: bytes = b"",
                  timeout_s: float = 10.0) -> tuple[int, bytes]:
    """One buffered request (health probes, tests)."""
    conn = await pool.acquire()
    sink = BufferedResponse()
    conn.send(pool.request_head(method, path, len(body)), body, sink)
    try:
        await asyncio.wait_for(sink.done, timeout_s)
    except BaseException:
        pool.discard(conn)
        raise
    pool.release(conn)
    return sink.status, bytes(sink.body)
