"""The workflow on a real one-node SLURM cluster (tests/cluster/slurm.py) through profiles/slurm:
jobs reach SLURM with the resources the rules declare, results equal a local run, a two-task
job runs both tasks, a job killed at its time limit is reported and retried, and a job
cancelled half-way is redone rather than trusted.

Each test's body runs beside the others' from the cluster's start (tests/cluster/concurrent.py):
they mostly wait on SLURM and on the executor plugin's status checks."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cluster import concurrent, slurm
from conftest import DEFAULT_CONFIG, REPO, make_workdir

# A real SLURM cluster is started for these (tests/cluster/slurm.py): not in the fast loop.
pytestmark = pytest.mark.slow

TINY_SNAKEFILE = REPO / "tests" / "cluster" / "Snakefile"
# Snakemake's command line, the SLURM plugin's status checks at most 2 s apart (its docstring
# says why).
PROMPT_STATUS_SNAKEMAKE = REPO / "tests" / "cluster" / "snakemake_prompt_status.py"
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)")


def snakemake_cmd(work: Path, snakefile: Path, args: list[str], limit: int) -> list[str]:
    # timeout -s KILL: Snakemake can ignore TERM for minutes while it waits on the cluster.
    return [
        "timeout",
        "-k",
        "10",
        "-s",
        "KILL",
        str(limit),
        sys.executable,
        str(PROMPT_STATUS_SNAKEMAKE),
        "--directory",
        str(work),
        "--snakefile",
        str(snakefile),
        *args,
    ]


def run_snakemake(work: Path, snakefile: Path, args: list[str], limit: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = snakemake_cmd(work, snakefile, args, limit)
    proc = concurrent.popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=limit + 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        concurrent.forget(proc)
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    (work / f"snakemake-{time.monotonic_ns()}.out").write_text(result.stdout + result.stderr)
    return result


def submitted_jobs(output: str) -> list[tuple[str, str]]:
    """(SLURM job id, rule) for every job Snakemake submitted, from its log lines."""
    jobs = []
    for job_id, log in SUBMITTED.findall(output):
        rule = re.search(r"slurm_logs/rule_([A-Za-z0-9_]+)", log)
        jobs.append((job_id, rule.group(1) if rule else "?"))
    return jobs


def failure_text(result: subprocess.CompletedProcess, work: Path) -> str:
    logs = "\n".join(
        f"== {p}\n{p.read_text(errors='replace')[-2000:]}"
        for p in sorted((work / ".snakemake" / "slurm_logs").rglob("*.log"))
    )
    return f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-6000:]}\n{logs}"


def time_limit_minutes(fields: dict[str, str]) -> int:
    """scontrol's TimeLimit ([D-]HH:MM:SS) in minutes."""
    days, _, clock = fields["TimeLimit"].rpartition("-")
    hours, minutes, seconds = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + hours * 60 + minutes + (seconds > 0)


def granted_memory_mb(fields: dict[str, str]) -> int:
    match = re.search(r"mem=(\d+)([MG])", fields["TRES"])
    return int(match.group(1)) * (1024 if match.group(2) == "G" else 1)


def tree_hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(".snakemake")
    }


# The demo's first stages at the smallest size that still exercises them: the builtin model is
# built and trained (2 steps), the dataset tokenised, the model quantized to MXFP4, and a
# scenario's user.conf written (a localrule, so it stays on the submit host; Server's, whose
# target_qps is a number: Offline's auto would measure the machine first).
REDUCED_TARGETS = [
    "resources/models/tiny-llama",
    "resources/datasets/openorca-synthetic",
    "results/models/tiny-llama-mxfp4-w4a16",
    "results/runs/cpu-2c-vllm/tiny-llama-mxfp4/Server/user.conf",
]


