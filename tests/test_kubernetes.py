"""The Kubernetes profile: the executor plugin's Job specs for the same DAG as a local run,
rendered without a cluster and validated against the Kubernetes schema and API rules."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import MI355X_SYSTEM, REPO, SCHEMA, make_workdir, mi355x_in_process, run_snakemake, slow_after
from test_dag import job_counts

from mlperf_repro.cluster.kubernetes import render, validate_manifest
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.plan import Plan

PROFILE = "profiles/kubernetes"
# The vendor's llama2-70b example with vLLM in the LoadGen process on all eight GPUs (written into the
# workdir): the shape whose run jobs request GPUs from Kubernetes themselves.
MI355X = "config/mi355x-in-process.yaml"
CONFIGS = [
    "config/config.yaml",
    *sorted(f"config/examples/{p.name}" for p in (REPO / "config/examples").glob("*.yaml")),
]
GPU_RULES = {"loadgen_run", "find_performance", "compliance_run", "reference_accuracy", "scaling_run", "screen_gpus"}
IMAGE_RULES = GPU_RULES | {"quantize"}
CUDA = "docker://vllm/vllm-openai@sha256:" + "b2" * 32


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    work = make_workdir(tmp_path_factory.mktemp("k8s"))
    shutil.copytree(REPO / "profiles", work / "profiles")
    (work / MI355X).write_text(yaml.safe_dump(mi355x_in_process(), sort_keys=False))
    return work


_renders: dict = {}


def rendered(workdir, configfile: str, profile: str = PROFILE):
    """Renders are slow (a Snakemake plan each): share them between the tests of this module."""
    key = (str(workdir), configfile, profile)
    if key not in _renders:
        _renders[key] = render(configfile, profile, workdir=workdir, timeout_s=300)
    return _renders[key]


def local_rules() -> set[str]:
    names = set()
    for path in (REPO / "workflow/rules").glob("*.smk"):
        for block in re.split(r"\n(?=rule )", path.read_text()):
            match = re.match(r"rule (\w+):", block)
            if match and re.search(r"^\s+localrule: True", block, re.M):
                names.add(match.group(1))
    return names | {"all"}


@pytest.mark.slow
@pytest.mark.parametrize("configfile", slow_after(CONFIGS))  # the examples: slow
def test_every_submitted_job_of_the_dag_renders_a_valid_job(workdir, configfile):
    jobs = rendered(workdir, configfile)
    dry_run = run_snakemake(workdir, "-n", "--cores", "2", "--configfile", configfile, timeout=300)
    assert dry_run.returncode == 0, dry_run.stderr[-3000:]
    expected = {rule: n for rule, n in job_counts(dry_run.stdout).items() if rule not in local_rules()}
    got: dict[str, int] = {}
    for job in jobs:
        got[job.rule] = got.get(job.rule, 0) + 1
    assert got == expected
    names = [job.manifest["metadata"]["name"] for job in jobs]
    assert len(set(names)) == len(names)
    for job in jobs:
        assert job.manifest["apiVersion"] == "batch/v1" and job.manifest["kind"] == "Job"
        assert validate_manifest(job.manifest) == [], (job.rule, job.wildcards)
        # The pod re-enters Snakemake for exactly this job.
        command = " ".join(job.container["args"])
        assert f"--target-jobs '{job.rule}:" in command and "--mode 'remote'" in command


def _tolerations(job) -> set[str]:
    return {t["key"] for t in job.pod_spec.get("tolerations") or []}


@pytest.mark.slow
def test_gpu_jobs_request_the_configured_gpus_and_carry_the_image(workdir):
    plan = Plan(validate_config(mi355x_in_process(), SCHEMA))
    system = MI355X_SYSTEM
    profile = load_yaml(REPO / PROFILE / "config.yaml")
    jobs = rendered(workdir, MI355X)
    gpu_jobs = [job for job in jobs if job.rule in GPU_RULES]
    assert {job.rule for job in gpu_jobs} == {"loadgen_run", "compliance_run"}
    for job in gpu_jobs:
        count = str(plan.accelerators(system))
        assert count == "8"
        assert job.gpu_limits() == {"amd.com/gpu": count}
        assert job.container["resources"]["requests"]["amd.com/gpu"] == count
        assert _tolerations(job) == {"amd.com/gpu"}
        # Node selection comes from the profile, never from a rule.
        assert job.pod_spec["nodeSelector"] == {
            "node.kubernetes.io/instance-type": profile["set-resources"][job.rule]["machine_type"]
        }
        assert job.container["resources"]["requests"]["cpu"] == f"{int(profile['set-threads'][job.rule] * 950)}m"
    for job in jobs:
        expected = plan.container(system) if job.rule in IMAGE_RULES else None
        assert job.apptainer_image == expected, job.rule
        if job.rule not in IMAGE_RULES:
            assert job.gpu_limits() == {} and _tolerations(job) == set() and not job.pod_spec.get("nodeSelector")
        # The pod runs the workflow image; apptainer inside it runs the vLLM image.
        assert job.container["image"] == profile["container-image"]
        assert "--deployment-method apptainer" in " ".join(job.container["args"])


@pytest.mark.slow
def test_the_vendor_recipe_quantizes_on_a_gpu_node(workdir):
    """Quark's AutoSmoothQuant with MXFP4 runs on a GPU only: the quantize job requests one
    (tests/test_quant_device.py), on the node kind the profile names for it."""
    profile = load_yaml(REPO / PROFILE / "config.yaml")
    (job,) = [job for job in rendered(workdir, MI355X) if job.rule == "quantize"]
    assert job.gpu_limits() == {"amd.com/gpu": "1"}
    assert _tolerations(job) == {"amd.com/gpu"}
    assert job.pod_spec["nodeSelector"] == {
        "node.kubernetes.io/instance-type": profile["set-resources"]["quantize"]["machine_type"]
    }


def test_cpu_jobs_request_no_gpus(workdir):
    jobs = rendered(workdir, "config/config.yaml")
    assert any(job.rule == "loadgen_run" for job in jobs)
    for job in jobs:
        assert job.gpu_limits() == {}, job.rule
        assert _tolerations(job) == set(), job.rule
        assert job.apptainer_image is None


@pytest.mark.slow
def test_nvidia_vendor_maps_to_nvidia_gpus(workdir):
    config = mi355x_in_process()
    system = config["systems"].pop(MI355X_SYSTEM)
    system["description"]["accelerator_model_name"] = "NVIDIA B200"
    system["software"]["container"] = CUDA
    system["gpu_screening"] = {"enabled": True, "policy": "refuse"}
    config["systems"]["b200-8x-cuda-vllm"] = system
    (workdir / "config" / "b200.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    profile = load_yaml(REPO / PROFILE / "config.yaml")
    profile["default-resources"]["gpu_manufacturer"] = "nvidia"
    profile["apptainer-args"] = "--nv --bind /data"
    (workdir / "profiles" / "k8s-nvidia").mkdir()
    (workdir / "profiles" / "k8s-nvidia" / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    jobs = rendered(workdir, "config/b200.yaml", "profiles/k8s-nvidia")
    gpu_jobs = [job for job in jobs if job.rule in GPU_RULES]
    # The GPU screen runs in the same image, on the same kind of node, with the same GPUs.
    assert {job.rule for job in gpu_jobs} == {"loadgen_run", "compliance_run", "screen_gpus"}
    for job in gpu_jobs:
        assert job.gpu_limits() == {"nvidia.com/gpu": "8"}
        assert _tolerations(job) == {"nvidia.com/gpu"}
        assert job.apptainer_image == CUDA
        assert job.pod_spec["nodeSelector"] == {
            "node.kubernetes.io/instance-type": profile["set-resources"][job.rule]["machine_type"]
        }
        assert validate_manifest(job.manifest) == []


@pytest.mark.slow
def test_without_scale_0_the_plugin_writes_gpu_requests_the_api_server_refuses(workdir):
    # Why the profile sets scale: 0. With the plugin's default the GPUs are only requested.
    profile = load_yaml(REPO / PROFILE / "config.yaml")
    del profile["default-resources"]["scale"]
    (workdir / "profiles" / "k8s-noscale").mkdir()
    (workdir / "profiles" / "k8s-noscale" / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    jobs = rendered(workdir, MI355X, "profiles/k8s-noscale")
    for job in jobs:
        problems = validate_manifest(job.manifest)
        if job.rule in GPU_RULES | {"quantize"}:  # quantize: the vendor recipe's GPU
            assert any("amd.com/gpu needs a limit" in p for p in problems), problems
        else:
            assert problems == []


def _a_gpu_manifest(workdir) -> dict:
    job = next(job for job in rendered(workdir, MI355X) if job.rule == "loadgen_run")
    return copy.deepcopy(job.manifest)


def _resources(manifest: dict) -> dict:
    return manifest["spec"]["template"]["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda m: _resources(m)["limits"].update(memory="-16000M"), "must not be negative"),
        (lambda m: _resources(m)["requests"].update(memory="lots"), "is not a Kubernetes quantity"),
        (lambda m: _resources(m)["requests"].update({"amd.com/gpu": "4"}), "request and limit must be equal"),
        (lambda m: _resources(m)["limits"].update({"amd.com/gpu": "0.5"}), "must be a whole number"),
        (lambda m: _resources(m)["requests"].update(cpu="128"), "exceeds the limit"),
        (lambda m: m["spec"]["template"]["spec"].update(restartPolicy="Always"), "Never or OnFailure"),
        (lambda m: m["metadata"].update(name="Snakejob_1"), "is not a DNS label"),
        (lambda m: m["spec"]["template"]["spec"]["containers"][0].update(gpus=8), "'gpus' was unexpected"),
        (lambda m: m["spec"].update(backoffLimit="none"), "is not of type"),
    ],
)
def test_the_validator_rejects_broken_manifests(workdir, breakage, message):
    manifest = _a_gpu_manifest(workdir)
    assert validate_manifest(manifest) == []
    breakage(manifest)
    problems = validate_manifest(manifest)
    assert any(message in p for p in problems), problems


@pytest.mark.slow
def test_cli_writes_one_manifest_per_job(workdir, tmp_path):
    out = tmp_path / "jobs"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_repro",
            "k8s-render",
            "--configfile",
            MI355X,
            "--workdir",
            str(workdir),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    files = sorted(out.glob("*.yaml"))
    assert len(files) == len(rendered(workdir, MI355X))
    assert "all valid" in result.stdout and "(10 with GPUs)" in result.stdout
    for path in files:
        assert validate_manifest(yaml.safe_load(path.read_text())) == []
    index = yaml.safe_load((out / "index.json").read_text())
    assert {entry["file"] for entry in index} == {p.name for p in files}


def test_a_profile_for_another_executor_is_refused(workdir, tmp_path):
    from mlperf_repro.errors import UserError

    (workdir / "profiles" / "not-k8s").mkdir(exist_ok=True)
    (workdir / "profiles" / "not-k8s" / "config.yaml").write_text("cores: 2\n")
    with pytest.raises(UserError, match="executor: kubernetes"):
        render("config/config.yaml", "profiles/not-k8s", workdir=workdir, timeout_s=300)


K8S_LAUNCH = "config/examples/mi355x-multinode-kubernetes.yaml"


@pytest.mark.slow
def test_cli_renders_the_server_objects_of_a_kubernetes_launch(workdir, tmp_path):
    out = tmp_path / "k8s"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_repro",
            "k8s-render",
            "--configfile",
            K8S_LAUNCH,
            "--workdir",
            str(workdir),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # A server set per scenario: the imported scenarios run their servers with flags of their own.
    assert "and 6 server manifests (3 server set(s))" in result.stdout and "all valid" in result.stdout
    stem = "servers-87xMI355X_22xEPYC_9575F-llama2-70b-99-Offline"
    statefulset = yaml.safe_load((out / f"{stem}-statefulset.yaml").read_text())
    service = yaml.safe_load((out / f"{stem}-service.yaml").read_text())
    assert validate_manifest(statefulset) == [] and validate_manifest(service) == []
    assert statefulset["spec"]["replicas"] == 11 and service["spec"]["clusterIP"] == "None"
    index = json.loads((out / "index.json").read_text())
    assert {entry["file"] for entry in index} == {p.name for p in out.glob("*.yaml")}
    # The run jobs are pods without GPUs in the workflow's image; quantization still runs in
    # the servers' image, whose digest the server pods pull.
    config = validate_config(load_yaml(REPO / K8S_LAUNCH), SCHEMA)
    image = Plan(config).server_image("87xMI355X_22xEPYC_9575F")
    assert statefulset["spec"]["template"]["spec"]["containers"][0]["image"] == image.removeprefix("docker://")
    jobs = rendered(workdir, K8S_LAUNCH)
    runs = [job for job in jobs if job.rule in {"loadgen_run", "compliance_run"}]
    assert runs and all(job.gpu_limits() == {} and job.apptainer_image is None for job in runs)
    assert [job.apptainer_image for job in jobs if job.rule == "quantize"] == [image]
