"""Builtin models are built in a child process whose CPU numerics are pinned, so that a rebuild
on another x86-64 machine gives the same bits.

Training is chaotic: a last-bit difference in one matrix product grows into another model. Left
alone, PyTorch's own kernels, MKL and oneDNN each pick the widest instructions the CPU has
(AVX-512, AMX), and those sum in another order: the tiny-llama shipped before this module,
rebuilt bit for bit where it was trained, came out different from step 50 on a Sapphire Rapids
CPU (2026-12-06). The child holds all three to their AVX2 kernels (every x86-64 server CPU since
2015 has them; MKL's conditional numerical reproducibility then gives the same bits for the same
thread count); the build report records what it ran with, so a rebuild that differs says where.

checkpoints.build_model runs ``python -m mlperf_repro.demo.checkpoints REQUEST.json`` here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError

#: The environment a build runs in: read by each library when it first loads, so it is set
#: for a fresh process, never in one that has imported torch already.
PINNED_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
#: What torch reports under PINNED_ENV on a CPU that has AVX2.
PINNED_KERNELS = "AVX2"


def numerics() -> dict[str, str]:
    """What the running process computes with (recorded in every build report)."""
    import torch

    return {"torch": torch.__version__.split("+")[0], "cpu_kernels": torch.backends.cpu.get_cpu_capability()}


def check_pinned() -> dict[str, str]:
    """This process's numerics, or a UserError if its CPU lacks the pinned kernels."""
    used = numerics()
    if used["cpu_kernels"] != PINNED_KERNELS:
        raise UserError(
            f"builtin models are trained with {PINNED_KERNELS} kernels, so that every machine gets the "
            f"same bits, but this CPU offers {used['cpu_kernels']} (no AVX2): build on an x86-64 CPU with "
            "AVX2, or acquire the model instead of building it"
        )
    return used


def run_pinned(module: str, request: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    """``python -m module REQUEST.json`` in a child with PINNED_ENV; the JSON it writes to the
    request's ``report`` path. Its stdout lines go to ``log``; its exit status 2 means a
    UserError whose message it printed to stderr."""
    with tempfile.TemporaryDirectory(prefix="mlperf-repro-build-") as scratch:
        request_path = Path(scratch) / "request.json"
        report_path = Path(scratch) / "report.json"
        request_path.write_text(json.dumps({**request, "report": str(report_path)}, default=list))
        stderr_path = Path(scratch) / "stderr.txt"
        with stderr_path.open("w") as stderr_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, str(request_path)],
                env={**os.environ, **PINNED_ENV, "PYTHONUNBUFFERED": "1"},
                stdout=subprocess.PIPE,
                stderr=stderr_file,
                text=True,
            )
            for line in proc.stdout:
                log(line.rstrip("\n"))
        stderr = stderr_path.read_text(errors="replace").strip()
        if proc.wait() != 0:
            detail = stderr if proc.returncode == 2 else stderr[-3000:]
            raise UserError(
                f"{request.get('source', module)}: the build into {request.get('dest_dir')} failed: {detail}"
            )
        return json.loads(report_path.read_text())
