"""One dispatch worker of a split head: a whole dispatcher in its own process.

    python -m mlperf_repro.backends.head_worker IN_FD OUT_FD

The head (backends.split_head) writes an ``INIT`` frame (endpoints with this worker's share of
their slots, dispatch and generation settings), then prompts and queries; the worker serves them
with the same :class:`~mlperf_repro.backends.endpoints.EndpointBackend` a single-process head
runs (balancing, failover, stall watchdog, warm connections) and writes back first tokens and
answers. ``FINISH`` ends it once everything it holds is answered: it writes its statistics and
exits. If the head goes away (its pipe ends) the worker exits at once: nobody is left to answer.
While it holds queries the worker does not wait on the head's pipe but looks into it on a timer
and whenever it writes answers back (poll), so the head's writes wake nobody.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading

from . import GenerationSettings, Request
from . import head_wire as wire
from .dispatcher import DispatchSettings, EndpointsLost, EndpointSpec
from .endpoints import EndpointBackend


def _read_init(fd_in: int, reader: wire.FrameReader) -> tuple[dict, list]:
    frames: list = []
    while not frames:
        data = os.read(fd_in, 1 << 16)
        if not data:
            raise SystemExit(0)  # the head went away before the run
        frames = reader.feed(data)
    kind, payload = frames[0]
    if kind != wire.INIT:
        raise SystemExit(f"head_worker: expected an INIT frame, got {kind!r}")
    return json.loads(bytes(payload)), frames[1:]


def serve(fd_in: int, fd_out: int) -> None:
    reader = wire.FrameReader()
    init, early = _read_init(fd_in, reader)
    outbox: list[bytes] = []

    def send(data: bytes) -> None:
        wire.write_all(fd_out, data)

    def flush() -> None:
        data = b"".join(outbox)
        outbox.clear()
        send(data)
        read_head()  # awake anyway: take the head's queries now rather than at the next poll

    def post(data: bytes) -> None:
        """First tokens and answers of one loop iteration leave in one write."""
        if not outbox:
            backend.loop.call_soon(flush)
        outbox.append(data)

    backend = EndpointBackend(
        endpoints=[EndpointSpec(**spec) for spec in init["endpoints"]],
        dispatch=DispatchSettings(**init["dispatch"]),
        generation=GenerationSettings(**init["generation"]),
        stream=init["stream"],
        on_first_tokens=(lambda firsts: post(wire.firsts_frame(firsts))) if init["stream"] else None,
        on_completions=lambda answers: post(wire.answers_frame(answers)),
    )
    dispatcher = backend.dispatcher
    try:
        backend.start()
    except EndpointsLost as exc:
        send(wire.frame(wire.FATAL, str(exc).encode()))
        raise SystemExit(1) from None
    prompts: dict[int, list[int]] = {}
    done = threading.Event()

    def take(frames) -> None:
        requests = []
        for kind, payload in frames:
            if kind == wire.QUERIES:
                requests.extend(Request(qid, prompts[key]) for qid, key in wire.read_queries(payload))
            elif kind == wire.PROMPT:
                key, ids = wire.read_prompt(payload)
                prompts[key] = ids
            elif kind == wire.FINISH:
                done.set()
        if requests:
            dispatcher.accept(requests)

    poll_s = init["poll_s"]
    loop = backend.loop

    def read_head() -> bool:
        """Take what the head sent (non-blocking); True if anything came."""
        try:
            data = os.read(fd_in, 1 << 20)
        except BlockingIOError:
            return False
        if not data:  # the head is gone: nobody to answer to
            os._exit(3)
        take(reader.feed(data))
        return True

    def poll() -> None:
        """Read what the head sent; while anything is in flight, look again in ``poll_s`` (and
        whenever answers go out: flush) rather than wait on the pipe. A write into a pipe that a
        thread sleeps on pays for its wake, 15 us of the head's CPU on this VM against 1.2 with
        nobody waiting (bench/wake_cost.py); a timer here costs the head nothing."""
        came = read_head()
        if came or dispatcher.in_flight_total or dispatcher.pending:
            loop.call_later(poll_s, poll)
        else:  # idle: wait on the pipe (level-triggered: what came meanwhile wakes it at once)
            loop.add_reader(fd_in, readable)

    def readable() -> None:
        loop.remove_reader(fd_in)
        poll()

    send(wire.json_frame(wire.READY, {"pid": os.getpid(), "problems": backend.startup_problems}))
    os.set_blocking(fd_in, False)
    loop.add_reader(fd_in, readable)
    if early:
        loop.call_soon(take, early)
    try:
        backend.serve_until(done)
    except EndpointsLost as exc:
        send(wire.frame(wire.FATAL, str(exc).encode()))
        raise SystemExit(1) from None
    if outbox:
        flush()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats = backend.stats
    stats["worker"] = {
        "pid": os.getpid(),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "answered": sum(e.completed for e in dispatcher.endpoints),
    }
    send(wire.json_frame(wire.STATS, stats))
    backend.stop()


def main(argv: list[str]) -> None:
    fd_in, fd_out = int(argv[0]), int(argv[1])
    serve(fd_in, fd_out)


if __name__ == "__main__":
    main(sys.argv[1:])
