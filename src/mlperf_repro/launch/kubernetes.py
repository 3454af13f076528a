"""``launch: kubernetes``: the run job (a pod under the kubernetes executor) starts its
inference servers as Kubernetes objects and deletes them afterwards.

One server pod per node: a StatefulSet of ``allocation.nodes`` pods (started in parallel,
kept apart by a required pod anti-affinity on the host name), each pod with
``servers_per_node`` containers running ``vllm serve`` on ``base_port + j`` and requesting
``accelerator_count`` GPUs each; a headless Service gives pod i the stable name
``<set>-<i>.<set>.<namespace>.svc.<cluster domain>``. The head waits until every server
answers the project's own /health probe (hard timeout; a pod that cannot start, e.g. an
image that cannot be pulled or a crash loop, fails the wait at once), runs the one LoadGen
head, and deletes the StatefulSet and the Service in a ``finally`` and on SIGTERM. The
objects are also owned by the run pod (ownerReferences), so deleting the run pod (the
executor cancelling the job) lets Kubernetes' garbage collector remove them when the head
had no chance to.

The manifest builders and the waiting/teardown logic are plain functions, tested without a
cluster; the API calls are in :func:`kubernetes_servers` and have not been run against a
real cluster (see docs/config/kubernetes-servers.md). :func:`render_servers` previews the objects every
``launch: kubernetes`` system would create (``mlperf-repro k8s-render``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import KUBERNETES_HOST_PREFIX, kubernetes_gpu_resource
from ..errors import UserError
from . import register_launcher
from .common import engine_args_to_flags, wait_until_healthy

# Labels on every object and pod the launcher creates; the set label selects one run's pods.
SET_LABEL = "mlperf-repro/server-set"
MODEL_LABEL = "mlperf-repro/served-model"
MANAGED_BY = {"app.kubernetes.io/managed-by": "mlperf-repro", "app.kubernetes.io/name": "vllm-server"}
# Where the kubelet puts the pod's service account (in-cluster config and own namespace).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# A StatefulSet's pods carry controller-revision-hash=<name>-<10 chars>, a label value of
# at most 63 characters, so the name may have at most 52.
MAX_SET_NAME = 52
# Waiting reasons a pod does not recover from without a change to the config or the cluster.
FATAL_WAITING_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
    }
)
API_TIMEOUT_S = 30  # every API request
TEARDOWN_TIMEOUT_S = 180  # until the server pods are gone (their GPUs free for the next job)
STATUS_EVERY_S = 10  # pod status reads while waiting for /health
LOG_TAIL_LINES = 20  # of a server that cannot start, in the error
READINESS_PERIOD_S = 10


def image_of(container: str) -> str:
    """``docker://rocm/vllm@sha256:...`` -> ``rocm/vllm@sha256:...`` (what the kubelet pulls)."""
    if not container.startswith("docker://"):
        raise UserError(f"software.container {container!r}: launch: kubernetes needs a docker:// image reference")
    return container[len("docker://") :]


def set_name(run_id: str) -> str:
    return f"mlperf-vllm-{run_id}"


def new_run_id() -> str:
    return secrets.token_hex(4)


def preview_run_id(system: str) -> str:
    """A fixed id for rendered previews, different per system."""
    return hashlib.sha256(system.encode()).hexdigest()[:8]


