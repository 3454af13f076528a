"""An edited config reruns exactly the jobs it affects, and nothing upstream of them.

Every job receives what it reads through its rule (``input:`` and ``params:``), so Snakemake's
own rerun triggers (params, input, code, software-env, mtime) are complete; the one exception is
the ``progress`` section (how often jobs log), which changes no output and is read from
Snakemake's config on purpose. The finished state
is made with ``snakemake --touch`` on placeholder outputs: it records the same metadata a real
run does (params, code, software), without the minutes of LoadGen runs; each single-key edit is
then judged by ``snakemake -n``, the command a user runs to see what an edit will redo.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import DEFAULT_CONFIG, llama2_part, make_workdir, run_snakemake, slow_after

SYSTEM = "cpu-2c-vllm"
BENCH = "tiny-llama-mxfp4"
SCENARIOS = ("Offline", "Server", "Interactive")
OUTPUT_SUFFIXES = (".json", ".txt", ".conf", ".md", ".csv", ".html", ".gz", ".xlsx", ".svg", ".png")

# What follows the package: the tarball, both checks and reports (with the HTML report's plots), and the comparison of the
# tree with itself that the baseline config configures.
PACKAGE = {"package", "tarball", "check_submission", "summary", "official_summary", "report_plots", "compare"}


def scenario_runs(scenario: str) -> set[str]:
    """One scenario's LoadGen runs and what is judged from them."""
    return {
        f"loadgen_run:{scenario}/performance",
        f"loadgen_run:{scenario}/accuracy",
        f"compliance_run:{scenario}/TEST06",
        f"accuracy_eval:{scenario}",
        f"compliance_verify:{scenario}/TEST06",
    }


ALL_RUNS = set().union(*(scenario_runs(s) for s in SCENARIOS))
USER_CONFS = {f"user_conf:{s}" for s in SCENARIOS}
# The default's Offline is target_qps auto: its find-performance pass measures with the engine,
# model and dataset of the runs, and its user.conf reads what the pass chose.
AUTO_OFFLINE = {"find_performance", "user_conf:Offline"}
EVERYTHING = (
    {"acquire_model", "acquire_dataset", "quantize", "reference_accuracy"}
    | USER_CONFS
    | AUTO_OFFLINE
    | ALL_RUNS
    | PACKAGE
)


def baseline() -> dict:
    config = llama2_part(yaml.safe_load(DEFAULT_CONFIG.read_text()))
    # A comparison is configured so that editing its settings can be tested too.
    config["compare"] = {
        "reference": "results/package/submission",
        "partners": ["results/package/submission"],
        "tolerance": 0.04,
    }
    return config


def system(c: dict) -> dict:
    return c["systems"][SYSTEM]


