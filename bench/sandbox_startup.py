"""Benchmark: what the code sandbox costs per program, in each isolation mode.

    .venv/bin/python bench/sandbox_startup.py [--runs 40]

Times :func:`mlperf_repro.accuracy.sandbox.run_python` on a program that does nothing, in
every mode this host offers (namespaces through bubblewrap, the seccomp filter alone, the
unsandboxed fallback), against the plain start of the same interpreter (``python -I -B -c
pass`` through ``subprocess.run``). For the choice of tool it also times the two ways of
making the namespaces without the project's own mount code: bubblewrap with the sandbox's
arguments, and util-linux ``unshare -Urnpim --fork --mount-proc`` (which gives no read-only
view of the filesystem by itself). Run it as root and as an ordinary user (``setpriv
--reuid=65534 --regid=65534 --clear-groups``): as root every program also switches to a uid
of its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from mlperf_repro.accuracy import sandbox


def per_run_ms(run, runs: int) -> tuple[float, float]:
    """Median and 90th percentile of ``runs`` timed calls, in ms (one warm-up call first)."""
    run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(1000 * (time.perf_counter() - start))
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    python = sandbox.default_python()
    print(f"uid {os.geteuid()}; interpreter {python}; bubblewrap {sandbox.bwrap_program()}; runs {args.runs}")
    rows = [("plain interpreter start", lambda: subprocess.run([python, "-I", "-B", "-c", "pass"], check=True))]
    bwrap = sandbox.bwrap_program()
    if bwrap and sandbox.isolation_problem("namespaces") is None:
        limits = sandbox.Limits()
        program = os.memfd_create("bench")
        info_read, info_write = os.pipe()
        folders = sandbox._open_folders(python, ())
        command = sandbox._bwrap_args(bwrap, folders, limits, program, info_write)
        command += [python, "-I", "-B", "-c", "pass"]
        passed = (program, info_write, *(fd for fd, _ in folders))

        def bubblewrap_alone() -> None:
            os.lseek(program, 0, os.SEEK_SET)
            subprocess.run(command, check=True, pass_fds=passed, stdout=subprocess.DEVNULL)

        rows.append(("bubblewrap, the sandbox's arguments", bubblewrap_alone))
    if shutil.which("unshare"):
        unshare = ["unshare", "-Urnpim", "--fork", "--kill-child", "--mount-proc", python, "-I", "-B", "-c", "pass"]
        if subprocess.run(unshare, capture_output=True).returncode == 0:
            rows.append(("util-linux unshare -Urnpim", lambda: subprocess.run(unshare, check=True)))
    for mode in sandbox.ISOLATION_MODES:
        problem = sandbox.isolation_problem(mode)
        if problem:
            print(f"{mode}: not available ({problem})")
            continue
        rows.append((f"run_python, {mode}", lambda mode=mode: sandbox.run_python("pass", isolation=mode)))
    for name, run in rows:
        median, p90 = per_run_ms(run, args.runs)
        print(f"{name:40s} median {median:6.1f} ms   p90 {p90:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
