"""``python -m mlperf_repro.launch.slurm_server HOME``: the batch script of a
``launch: slurm-shared`` server job (see :func:`mlperf_repro.launch.slurm_shared.serve`)."""

import sys
from pathlib import Path

from ..errors import UserError
from .slurm_shared import serve

if __name__ == "__main__":
    try:
        sys.exit(serve(Path(sys.argv[1])))
    except UserError as exc:
        sys.exit(f"error: {exc}")
