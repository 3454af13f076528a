"""``launch: kubernetes``: the config, the server objects the run job creates (rendered and
checked against the Kubernetes 1.32 schema), the pod DNS names the head sends to, and the
parts of the lifecycle that do not need an API server: the /health wait against real HTTP
servers, the pod status report, and a teardown that runs on failure and on SIGTERM.

No Kubernetes API server runs here (Debian ships kubectl but no kube-apiserver or kubelet),
so the create/delete calls themselves are not exercised; see docs/config/kubernetes-servers.md."""

from __future__ import annotations

import copy
import http.server
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
import yaml
from conftest import REPO, SCHEMA

from mlperf_repro.backends.endpoints import serving
from mlperf_repro.cluster.kubernetes import validate_manifest
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_file
from mlperf_repro.launch.common import _healthy, wait_until_healthy
from mlperf_repro.launch.kubernetes import (
    Teardown,
    endpoints_on_pods,
    failing_containers,
    model_path_on_claim,
    placement,
    pod_report,
    render_servers,
    server_manifests,
    server_set_from_config,
    sigterm_unwinds,
)
from mlperf_repro.plan import Plan

EXAMPLE = REPO / "config/examples/mi355x-multinode-kubernetes.yaml"
SLURM_EXAMPLE = REPO / "config/examples/mi355x-multinode-slurm.yaml"
SYSTEM = "87xMI355X_22xEPYC_9575F"
IMAGE = "docker://rocm/vllm@sha256:" + "ab" * 32


def k8s_system(default_config: dict, **allocation) -> dict:
    config = copy.deepcopy(default_config)
    system = next(iter(config["systems"].values()))
    system["software"] = {"container": IMAGE}
    system["engine"] = {
        "backend": "endpoints",
        "endpoints": {
            "launch": "kubernetes",
            "served_model_name": "tiny",
            "allocation": dict(
                {
                    "nodes": 3,
                    "servers_per_node": 2,
                    "accelerator": "AMD Instinct MI355X",
                    "accelerator_count": 1,
                    "base_port": 9000,
                },
                **allocation,
            ),
            "kubernetes": {"model_volume": {"claim": "mlperf-data", "mount_path": "/data"}},
        },
    }
    for key in ("number_of_nodes", "accelerators_per_node", "accelerator_model_name"):
        system["description"][key] = "auto"
    # The default config's measured reference runs in-process, which launch: kubernetes refuses.
    for benchmark in config["benchmarks"].values():
        benchmark["accuracy_target"] = "reference"
    return config


def example() -> tuple[dict, dict]:
    config = validate_config(load_yaml(EXAMPLE), SCHEMA)
    return config, config["systems"][SYSTEM]["engine"]


# What a site adds to the imported example's kubernetes section (the vendor's files name none).
SITE_SETTINGS = {"node_selector": {"node.kubernetes.io/instance-type": "mi355x-8gpu"}, "cpu": 12}
SITE_SETTINGS.update(memory="128Gi", shm_size="64Gi")


def example_servers(site: bool = False, **changes):
    config, engine = example()
    if site:
        engine["endpoints"]["kubernetes"].update(copy.deepcopy(SITE_SETTINGS))
    servers = server_set_from_config(
        engine,
        name="mlperf-vllm-0123abcd",
        namespace="mlperf",
        model_path="/data/mlperf-repro/results/models/llama2-70b-chat-mxfp4",
    )
    for key, value in changes.items():
        setattr(servers, key, value)
    return engine, servers


