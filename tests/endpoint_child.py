"""Run one LoadGen test through the endpoint backend (the run stage's own entry point).

    python endpoint_child.py ARGS.json    (the keyword arguments of stages.runs.loadgen_job)

Fault injection: with KILL_PGID and KILL_AFTER set, the server process group KILL_PGID
gets SIGKILL right after the KILL_AFTER-th answer reaches LoadGen, i.e. mid-run with
queries in flight, however fast the run goes.

Prints ``RECORD <json>`` with the run record; ``ERROR <message>`` when the run stops.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from mlperf_repro.backends.dispatcher import EndpointsLost
from mlperf_repro.harness import sut as sut_module
from mlperf_repro.stages.runs import loadgen_job


def inject_kill(pgid: int, after: int) -> None:
    complete = sut_module.LlmSut.complete

    def complete_then_kill(self, request_id, token_ids):
        complete(self, request_id, token_ids)
        if self.completed == after:
            os.killpg(pgid, signal.SIGKILL)

    sut_module.LlmSut.complete = complete_then_kill


if __name__ == "__main__":
    if os.environ.get("KILL_PGID"):
        inject_kill(int(os.environ["KILL_PGID"]), int(os.environ["KILL_AFTER"]))
    kwargs = json.loads(open(sys.argv[1]).read())
    try:
        record = loadgen_job(**kwargs)
    except EndpointsLost as exc:
        print("ERROR " + str(exc).replace("\n", " | "), flush=True)
        sys.exit(3)
    print("RECORD " + json.dumps(record), flush=True)
