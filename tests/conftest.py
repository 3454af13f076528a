"""Shared test fixtures: the repository root and the default config."""

from __future__ import annotations

import copy
import inspect
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = REPO / "config" / "config.yaml"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# A checker rule that stops on an unexpected value raises in every test (and in the workflows
# tests start) instead of becoming a ``checker-fault`` finding a test might not look for.
os.environ["MLPERF_REPRO_RAISE_CHECKER_FAULTS"] = "1"
# OpenMP threads (torch's, vLLM's) that sleep at once when they wait instead of spinning: the
# xdist workers run several multi-threaded jobs on 2 cores, where spinning threads hold the
# cores the threads they wait for need. A trainer rebuild beside the gpt-oss demo took 134 s
# instead of 173-178 s (bench/README.md); results are unchanged (same threads, same work).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The suite writes the bytecode of what it imports, where PYTHONDONTWRITEBYTECODE would have
# every process (workers, Snakemake, jobs, servers) compile its imports from source:
# `./install.sh --test` compiles nothing (install.sh says why). Written once, atomically.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


#: Each test file's stage, given to its tests as a marker: ``pytest -m quantize`` runs the
#: quantize stage's tests (prefixes of the file name; tests/test_layers.py checks that every
#: file has exactly one stage).
STAGES: dict[str, tuple[str, ...]] = {
    "acquire": ("test_fetch", "test_demo_checkpoints", "test_bundle"),
    "quantize": ("test_quant_", "test_mxfp4_codec", "test_extending_quant_format"),
    "run": (
        "test_harness",
        "test_endpoints_vllm",
        "test_dispatcher",
        "test_split_head",
        "test_plan_userconf",
        "test_find_performance",
        "test_allocation_launch",
        "test_extending_launcher",
        "test_kubernetes",
        "test_slurm",
        "test_screen",
        "test_software",
        "test_wan_",
        "test_harmony",
        "test_shared_",
    ),
    "accuracy": ("test_accuracy_", "test_sentence_split", "test_extending_task"),
    "compliance": ("test_compliance",),
    "check": (
        "test_check",
        "test_round_",
        "test_preflight",
        "test_lock",
        "test_reader_properties",
        "test_reader_sweep",
    ),
    "package": ("test_package_units", "test_package_sysfacts"),
    "compare": ("test_compare", "test_scaling", "test_import"),
    "plan": ("test_config", "test_dag", "test_estimate", "test_paths", "test_rerun_triggers"),
    "workflow": (
        "test_e2e",
        "test_bytecode",
        "test_gpt_oss_demo",
        "test_docs",
        "test_lint",
        "test_layers",
        "test_report_html",
        "test_report_summary",
    ),
}


def slow_after(values, keep: int = 1) -> list:
    """Parameters for a test that runs once per value (per example config, per edit): the first
    ``keep`` stay in the fast loop, the rest are marked slow (the full suite runs them all).
    A tuple is one test's several arguments."""
    slow = pytest.mark.slow
    return [
        value
        if i < keep
        else pytest.param(*value, marks=slow)
        if isinstance(value, tuple)
        else pytest.param(value, marks=slow)
        for i, value in enumerate(values)
    ]


def stages_of(filename: str) -> list[str]:
    return [stage for stage, prefixes in STAGES.items() if filename.startswith(prefixes)]


#: The files sharing the one-node SLURM test cluster: its daemons bind fixed ports, so one
#: pytest-xdist worker runs them all.
SLURM_FILES = ("test_slurm.py", "test_slurm_servers.py", "test_screen_slurm.py")

# Every vLLM engine the tests start reserves 1 GiB of KV cache (a config's own env can say
# otherwise): the stand-ins need a few MB of it, and the configs' gpu_memory_utilization 0.3
# reserves 7 GB per engine on 24 GB, which kept engines from running beside each other and
# cost each start about 7 s (31.6 s against 24.7 s to /health, measured 2026-12-04).
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


#: The everyday loop's workers: a plain ``pytest`` runs the fast set on two xdist workers.
FAST_LOOP_WORKERS = 2


def fast_loop(config: pytest.Config) -> bool:
    """A plain ``pytest``: no paths and no ``-m``. It runs the fast set (tests not marked
    ``slow``) in parallel; naming files or a marker expression runs exactly what was named,
    in one process unless ``-n`` says otherwise; ./test.sh runs everything."""
    return config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.markexpr


