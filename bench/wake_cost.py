"""CPU a sleeping thread pays to be woken, on this machine: a writer process sends small
messages at --rate per second (busy-waiting between them, so it never sleeps); the reader waits
for each (``select`` on a pipe; ``poll`` on a ZMQ socket) and reports its process's CPU per wake,
the writer its CPU per message (the wake is paid on both sides): time in the write call plus
whatever its other threads spent (ZMQ's I/O thread does the sending).

Against, in the same run: the reader sleeping a fixed tick (--tick-ms) and then reading whatever
came meanwhile (non-blocking), its CPU per message, and the writer's per message, now into a
channel nobody waits on. The split head's design follows from the ratios (bench/README.md, split
head): under load nothing in LoadGen's process wakes per message, and its workers do not wait on
the pipe LoadGen's process writes to.

--channel zmq measures ZeroMQ PUSH/PULL over ipc:// instead of a pipe (the channel MLCommons'
endpoints harness uses; pyzmq comes with vLLM in the project's environment):

    .venv/bin/python bench/wake_cost.py [--rate 3000] [--seconds 3] [--tick-ms 2] [--channel pipe,zmq]
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import tempfile
import time

MESSAGE = b"x" * 40


class PipeChannel:
    name = "pipe"

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()

    def writer_side(self) -> None:
        os.close(self.read_end)

    def send(self, data: bytes) -> None:
        os.write(self.write_end, data)

    def close_writer(self) -> None:
        os.close(self.write_end)

    def reader_side(self, ticking: bool) -> None:
        os.close(self.write_end)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.read_end, selectors.EVENT_READ)
        os.set_blocking(self.read_end, not ticking)

    def wait(self, timeout: float) -> bool:
        return bool(self.selector.select(timeout))

    def read(self) -> bytes | None:
        """What came (b"" at the end), None if nothing."""
        try:
            return os.read(self.read_end, 1 << 20)
        except BlockingIOError:
            return None

    def close_reader(self) -> None:
        os.close(self.read_end)


class ZmqChannel:
    """PUSH/PULL over ipc://; an empty message marks the end (ZMQ has no end of stream)."""

    name = "zmq"

    def __init__(self) -> None:
        self.address = f"ipc://{tempfile.mkdtemp()}/wake"

    def writer_side(self) -> None:
        import zmq

        self.socket = zmq.Context().socket(zmq.PUSH)
        self.socket.connect(self.address)

    def send(self, data: bytes) -> None:
        self.socket.send(data)

    def close_writer(self) -> None:
        self.socket.send(b"")
        self.socket.close(linger=5000)

    def reader_side(self, ticking: bool) -> None:
        import zmq

        self.zmq = zmq
        self.socket = zmq.Context().socket(zmq.PULL)
        self.socket.bind(self.address)

    def wait(self, timeout: float) -> bool:
        return bool(self.socket.poll(timeout * 1000))

    def read(self) -> bytes | None:
        """Everything that came, joined (b"" at the end), None if nothing."""
        parts = []
        while True:
            try:
                part = self.socket.recv(self.zmq.NOBLOCK)
            except self.zmq.Again:
                break
            if not part:
                return b""
            parts.append(part)
        return b"".join(parts) if parts else None

    def close_reader(self) -> None:
        self.socket.close(linger=0)


CHANNELS = {"pipe": PipeChannel, "zmq": ZmqChannel}


def writer(channel, report_fd: int, rate: float, seconds: float) -> None:
    channel.writer_side()
    time.sleep(0.2)  # let the reader settle into its loop
    writes, in_send = 0, 0.0
    process_before, thread_before = time.process_time(), time.thread_time()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        before = time.thread_time()
        channel.send(MESSAGE)
        in_send += time.thread_time() - before
        writes += 1
        due = time.monotonic() + 1 / rate
        while time.monotonic() < due:
            pass
    other_threads = (time.process_time() - process_before) - (time.thread_time() - thread_before)
    channel.close_writer()
    os.write(report_fd, json.dumps({"writes": writes, "cpu_s": in_send + max(other_threads, 0.0)}).encode())
    os._exit(0)


def measure(channel_type, rate: float, seconds: float, tick_s: float | None) -> dict:
    """``tick_s`` None: wait for each message; else sleep a tick, then read what came."""
    channel = channel_type()
    report_read, report_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(report_read)
        writer(channel, report_write, rate, seconds)
    os.close(report_write)
    channel.reader_side(ticking=tick_s is not None)
    reads, cpu_before = 0, time.process_time()
    while True:
        if tick_s is None and not channel.wait(0.1):
            continue
        if tick_s is not None:
            time.sleep(tick_s)
        data = channel.read()
        if data is None:
            continue
        if not data:
            break
        reads += 1
    cpu = time.process_time() - cpu_before
    os.waitpid(pid, 0)
    channel.close_reader()
    wrote = json.loads(os.read(report_read, 1 << 16))
    os.close(report_read)
    return {
        "reads": reads,
        "cpu_s": round(cpu, 3),
        "cpu_us_per_read": round(1e6 * cpu / max(reads, 1), 1),
        "writer_cpu_us_per_message": round(1e6 * wrote["cpu_s"] / max(wrote["writes"], 1), 2),
        "messages": wrote["writes"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=3000)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--tick-ms", type=float, default=2)
    parser.add_argument("--channel", default="pipe", help="pipe, zmq or both (comma-separated)")
    args = parser.parse_args()
    report: dict = {"rate": args.rate}
    for name in args.channel.split(","):
        channel_type = CHANNELS[name]
        woken = measure(channel_type, args.rate, args.seconds, None)
        ticking = measure(channel_type, args.rate, args.seconds, args.tick_ms / 1000)
        report[name] = {
            "woken_per_message": {**woken, "cpu_us_per_message": round(1e6 * woken["cpu_s"] / woken["messages"], 1)},
            f"ticking_{args.tick_ms:g}_ms": {
                **ticking,
                "cpu_us_per_message": round(1e6 * ticking["cpu_s"] / ticking["messages"], 1),
            },
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
