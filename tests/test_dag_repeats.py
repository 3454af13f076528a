"""repeats: N in Snakemake's own dry-run DAG: three performance runs for repeats: 3, the
packaged repeat an input of the package, the plan view's job counts the DAG's."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import SCHEMA, make_workdir, run_snakemake
from test_dag import job_counts

from mlperf_repro.config import validate_config
from mlperf_repro.estimate import estimate_plan

RUNS = "results/runs/cpu-2c-vllm/tiny-llama-mxfp4/Server"


def _rule_blocks(output: str, rule: str) -> list[str]:
    """The dry run's job blocks of one rule (a local rule may print as ``localrule``)."""
    blocks = re.split(r"\n(?=\[|rule |localrule )", output)
    return [block for block in blocks if block.startswith((f"rule {rule}:", f"localrule {rule}:"))]


@pytest.mark.slow
def test_repeats_3_makes_three_performance_runs(tmp_path, default_config):
    server = default_config["systems"]["cpu-2c-vllm"]["benchmarks"]["tiny-llama-mxfp4"]["Server"]
    server.update(repeats=3, packaged_repeat=3)
    work = make_workdir(tmp_path)
    (work / "repeats.yaml").write_text(yaml.safe_dump(default_config))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "repeats.yaml", timeout=120)
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout)
    assert counts["loadgen_repeat"] == 2
    assert counts["loadgen_run"] == 6  # performance and accuracy of three scenarios, as without repeats

    performance_runs = [
        line.split("output: ", 1)[1]
        for block in _rule_blocks(result.stdout, "loadgen_run") + _rule_blocks(result.stdout, "loadgen_repeat")
        for line in block.splitlines()
        if line.strip().startswith("output: ") and line.split("output: ", 1)[1].startswith(f"{RUNS}/performance")
    ]
    assert sorted(performance_runs) == [f"{RUNS}/performance", f"{RUNS}/performance_run_2", f"{RUNS}/performance_run_3"]
    # each repeat its own LoadGen process (job) with its own log; the same user.conf
    repeats = _rule_blocks(result.stdout, "loadgen_repeat")
    assert all(f"{RUNS}/user.conf" in block and "performance_run_" in block.split("log: ")[1] for block in repeats)
    # the packaged repeat feeds the package, every repeat the summary
    (package,) = _rule_blocks(result.stdout, "package")
    assert f"{RUNS}/performance_run_3" in package and f"{RUNS}/performance_run_2" not in package
    (summary,) = _rule_blocks(result.stdout, "summary")
    assert f"{RUNS}/performance_run_2" in summary and f"{RUNS}/performance_run_3" in summary
    # the plan view counts the same jobs
    estimate = estimate_plan(validate_config(default_config, SCHEMA))
    assert estimate.rule_counts() == {k: v for k, v in counts.items() if k != "all"}