# -- config -------------------------------------------------------------------------------------
def test_the_endpoint_list_names_server_pods_and_the_plan_counts_their_gpus(default_config):
    config = validate_config(k8s_system(default_config), SCHEMA)
    system = next(iter(config["systems"]))
    endpoints = config["systems"][system]["engine"]["endpoints"]
    assert [(e["name"], e["host"], e["port"], e["node"]) for e in endpoints["list"]] == [
        ("node0-0", "k8s-server-pod-0", 9000, "node0"),
        ("node0-1", "k8s-server-pod-0", 9001, "node0"),
        ("node1-0", "k8s-server-pod-1", 9000, "node1"),
        ("node1-1", "k8s-server-pod-1", 9001, "node1"),
        ("node2-0", "k8s-server-pod-2", 9000, "node2"),
        ("node2-1", "k8s-server-pod-2", 9001, "node2"),
    ]
    # The image comes from software.container.
    assert endpoints["kubernetes"]["image"] == IMAGE
    plan = Plan(config)
    # The run pod holds no GPUs and runs in the workflow's pod image; the servers hold 6.
    assert plan.accelerators(system) == 0 and plan.nodes(system) == 1 and plan.server_tasks(system) is None
    assert plan.container(system) is None and plan.server_image(system) == IMAGE
    assert plan.server_accelerators(system) == 6 and plan.server_nodes(system) == 3
    assert plan.server_accelerators(system, 3) == 3 and plan.server_nodes(system, 3) == 2
    assert plan.screening(system) is None
    assert validate_config(config, SCHEMA)["systems"][system]["engine"]["endpoints"]["list"] == endpoints["list"]


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda s: s["engine"]["endpoints"].pop("kubernetes"), "launch: kubernetes needs kubernetes.model_volume"),
        (
            lambda s: s["engine"]["endpoints"].update(launch="slurm"),
            "endpoints.kubernetes: only used with launch: kubernetes",
        ),
        (lambda s: s["engine"]["endpoints"].pop("allocation"), "launch: kubernetes starts the servers"),
        (
            lambda s: s["engine"]["endpoints"]["allocation"].update(srun_args=["--exclusive"]),
            "allocation.srun_args: only used with launch: slurm",
        ),
        (lambda s: s.pop("software"), "software.container: launch: kubernetes runs the servers in this image"),
        (
            lambda s: s["software"].update(container="oras://ghcr.io/x/vllm@sha256:" + "ab" * 32),
            "needs a docker:// reference",
        ),
        (
            lambda s: s["engine"]["endpoints"]["kubernetes"].update(image="docker://rocm/vllm:latest"),
            "not pinned by digest",
        ),
        (
            lambda s: s["engine"]["endpoints"]["allocation"].update(accelerator="Intel Gaudi 3"),
            "cannot tell the GPU resource from accelerator 'Intel Gaudi 3'",
        ),
        (
            lambda s: s["engine"].update(engine_args={"tensor_parallel_size": 2}),
            "tensor_parallel_size x pipeline_parallel_size = 2",
        ),
        (
            lambda s: s.update(gpu_screening={"enabled": True}),
            "GPU screening is not implemented for launch: kubernetes",
        ),
        (lambda s: s["engine"]["endpoints"]["kubernetes"].update(memory="lots"), "kubernetes.memory"),
        (lambda s: s["engine"]["endpoints"]["kubernetes"]["model_volume"].update(mount_path="data"), "mount_path"),
        (
            lambda s: s["engine"]["endpoints"].update(list=[{"name": "a", "host": "h", "port": 1}]),
            "with launch: kubernetes the list is generated from allocation",
        ),
    ],
)
def test_bad_kubernetes_launch_settings_are_named(default_config, change, fragment):
    config = k8s_system(default_config)
    change(next(iter(config["systems"].values())))
    with pytest.raises(UserError, match="invalid config") as err:
        validate_config(config, SCHEMA)
    assert fragment in str(err.value)


def test_a_measured_accuracy_reference_is_refused(default_config):
    config = k8s_system(default_config)
    benchmark = next(b for b in config["benchmarks"].values() if b.get("quantization"))
    benchmark["accuracy_target"] = "measured"
    with pytest.raises(UserError, match="reference runs vLLM inside the run pod"):
        validate_config(config, SCHEMA)


