"""Run one LoadGen test through the endpoint backend (the run stage's own entry point).

    python endpoint_child.py ARGS.json    (the keyword arguments of harness.jobs.loadgen_job)

Prints ``RECORD <json>`` with the run record; ``ERROR <message>`` when the run stops.
"""

from __future__ import annotations

import json
import sys

from mlperf_repro.backends.dispatcher import EndpointsLost
from mlperf_repro.harness.jobs import loadgen_job

if __name__ == "__main__":
    kwargs = json.loads(open(sys.argv[1]).read())
    try:
        record = loadgen_job(**kwargs)
    except EndpointsLost as exc:
        print("ERROR " + str(exc).replace("\n", " | "), flush=True)
        sys.exit(3)
    print("RECORD " + json.dumps(record), flush=True)