def label_value(text: str) -> str:
    """A label value (63 characters of [A-Za-z0-9_.-], alphanumeric at both ends) naming ``text``."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in text)[:63]
    return cleaned.strip("-_.") or "x"


def model_path_on_claim(model_path: str | Path, mount_path: str, cwd: str | Path | None = None) -> str:
    """Where a server pod reads the checkpoint the run job was given as ``model_path``.

    The run pod mounts the claim at ``mount_path`` (the profile's kubernetes-persistent-volumes)
    and so do the server pods. Snakemake's fs storage hands the job either a symlink into the
    claim (followed here) or a copy under ``.snakemake/storage/fs/<path on the claim>``; a
    workflow that runs on the claim itself passes a path below the mount."""
    path = Path(model_path)
    if not path.is_absolute():
        path = Path(cwd or os.getcwd()) / path
    text = str(path.resolve())
    marker = "/.snakemake/storage/fs/"
    if marker in text:
        text = "/" + text.split(marker, 1)[1]
    mount = mount_path.rstrip("/") or "/"
    if not (text == mount or text.startswith(mount + "/")):
        raise UserError(
            f"the model {model_path} ({text}) is not on the claim mounted at {mount_path} "
            f"(engine.endpoints.kubernetes.model_volume), so the server pods cannot read it; run the "
            f"workflow with fs storage on that claim (profiles/kubernetes) or move the model there"
        )
    return text


@dataclass
class ServerSet:
    """Everything the server manifests are made of (derived from the config and the run)."""

    name: str
    namespace: str
    nodes: int
    ports: list[int]
    image: str
    model_path: str
    served_model_name: str
    engine_args: dict[str, Any]
    claim: str
    mount_path: str
    env: dict[str, str] = field(default_factory=dict)
    gpu_resource: str | None = None
    gpus_per_server: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    service_account: str | None = None
    shm_size: str = "16Gi"
    cpu: float | None = None
    memory: str | None = None
    cluster_domain: str = "cluster.local"
    owner: dict[str, Any] | None = None

    @property
    def labels(self) -> dict[str, str]:
        return {**MANAGED_BY, SET_LABEL: self.name, MODEL_LABEL: label_value(self.served_model_name)}

    def pod_name(self, index: int) -> str:
        return f"{self.name}-{index}"

    def pod_host(self, index: int) -> str:
        """The stable DNS name of server pod ``index`` (headless Service, StatefulSet ordinal)."""
        return f"{self.pod_name(index)}.{self.name}.{self.namespace}.svc.{self.cluster_domain}"


def server_set_from_config(
    engine: dict[str, Any],
    *,
    name: str,
    namespace: str,
    model_path: str,
    owner: dict[str, Any] | None = None,
    nodes: int | None = None,
) -> ServerSet:
    """The server set of a validated ``launch: kubernetes`` engine (its image filled in from
    the system's software.container by the config check); ``nodes`` pods instead of the
    allocation's (a scaling run that drives only the servers of its first pods)."""
    endpoints = engine["endpoints"]
    allocation, settings = endpoints["allocation"], endpoints["kubernetes"]
    gpu_resource = kubernetes_gpu_resource(allocation, settings)
    base = allocation.get("base_port", 8000)
    return ServerSet(
        name=name,
        namespace=namespace,
        nodes=nodes or allocation["nodes"],
        ports=[base + j for j in range(allocation.get("servers_per_node", 1))],
        image=image_of(settings["image"]),
        model_path=model_path,
        served_model_name=endpoints.get("served_model_name", "model"),
        engine_args=engine.get("engine_args") or {},
        claim=settings["model_volume"]["claim"],
        mount_path=settings["model_volume"]["mount_path"],
        env={k: str(v) for k, v in (engine.get("env") or {}).items()},
        gpu_resource=gpu_resource,
        gpus_per_server=allocation.get("accelerator_count", 1) if gpu_resource else 0,
        node_selector=dict(settings.get("node_selector") or {}),
        service_account=settings.get("service_account"),
        shm_size=settings.get("shm_size", "16Gi"),
        cpu=settings.get("cpu"),
        memory=settings.get("memory"),
        cluster_domain=settings.get("cluster_domain", "cluster.local"),
        owner=owner,
    )


def _metadata(servers: ServerSet) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": servers.name, "namespace": servers.namespace, "labels": dict(servers.labels)}
    if servers.owner:
        meta["ownerReferences"] = [servers.owner]
    return meta


def server_container(servers: ServerSet, index: int, port: int) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if servers.gpu_resource and servers.gpus_per_server:
        # An extended resource is requested as a limit (and a request equal to it).
        requests[servers.gpu_resource] = limits[servers.gpu_resource] = str(servers.gpus_per_server)
    if servers.cpu is not None:
        requests["cpu"] = f"{int(round(servers.cpu * 1000))}m"
    if servers.memory is not None:
        requests["memory"] = servers.memory
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    container: dict[str, Any] = {
        "name": f"vllm-{index}",
        "image": servers.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "vllm",
            "serve",
            servers.model_path,
            "--served-model-name",
            servers.served_model_name,
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--disable-uvicorn-access-log",
            *engine_args_to_flags(servers.engine_args),
        ],
        "ports": [{"name": f"http-{index}", "containerPort": port, "protocol": "TCP"}],
        # Kubernetes' own view (the Service's ready addresses, `kubectl get pods`); the head
        # does not trust it and probes /health itself.
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": READINESS_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "models", "mountPath": servers.mount_path, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    if servers.env:
        container["env"] = [{"name": k, "value": v} for k, v in sorted(servers.env.items())]
    if resources:
        container["resources"] = resources
    return container


def statefulset_manifest(servers: ServerSet) -> dict[str, Any]:
    selector = {SET_LABEL: servers.name}
    pod: dict[str, Any] = {
        "containers": [server_container(servers, j, port) for j, port in enumerate(servers.ports)],
        # One server pod per node: the GPUs of a node belong to one pod, and the endpoint list's
        # node i is pod i's node.
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": dict(selector)}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
        "volumes": [
            {"name": "models", "persistentVolumeClaim": {"claimName": servers.claim, "readOnly": True}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": servers.shm_size}},
        ],
        "terminationGracePeriodSeconds": 30,
    }
    if servers.node_selector:
        pod["nodeSelector"] = dict(servers.node_selector)
    if servers.gpu_resource and servers.gpus_per_server:
        # GPU nodes are usually tainted with their resource name (as the executor plugin assumes).
        pod["tolerations"] = [{"key": servers.gpu_resource, "operator": "Exists", "effect": "NoSchedule"}]
    if servers.service_account:
        pod["serviceAccountName"] = servers.service_account
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(servers),
        "spec": {
            "serviceName": servers.name,
            "replicas": servers.nodes,
            # All pods at once (the default starts them one after the other, each once Ready).
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": dict(selector)},
            "template": {"metadata": {"labels": dict(servers.labels)}, "spec": pod},
        },
    }


def service_manifest(servers: ServerSet) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(servers),
        "spec": {
            # Headless: a DNS record per pod, no load-balancing virtual IP (the head balances).
            "clusterIP": "None",
            # Names resolve before Kubernetes calls a pod ready: the head's own probe decides.
            "publishNotReadyAddresses": True,
            "selector": {SET_LABEL: servers.name},
            "ports": [
                {"name": f"http-{j}", "port": port, "targetPort": port, "protocol": "TCP"}
                for j, port in enumerate(servers.ports)
            ],
        },
    }


def server_manifests(servers: ServerSet) -> list[dict[str, Any]]:
    """In creation order: the Service (pod names resolve from the start), then the StatefulSet."""
    if len(servers.name) > MAX_SET_NAME:
        raise UserError(f"server set name {servers.name!r} is longer than {MAX_SET_NAME} characters")
    return [service_manifest(servers), statefulset_manifest(servers)]


def endpoints_on_pods(entries: Sequence[dict], servers: ServerSet) -> list[dict]:
    """The generated endpoint entries (hosts ``k8s-server-pod-<i>``) with pod i's DNS name."""
    placed = []
    for entry in entries:
        index = int(entry["host"][len(KUBERNETES_HOST_PREFIX) :])
        if index >= servers.nodes:
            raise UserError(f"endpoint {entry['name']} needs server pod {index}, but the set has {servers.nodes}")
        if entry["port"] not in servers.ports:
            raise UserError(f"endpoint {entry['name']} listens on {entry['port']}, not a server port of the set")
        placed.append(dict(entry, host=servers.pod_host(index), pod=servers.pod_name(index)))
    return placed


# -- pod status, from the API's JSON form of v1.Pod -------------------------------------------
def _container_problem(status: dict[str, Any]) -> tuple[str | None, bool]:
    state = status.get("state") or {}
    waiting = state.get("waiting")
    if waiting:
        reason = waiting.get("reason") or "Waiting"
        message = (waiting.get("message") or "").strip().splitlines()
        text = f"{status.get('name')}: {reason}" + (f" ({message[0][:200]})" if message else "")
        return text, reason in FATAL_WAITING_REASONS
    terminated = state.get("terminated")
    if terminated:
        return (
            f"{status.get('name')}: exited with code {terminated.get('exitCode')} "
            f"({terminated.get('reason') or 'Terminated'})"
        ), False
    if not status.get("ready"):
        return f"{status.get('name')}: running, not ready", False
    return None, False


def describe_pod(pod: dict[str, Any]) -> tuple[str, bool]:
    """One line on why a pod is not serving yet, and whether it cannot recover by itself."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    name, phase = meta.get("name", "?"), status.get("phase") or "Unknown"
    node = (pod.get("spec") or {}).get("nodeName")
    details, fatal = [], False
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            details.append(
                f"{condition.get('reason') or 'not scheduled'}: "
                f"{(condition.get('message') or '').strip()[:300]}".rstrip(": ")
            )
    for container in status.get("containerStatuses") or []:
        text, is_fatal = _container_problem(container)
        if text:
            details.append(text)
        fatal = fatal or is_fatal
    if phase == "Failed":
        fatal = True
        details.append(status.get("reason") or "pod failed")
    where = f" on {node}" if node else ""
    return f"{name} ({phase}{where}{': ' + '; '.join(details) if details else ''})", fatal


def pod_report(
    pods: Sequence[dict[str, Any]], expected: Sequence[str], only: Sequence[str] | None = None
) -> tuple[list[str], list[str]]:
    """(fatal, waiting) lines for the expected pods (all, or those named in ``only``); a pod
    that does not exist yet is reported as not created."""
    by_name = {(p.get("metadata") or {}).get("name"): p for p in pods}
    fatal, waiting = [], []
    for name in expected:
        if only is not None and name not in only:
            continue
        pod = by_name.get(name)
        if pod is None:
            waiting.append(f"{name} (not created)")
            continue
        line, is_fatal = describe_pod(pod)
        (fatal if is_fatal else waiting).append(line)
    return fatal, waiting


def failing_containers(
    pods: Sequence[dict[str, Any]], only: Sequence[str] | None = None
) -> list[tuple[str, str, bool]]:
    """(pod, container, previous) of every container that cannot start by itself; ``previous``:
    its log is that of the last crashed run (a crash loop), not of the current one."""
    found = []
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name")
        if only is not None and name not in only:
            continue
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            reason = ((status.get("state") or {}).get("waiting") or {}).get("reason")
            if reason in FATAL_WAITING_REASONS:
                found.append((name, status.get("name"), reason == "CrashLoopBackOff"))
    return found


def placement(pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per server pod: its node and the image digests its containers run (the kubelet's imageID)."""
    rows = []
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("name", "")):
        status = pod.get("status") or {}
        rows.append(
            {
                "pod": (pod.get("metadata") or {}).get("name"),
                "node": (pod.get("spec") or {}).get("nodeName"),
                "host_ip": status.get("hostIP"),
                "pod_ip": status.get("podIP"),
                "image_ids": sorted(
                    {c.get("imageID") for c in status.get("containerStatuses") or [] if c.get("imageID")}
                ),
            }
        )
    return rows