#: Set by the everyday loop's controller for its xdist workers, which are started with the
#: controller's paths as arguments and its options unparsed: the marker expression they apply.
FAST_LOOP_MARKEXPR = "MLPERF_REPRO_FAST_LOOP_MARKEXPR"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # An initial conftest's hook, run before pytest-xdist's: it sees the workers asked for here.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        if os.environ.get(FAST_LOOP_MARKEXPR) and not config.option.markexpr:
            config.option.markexpr = os.environ[FAST_LOOP_MARKEXPR]
    elif fast_loop(config):
        config.option.markexpr = "not slow"
        if config.pluginmanager.has_plugin("xdist") and config.option.numprocesses is None:
            config.option.numprocesses = FAST_LOOP_WORKERS
            os.environ[FAST_LOOP_MARKEXPR] = config.option.markexpr
    else:
        os.environ.pop(FAST_LOOP_MARKEXPR, None)


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.option.markexpr == "not slow" and config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        return "the everyday loop: tests marked slow are left out (./test.sh runs the whole suite)"
    return None


def pytest_itemcollected(item):
    for stage in stages_of(item.path.name):
        item.add_marker(getattr(pytest.mark, stage))


#: The files that took longest in ./test.sh's second run (seconds of a worker's time, fresh
#: clone, 2026-12-06, the day's third profile: bench/suite_profile.py), longest first: handed out in this order after the
#: SLURM files, so that no long file starts late and leaves the other workers idle at the end.
LONGEST_FILES = (
    "test_quant_quark.py",  # 289
    "test_bundle_offline.py",  # 238
    "test_reader_sweep.py",  # 187
    "test_find_performance.py",  # 84
    "test_kubernetes.py",  # 75
    "test_endpoints_vllm.py",  # 70
    "test_rerun_triggers.py",  # 66
    "test_dispatcher.py",  # 57
    "test_accuracy_sandbox.py",  # 53
    "test_endpoints_vllm_data_parallel.py",  # 53
    "test_accuracy_lcb_reference.py",  # 46
    "test_e2e_repeats.py",  # 46
    "test_estimate.py",  # 45
    "test_shared_video_server.py",  # 44
    "test_docs_commands.py",  # 40
    "test_dag.py",  # 39
    "test_accuracy_vbench.py",  # 37
    "test_wan_task.py",  # 37
    "test_import_round_trip.py",  # 35
    "test_quant_validate.py",  # 22
)


def pytest_collection_modifyitems(items):
    # The SLURM files first, then the longest files, then the other files with slow tests, so
    # that pytest-xdist hands the longest work out first (every worker sorts alike: their
    # collections must agree).
    slow_files = {item.path.name for item in items if item.get_closest_marker("slow")}

    def rank(item) -> tuple[int, int]:
        name = item.path.name
        if name in SLURM_FILES:
            return (0, 0)
        if name in LONGEST_FILES:
            return (1, LONGEST_FILES.index(name))
        return (2 if name in slow_files else 3, 0)

    items.sort(key=rank)


