"""Where a test-suite run's time goes: per file, per fixture (setup and teardown apart) and
the time each pytest-xdist worker sat idle.

    python bench/suite_profile.py [--fresh-clone] [--out DIR] [--top N] [-- COMMAND ...]

Runs COMMAND (default ``./test.sh``; with ``--fresh-clone``, ``.ci/run`` in a new clone of
this checkout's HEAD: install, linters and the whole suite, as CI does) with the recording
plugin ``bench/suite_profile_plugin.py`` loaded into every pytest process, then prints
Markdown tables. ``--from DIR`` only prints the tables of an earlier run's records.

The baseline in the same run is the suite's own wall time: each table's shares are of it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def run_profiled(command: list[str], cwd: Path, out: Path) -> float:
    env = dict(os.environ)
    env["MLPERF_REPRO_PROFILE_DIR"] = str(out)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), env.get("PYTHONPATH", "")]))
    env["PYTEST_ADDOPTS"] = " ".join(filter(None, [env.get("PYTEST_ADDOPTS", ""), "-p suite_profile_plugin"]))
    start = time.monotonic()
    result = subprocess.run(command, cwd=cwd, env=env)
    seconds = time.monotonic() - start
    print(f"{' '.join(command)}: exit {result.returncode} after {seconds:.0f} s", file=sys.stderr)
    return seconds


def load(folder: Path) -> list[dict]:
    records = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def runs_of(records: list[dict]) -> dict[str, list[dict]]:
    """Records by pytest invocation (the plugin labels each with its controller's pid)."""
    by_run: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_run[record["worker"].split("-")[0]].append(record)
    return dict(sorted(by_run.items(), key=lambda item: min(_start(r) for r in item[1])))


def _start(record: dict) -> float:
    return record.get("start", record.get("t", 0.0))


def _stop(record: dict) -> float:
    return record.get("stop", record.get("t", 0.0))


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def tables(records: list[dict], top: int) -> str:
    lines: list[str] = []
    for number, run in enumerate(runs_of(records).values(), 1):
        phases = [r for r in run if r["kind"] == "phase"]
        if not phases:
            continue
        begin = min(_start(r) for r in run)
        end = max(_stop(r) for r in run)
        wall = end - begin
        workers = sorted({r["worker"] for r in phases})
        lines += [
            f"### pytest run {number}: {len({r['test'] for r in phases})} tests, {len(workers)} worker(s), "
            f"wall {minutes(wall)}",
            "",
            "| worker | busy | idle | idle share |",
            "|---|---:|---:|---:|",
        ]
        for worker in workers:
            own = [r for r in phases if r["worker"] == worker]
            busy = sum(_stop(r) - _start(r) for r in own)
            idle = wall - busy
            lines.append(f"| {worker.split('-', 1)[1]} | {minutes(busy)} | {minutes(idle)} | {idle / wall:.0%} |")

        per_file: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        cpu_of_file: dict[str, float] = defaultdict(float)
        for r in phases:
            per_file[r["test"].split("::")[0]][r["phase"]] += _stop(r) - _start(r)
            cpu_of_file[r["test"].split("::")[0]] += r.get("cpu") or 0.0
        lines += [
            "",
            f"Files, the {top} slowest (setup includes the fixtures a file's first test builds; cpu: the "
            "CPU seconds of the pytest process and the children it waited for, what a cut saves on a CPU-bound run):",
            "",
            "| file | setup | call | teardown | total | share of wall | cpu |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        ranked = sorted(per_file.items(), key=lambda item: -sum(item[1].values()))
        for name, t in ranked[:top]:
            total = sum(t.values())
            lines.append(
                f"| {name} | {t['setup']:.1f} | {t['call']:.1f} | {t['teardown']:.1f} | {total:.1f} | {total / wall:.0%} "
                f"| {cpu_of_file[name]:.1f} |"
            )
        rest = ranked[top:]
        if rest:
            rest_wall = sum(sum(t.values()) for _, t in rest)
            rest_cpu = sum(cpu_of_file[name] for name, _ in rest)
            lines.append(f"| ({len(rest)} more files) | | | | {rest_wall:.1f} | | {rest_cpu:.1f} |")
        lines.append(f"\nCPU seconds in all: {sum(cpu_of_file.values()):.0f} (wall x 2 cores: {2 * wall:.0f})")

        fixtures: dict[tuple[str, str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for r in run:
            if r["kind"] != "fixture":
                continue
            key = (r["fixture"], r["scope"], r["defined_in"])
            fixtures[key][r["event"]] += _stop(r) - _start(r)
            fixtures[key][r["event"] + "s"] += 1
        lines += [
            "",
            f"Fixtures, the {top} slowest (setup and teardown apart, summed over their instances):",
            "",
            "| fixture | scope | defined in | instances | setup | teardown |",
            "|---|---|---|---:|---:|---:|",
        ]
        ranked_fixtures = sorted(fixtures.items(), key=lambda item: -(item[1]["setup"] + item[1]["teardown"]))
        for (name, scope, where), t in ranked_fixtures[:top]:
            lines.append(
                f"| {name} | {scope} | {where} | {int(t['setups'])} | {t['setup']:.1f} | {t['teardown']:.1f} |"
            )
        slowest = sorted(((r["test"], r["phase"], _stop(r) - _start(r)) for r in phases), key=lambda item: -item[2])[
            :top
        ]
        lines += ["", f"Test phases, the {top} slowest:", "", "| test | phase | seconds |", "|---|---|---:|"]
        lines += [f"| {test} | {phase} | {seconds:.1f} |" for test, phase, seconds in slowest]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh-clone", action="store_true", help="run .ci/run in a new clone of HEAD")
    parser.add_argument("--out", type=Path, help="where the records go (default: a new temporary folder)")
    parser.add_argument("--from", dest="source", type=Path, help="print the tables of earlier records only")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("command", nargs="*", help="the suite command (default ./test.sh)")
    args = parser.parse_args()
    if args.source:
        print(tables(load(args.source), args.top))
        return 0
    out = (args.out or Path(tempfile.mkdtemp(prefix="suite-profile-"))).resolve()
    if args.fresh_clone:
        # mkdtemp's folder is private (0700), as root's home is: the sandbox shows the
        # checkout's folders to its own uid all the same (accuracy/sandbox.py _Shown).
        clone = Path(tempfile.mkdtemp(prefix="suite-profile-clone-")) / "repo"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        seconds = run_profiled(args.command or [".ci/run"], clone, out)
        shutil.rmtree(clone.parent, ignore_errors=True)
    else:
        seconds = run_profiled(args.command or ["./test.sh"], REPO, out)
    print(f"Whole command: {minutes(seconds)} (records in {out})\n")
    print(tables(load(out), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