def test_the_plan_view_counts_the_server_pods_gpus_like_the_slurm_run(tmp_path):
    """The same 11 x 8 MI355X shape on SLURM and on Kubernetes costs the same GPU-hours."""
    config = load_yaml(EXAMPLE)
    endpoints = config["systems"][SYSTEM]["engine"]["endpoints"]
    endpoints["launch"] = "slurm"
    endpoints.pop("kubernetes")
    (tmp_path / "slurm.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    k8s, slurm = estimate_file(str(EXAMPLE), str(SCHEMA)), estimate_file(str(tmp_path / "slurm.yaml"), str(SCHEMA))
    assert k8s.total["gpu_hours"] == pytest.approx(slurm.total["gpu_hours"])
    # The vendor's own 11-node result (imported) has the same shape: 88 GPUs in 11 nodes.
    imported = estimate_file(str(SLURM_EXAMPLE), str(SCHEMA))
    for estimate in (k8s, slurm, imported):
        runs = [d for row in estimate.rows for d in row.details if d["rule"] in ("loadgen_run", "compliance_run")]
        assert runs and all(d["accelerators"] == 88 and d["nodes"] == 11 for d in runs)


# -- the server objects ------------------------------------------------------------------------
def test_server_manifests_are_valid_and_carry_gpus_ports_probes_image_one_pod_per_node():
    engine, servers = example_servers(site=True)
    service, statefulset = server_manifests(servers)
    assert validate_manifest(service) == [] and validate_manifest(statefulset) == []
    allocation, settings = engine["endpoints"]["allocation"], engine["endpoints"]["kubernetes"]
    spec = statefulset["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == allocation["nodes"] == 11 and spec["podManagementPolicy"] == "Parallel"
    assert len(pod["containers"]) == allocation["servers_per_node"] == 8
    # One server pod per node: required anti-affinity on the host name against its own pods.
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["nodeSelector"] == settings["node_selector"]
    assert pod["tolerations"] == [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    image = engine["endpoints"]["kubernetes"]["image"]
    for j, container in enumerate(pod["containers"]):
        port = allocation["base_port"] + j
        assert container["image"] == image.removeprefix("docker://") and "@sha256:" in container["image"]
        assert container["resources"]["limits"] == {"amd.com/gpu": "1"}
        assert container["resources"]["requests"] == {"amd.com/gpu": "1", "cpu": "12000m", "memory": "128Gi"}
        assert container["ports"] == [{"name": f"http-{j}", "containerPort": port, "protocol": "TCP"}]
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port}
        command = container["command"]
        assert command[:3] == ["vllm", "serve", servers.model_path]
        assert command[command.index("--port") + 1] == str(port)
        assert command[command.index("--served-model-name") + 1] == "llama-2-70b-chat-hf"
        assert command[command.index("--gpu-memory-utilization") + 1] == "0.94"  # the vendor's, imported
        assert command[command.index("--kv-cache-dtype") + 1] == "fp8"
        assert {"name": "VLLM_USE_V1", "value": "1"} in container["env"]
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/data", "/dev/shm"}
    assert {v["name"]: v for v in pod["volumes"]}["models"]["persistentVolumeClaim"] == {
        "claimName": "mlperf-data",
        "readOnly": True,
    }
    assert {v["name"]: v for v in pod["volumes"]}["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    # The headless Service selects exactly these pods, on every server port.
    assert service["spec"]["clusterIP"] == "None" and service["metadata"]["name"] == spec["serviceName"]
    assert service["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    assert [p["port"] for p in service["spec"]["ports"]] == [8000 + j for j in range(8)]


def test_the_endpoint_list_is_the_pods_dns_names_and_ports():
    engine, servers = example_servers()
    placed = endpoints_on_pods(engine["endpoints"]["list"], servers)
    _, statefulset = server_manifests(servers)
    name, namespace = statefulset["metadata"]["name"], statefulset["metadata"]["namespace"]
    serving_ports = [c["ports"][0]["containerPort"] for c in statefulset["spec"]["template"]["spec"]["containers"]]
    # StatefulSet pod i is <name>-i; the headless Service <name> gives it <pod>.<service>.<ns>.svc.<domain>.
    every = [
        (f"{name}-{i}.{statefulset['spec']['serviceName']}.{namespace}.svc.cluster.local", port)
        for i in range(statefulset["spec"]["replicas"])
        for port in serving_ports
    ]
    # The vendor's 87 engines (allocation.servers): pod 10's eighth container starts but gets no queries.
    assert [(e["host"], e["port"]) for e in placed] == every[:87] and len(every) == 88
    assert placed[9]["pod"] == f"{name}-1" and placed[9]["name"] == "node1-1"


def test_nvidia_accelerators_request_nvidia_gpus(default_config):
    config = k8s_system(default_config, accelerator="NVIDIA B200", accelerator_count=2)
    system = next(iter(config["systems"].values()))
    system["engine"]["engine_args"] = {"tensor_parallel_size": 2}
    config = validate_config(config, SCHEMA)
    engine = next(iter(config["systems"].values()))["engine"]
    servers = server_set_from_config(engine, name="mlperf-vllm-1", namespace="ns", model_path="/data/m")
    _, statefulset = server_manifests(servers)
    assert validate_manifest(statefulset) == []
    pod = statefulset["spec"]["template"]["spec"]
    assert [c["resources"]["limits"] for c in pod["containers"]] == [{"nvidia.com/gpu": "2"}] * 2
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_servers_without_accelerators_request_no_gpus(default_config):
    config = validate_config(k8s_system(default_config, accelerator="N/A"), SCHEMA)
    engine = next(iter(config["systems"].values()))["engine"]
    servers = server_set_from_config(engine, name="mlperf-vllm-2", namespace="ns", model_path="/data/m")
    _, statefulset = server_manifests(servers)
    assert validate_manifest(statefulset) == []
    pod = statefulset["spec"]["template"]["spec"]
    assert "tolerations" not in pod and all("resources" not in c for c in pod["containers"])


@pytest.mark.parametrize(
    "breakage, message",
    [
        (
            lambda m: m["spec"]["selector"]["matchLabels"].update({"mlperf-repro/server-set": "other"}),
            "does not select the template's labels",
        ),
        (
            lambda m: m["spec"]["template"]["spec"]["containers"][1]["ports"][0].update(containerPort=8000),
            "both use port 8000",
        ),
        (lambda m: m["metadata"].update(name="mlperf-vllm-" + "a" * 45), "longer than 52 characters"),
        (lambda m: m["spec"]["template"]["spec"].update(restartPolicy="Never"), "need Always"),
        (
            lambda m: m["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].update(
                {"amd.com/gpu": "2"}
            ),
            "request and limit must be equal",
        ),
        (lambda m: m["spec"].update(replicas="11"), "is not of type"),
    ],
)
def test_the_validator_rejects_broken_server_sets(breakage, message):
    _, servers = example_servers()
    _, statefulset = server_manifests(servers)
    breakage(statefulset)
    problems = validate_manifest(statefulset)
    assert any(message in p for p in problems), problems


def test_the_rbac_manifests_are_valid():
    import kubernetes_validate

    documents = list(yaml.safe_load_all((REPO / "profiles/kubernetes/rbac.yaml").read_text()))
    assert [d["kind"] for d in documents] == ["ServiceAccount", "Role", "RoleBinding"]
    for document in documents:
        kubernetes_validate.validate(document, "1.32", strict=True)
    profile = load_yaml(REPO / "profiles/kubernetes/config.yaml")
    assert profile["kubernetes-service-account-name"] == documents[0]["metadata"]["name"]
    verbs = {(r["resources"][0], v) for r in documents[1]["rules"] for v in r["verbs"]}
    assert {
        ("statefulsets", "create"),
        ("statefulsets", "delete"),
        ("services", "create"),
        ("services", "delete"),
        ("pods", "list"),
        ("pods", "get"),
    } <= verbs


def test_render_servers_follows_the_profile_and_names_disagreements(tmp_path):
    sets = render_servers(EXAMPLE.relative_to(REPO), "profiles/kubernetes", workdir=REPO)
    # One set per scenario: the vendor's scenarios run their servers with flags of their own.
    assert [(s.system, s.benchmark, s.scenarios, s.problems) for s in sets] == [
        (SYSTEM, "llama2-70b-99", (scenario,), []) for scenario in ("Offline", "Server", "Interactive")
    ]
    config, _ = example()
    for rendered in sets:
        command = rendered.manifests[1]["spec"]["template"]["spec"]["containers"][0]["command"]
        own = config["systems"][SYSTEM]["benchmarks"]["llama2-70b-99"][rendered.scenarios[0]]["engine"]
        assert command[command.index("--max-num-seqs") + 1] == str(own["engine_args"]["max_num_seqs"])
        assert rendered.file_stem.endswith(rendered.scenarios[0])
    assert len({r.manifests[1]["metadata"]["name"] for r in sets}) == 3
    service, statefulset = sets[0].manifests
    assert (
        statefulset["metadata"]["namespace"]
        == load_yaml(REPO / "profiles/kubernetes/config.yaml")["kubernetes-namespace"]
    )
    # The model is read where fs storage keeps it on the claim.
    assert (
        statefulset["spec"]["template"]["spec"]["containers"][0]["command"][2]
        == "/data/mlperf-repro/results/models/llama-2-70b-chat-hf-llama2-70b-99-mxfp4"
    )
    profile = load_yaml(REPO / "profiles/kubernetes/config.yaml")
    profile["kubernetes-persistent-volumes"] = ["other-claim:/data"]
    profile.pop("kubernetes-service-account-name")
    (tmp_path / "workflow/schemas").mkdir(parents=True)
    (tmp_path / "workflow/schemas/config.schema.yaml").write_text(SCHEMA.read_text())
    (tmp_path / "p").mkdir()
    (tmp_path / "p/config.yaml").write_text(yaml.safe_dump(profile))
    (tmp_path / "c.yaml").write_text(EXAMPLE.read_text())
    bad = render_servers("c.yaml", "p", workdir=tmp_path)[0]
    assert any(
        "claim mlperf-data at /data is not among the profile's kubernetes-persistent-volumes" in p for p in bad.problems
    ), bad.problems
    assert any("kubernetes-service-account-name is unset" in p for p in bad.problems), bad.problems


# -- where the servers find the model ---------------------------------------------------------
def test_the_model_path_on_the_claim(tmp_path):
    claim = tmp_path / "data"
    model = claim / "mlperf-repro/results/models/m"
    model.mkdir(parents=True)
    work = tmp_path / "work"
    # fs storage, on-demand: a symlink into the claim.
    (work / ".snakemake/storage/fs/x").mkdir(parents=True)
    (work / "linked").symlink_to(model)
    assert model_path_on_claim("linked", str(claim), cwd=work) == str(model)
    # fs storage, copied: .snakemake/storage/fs/<path on the claim>.
    copied = work / ".snakemake/storage/fs" / str(model).lstrip("/")
    copied.mkdir(parents=True)
    assert model_path_on_claim(copied.relative_to(work), str(claim), cwd=work) == str(model)
    # A workflow running on the claim itself.
    assert model_path_on_claim(model, str(claim)) == str(model)
    with pytest.raises(UserError, match="is not on the claim mounted at"):
        model_path_on_claim(work / "elsewhere", str(claim))


# -- waiting for the servers --------------------------------------------------------------------
class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        ready = self.server.ready.is_set() and self.path == "/health"
        self.send_response(200 if ready else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def health_servers():
    servers = []

    def start(ready: bool):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
        server.ready = threading.Event()
        if ready:
            server.ready.set()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_the_wait_returns_once_every_server_answers_health(health_servers):
    up, late = health_servers(True), health_servers(False)
    endpoints = [("127.0.0.1", up.server_port), ("127.0.0.1", late.server_port)]
    checked = []

    def check(waiting):
        checked.append(sorted(waiting))
        late.ready.set()  # the slow server finishes loading

    wait_until_healthy(endpoints, 60, probe=_healthy, check=check, poll_s=0.05, check_every_s=0)
    assert checked == [[("127.0.0.1", late.server_port)]]


def test_the_wait_times_out_naming_the_servers_and_their_pods(health_servers):
    up, never = health_servers(True), health_servers(False)
    endpoints = [("127.0.0.1", up.server_port), ("127.0.0.1", never.server_port)]
    with pytest.raises(UserError) as err:
        wait_until_healthy(
            endpoints,
            0.3,
            probe=_healthy,
            poll_s=0.05,
            describe=lambda waiting: f"pods not ready: {sorted(p for _, p in waiting)}",
        )
    message = str(err.value)
    assert f"127.0.0.1:{never.server_port}" in message and f"127.0.0.1:{up.server_port}" not in message
    assert f"pods not ready: [{never.server_port}]" in message


def test_a_pod_that_cannot_start_ends_the_wait_at_once(health_servers):
    never = health_servers(False)
    pods = [
        {
            "metadata": {"name": "set-0"},
            "spec": {"nodeName": "gpu-a17"},
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "vllm-0",
                        "ready": False,
                        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "manifest unknown"}},
                    }
                ],
            },
        }
    ]

    def check(waiting):
        fatal, _ = pod_report(pods, ["set-0"])
        if fatal:
            raise UserError("cannot start: " + "; ".join(fatal))

    with pytest.raises(UserError, match=r"set-0 \(Pending on gpu-a17: vllm-0: ImagePullBackOff \(manifest unknown\)\)"):
        wait_until_healthy([("127.0.0.1", never.server_port)], 600, probe=_healthy, check=check, poll_s=0.05)


