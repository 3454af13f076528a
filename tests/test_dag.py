"""The dry-run DAG: the right number of jobs per stage, derived from the config."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import REPO, make_workdir, run_snakemake, slow_after


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:", 1)[1]
    counts = {}
    for line in table.splitlines():
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if match and match.group(1) != "total":
            counts[match.group(1)] = int(match.group(2))
    return counts


@pytest.mark.slow
def test_default_config_plan(tmp_path):
    work = make_workdir(tmp_path)
    result = run_snakemake(work, "-n", "--cores", "2", timeout=120)
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout)
    assert counts == {
        "acquire_model": 2,  # tiny-llama, tiny-wan
        "acquire_dataset": 2,
        "quantize": 2,  # tiny-llama to MXFP4, tiny-wan's transformers to FP8
        # The unquantized model on its system: llama2's ROUGE, and the tiny Wan's videos that
        # its open-division metrics compare with (accuracy_target: measured, both).
        "reference_accuracy": 2,
        "find_performance": 3,  # target_qps auto: llama2 Offline, wan-2.2 Offline and SingleStream
        "user_conf": 5,  # llama2: Offline, Server, Interactive; wan-2.2: Offline, SingleStream
        # x performance, accuracy; wan-2.2's performance runs are in its measurement pairs
        "loadgen_run": 8,
        "accuracy_eval": 5,
        # TEST06 per llama2 scenario, TEST04 per wan-2.2 scenario (the table's compliance tests):
        # TEST04 and the performance run it is judged against are one job (measurement_pair)
        "compliance_run": 3,
        "measurement_pair": 2,
        "compliance_verify": 5,
        "package": 1,
        "tarball": 1,
        "check_submission": 1,
        "summary": 1,
        "official_summary": 1,
        "report_plots": 1,  # the HTML report's plots and pages
        "all": 1,
    }


@pytest.mark.slow
def test_test04_and_its_performance_run_are_one_measurement_pair(tmp_path):
    """TEST04 compares the speeds of two runs: one job (measurement_pair) makes the performance
    run and the audited run back to back, and the package, the verdict and the summary read that
    pair's runs; TEST06, judged on its own, stays a compliance_run beside the performance run."""
    work = make_workdir(tmp_path)
    result = run_snakemake(work, "-n", "--cores", "2", timeout=120)
    assert result.returncode == 0, result.stderr
    blocks = re.split(r"\n(?=\[)", result.stdout)
    pairs = [b for b in blocks if "rule measurement_pair:" in b]
    assert len(pairs) == 2
    for block in pairs:
        scenario = re.search(r"scenario=(\w+)", block).group(1)
        base = f"results/runs/cpu-2c-diffusers/tiny-wan-t2v/{scenario}/TEST04_pair"
        outputs = re.search(r"output: (.*)", block).group(1).split(", ")
        assert sorted(outputs) == [f"{base}/TEST04", f"{base}/attempts", f"{base}/performance"]
        verify = next(
            b for b in blocks if "rule compliance_verify:" in b and f"scenario={scenario}" in b and "test=TEST04" in b
        )
        inputs = re.search(r"input: (.*)", verify).group(1).split(", ")
        assert f"{base}/TEST04" in inputs and f"{base}/performance" in inputs
    package = next(b for b in blocks if "rule package:" in b)
    assert "results/runs/cpu-2c-diffusers/tiny-wan-t2v/Offline/TEST04_pair/performance" in package
    assert "results/runs/cpu-2c-diffusers/tiny-wan-t2v/Offline/performance" not in package
    runs = [b for b in blocks if "rule compliance_run:" in b]
    assert len(runs) == 3 and all("test=TEST06" in b for b in runs)


@pytest.mark.slow
def test_plan_scales_with_systems_and_scenarios(tmp_path, default_config):
    """A second system with two scenarios and an unquantized benchmark."""
    config = default_config
    second = dict(config["systems"]["cpu-2c-vllm"])
    second["benchmarks"] = {
        "tiny-llama-mxfp4": {"Offline": {"target_qps": 1}, "Server": {"target_qps": 1}},
        "tiny-llama-bf16": {"Offline": {"target_qps": 1}},
    }
    config["systems"]["second-host"] = second
    config["benchmarks"]["tiny-llama-bf16"] = {
        "mlperf_benchmark": "llama2-70b-99",
        "model": "tiny-llama",
        "dataset": "openorca-synthetic",
        "quantization": None,
    }
    work = make_workdir(tmp_path)
    (work / "two.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "two.yaml", timeout=120)
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout)
    scenarios = 3 + 2 + 1
    assert counts["user_conf"] == scenarios
    assert counts["loadgen_run"] == 2 * scenarios
    assert counts["accuracy_eval"] == scenarios
    assert counts["compliance_run"] == counts["compliance_verify"] == scenarios
    assert counts["quantize"] == 1  # shared by both systems
    assert counts["reference_accuracy"] == 2  # per system, only for the measured-target benchmark
    assert counts["find_performance"] == 1  # the first system's Offline is target_qps auto
    assert counts["acquire_model"] == 1 and counts["acquire_dataset"] == 1


@pytest.mark.slow
def test_compare_from_the_config(tmp_path, default_config):
    default_config["compare"] = {
        "reference": "/data/vendor.tar.gz",
        "partners": [["runs/a", "runs/b"], "results/package/submission"],
    }
    work = make_workdir(tmp_path)
    (work / "cmp.yaml").write_text(yaml.safe_dump(default_config))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "cmp.yaml", timeout=120)
    assert result.returncode != 0  # the reference archive is missing: named, nothing runs
    assert "/data/vendor.tar.gz" in result.stdout + result.stderr
    (tmp_path / "vendor.tar.gz").write_bytes(b"")
    for run in ("a", "b"):
        (work / "runs" / run).mkdir(parents=True)  # partners' trees: folders, read as they are
    default_config["compare"]["reference"] = str(tmp_path / "vendor.tar.gz")
    (work / "cmp.yaml").write_text(yaml.safe_dump(default_config))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "cmp.yaml", timeout=120)
    assert result.returncode == 0, result.stderr
    assert job_counts(result.stdout)["compare"] == 1
    for stem in ("vendor_vs_a-2-runs", "vendor_vs_work"):
        assert f"results/compare/{stem}.html" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("example", slow_after(sorted(p.name for p in (REPO / "config" / "examples").glob("*.yaml"))))
def test_every_example_config_validates_and_plans(tmp_path, example):
    work = make_workdir(tmp_path)
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", f"config/examples/{example}", timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "loadgen_run" in job_counts(result.stdout)