def reduced_config() -> dict:
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    # The shipped stand-in would only be copied: a builtin spec makes the SLURM job build and
    # train one.
    config["models"]["tiny-llama"] = {"source": "builtin:tiny-llama", "builtin": {}}
    config["models"]["tiny-llama"]["builtin"].update(
        train_steps=2,
        batch_size=4,
        eval_examples=2,
        train_examples=64,
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    config["datasets"]["openorca-synthetic"]["builtin"]["samples"] = 16
    config["systems"]["cpu-2c-vllm"]["engine"]["engine_args"]["max_model_len"] = 512
    return config


#: What the tests' copy of profiles/slurm changes: the first status check 2 s after a
#: submission (the shipped profile's 5 s is for a real cluster's slurmctld, which many users'
#: workflows poll). The plugin (2.8.0) would then wait 10 s longer after each check in which
#: none of the workflow's jobs finished; the tests run Snakemake through
#: tests/cluster/snakemake_prompt_status.py, which keeps its checks at most 2 s apart, so a job
#: is seen within about 2 s of its end. This one-node cluster starts a job within a second
#: (tests/cluster/slurm.py, SchedulerParameters).
TEST_PROFILE = {"slurm-init-seconds-before-status-checks": 2}


def copy_profiles(work: Path) -> None:
    """The repository's profiles in ``work``, profiles/slurm with TEST_PROFILE's settings."""
    shutil.copytree(REPO / "profiles", work / "profiles")
    config = work / "profiles" / "slurm" / "config.yaml"
    profile = yaml.safe_load(config.read_text())
    assert TEST_PROFILE.keys() <= profile.keys(), "profiles/slurm no longer sets what the tests change"
    config.write_text(yaml.safe_dump({**profile, **TEST_PROFILE}, sort_keys=False))


def workdir_with_profiles(base: Path) -> Path:
    base.mkdir()
    work = make_workdir(base)
    copy_profiles(work)
    return work


def reduced_demo_on_slurm_matches_local_run(slurm_cluster, tmp_path):
    config_text = yaml.safe_dump(reduced_config(), sort_keys=False)
    on_slurm = workdir_with_profiles(tmp_path / "slurm")
    local = workdir_with_profiles(tmp_path / "local")
    for work in (on_slurm, local):
        (work / "reduced.yaml").write_text(config_text)

    # The local reference runs alongside: its jobs and the SLURM jobs share the two cores.
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    local_run = concurrent.popen(
        snakemake_cmd(
            local,
            local / "Snakefile",
            [*REDUCED_TARGETS, "--workflow-profile", "profiles/local", "--configfile", "reduced.yaml"],
            600,
        ),
        cwd=local,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        # This test cluster's node has 2 CPUs: a site sets such sizes with set-threads.
        result = run_snakemake(
            on_slurm,
            on_slurm / "Snakefile",
            [
                *REDUCED_TARGETS,
                "--workflow-profile",
                "profiles/slurm",
                "--set-threads",
                "quantize=2",
                "--configfile",
                "reduced.yaml",
            ],
            600,
        )
        local_out, _ = local_run.communicate(timeout=630)
    finally:
        if local_run.poll() is None:
            local_run.kill()
    assert result.returncode == 0, failure_text(result, on_slurm)
    assert local_run.returncode == 0, local_out[-6000:]

    jobs = submitted_jobs(result.stdout + result.stderr)
    assert sorted(rule for _, rule in jobs) == ["acquire_dataset", "acquire_model", "quantize"]
    # What the rules declare (threads, mem_mb, runtime) is what SLURM granted each job; the
    # quantize job's memory comes from the acquired checkpoint (quant.memory).
    from mlperf_repro.quant.memory import quantize_job_mem_mb

    model = on_slurm / "resources" / "models" / "tiny-llama"
    quantize_mem = quantize_job_mem_mb(model)
    assert quantize_mem < 8000  # the tiny model: the whole-model logit comparison's need
    expected = {"acquire_model": (2, 4000, 30), "acquire_dataset": (1, 2000, 30), "quantize": (2, quantize_mem, 60)}
    for job_id, rule in jobs:
        fields = slurm.job_fields(job_id)
        assert fields["JobState"] == "COMPLETED", (rule, fields)
        cpus, mem_mb, minutes = expected[rule]
        assert (int(fields["NumCPUs"]), granted_memory_mb(fields), time_limit_minutes(fields)) == (
            cpus,
            mem_mb,
            minutes,
        ), (rule, fields)
        assert fields["Partition"] == slurm_cluster.partition

    # Same bytes as the local run: model and dataset manifests, the whole quantized
    # checkpoint (with its quant_manifest.json hashes), and the generated user.conf.
    for manifest in (
        "resources/models/tiny-llama/manifest.sha256",
        "resources/datasets/openorca-synthetic/manifest.sha256",
        "results/runs/cpu-2c-vllm/tiny-llama-mxfp4/Server/user.conf",
    ):
        assert (on_slurm / manifest).read_text() == (local / manifest).read_text(), manifest
    for folder in ("results/models/tiny-llama-mxfp4-w4a16", "results/models/tiny-llama-mxfp4-w4a16-emulated"):
        slurm_tree = tree_hashes(on_slurm / folder)
        assert "quant_manifest.json" in slurm_tree and "model.safetensors" in slurm_tree
        assert slurm_tree == tree_hashes(local / folder), folder


def tiny_workdir(tmp_path: Path) -> Path:
    work = tmp_path / "tiny"
    work.mkdir()
    copy_profiles(work)
    return work


def two_task_job_runs_both_tasks(slurm_cluster, tmp_path):
    work = tiny_workdir(tmp_path)
    result = run_snakemake(work, TINY_SNAKEFILE, ["two_tasks.txt", "--workflow-profile", "profiles/slurm"], 240)
    assert result.returncode == 0, failure_text(result, work)
    lines = sorted((work / "two_tasks.txt").read_text().splitlines())
    assert lines == [f"task={i} of 2 on {slurm_cluster.node}" for i in range(2)]
    [(job_id, rule)] = submitted_jobs(result.stdout + result.stderr)
    fields = slurm.job_fields(job_id)
    assert (rule, fields["JobState"], fields["NumTasks"]) == ("two_tasks", "COMPLETED", "2")


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def running_job_ids(work: Path) -> list[str]:
    """Running jobs submitted from ``work`` (other tests' jobs run beside them)."""
    out = slurm.run(["squeue", "-h", "-t", "R", "-o", "%i %Z"], timeout=10).stdout
    return [line.split()[0] for line in out.splitlines() if line.split()[1:] == [str(work)]]


def cancelled_job_is_redone_not_trusted(tmp_path):
    """An outage in the middle of a job: the submit host's Snakemake dies, and so does the job,
    after it wrote half its output. The half-written file must not count as done."""
    work = tiny_workdir(tmp_path)
    args = ["written.txt", "--workflow-profile", "profiles/slurm", "--config", "writer_seconds=12"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    outage = concurrent.popen(
        snakemake_cmd(work, TINY_SNAKEFILE, args, 240),
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (work / "written.txt").exists(), 150, "the slow writer's first half")
        job_ids = wait_for(lambda: running_job_ids(work), 30, "the slow writer's SLURM job")
        os.killpg(outage.pid, signal.SIGKILL)  # the submit host goes away...
        outage.wait(timeout=30)
        for job_id in job_ids:  # ...and the job dies with its node
            slurm.kill_job_processes(job_id)
        wait_for(lambda: not running_job_ids(work), 60, "the killed job to end")
    finally:
        if outage.poll() is None:
            os.killpg(outage.pid, signal.SIGKILL)
    assert (work / "written.txt").read_text() == "first half\n"
    assert (work / "first.txt").read_text() == "first\n"

    # The dead Snakemake's lock stays; after an outage the workflow is unlocked first.
    unlocked = run_snakemake(work, TINY_SNAKEFILE, ["written.txt", "--unlock"], 120)
    assert unlocked.returncode == 0, unlocked.stderr
    # Without rerun-incomplete Snakemake refuses to go on from a half-written output.
    refused = run_snakemake(work, TINY_SNAKEFILE, ["written.txt", "--cores", "1", "--config", "writer_seconds=12"], 120)
    assert refused.returncode != 0
    assert "Incomplete" in refused.stdout + refused.stderr and "written.txt" in refused.stdout + refused.stderr

    # The profile's rerun-incomplete redoes exactly the interrupted job; the finished one stays.
    resumed = run_snakemake(work, TINY_SNAKEFILE, args, 240)
    assert resumed.returncode == 0, failure_text(resumed, work)
    assert [rule for _, rule in submitted_jobs(resumed.stdout + resumed.stderr)] == ["slow_writer"]
    assert (work / "written.txt").read_text() == "first half\nsecond half\n"


def time_limit_is_reported_and_retried_with_more_time(tmp_path):
    work = tiny_workdir(tmp_path)
    result = run_snakemake(work, TINY_SNAKEFILE, ["outlast.txt", "--workflow-profile", "profiles/slurm"], 420)
    assert result.returncode == 0, failure_text(result, work)
    output = result.stdout + result.stderr
    [(first, _), (second, _)] = submitted_jobs(output)
    first_fields, second_fields = slurm.job_fields(first), slurm.job_fields(second)
    # Attempt 1: killed by SLURM at its one-minute limit, and Snakemake's log says so.
    assert (first_fields["JobState"], time_limit_minutes(first_fields)) == ("TIMEOUT", 1)
    assert f"SLURM-job '{first}' failed, SLURM status is: 'TIMEOUT'" in output
    first_log = next((work / ".snakemake" / "slurm_logs").rglob(f"{first}.log")).read_text()
    assert "DUE TO TIME LIMIT" in first_log
    # Attempt 2 (the profile's restart-times) asked for three minutes and finished.
    assert (second_fields["JobState"], time_limit_minutes(second_fields)) == ("COMPLETED", 3)
    assert (work / "outlast.txt").read_text() == "finished with a limit of 3 min\n"


# The tests: each waits for its body, started beside the others' (tests/cluster/concurrent.py);
# expected_s, about how long a body takes, orders their start (the longest first).
@pytest.mark.slurm_concurrent(body=time_limit_is_reported_and_retried_with_more_time, expected_s=230)
def test_time_limit_is_reported_and_retried_with_more_time(slurm_concurrent):
    slurm_concurrent.result()


@pytest.mark.slurm_concurrent(body=reduced_demo_on_slurm_matches_local_run, expected_s=80, cpu_heavy=True)
def test_reduced_demo_on_slurm_matches_local_run(slurm_concurrent):
    slurm_concurrent.result()


@pytest.mark.slurm_concurrent(body=two_task_job_runs_both_tasks, expected_s=25)
def test_two_task_job_runs_both_tasks(slurm_concurrent):
    slurm_concurrent.result()


@pytest.mark.slurm_concurrent(body=cancelled_job_is_redone_not_trusted, expected_s=60)
def test_cancelled_job_is_redone_not_trusted(slurm_concurrent):
    """An outage in the middle of a job: the submit host's Snakemake dies, and so does the job,
    after it wrote half its output. The half-written file must not count as done."""
    slurm_concurrent.result()