@pytest.fixture(autouse=True)
def _each_test_leaves_the_environment_as_it_found_it():
    """Importing vLLM in a test sets variables (PYTORCH_NVML_BASED_CUDA_CHECK, AITER_SITUV2_*)
    that every workflow a later test of the same process starts would inherit and record as
    its serving environment (provenance ENV_PREFIXES), so two runs of one config compared as
    differing. Fixtures of wider scope set theirs before this one saves."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the SLURM files as one file: each file's tests on one worker, so
    its module fixtures (a model, a workflow run) are built once, and the one-node SLURM test
    cluster, whose daemons bind fixed ports, is started by one worker only. (pytest-xdist's
    ``loadgroup``, which this replaces, forms no group under pytest 9: it renames each test by
    appending ``@group`` to ``item._nodeid``, and pytest 9 derives the name from its parts.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # pytest-xdist (3.8) otherwise hands files out by their number of tests, most first,
    # whatever pytest_collection_modifyitems ordered: the gpt-oss demo's four tests, the run's
    # longest file, started late.
    config.option.loadscopereorder = False

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return "slurm" if Path(file).name in SLURM_FILES else file

    return FileScheduling(config, log)


#: The default config's text-to-video part (its own tests: test_wan_*.py, test_estimate_wan.py).
WAN_PART = {"models": "tiny-wan", "datasets": "vbench-prompts-synthetic", "benchmarks": "tiny-wan-t2v"}
WAN_SYSTEM = "cpu-2c-diffusers"


# The imported vendor example (config/examples/mi355x-llama2-70b.yaml): its system and a variant with
# vLLM inside the LoadGen process on all eight GPUs (tensor parallel 8), the shape tests of
# in-process GPU jobs (Kubernetes GPU requests, GPU screening, images) use.
MI355X_EXAMPLE = REPO / "config" / "examples" / "mi355x-llama2-70b.yaml"
MI355X_SYSTEM = "8xMI355X_2xEPYC_9575F"


def mi355x_in_process() -> dict:
    import yaml

    config = yaml.safe_load(MI355X_EXAMPLE.read_text())
    system = config["systems"][MI355X_SYSTEM]
    engine = system["engine"]
    system["engine"] = {
        "backend": "vllm",
        "engine_args": {**engine["engine_args"], "tensor_parallel_size": 8},
        "env": engine["env"],
        "serve_quantized_as": "native",
    }
    return config


def llama2_part(config: dict) -> dict:
    """``config`` (the default's shape) without its text-to-video benchmark, model, dataset
    and system."""
    for key, name in WAN_PART.items():
        config[key].pop(name, None)
    config["systems"].pop(WAN_SYSTEM, None)
    return config


@pytest.fixture
def demo_config() -> dict:
    """The whole default config, its text-to-video part included."""
    from mlperf_repro.config import load_yaml

    return copy.deepcopy(load_yaml(DEFAULT_CONFIG))


@pytest.fixture
def default_config() -> dict:
    """The default config's llama2 part, which most tests reason about."""
    from mlperf_repro.config import load_yaml

    return llama2_part(copy.deepcopy(load_yaml(DEFAULT_CONFIG)))


def model_load_per_run(config: dict) -> dict:
    """The config with every launch: shared system's runs loading the model themselves
    (backend vllm, in-process; a diffusers system's pipeline in process): the plan view then
    prices each LoadGen process alike."""
    for system in config["systems"].values():
        if (system["engine"].get("endpoints") or {}).get("launch") == "shared":
            system["engine"]["backend"] = "vllm"
            del system["engine"]["endpoints"]
        system["engine"].pop("launch", None)  # backend diffusers: the pipeline in each run's process
    return config


def llm_benchmarks(config: dict) -> list[dict]:
    """The config's benchmarks whose task is not text-to-video (their model an LLM checkpoint,
    which every quantization tool handles; a Diffusers pipeline only tool native quantizes)."""
    from mlperf_repro.benchmarks import load_round

    rules = load_round(config["round"])
    return [
        bench
        for bench in config["benchmarks"].values()
        if rules.benchmark(bench["mlperf_benchmark"]).facts.get("task") != "text-to-video"
    ]


def write_recipe_config(work: Path, config: dict, name: str, recipe: dict) -> str:
    """``config`` with every LLM benchmark quantized by ``recipe`` (as ``quantization.<name>``;
    the text-to-video ones, whose model is a Diffusers pipeline, served unquantized), written
    to ``work/<name>.yaml`` with its tiny-llama model acquired beforehand (the preflight's disk
    estimate would take the model for llama2-70b, ~140 GB). Returns the config file's name."""
    import yaml

    from mlperf_repro.fetch.entries import acquire_model_entry

    config["quantization"] = {name: recipe}
    for bench in config["benchmarks"].values():
        bench.pop("quantization", None)
    for bench in llm_benchmarks(config):
        bench["quantization"] = name
    (work / f"{name}.yaml").write_text(yaml.safe_dump(config))
    acquire_model_entry(
        config["models"]["tiny-llama"],
        work / "resources/models/tiny-llama",
        work / "results/acquire/models/tiny-llama.json",
    )
    return f"{name}.yaml"


def save_tiny_llama(path: Path, *, seed: int = 0, layers: int = 2, max_shard_size: str | None = None) -> Path:
    """A random bf16 Llama (hidden 64, intermediate 128, 4 heads / 2 KV heads, vocab 128) saved
    with transformers at ``path``: the quantization tests' model (nothing touches the network)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path, **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    return path


def with_artifacts(workdir: Path) -> Path:
    """``workdir`` given the checkout's shipped artifacts (the default config's file://
    artifacts/models sources are read from the workflow's folder), as a link: never written."""
    link = workdir / "artifacts"
    if not link.exists():
        link.symlink_to(REPO / "artifacts", target_is_directory=True)
    return workdir


def make_workdir(tmp_path: Path) -> Path:
    """A copy of the workflow's entry files in tmp_path, so runs never touch the checkout."""
    work = tmp_path / "work"
    work.mkdir()
    # artifacts: the shipped demo checkpoints the configs acquire (file://artifacts/...).
    for item in ("Snakefile", "workflow", "scripts", "config", "envs", "artifacts"):
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, work / item)
        else:
            shutil.copyfile(src, work / item)
    return work


