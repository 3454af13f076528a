"""Run MLCommons' official submission checker (a checkout of mlcommons/inference) on a
tree, for the benchmarks that compare our check with it."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class OfficialRun:
    ok: bool  # "submission looks OK" and exit 0
    crash: str | None  # the last line of a traceback, if it stopped with one
    errors: list[str]  # its ERROR lines, paths relative to the tree
    returncode: int
    seconds: float


def run_official(checkout: Path, tree: Path, round_name: str, submitter: str) -> OfficialRun:
    """``python -m submission_checker.main --input TREE --version ROUND --submitter X``."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run(
            [sys.executable, "-m", "submission_checker.main", "--input", str(tree), "--version", round_name]
            + ["--submitter", submitter, "--csv", str(Path(scratch) / "summary.csv")],
            cwd=checkout / "tools" / "submission",
            capture_output=True,
            text=True,
        )
    output = proc.stdout + proc.stderr
    errors = [
        line.split(" ERROR] ", 1)[1].replace(f"{tree}/", "") for line in output.splitlines() if " ERROR] " in line
    ]
    crash = None
    if "Traceback (most recent call last)" in output:
        crash = next((line for line in reversed(output.splitlines()) if line.strip()), "?")
    ok = proc.returncode == 0 and "submission looks OK" in output
    return OfficialRun(ok, crash, errors, proc.returncode, time.perf_counter() - start)