def test_the_pod_report_says_why_each_pod_is_not_serving():
    pods = [
        {
            "metadata": {"name": "s-0"},
            "spec": {},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/11 nodes are available: 11 Insufficient amd.com/gpu.",
                    }
                ],
            },
        },
        {
            "metadata": {"name": "s-1"},
            "spec": {"nodeName": "n1"},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "vllm-0",
                        "ready": False,
                        "restartCount": 3,
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                    },
                    {"name": "vllm-1", "ready": False, "state": {"running": {}}},
                ],
            },
        },
        {
            "metadata": {"name": "s-2"},
            "spec": {"nodeName": "n2"},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "vllm-0",
                        "ready": True,
                        "state": {"running": {}},
                        "imageID": "docker.io/rocm/vllm@sha256:ab",
                    }
                ],
            },
        },
    ]
    fatal, waiting = pod_report(pods, ["s-0", "s-1", "s-2", "s-3"])
    assert fatal == ["s-1 (Running on n1: vllm-0: CrashLoopBackOff (back-off 40s); vllm-1: running, not ready)"]
    assert waiting == [
        "s-0 (Pending: Unschedulable: 0/11 nodes are available: 11 Insufficient amd.com/gpu.)",
        "s-2 (Running on n2)",
        "s-3 (not created)",
    ]
    assert pod_report(pods, ["s-0", "s-1"], only={"s-0"}) == ([], [waiting[0]])
    # Whose log goes into the error: the crash-looping container's previous run.
    assert failing_containers(pods) == [("s-1", "vllm-0", True)]
    assert failing_containers(pods, only={"s-0"}) == []
    assert placement(pods)[2] == {
        "pod": "s-2",
        "node": "n2",
        "host_ip": None,
        "pod_ip": None,
        "image_ids": ["docker.io/rocm/vllm@sha256:ab"],
    }