# -- waiting and teardown, independent of the API ---------------------------------------------
class Teardown:
    """Undo steps, run last-registered first, each exactly once, all of them even when one
    fails (an unreachable API must not keep the next step from running). Use it as a
    context manager: the steps run when the block ends, however it ends."""

    def __init__(self, log: Callable[[str], None] | None = None, leftover_hint: str = "") -> None:
        self._steps: list[tuple[str, Callable[[], None]]] = []
        self.failures: list[str] = []
        self._log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self.leftover_hint = leftover_hint

    def push(self, what: str, step: Callable[[], None]) -> None:
        self._steps.append((what, step))

    def run(self) -> list[str]:
        while True:
            with self._lock:
                if not self._steps:
                    return self.failures
                what, step = self._steps.pop()
            try:
                step()
                self._log(f"teardown: {what}")
            except BaseException as exc:  # noqa: BLE001 - every step must get its turn
                self.failures.append(f"{what}: {exc}")
                self._log(f"teardown FAILED: {what}: {exc}")

    def __enter__(self) -> Teardown:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self.run() and self.leftover_hint:
            self._log(self.leftover_hint)


class Terminated(SystemExit):
    """SIGTERM arrived (the pod is being deleted): unwinds the run so its teardown runs."""


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` in the main thread instead of
    ending the process on the spot (which would skip every ``finally``). Outside the main
    thread signals cannot be handled; the block then runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- the launcher (Kubernetes API) ---------------------------------------------------------------
def _connect():
    """API clients: the pod's service account inside a cluster, else the local kubeconfig."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise UserError(
            "launch: kubernetes needs the kubernetes Python client in the run job's environment "
            "(pip install -r envs/workflow.txt)"
        ) from None
    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            # KUBECONFIG as it is now (the client reads it once, when first imported).
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None)
        except (config.ConfigException, OSError) as exc:
            raise UserError(
                "engine.endpoints.launch is kubernetes, but this run is neither inside a Kubernetes pod "
                "(no service account token) nor has a kubeconfig; run the workflow with "
                f"--workflow-profile profiles/kubernetes, or use launch: local / external ({exc})"
            ) from None
    return client, client.CoreV1Api(), client.AppsV1Api()


def own_namespace(configured: str | None) -> str:
    if configured:
        return configured
    path = SERVICE_ACCOUNT_DIR / "namespace"
    if path.is_file():
        return path.read_text().strip()
    raise UserError(
        "launch: kubernetes cannot tell its namespace: this run is not in a pod with a service account "
        "(/var/run/secrets/kubernetes.io/serviceaccount/namespace); set "
        "engine.endpoints.kubernetes.namespace"
    )


def api_errors() -> tuple[type[BaseException], ...]:
    """What a failed API request raises: the server's answer, or no answer at all."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    return ApiException, urllib3.exceptions.HTTPError, OSError


def _owner_reference(core: Any, namespace: str) -> dict[str, Any] | None:
    """The run pod as owner of the server objects, when this process runs in a pod of that
    namespace (its host name is the pod name)."""
    name = os.environ.get("HOSTNAME")
    if not name or not SERVICE_ACCOUNT_DIR.is_dir():
        return None
    try:
        pod = core.read_namespaced_pod(name, namespace, _request_timeout=API_TIMEOUT_S)
    except api_errors():
        return None
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod.metadata.uid}


def _api_error(action: str, exc: Exception) -> UserError:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None) or str(exc)
    body = getattr(exc, "body", None)
    try:
        reason = json.loads(body).get("message", reason) if body else reason
    except (ValueError, AttributeError):
        pass
    hint = " (the run pod's service account needs the Role in profiles/kubernetes/rbac.yaml)" if status == 403 else ""
    if status is None:
        reason = f"no answer from the API server ({type(exc).__name__}: {str(exc)[:300]})"
    return UserError(f"Kubernetes API: {action} failed: {status or ''} {reason}{hint}".replace("  ", " "))


@contextmanager
def kubernetes_servers(
    entries: Sequence[dict],
    model_path: str,
    engine: dict[str, Any],
    log_dir: str | Path,
    *,
    startup_timeout_s: float = 600.0,
) -> Iterator[tuple[list[dict], dict[str, Any]]]:
    """Create the server pods of a ``launch: kubernetes`` system, wait until every server
    answers /health, yield the endpoint entries (pod DNS names, real nodes) and the record
    of what ran where; delete everything afterwards."""
    from kubernetes.client.exceptions import ApiException

    client, core, apps = _connect()
    failed = api_errors()
    settings = engine["endpoints"]["kubernetes"]
    namespace = own_namespace(settings.get("namespace"))
    on_claim = model_path_on_claim(model_path, settings["model_volume"]["mount_path"])
    # A scaling run drives the servers of its first pods only: create just those pods.
    pods_needed = 1 + max(int(e["host"][len(KUBERNETES_HOST_PREFIX) :]) for e in entries)
    servers = server_set_from_config(
        engine,
        name=set_name(new_run_id()),
        namespace=namespace,
        model_path=on_claim,
        owner=_owner_reference(core, namespace),
        nodes=pods_needed,
    )
    service, statefulset = server_manifests(servers)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    selector = f"{SET_LABEL}={servers.name}"
    expected = [servers.pod_name(i) for i in range(servers.nodes)]
    placed = endpoints_on_pods(entries, servers)
    pod_of = {(e["host"], e["port"]): e["pod"] for e in placed}

    def pods() -> list[dict]:
        listed = core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=API_TIMEOUT_S)
        return [client.ApiClient().sanitize_for_serialization(p) for p in listed.items]

    def delete(call: Callable[..., Any]) -> Callable[[], None]:
        def step() -> None:
            try:
                call(servers.name, namespace, propagation_policy="Background", _request_timeout=API_TIMEOUT_S)
            except ApiException as exc:
                if exc.status != 404:
                    raise

        return step

    def pods_gone() -> None:
        deadline = time.monotonic() + TEARDOWN_TIMEOUT_S
        while pods():
            if time.monotonic() > deadline:
                raise UserError(f"server pods of {servers.name} still exist {TEARDOWN_TIMEOUT_S} s after the delete")
            time.sleep(2)

    def check(waiting: set) -> None:
        try:
            listed = pods()
        except failed:
            return  # a slow or restarting API server is not a failed server; the timeout still holds
        only = {pod_of[w] for w in waiting}
        fatal, _ = pod_report(listed, expected, only=only)
        if fatal:
            raise UserError(
                f"server pod(s) of {servers.name} cannot start:\n  "
                + "\n  ".join(fatal)
                + f"\n(kubectl -n {namespace} describe pods -l {selector})"
                + "".join(log_tail(*failing) for failing in failing_containers(listed, only)[:2])
            )

    def log_tail(pod: str, container: str, previous: bool) -> str:
        """The end of a failing server's log, for the error message (the run's log keeps it)."""
        try:
            text = core.read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                previous=previous,
                tail_lines=LOG_TAIL_LINES,
                _request_timeout=API_TIMEOUT_S,
            )
        except failed:
            return ""
        lines = "\n    ".join(str(text).rstrip().splitlines()[-LOG_TAIL_LINES:])
        return f"\nlast lines of {pod}/{container}{' (previous run)' if previous else ''}:\n    {lines}"

    def describe(waiting: set) -> str:
        try:
            listed = pods()
        except failed as exc:
            return f"(the pods' status could not be read: {_api_error('listing pods', exc)})"
        fatal, still = pod_report(listed, expected, only={pod_of[w] for w in waiting})
        return (
            "pods not ready:\n  "
            + "\n  ".join(fatal + still)
            + f"\n(kubectl -n {namespace} describe pods -l {selector})"
        )

    if not Path(on_claim).is_dir():
        raise UserError(
            f"the model is not at {on_claim} in this pod, where the server pods will look for it on "
            f"claim {servers.claim}; the run pod must mount the claim at "
            f"{servers.mount_path} (profile: kubernetes-persistent-volumes)"
        )
    hint = (
        f"some server objects may be left: kubectl -n {namespace} delete statefulset,service -l {selector} "
        f"(they also go when the run pod is deleted)"
    )
    # The handler stays in place while the teardown runs: a second SIGTERM interrupts one
    # step, and the next steps still run.
    with sigterm_unwinds(), Teardown(leftover_hint=hint) as teardown:
        # Each delete is registered before its create: a create whose answer is lost may still
        # have happened (a missing object is no failure for the delete). Run last in, first out:
        # the StatefulSet and the Service are deleted first (quick), then the head waits until
        # the pods are gone, so their GPUs are free for the next job.
        teardown.push(f"server pods of {servers.name} gone", pods_gone)
        teardown.push(f"deleted Service {namespace}/{servers.name}", delete(core.delete_namespaced_service))
        try:
            core.create_namespaced_service(namespace, service, _request_timeout=API_TIMEOUT_S)
        except failed as exc:
            raise _api_error(f"creating Service {namespace}/{servers.name}", exc) from None
        teardown.push(f"deleted StatefulSet {namespace}/{servers.name}", delete(apps.delete_namespaced_stateful_set))
        try:
            apps.create_namespaced_stateful_set(namespace, statefulset, _request_timeout=API_TIMEOUT_S)
        except failed as exc:
            raise _api_error(f"creating StatefulSet {namespace}/{servers.name}", exc) from None
        (log_dir / "manifests.json").write_text(json.dumps([service, statefulset], indent=2) + "\n")
        try:
            wait_until_healthy(
                [(e["host"], e["port"]) for e in placed],
                startup_timeout_s,
                check=check,
                describe=describe,
                check_every_s=STATUS_EVERY_S,
            )
        except failed as exc:
            raise _api_error(f"reading the pods of {namespace}/{servers.name}", exc) from None
        try:
            where = placement(pods())
        except failed as exc:
            raise _api_error(f"reading the pods of {namespace}/{servers.name}", exc) from None
        node_of = {row["pod"]: row["node"] for row in where}
        placed = [dict(e, node=node_of.get(e["pod"]) or e["node"]) for e in placed]
        record = {
            "launch": "kubernetes",
            "namespace": namespace,
            "statefulset": servers.name,
            "service": servers.name,
            "image": servers.image,
            "model_path": on_claim,
            "placement": where,
        }
        (log_dir / "servers.json").write_text(json.dumps(record, indent=2) + "\n")
        yield placed, record


@register_launcher("kubernetes")
@contextmanager
def launch_kubernetes(
    engine: dict[str, Any], model_path: str, log_dir: str | Path, *, screening: dict | None = None
) -> Iterator[dict[str, Any]]:
    """The system's server pods; yields the engine with the endpoint list naming the pods and
    ``servers``: the image and which pod ran on which node."""
    endpoints = engine["endpoints"]
    with kubernetes_servers(
        endpoints["list"], model_path, engine, log_dir, startup_timeout_s=endpoints.get("startup_timeout_s", 600)
    ) as (placed, record):
        yield dict(engine, endpoints=dict(endpoints, list=placed), servers=record)


# -- preview: the server objects of every launch: kubernetes system (mlperf-repro k8s-render) --
@dataclass
class RenderedServers:
    """The server objects a ``launch: kubernetes`` run job of ``system`` creates for ``benchmark``
    (its model) in ``scenarios`` (whose engines are the same), as they would be created, with a
    fixed preview id in the names. ``scenario_suffix``: the benchmark's runs need several sets
    (scenarios with engine settings of their own), so the file names say which."""

    system: str
    benchmark: str
    manifests: list[dict[str, Any]]
    problems: list[str]
    scenarios: tuple[str, ...] = ()
    scenario_suffix: bool = False

    @property
    def file_stem(self) -> str:
        stem = f"servers-{self.system}-{self.benchmark}"
        if self.scenario_suffix:
            stem += "-" + "-".join(self.scenarios)
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)


def render_servers(configfile: str | Path, profile: str | Path, *, workdir: str | Path = ".") -> list[RenderedServers]:
    """The StatefulSet and headless Service of every launch: kubernetes system and benchmark,
    with the namespace, claim and storage prefix of the profile. ``problems`` lists where the
    config and the profile disagree (the run pod would not see the model where the servers
    read it, or could not create the servers)."""
    from ..config import load_yaml, validate_config
    from ..plan import Plan
    from . import LAUNCHERS

    workdir = Path(workdir).resolve()
    config = validate_config(
        load_yaml(workdir / configfile), workdir / "workflow/schemas/config.schema.yaml", launchers=LAUNCHERS
    )
    settings = load_yaml(workdir / profile / "config.yaml") or {}
    plan = Plan(config)
    volumes = [str(v) for v in settings.get("kubernetes-persistent-volumes") or []]
    prefix = str(settings.get("default-storage-prefix") or "").rstrip("/")
    rendered = []
    for system in plan.systems:
        if not plan.launches_on_kubernetes(system):
            continue
        engine = plan.engine(system)
        k8s = engine["endpoints"]["kubernetes"]
        claim, mount = k8s["model_volume"]["claim"], k8s["model_volume"]["mount_path"].rstrip("/")
        where = f"systems.{system}.engine.endpoints.kubernetes"
        problems = []
        if f"{claim}:{mount}" not in volumes:
            problems.append(
                f"{where}.model_volume: claim {claim} at {mount} is not among the profile's "
                f"kubernetes-persistent-volumes ({', '.join(volumes) or 'none'}), so the run pod does "
                f"not see the model where the server pods read it"
            )
        if not (prefix == mount or prefix.startswith(mount + "/")):
            problems.append(
                f"{where}.model_volume: the profile's default-storage-prefix {prefix or '(unset)'} is not "
                f"below {mount}, so the workflow's files are not on the claim the server pods mount"
            )
        if not settings.get("kubernetes-service-account-name"):
            problems.append(
                "profile: kubernetes-service-account-name is unset; the run pod creates the server pods "
                "and needs a service account with the Role in profiles/kubernetes/rbac.yaml"
            )
        namespace = k8s.get("namespace") or settings.get("kubernetes-namespace") or "default"
        for benchmark in config["systems"][system]["benchmarks"]:
            # A run job starts its servers with its scenario's engine (engine_args and env of
            # the scenario on top of the system's): one set per distinct engine.
            engines: dict[str, tuple[dict[str, Any], list[str]]] = {}
            for scenario in config["systems"][system]["benchmarks"][benchmark]:
                run_engine = plan.run_engine(system, benchmark, scenario)
                key = json.dumps(run_engine, sort_keys=True, default=str)
                engines.setdefault(key, (run_engine, []))[1].append(scenario)
            for run_engine, scenarios in engines.values():
                servers = server_set_from_config(
                    run_engine,
                    name=set_name(preview_run_id(f"{system}/{benchmark}/{'/'.join(scenarios)}")),
                    namespace=namespace,
                    model_path=f"{prefix}/{plan.serving_dir(system, benchmark)}",
                )
                rendered.append(
                    RenderedServers(
                        system,
                        benchmark,
                        server_manifests(servers),
                        list(problems),
                        tuple(scenarios),
                        scenario_suffix=len(engines) > 1,
                    )
                )
    return rendered


def write_server_manifests(sets: list[RenderedServers], out_dir: str | Path) -> list[Path]:
    """One YAML file per object (``servers-<system>-<benchmark>[-<scenarios>]-<kind>.yaml``: the scenarios
    where the benchmark's runs start servers of different settings), added to index.json."""
    import yaml

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    index_path = out_dir / "index.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else []
    paths = []
    for entry in sets:
        for manifest in entry.manifests:
            path = out_dir / f"{entry.file_stem}-{manifest['kind'].lower()}.yaml"
            path.write_text(yaml.safe_dump(manifest, sort_keys=False, width=120))
            paths.append(path)
            index.append(
                {
                    "file": path.name,
                    "kind": manifest["kind"],
                    "system": entry.system,
                    "benchmark": entry.benchmark,
                    "scenarios": list(entry.scenarios),
                    "created_by": "the run jobs of this system (launch: kubernetes), with a random id per run",
                }
            )
    index_path.write_text(json.dumps(index, indent=2) + "\n")
    return paths
