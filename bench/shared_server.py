"""The default config's complete run from a clean results/: its systems' runs through one
shared server per system (launch: shared, the default: a vLLM server, a video server) against
a model load per LoadGen process (the same config with the in-process engine, backend: vllm,
and the text-to-video pipeline in each run's process), in one invocation.

    .venv/bin/python bench/shared_server.py [--keep DIR]

Each variant runs in a fresh copy of the workflow (Snakefile, workflow/, scripts/, config/,
envs/) with ``snakemake --cores 2``; the demo model, dataset and every other output are made
from scratch in both. Reports each variant's wall time, the ratio, the run jobs' seconds
(per LoadGen process), and whether the two trees' accuracy results are the same. Several
minutes per variant on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = [str(REPO / ".venv/bin/snakemake")]
LLM_SYSTEM = "cpu-2c-vllm"


def workdir(root: Path, name: str, config: dict) -> Path:
    work = root / name
    work.mkdir(parents=True)
    for item in ("Snakefile", "workflow", "scripts", "config", "envs"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, work / item)
    (work / "bench.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return work


def in_process(config: dict) -> dict:
    """The same config with every system's runs each loading the model themselves: the LLM
    in vLLM's in-process engine, the text-to-video pipeline in the run's own process."""
    config = json.loads(json.dumps(config))
    engine = config["systems"][LLM_SYSTEM]["engine"]
    engine["backend"] = "vllm"
    engine.pop("endpoints", None)
    for system in config["systems"].values():
        system["engine"].pop("launch", None)  # backend diffusers: launch in_process
    return config


def job_seconds(log: str) -> dict[str, list[int]]:
    """Rule -> seconds of each of its jobs, from Snakemake's own timestamps."""
    stamp = re.compile(r"^\[(\w{3} \w{3}\s+\d+ [\d:]+ \d{4})\]")
    started, seconds, rule, now = {}, {}, None, None
    for line in log.splitlines():
        if m := stamp.match(line):
            now = time.mktime(time.strptime(re.sub(r"\s+", " ", m.group(1)), "%a %b %d %H:%M:%S %Y"))
        elif m := re.match(r"(?:local)?rule (\w+):", line):
            rule = m.group(1)
        elif (m := re.match(r"\s+jobid: (\d+)", line)) and rule:
            started[m.group(1)] = (rule, now)
        elif (m := re.match(r"Finished jobid: (\d+)", line)) and m.group(1) in started:
            name, t0 = started[m.group(1)]
            seconds.setdefault(name, []).append(int(now - t0))
    return seconds


def run(work: Path) -> dict:
    start = time.monotonic()
    result = subprocess.run(
        SNAKEMAKE + ["--cores", "2", "--configfile", "bench.yaml"], cwd=work, capture_output=True, text=True
    )
    wall = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"{work}: the workflow failed\n{result.stderr[-4000:]}")
    summary = json.loads((work / "results/report/summary.json").read_text())
    return {"wall_s": wall, "jobs": job_seconds(result.stdout + result.stderr), "summary": summary}


def accuracy_of(summary) -> dict:
    rows = summary["rows"] if isinstance(summary, dict) else summary
    return {(r["system"], r["benchmark"], r["scenario"]): r.get("accuracy") for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="run in DIR and keep the two workflow folders")
    args = parser.parse_args()
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-shared-"))
    variants = {"model load per run (backend: vllm)": in_process(config), "shared server (launch: shared)": config}
    results = {}
    for i, (name, variant) in enumerate(variants.items()):
        results[name] = run(workdir(root, f"v{i}", variant))
        print(f"{name}: {results[name]['wall_s']:.0f} s", flush=True)
    (base_name, base), (shared_name, shared) = results.items()
    print(f"\n{date.today()}, default config from a clean results/, snakemake --cores 2:\n")
    print("| | complete run | LoadGen jobs (loadgen_run + compliance_run), mean s |")
    print("|---|---|---|")
    for name, res in results.items():
        runs = res["jobs"].get("loadgen_run", []) + res["jobs"].get("compliance_run", [])
        print(f"| {name} | {res['wall_s']:.0f} s | {len(runs)} jobs, {sum(runs) / max(len(runs), 1):.1f} s |")
    print(f"\nratio shared / per-run load: {shared['wall_s'] / base['wall_s']:.2f}")
    same = accuracy_of(base["summary"]) == accuracy_of(shared["summary"])
    print(f"accuracy results identical: {same}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
