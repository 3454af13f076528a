# Shared by every stage file: config validation, the plan, wildcard constraints, helpers.
import functools
import json
import os
import re
import sys
from pathlib import Path

from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.errors import UserError
from mlperf_repro.compare.targets import compare_inputs, compare_outputs, compare_specs
from mlperf_repro.launch import LAUNCHERS
from mlperf_repro.launch.slurm_shared import stop_server_jobs
from mlperf_repro.lock import check_environment
from mlperf_repro.paths import PATHS, path
from mlperf_repro.plan import COMPLIANCE_TEST_PATTERN, MODES, Plan
from mlperf_repro.quant.memory import quantize_job_mem_mb
from mlperf_repro.report.items import report_items

try:
    validate_config(config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml", launchers=LAUNCHERS)
except UserError as exc:
    # One message naming the key and what is allowed; no traceback.
    sys.exit(f"error: {exc}")


def lock_check_or_stop():
    """The environment against the lock beside the config file (config/config.lock.json for the
    default), before any job: a difference stops here, even a dry run, unless lock_override
    gives a reason. Only the main process checks; a job's process re-reads the Snakefile and
    finds what the start accepted in PATHS["lock_check"]. Without a lock: a stat per config file."""
    if not workflow.is_main_process:
        return None
    try:
        return check_environment(config, workflow.configfiles, log=lambda line: print(line, file=sys.stderr))
    except UserError as exc:
        sys.exit(f"error: {exc}")


LOCK_CHECK = lock_check_or_stop()
PLAN = Plan(config)
SCRIPTS = "../../scripts"
# launch: shared - a server that died during a run fails that run; its retry finds the
# server gone and starts it again (one retry, only when a system shares servers).
RUN_RETRIES = 1 if PLAN.shares_servers() else None
# The software of the jobs that run in the workflow's own environment (the heavy ones name
# the system's image instead); used with --software-deployment-method conda.
WORKFLOW_ENV = "../../envs/conda/workflow.yaml"


def alternatives(names):
    return "|".join(re.escape(n) for n in names) or "(?!)"


wildcard_constraints:
    system=alternatives(PLAN.systems),
    benchmark=alternatives(PLAN.benchmarks),
    scenario=alternatives(PLAN.scenarios),
    mode=alternatives(MODES),
    test=COMPLIANCE_TEST_PATTERN,
    model=alternatives(PLAN.models),
    dataset=alternatives(PLAN.datasets),
    recipe=alternatives(config.get("quantization") or {}),
    n_endpoints=r"\d+",
    # repeats: N - the extra performance runs are repeats 2..N (repeat 1 is the performance run).
    repeat=r"[2-9]|[1-9]\d+",


def machine_threads(cluster_cpus):
    """threads: of a job that owns the machine it runs on (a measurement, a quantization).
    Run locally it takes all of --cores, so no other job shares its cores. In a cluster run
    (on the submit host, which has no --cores, and inside the job) it asks for cluster_cpus,
    the same number on both sides: --cpus-per-task, the in-job srun step and the script's
    threads agree. A profile's set-threads replaces it per rule (site node sizes)."""

    def threads(wildcards):
        if workflow.non_local_exec or workflow.remote_exec:
            return cluster_cpus
        return workflow.cores

    return threads


def run_threads(cluster_cpus, is_measurement):
    """threads: of a LoadGen job. A measurement (a performance run, a compliance test judged
    on speed) owns the machine: machine_threads. A run whose time nobody judges (accuracy
    mode, TEST06's output checks, the unquantized reference) takes one core locally, so the
    light jobs of another system run beside it instead of after it; runs of one system still
    take turns at its shared server's lock. In a cluster run, cluster_cpus as before."""
    owns = machine_threads(cluster_cpus)

    def threads(wildcards):
        if workflow.non_local_exec or workflow.remote_exec or is_measurement(wildcards):
            return owns(wildcards)
        return 1

    return threads


def is_performance_run(wildcards):
    return run_mode(wildcards) == "performance"


def compliance_judges_speed(wildcards):
    return PLAN.compliance_judges_speed(wildcards.test, wildcards.benchmark)


def never(wildcards):
    return False


# Software per stage: heavy jobs run in the system's digest-pinned image when Snakemake is
# started with --software-deployment-method apptainer; None (CPU hosts) leaves them in the
# pip environments of envs/. *_container is what apptainer runs (with an offline bundle, the
# bundle's oci-archive: of the image); *_image the configured reference the job records.
def system_container(wildcards):
    return PLAN.container(wildcards.system)


def system_image(wildcards):
    return PLAN.container_image(wildcards.system)


def quantize_container(wildcards):
    return PLAN.quantize_container(wildcards.model, wildcards.recipe)


def quantize_image(wildcards):
    return PLAN.quantize_image(wildcards.model, wildcards.recipe)


def quantize_mem_mb(wildcards, input):
    """The quantize job's memory, read from the acquired checkpoint's headers when the job is
    ready to run: the bounded path's need (2 x the largest tensor + 1 GB), or the whole bf16
    model + 4 GB for tool quark (with AutoSmoothQuant, its host cache of calibration activations)."""
    recipe = config["quantization"][wildcards.recipe]
    on_gpu = PLAN.quantize_device(wildcards.recipe)["device"] == "gpu"
    return quantize_job_mem_mb(input.model, tool=recipe.get("tool"), recipe=recipe, on_gpu=on_gpu)


def prequantized_checkpoint(wildcards):
    """The acquired checkpoint of a tool: prequantized recipe (a models entry), else nothing."""
    recipe = config["quantization"][wildcards.recipe]
    name = recipe.get("checkpoint") if recipe.get("tool") == "prequantized" else None
    return [PLAN.model_dir(name)] if name else []


def calibration_dataset(wildcards):
    """The dataset a calibrating recipe (tool quark; native static scales or an FP8 KV cache)
    draws its rows from (Plan.calibration_source); nothing for the others."""
    source = PLAN.calibration_source(wildcards.model, wildcards.recipe)
    return [PLAN.dataset_dir(source[0])] if source else []


def calibration_file(wildcards):
    source = PLAN.calibration_source(wildcards.model, wildcards.recipe)
    return source[1] if source else None


def screen_of(wildcards):
    """The GPU screen a run of this system waits for; none when it is not screened."""
    return PLAN.screen_input(wildcards.system)


def find_performance_of(wildcards):
    """The find-performance result a target_qps: auto scenario's user.conf reads; nothing otherwise."""
    return PLAN.find_performance_input(wildcards.system, wildcards.benchmark, wildcards.scenario)


def offline_pass_of(wildcards):
    """The Offline find-performance result a Server/Interactive search starts from (no start_qps)."""
    _, _, offline = PLAN.search_start(wildcards.system, wildcards.benchmark, wildcards.scenario)
    return [offline] if offline else []


def run_mode(wildcards):
    """A LoadGen job's mode: its {mode} wildcard; a repeat (loadgen_repeat) is a performance run."""
    return wildcards.get("mode", "performance")


def serving_dir(wildcards):
    return PLAN.serving_dir(wildcards.system, wildcards.benchmark)


def dataset_dir_of(wildcards):
    return PLAN.dataset_dir(PLAN.benchmark_cfg(wildcards.benchmark)["dataset"])


def accuracy_datasets_of(wildcards):
    """What an evaluation reads besides the dataset (gpt-oss: its LiveCodeBench release)."""
    return PLAN.accuracy_datasets(wildcards.benchmark)


def tokenizer_dir_of(wildcards):
    return PLAN.model_dir(PLAN.benchmark_cfg(wildcards.benchmark)["model"])


def reference_accuracy_of(wildcards):
    if PLAN.needs_reference_accuracy(wildcards.benchmark):
        return PLAN.reference_accuracy_path(wildcards.system, wildcards.benchmark)
    return []


def reference_outputs_of(wildcards):
    """The reference run's outputs, for open_accuracy's metrics that compare with them."""
    if PLAN.accuracy_targets(wildcards.benchmark).get("open_metrics"):
        return PLAN.reference_outputs_path(wildcards.system, wildcards.benchmark)
    return []


def preflight_or_stop(config, report):
    from mlperf_repro.check.stage import preflight_job

    try:
        preflight_job(config, report)
    except UserError as exc:
        sys.exit(f"error: {exc}\n(report: {report})")


def record_lock_check(record, out_json):
    """What the lock check accepted, for every run's provenance (null without a lock)."""
    Path(out_json).parent.mkdir(parents=True, exist_ok=True)
    Path(out_json).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


# The HTML report's items (rule report_plots; `snakemake --report`).
def report_outputs():
    return [item.path for item in report_items(PLAN)]


def print_summary(path, report_files=()):
    summary = Path(path)
    if summary.is_file():
        print(f"\n{summary.read_text()}")
    if report_files and all(Path(f).is_file() for f in report_files):
        # The HTML report (plots, summary, compliance, provenance) is assembled on request.
        configfiles = [f"--configfile {os.path.relpath(f)}" for f in workflow.overwrite_configfiles]
        command = " ".join(["snakemake", *configfiles, "--report", "report.html"])
        print(f"HTML report with plots: {command}")


def stop_shared_server_jobs():
    """launch: slurm-shared: the workflow's server jobs end with it, queued ones too (onsuccess
    and onerror in the Snakefile)."""
    if PLAN.submits_server_jobs():
        for job_id in stop_server_jobs():
            print(f"[shared server job] cancelled SLURM job {job_id}: the workflow has ended", file=sys.stderr)


# The plan view (rule plan_view).
def estimate_keys_set_by_user():
    """The `estimate` keys the config files set (the rest are schema defaults)."""
    keys = set()
    for path in workflow.configfiles:
        raw = load_yaml(path)
        section = raw.get("estimate") if isinstance(raw, dict) else None
        keys |= set(section) if isinstance(section, dict) else set()
    return keys


@functools.cache
def plan_view():
    # Only when the target is asked for: other runs never pay for (or fail on) the estimate.
    return estimate_plan(config, estimate_keys_set_by_user())