# -- teardown ----------------------------------------------------------------------------------
def test_teardown_runs_every_step_last_first_once_even_when_one_fails():
    done, log = [], []

    def fail():
        raise RuntimeError("API unreachable")

    with pytest.raises(ValueError):
        with Teardown(log=log.append, leftover_hint="delete by hand") as teardown:
            teardown.push("pods gone", lambda: done.append("pods gone"))
            teardown.push("service", fail)
            teardown.push("statefulset", lambda: done.append("statefulset"))
            raise ValueError("the run failed")
    assert done == ["statefulset", "pods gone"]
    assert teardown.failures == ["service: API unreachable"]
    assert log[-1] == "delete by hand"
    assert teardown.run() == ["service: API unreachable"] and done == ["statefulset", "pods gone"]


SIGTERM_CHILD = textwrap.dedent("""
    import sys, time
    from mlperf_repro.launch.kubernetes import Teardown, sigterm_unwinds
    out = open(sys.argv[1], "w", buffering=1)
    with sigterm_unwinds(), Teardown(log=lambda text: out.write(text + "\\n")) as teardown:
        teardown.push("service deleted", lambda: None)
        teardown.push("statefulset deleted", lambda: None)
        print("READY", flush=True)
        time.sleep(120)
    out.write("not reached\\n")
""")