def setter(path: str, value) -> Callable[[dict], None]:
    """An edit of one key, given as a dotted path (``systems.<s>.description.cooling``)."""

    def edit(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[last] = value

    return edit


def drop_interactive(config: dict) -> None:
    del system(config)["benchmarks"][BENCH]["Interactive"]


def package_repeat_2(config: dict) -> None:
    system(config)["benchmarks"][BENCH]["Server"].update(repeats=2, packaged_repeat=2)


DESC = f"systems.{SYSTEM}.description"
ENGINE = f"systems.{SYSTEM}.engine"
# (id, edit, the jobs it must rerun). Where the answer is a choice, the comment says why.
EDITS = [
    ("submitter", setter("submitter", "PartnerCo"), PACKAGE),
    # The division decides the tree's folder and what the check enforces, not how runs go.
    ("division", setter("division", "network"), PACKAGE),
    ("description.cooling", setter(f"{DESC}.cooling", "liquid"), PACKAGE),
    ("description.sw_notes", setter(f"{DESC}.sw_notes", "served by vLLM's CPU backend"), PACKAGE),
    ("description.hw_notes", setter(f"{DESC}.hw_notes", "2 vCPUs"), PACKAGE),
    ("description.system_name", setter(f"{DESC}.system_name", "Renamed host"), PACKAGE),
    ("description.status", setter(f"{DESC}.status", "available"), PACKAGE),
    ("description.host_memory_configuration", setter(f"{DESC}.host_memory_configuration", "2x 12 GB"), PACKAGE),
    # user.conf's text is the param of its job: only that scenario is measured again.
    (
        "Server.target_qps",
        setter(f"systems.{SYSTEM}.benchmarks.{BENCH}.Server.target_qps", 25),
        {"user_conf:Server"} | scenario_runs("Server") | PACKAGE,
    ),
    (
        "Interactive.target_qps",
        setter(f"systems.{SYSTEM}.benchmarks.{BENCH}.Interactive.target_qps", 15),
        {"user_conf:Interactive"} | scenario_runs("Interactive") | PACKAGE,
    ),
    # target_qps auto: the pass measures again, and only its scenario's runs follow.
    (
        "Offline.start_qps",
        setter(f"systems.{SYSTEM}.benchmarks.{BENCH}.Offline.start_qps", 150),
        AUTO_OFFLINE | scenario_runs("Offline") | PACKAGE,
    ),
    (
        "find_performance.margin",
        setter("find_performance", {"margin": 0.2}),
        AUTO_OFFLINE | scenario_runs("Offline") | PACKAGE,
    ),
    # The engine serves every run of the system, the unquantized reference and the pass included.
    (
        "engine_args.max_model_len",
        setter(f"{ENGINE}.engine_args.max_model_len", 1024),
        ALL_RUNS | AUTO_OFFLINE | {"reference_accuracy"} | PACKAGE,
    ),
    (
        "engine.env",
        setter(f"{ENGINE}.env.VLLM_CPU_KVCACHE_SPACE", "2"),
        ALL_RUNS | AUTO_OFFLINE | {"reference_accuracy"} | PACKAGE,
    ),
    # A new FP4 checkpoint: every run that serves it; the reference serves the unquantized model.
    (
        "quantization.exclude",
        setter("quantization.mxfp4-w4a16.exclude", []),
        {"quantize"} | ALL_RUNS | AUTO_OFFLINE | PACKAGE,
    ),
    (
        "quantization.scale_mode",
        setter("quantization.mxfp4-w4a16.scale_mode", "floor"),
        {"quantize"} | ALL_RUNS | AUTO_OFFLINE | PACKAGE,
    ),
    # A new dataset: every run and user.conf (performance_sample_count follows its size), not the model.
    (
        "dataset samples",
        setter("datasets.openorca-synthetic.builtin.samples", 200),
        {"acquire_dataset", "reference_accuracy"} | USER_CONFS | AUTO_OFFLINE | ALL_RUNS | PACKAGE,
    ),
    (
        "test_scale.min_duration_ms",
        setter("test_scale.min_duration_ms", 12000),
        USER_CONFS | AUTO_OFFLINE | ALL_RUNS | PACKAGE,
    ),
    (
        "test_scale.performance_sample_count",
        setter("test_scale.performance_sample_count", 128),
        USER_CONFS | AUTO_OFFLINE | ALL_RUNS | PACKAGE,
    ),
    # Judged again against a new fraction of the same measured reference; nothing is rerun.
    (
        "accuracy_fraction",
        setter(f"benchmarks.{BENCH}.accuracy_fraction", 0.98),
        {f"accuracy_eval:{s}" for s in SCENARIOS} | PACKAGE,
    ),
    ("package.failed_results", setter("package", {"failed_results": "keep"}), PACKAGE),
    ("compare.tolerance", setter("compare.tolerance", 0.02), {"compare"}),
    # How often jobs log their progress changes no result: the jobs read it from Snakemake's
    # config (mlperf_repro.stage.run), not from a param, so nothing reruns.
    ("progress", setter("progress", {"interval_s": 30, "stall_after_s": 600}), set()),
    # The plan view is not part of `all`.
    ("estimate.run_overhead_s", setter("estimate.run_overhead_s", 45), set()),
    # A new model: everything but the user.confs whose text does not depend on it (the auto
    # Offline's does: its pass measures the new model).
    (
        "model source",
        setter("models.tiny-llama", {"source": "builtin:tiny-llama", "builtin": {"train_steps": 200}}),
        EVERYTHING - (USER_CONFS - AUTO_OFFLINE),
    ),
    # A scenario fewer: its results leave the tree; nothing is measured again.
    ("drop Interactive", drop_interactive, PACKAGE),
    # repeats is no LoadGen setting: only the new repeats run, user.conf and run 1 stay.
    (
        "Server.repeats",
        setter(f"systems.{SYSTEM}.benchmarks.{BENCH}.Server.repeats", 3),
        {"loadgen_repeat:Server/performance_run_2", "loadgen_repeat:Server/performance_run_3"} | PACKAGE,
    ),
    # Packaging repeat 2 instead of run 1 measures nothing again but that repeat.
    ("Server.packaged_repeat", package_repeat_2, {"loadgen_repeat:Server/performance_run_2"} | PACKAGE),
]


def job_key(rule: str, output: str) -> str:
    """``rule`` or ``rule:<scenario>[/<mode or test>]`` from the job's first output."""
    match = re.search(rf"/{re.escape(BENCH)}/(.+)$", output)
    if not match:
        return rule
    parts = [p for p in match.group(1).split("/") if not p.endswith(OUTPUT_SUFFIXES)]
    return f"{rule}:{'/'.join(parts)}" if parts else rule


def planned_jobs(work: Path, configfile: str) -> set[str]:
    result = run_snakemake(work, "-n", "--configfile", configfile, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = set()
    lines = result.stdout.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"(?:local)?rule (\w+):$", line)
        if match and match.group(1) != "all":
            output = next(ln for ln in lines[i + 1 :] if ln.startswith("    output:"))
            jobs.add(job_key(match.group(1), output.split(":", 1)[1].split(",")[0].strip()))
    return jobs


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A workdir whose every output exists and is recorded as made by the baseline config."""
    work = make_workdir(tmp_path_factory.mktemp("rerun"))
    (work / "base.yaml").write_text(yaml.safe_dump(baseline(), sort_keys=False))
    result = run_snakemake(work, "-n", "--configfile", "base.yaml", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = {
        path.strip()
        for line in result.stdout.splitlines()
        if line.startswith("    output:")
        for path in line.split(":", 1)[1].split(",")
    }
    for output in outputs:
        path = work / output
        if output.endswith(OUTPUT_SUFFIXES):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        else:  # directory() outputs
            path.mkdir(parents=True, exist_ok=True)
    # --forceall: every job is recorded, also those whose placeholder outputs already look
    # newer than their inputs (without it they would have no metadata to compare with).
    result = run_snakemake(work, "--touch", "--forceall", "--cores", "1", "--configfile", "base.yaml", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert planned_jobs(work, "base.yaml") == set(), "the untouched config must have nothing to do"
    return work


def test_the_table_covers_enough_edits():
    assert len(EDITS) >= 15
    assert len({name for name, _, _ in EDITS}) == len(EDITS)


@pytest.mark.slow
@pytest.mark.parametrize("name, edit, expected", slow_after(EDITS, keep=4), ids=[e[0] for e in EDITS])
def test_an_edit_reruns_exactly_what_it_affects(finished, name, edit, expected):
    config = copy.deepcopy(baseline())
    edit(config)
    configfile = f"edit-{re.sub(r'[^A-Za-z0-9]+', '-', name)}.yaml"
    (finished / configfile).write_text(yaml.safe_dump(config, sort_keys=False))
    jobs = planned_jobs(finished, configfile)
    assert jobs == expected, f"unexpected: {sorted(jobs - expected)}; missing: {sorted(expected - jobs)}"
