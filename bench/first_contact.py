"""A newcomer's first run, timed: a fresh clone, then the README's first command.

    .venv/bin/python bench/first_contact.py [--runs 3] [--keep DIR]

Each run clones this checkout's HEAD into a new folder and runs, as the README says,
``./install.sh`` and then ``.venv/bin/snakemake --cores all`` (timed apart, and together),
then reads what a newcomer reads: ``results/check/report.txt`` (PASS?), every result's
LoadGen validity and accuracy verdict (``results/report/summary.csv``) and the summary's first
lines, and each measurement pair's ratio per attempt. It prints one row per run and the
median and spread (min-max) of the totals, and writes them as JSON (``--json``). Run it alone
on the machine: the figure is the machine's whole attention to one newcomer. The install
reuses the package caches of earlier installs on the machine (uv's, pip's), as a second
project on a developer's machine would; a machine that never installed these packages
downloads them first (not measured here).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(command: list[str], cwd: Path, log: Path) -> tuple[float, int]:
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode
    return time.monotonic() - started, code


def one_run(base: Path, k: int) -> dict:
    clone = base / f"clone-{k}"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    install_s, install_rc = timed(["./install.sh"], clone, base / f"install-{k}.log")
    run_s, run_rc = timed([".venv/bin/snakemake", "--cores", "all"], clone, base / f"run-{k}.log")
    report = clone / "results/check/report.txt"
    summary_csv = clone / "results/report/summary.csv"
    summary_md = clone / "results/report/summary.md"
    rows = list(csv.DictReader(summary_csv.open())) if summary_csv.is_file() else []
    return {
        "install_s": round(install_s, 1),
        "workflow_s": round(run_s, 1),
        "total_s": round(install_s + run_s, 1),
        "install_rc": install_rc,
        "workflow_rc": run_rc,
        "check_pass": report.is_file() and "result: PASS" in report.read_text(),
        "results": len(rows),
        "valid": sum(r["loadgen_validity"] == "VALID" for r in rows),
        "accuracy_met": sum(r["accuracy_passed"] == "yes" for r in rows),
        "summary_head": summary_md.read_text().splitlines()[2:4] if summary_md.is_file() else [],
        # Each measurement pair's ratio per attempt (a pair measured again: more than one).
        "pair_ratios": {
            str(record.parent.parent.parent.relative_to(clone / "results/runs")): [
                round(a["speedup"], 4) for a in json.loads(record.read_text())["attempts"] if "speedup" in a
            ]
            for record in sorted((clone / "results/runs").glob("*/*/*/*_pair/attempts/attempts.json"))
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--keep", help="folder to keep the clones (less their .venv) and logs in (default: a temporary one, removed)"
    )
    parser.add_argument("--json", help="write the runs and their statistics here")
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="first-contact-"))
    base.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    runs = []
    try:
        for k in range(1, args.runs + 1):
            run = one_run(base, k)
            runs.append(run)
            print(
                f"run {k}: install {run['install_s']} s + workflow {run['workflow_s']} s = {run['total_s']} s; "
                f"check {'PASS' if run['check_pass'] else 'not PASS'}, {run['valid']}/{run['results']} VALID, "
                f"{run['accuracy_met']}/{run['results']} accuracy met; measurement pairs {run['pair_ratios']}",
                flush=True,
            )
            # --keep keeps each clone's results and logs, not its 3 GB environment.
            shutil.rmtree(base / f"clone-{k}" / ".venv" if args.keep else base / f"clone-{k}", ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    totals = [r["total_s"] for r in runs]
    stats = {
        "commit": commit.stdout.strip(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs": runs,
        "total_median_s": statistics.median(totals),
        "total_min_s": min(totals),
        "total_max_s": max(totals),
        "workflow_median_s": statistics.median(r["workflow_s"] for r in runs),
        "install_median_s": statistics.median(r["install_s"] for r in runs),
    }
    print(
        f"total: median {stats['total_median_s']} s (min {stats['total_min_s']}, max {stats['total_max_s']}); "
        f"install median {stats['install_median_s']} s, workflow median {stats['workflow_median_s']} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(stats, indent=2) + "\n")
    ok = all(r["check_pass"] and r["valid"] == r["results"] == r["accuracy_met"] > 0 for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