def test_sigterm_runs_the_teardown_before_the_process_ends(tmp_path):
    log = tmp_path / "teardown.log"
    child = subprocess.Popen([sys.executable, "-c", SIGTERM_CHILD, str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        child.send_signal(signal.SIGTERM)
        assert child.wait(60) == 128 + signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert log.read_text().splitlines() == ["teardown: statefulset deleted", "teardown: service deleted"]


def test_sigterm_handling_is_restored_after_the_block():
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_unwinds():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


# -- outside a cluster -------------------------------------------------------------------------
def test_outside_a_cluster_the_run_stops_with_a_clear_reason(default_config, tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    config = validate_config(k8s_system(default_config), SCHEMA)
    engine = next(iter(config["systems"].values()))["engine"]
    with pytest.raises(UserError, match="neither inside a Kubernetes pod"):
        with serving(engine, str(tmp_path / "model"), tmp_path / "servers"):
            pass


def test_an_unreachable_api_server_is_a_clear_error(default_config, tmp_path, monkeypatch, capfd):
    """A kubeconfig whose API server does not answer: the real client's request fails, and the
    run stops naming the action, not with a traceback."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "here",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "none"}}],
                "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    claim = tmp_path / "claim"
    (claim / "models/tiny").mkdir(parents=True)
    config = k8s_system(default_config)
    endpoints = next(iter(config["systems"].values()))["engine"]["endpoints"]
    endpoints["kubernetes"].update(namespace="mlperf", model_volume={"claim": "mlperf-data", "mount_path": str(claim)})
    engine = next(iter(validate_config(config, SCHEMA)["systems"].values()))["engine"]
    with pytest.raises(
        UserError,
        match=r"Kubernetes API: creating Service mlperf/mlperf-vllm-[0-9a-f]{8} failed: "
        r"no answer from the API server",
    ):
        with serving(engine, str(claim / "models/tiny"), tmp_path / "servers"):
            pass
    # The teardown still tried every step (a create whose answer is lost may have happened)
    # and says what may be left.
    err = capfd.readouterr().err
    assert "teardown FAILED: deleted Service mlperf/mlperf-vllm-" in err
    assert "teardown FAILED: server pods of mlperf-vllm-" in err
    assert "kubectl -n mlperf delete statefulset,service -l mlperf-repro/server-set=mlperf-vllm-" in err
