"""Run one LoadGen test through the endpoint backend (the run stage's own entry point).

    python endpoint_child.py ARGS.json    (the keyword arguments of stages.runs.loadgen_job)

Fault injection: with KILL_PGID and KILL_AFTER set, the server process group KILL_PGID
gets SIGKILL once KILL_AFTER answers have reached LoadGen, at the moment the dispatcher
next sends queries to endpoint KILL_ENDPOINT (default srv1): mid-run and with queries in
flight on that server, however fast the run goes and whatever the scenario's arrival gaps.
With KILL_PORT, the loop goes on only once that port refuses connections: a killed vLLM
server takes seconds to die on a slow machine, and in that window its port still takes
connections that nobody answers (a slow server, not a dead one, to the dispatcher).

Prints ``RECORD <json>`` with the run record; ``ERROR <message>`` when the run stops.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

from mlperf_repro.backends.dispatcher import Dispatcher, EndpointsLost
from mlperf_repro.harness import sut as sut_module
from mlperf_repro.stages.runs import loadgen_job


def wait_until_refused(port: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"port {port} still takes connections {timeout_s:g} s after SIGKILL")


def inject_kill(pgid: int, after: int, endpoint_name: str, port: int | None) -> None:
    completions, start = sut_module.LlmSut.completions, Dispatcher._start
    state = {"armed": False, "killed": False}

    def complete_and_count(self, answers):
        completions(self, answers)
        state["armed"] = state["armed"] or self.completed >= after

    def start_then_kill(self, endpoint, queries):
        start(self, endpoint, queries)
        # Killed right after a send, the server holds at least these queries unanswered.
        if state["armed"] and not state["killed"] and endpoint.name == endpoint_name:
            state["killed"] = True
            os.killpg(pgid, signal.SIGKILL)
            if port is not None:
                wait_until_refused(port)

    sut_module.LlmSut.completions = complete_and_count
    Dispatcher._start = start_then_kill


if __name__ == "__main__":
    if os.environ.get("KILL_PGID"):
        inject_kill(
            int(os.environ["KILL_PGID"]),
            int(os.environ["KILL_AFTER"]),
            os.environ.get("KILL_ENDPOINT", "srv1"),
            int(os.environ["KILL_PORT"]) if os.environ.get("KILL_PORT") else None,
        )
    kwargs = json.loads(open(sys.argv[1]).read())
    try:
        record = loadgen_job(**kwargs)
    except EndpointsLost as exc:
        print("ERROR " + str(exc).replace("\n", " | "), flush=True)
        sys.exit(3)
    print("RECORD " + json.dumps(record), flush=True)