def run_snakemake(work: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        SNAKEMAKE + ["--directory", str(work), "--snakefile", str(work / "Snakefile"), *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def run_config(tmp_path: Path, name: str, config: dict, timeout: int = 1500) -> Path:
    """A fresh workdir in tmp_path that has run the whole workflow on ``config`` (written as
    ``<name>.yaml``); the test fails with the jobs' logs if the workflow does."""
    import yaml

    work = make_workdir(tmp_path)
    (work / f"{name}.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(work, "--cores", "2", "--configfile", f"{name}.yaml", timeout=timeout)
    if result.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}" for p in sorted((work / "logs").rglob("*.log")))
        pytest.fail(f"workflow failed:\n{result.stderr[-5000:]}\n{logs}")
    return work


E2E_CONFIG = REPO / "tests" / "configs" / "e2e.yaml"
# What a run of a config made of tests/configs/e2e.yaml's parts can take over from the session's
# end-to-end run: the acquired and quantized model, the dataset and the reference accuracy (same
# config entries, same outputs), so only the runs and what follows them are made again.
E2E_REUSABLE = ("resources", "results/acquire", "results/models", "results/reference")


def run_reusing_e2e(e2e_workdir: Path, tmp_path: Path, name: str, config: dict, timeout: int = 1500) -> Path:
    """A fresh workdir that ran ``config`` (written as ``<name>.yaml``) after copying the
    end-to-end run's reusable outputs; the test fails with the jobs' logs if the workflow does."""
    import yaml

    tmp_path.mkdir(parents=True, exist_ok=True)
    work = make_workdir(tmp_path)
    for folder in E2E_REUSABLE:
        if (e2e_workdir / folder).is_dir():
            shutil.copytree(e2e_workdir / folder, work / folder, copy_function=shutil.copy2)
    (work / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_snakemake(work, "--cores", "2", "--configfile", f"{name}.yaml", timeout=timeout)
    if result.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}" for p in sorted((work / "logs").rglob("*.log")))
        pytest.fail(f"workflow failed:\n{result.stderr[-5000:]}\n{logs}")
    return work


def build_once(home: Path, build) -> Path:
    """``build(home / "work")``'s result, built by the first of the processes that ask for it
    (the suite's two pytest runs, pytest-xdist's workers) and read by the others: a lock
    serialises them, ``done`` marks a finished build and ``failed`` a failed one, whose
    message every later asker fails with instead of building again."""
    import fcntl

    home.mkdir(parents=True, exist_ok=True)
    work, done, failed = home / "work", home / "done", home / "failed"
    with (home / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(f"(built once for the suite, in {home})\n{failed.read_text()}", pytrace=False)
        if not done.exists():
            shutil.rmtree(work, ignore_errors=True)  # a build killed half-way
            try:
                build(work)
            except pytest.fail.Exception as err:
                failed.write_text(str(err))
                raise
            done.touch()
    return work


def shared_tmp(tmp_path_factory) -> Path:
    """The temporary folder every pytest-xdist worker of this run shares (each worker's own
    basetemp is a folder of it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_e2e(work: Path) -> None:
    work = make_workdir(work.parent)
    shutil.copyfile(E2E_CONFIG, work / "e2e.yaml")
    result = run_snakemake(work, "--cores", "2", "--configfile", "e2e.yaml", timeout=1800)
    if result.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}" for p in sorted((work / "logs").rglob("*.log")))
        pytest.fail(f"workflow failed:\n{result.stderr[-5000:]}\n{logs}")
    (work / "snakemake.out").write_text(result.stdout + result.stderr)


def e2e_home(tmp_path_factory) -> Path:
    home = os.environ.get("MLPERF_REPRO_E2E_HOME")
    return Path(home) if home else shared_tmp(tmp_path_factory) / "e2e"


def e2e_built(tmp_path_factory) -> bool:
    """Whether e2e_workdir is there to read at once (no build to wait for)."""
    return bool(os.environ.get("MLPERF_REPRO_E2E_WORKDIR")) or (e2e_home(tmp_path_factory) / "done").exists()


@pytest.fixture(scope="session")
def e2e_workdir(tmp_path_factory) -> Path:
    """The default pipeline run once at test scale; the end-to-end tests and the real-server
    endpoint tests read what it produced (model, dataset, LoadGen logs). Built once per suite:
    ``MLPERF_REPRO_E2E_HOME`` (set by ``./test.sh``) is where, so the suite's second pytest run
    reads what its first built; without it, once per pytest run. Tests only read it, or copy
    it; the ones that rerun parts of it in place are marked ``exclusive`` and run first."""
    # Developers iterating on assertions can point this at a finished run's directory.
    reuse = os.environ.get("MLPERF_REPRO_E2E_WORKDIR")
    if reuse:
        return Path(reuse)
    return build_once(e2e_home(tmp_path_factory), build_e2e)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real one-node SLURM cluster (tests/cluster/slurm.py), up for the whole session.
    CI is expected to have (or install) Debian's slurm-wlm: a cluster that cannot be
    installed or started fails the tests that need it, it does not skip them."""
    from cluster import slurm

    try:
        cluster = slurm.start()
    except slurm.SlurmError as err:
        pytest.fail(f"the one-node SLURM test cluster could not be started: {err}", pytrace=False)
    print(f"\nSLURM test cluster up in {cluster.start_seconds:.2f} s ({cluster.root})")
    yield cluster
    slurm.stop(cluster)


@pytest.fixture(scope="session")
def slurm_concurrent_bodies(request, slurm_cluster, tmp_path_factory):
    """The bodies of every selected test marked ``slurm_concurrent``, started together once the
    SLURM test cluster is up (tests/cluster/concurrent.py)."""
    from cluster import concurrent

    bodies = concurrent.Bodies()
    marked = [(item, item.get_closest_marker("slurm_concurrent")) for item in request.session.items]
    marked = [(item, marker.kwargs) for item, marker in marked if marker is not None]
    # The longest first; a body that reads the end-to-end run waits for its build when this
    # pytest run has to make it (the suite's second run reads what its first built).
    wait_for_e2e = not e2e_built(tmp_path_factory)
    marked.sort(
        key=lambda pair: (
            wait_for_e2e and "e2e_workdir" in inspect.signature(pair[1]["body"]).parameters,
            -pair[1]["expected_s"],
        )
    )
    for item, kwargs in marked:
        body = kwargs["body"]

        def resolve(param: str, item=item):
            if param == "slurm_cluster":
                return slurm_cluster
            if param == "tmp_path":
                return tmp_path_factory.mktemp(item.name[:30])
            if param == "e2e_workdir":
                return request.getfixturevalue("e2e_workdir")
            raise TypeError(f"a SLURM test body asks for {param!r}: slurm_cluster, tmp_path or e2e_workdir")

        bodies.start(item.nodeid, body, resolve, cpu_heavy=kwargs.get("cpu_heavy", False))
    yield bodies
    concurrent.kill_children()


@dataclass
class ConcurrentBody:
    bodies: object
    nodeid: str

    def result(self, timeout: float = 3600) -> None:
        """Wait for this test's body and raise what it raised; print how long it took."""
        body = self.bodies.result(self.nodeid, timeout)
        print(f"body ran {body.seconds:.1f} s beside the other SLURM tests' (after {body.waited:.1f} s for a CPU slot)")


@pytest.fixture
def slurm_concurrent(request, slurm_concurrent_bodies) -> ConcurrentBody:
    """This test's body, already started beside the other SLURM tests' (marker
    ``slurm_concurrent(body=...)``)."""
    if request.node.get_closest_marker("slurm_concurrent") is None:
        raise TypeError("slurm_concurrent is for tests marked @pytest.mark.slurm_concurrent(body=...)")
    return ConcurrentBody(slurm_concurrent_bodies, request.node.nodeid)
