"""``python -m mlperf_repro.launch.shared_supervisor HOME``: the detached process that owns a
``launch: shared`` system's servers (see :func:`mlperf_repro.launch.shared.supervise`)."""

import sys
from pathlib import Path

from .shared import supervise

if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1])))
