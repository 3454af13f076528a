"""CPU a sleeping thread pays to be woken, on this machine: a writer process sends small
messages down a pipe at --rate per second (busy-waiting between them, so it never sleeps); the
reader waits in ``select`` for each and reports its own CPU per wake (``time.thread_time``), the
writer its CPU per write (the wake is paid on both sides).

Against, in the same run: the reader sleeping a fixed tick (--tick-ms) and then reading whatever
came meanwhile (non-blocking), its CPU per message, and the writer's per write, now into a pipe
nobody waits on. The split head's design follows from the ratios (bench/README.md, split head):
under load nothing in LoadGen's process wakes per message, and its workers do not wait on the
pipe LoadGen's process writes to.

    .venv/bin/python bench/wake_cost.py [--rate 3000] [--seconds 3] [--tick-ms 2]
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import time


def writer(fd: int, report_fd: int, rate: float, seconds: float) -> None:
    end = time.monotonic() + seconds
    writes, in_write = 0, 0.0
    while time.monotonic() < end:
        before = time.thread_time()
        os.write(fd, b"x" * 40)
        in_write += time.thread_time() - before
        writes += 1
        due = time.monotonic() + 1 / rate
        while time.monotonic() < due:
            pass
    os.write(report_fd, json.dumps({"writes": writes, "cpu_s": in_write}).encode())
    os._exit(0)


def measure(rate: float, seconds: float, tick_s: float | None) -> dict:
    """``tick_s`` None: wait in select for each message; else sleep a tick, then read."""
    read_end, write_end = os.pipe()
    report_read, report_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        writer(write_end, report_write, rate, seconds)
    os.close(write_end)
    os.close(report_write)
    selector = selectors.DefaultSelector()
    selector.register(read_end, selectors.EVENT_READ)
    if tick_s is not None:
        os.set_blocking(read_end, False)
    reads, cpu_before = 0, time.thread_time()
    while True:
        if tick_s is None and not selector.select(0.1):
            continue
        if tick_s is not None:
            time.sleep(tick_s)
        try:
            data = os.read(read_end, 1 << 20)
        except BlockingIOError:
            continue
        if not data:
            break
        reads += 1
    cpu = time.thread_time() - cpu_before
    os.waitpid(pid, 0)
    os.close(read_end)
    wrote = json.loads(os.read(report_read, 1 << 16))
    os.close(report_read)
    return {
        "reads": reads,
        "cpu_s": round(cpu, 3),
        "cpu_us_per_read": round(1e6 * cpu / max(reads, 1), 1),
        "writer_cpu_us_per_write": round(1e6 * wrote["cpu_s"] / max(wrote["writes"], 1), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=3000)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--tick-ms", type=float, default=2)
    args = parser.parse_args()
    messages = int(args.rate * args.seconds)
    woken = measure(args.rate, args.seconds, None)
    ticking = measure(args.rate, args.seconds, args.tick_ms / 1000)
    report = {
        "rate": args.rate,
        "messages": messages,
        "woken_per_message": {**woken, "cpu_us_per_message": round(1e6 * woken["cpu_s"] / messages, 1)},
        f"ticking_{args.tick_ms:g}_ms": {**ticking, "cpu_us_per_message": round(1e6 * ticking["cpu_s"] / messages, 1)},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
