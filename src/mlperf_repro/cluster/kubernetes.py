"""Kubernetes job specs for the workflow's DAG, rendered and validated without a cluster.

``render`` plans the workflow with Snakemake's own command line and a Kubernetes profile
(``profiles/kubernetes``: resources, threads, storage and plugin settings exactly as a real
run would see them), then lets the installed executor plugin build the batch/v1 Job of
every job it would submit, with its API client replaced by a recorder (see
``preview_child``). So the manifests are the plugin's, not a re-implementation: container
image, command, cpu/memory/GPU requests and limits (``gpu`` with ``gpu_manufacturer`` ->
``amd.com/gpu`` or ``nvidia.com/gpu``), node selector (``machine_type`` ->
``node.kubernetes.io/instance-type``), tolerations and volumes. Local rules stay in the
main Snakemake process and get no Job.

``validate_manifest`` checks a manifest against the Kubernetes OpenAPI schema (bundled by
the ``kubernetes-validate`` package, offline) and against the API server's own rules that
the schema cannot express (quantities well formed and not negative, requests within limits,
GPUs whole and requested as limits, names and labels well formed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError

# Schema version the manifests are checked against (the API of the kubernetes client the
# plugin pins, <33).
KUBERNETES_VERSION = "1.32"
# Snakemake plans the whole DAG in the child; a big config takes tens of seconds.
RENDER_TIMEOUT_S = 600

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_KEY_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Resources the kubelet itself accounts (everything else with a domain is an extended resource,
# e.g. amd.com/gpu, which cannot be overcommitted).
NATIVE_RESOURCES = {"cpu", "memory", "ephemeral-storage", "storage"}
GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu")


@dataclass
class RenderedJob:
    rule: str
    wildcards: dict[str, str]
    threads: int
    resources: dict[str, Any]
    unknown_resources: list[str]
    apptainer_image: str | None
    manifest: dict[str, Any]

    @property
    def pod_spec(self) -> dict[str, Any]:
        return self.manifest["spec"]["template"]["spec"]

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.pod_spec["containers"]
        return container

    def gpu_limits(self) -> dict[str, str]:
        limits = (self.container.get("resources") or {}).get("limits") or {}
        return {k: v for k, v in limits.items() if k in GPU_RESOURCES}

    @property
    def file_stem(self) -> str:
        parts = [self.rule, *(str(v) for v in self.wildcards.values())]
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def snakemake_arguments(configfile: str | Path, profile: str | Path, snakefile: str | Path = "Snakefile") -> list[str]:
    return ["--snakefile", str(snakefile), "--profile", str(profile), "--configfile", str(configfile)]


def render(
    configfile: str | Path,
    profile: str | Path,
    *,
    workdir: str | Path = ".",
    snakefile: str | Path = "Snakefile",
    timeout_s: float = RENDER_TIMEOUT_S,
) -> list[RenderedJob]:
    """Every job the Kubernetes executor would submit for this config and profile.

    Paths are relative to ``workdir`` (the workflow's root, where a run would start: the
    plugin ships the sources from there and the config must lie below it)."""
    workdir = Path(workdir).resolve()
    for what, path in (("config file", configfile), ("profile", profile), ("Snakefile", snakefile)):
        if not (workdir / path).exists():
            raise UserError(f"{what} {path} does not exist (relative to {workdir})")
    with tempfile.TemporaryDirectory(prefix="k8s-preview-") as scratch:
        out = Path(scratch) / "jobs.json"
        command = [
            sys.executable,
            "-m",
            "mlperf_repro.cluster.preview_child",
            str(out),
            "--",
            *snakemake_arguments(configfile, profile, snakefile),
        ]
        try:
            result = subprocess.run(
                command,
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        except subprocess.TimeoutExpired:
            raise UserError(f"planning the workflow for Kubernetes took longer than {timeout_s:.0f} s") from None
        if result.returncode != 0:
            tail = (result.stdout[-2000:] + "\n" + result.stderr[-4000:]).strip()
            raise UserError(f"planning the workflow with profile {profile} failed:\n{tail}")
        records = json.loads(out.read_text())["jobs"]
    return [RenderedJob(**record) for record in records]


def _quantity(value: Any) -> Any:
    from kubernetes.utils import parse_quantity

    return parse_quantity(value)


def _resource_problems(where: str, resources: dict[str, Any]) -> list[str]:
    problems = []
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    parsed: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    for kind, values in (("requests", requests), ("limits", limits)):
        for name, value in values.items():
            try:
                quantity = _quantity(value)
            except (ValueError, TypeError):
                problems.append(f"{where}.resources.{kind}.{name}: {value!r} is not a Kubernetes quantity")
                continue
            if quantity < 0:
                problems.append(f"{where}.resources.{kind}.{name}: {value!r} must not be negative")
            parsed[kind][name] = quantity
    for name, request in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None and request > limit:
            problems.append(f"{where}.resources.requests.{name}: {requests[name]!r} exceeds the limit {limits[name]!r}")
    for name in set(parsed["requests"]) | set(parsed["limits"]):
        if name in NATIVE_RESOURCES or "/" not in name or name.startswith(("kubernetes.io/", "hugepages-")):
            continue
        # Extended resources (GPUs): whole units, no overcommit, so a limit equal to the request.
        for kind in ("requests", "limits"):
            value = parsed[kind].get(name)
            if value is not None and value != int(value):
                problems.append(f"{where}.resources.{kind}.{name}: {name} must be a whole number")
        if name not in parsed["limits"]:
            problems.append(
                f"{where}.resources.limits.{name}: a request for {name} needs a limit (it cannot be overcommitted)"
            )
        elif name in parsed["requests"] and parsed["requests"][name] != parsed["limits"][name]:
            problems.append(f"{where}.resources: {name} request and limit must be equal")
    return problems


def _label_problems(where: str, labels: dict[str, Any]) -> list[str]:
    problems = []
    for key, value in labels.items():
        name = key.rsplit("/", 1)[-1]
        if not (LABEL_KEY_NAME.match(name) and len(name) <= 63):
            problems.append(f"{where}: key {key!r} is not a valid label key")
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            problems.append(f"{where}.{key}: {value!r} is not a valid label value")
    return problems


def validate_manifest(manifest: dict[str, Any], kubernetes_version: str = KUBERNETES_VERSION) -> list[str]:
    """Why the API server would refuse this manifest; an empty list when it is valid."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path) or "(manifest)"
        return [f"{where}: {exc.message}"]
    problems: list[str] = []
    name = (manifest.get("metadata") or {}).get("name", "")
    # A Job's name is also the job-name label of its pods: a DNS label of at most 63 characters.
    if not (DNS_LABEL.match(name) and len(name) <= 63):
        problems.append(f"metadata.name: {name!r} is not a DNS label of at most 63 characters")
    problems += _label_problems("metadata.labels", (manifest.get("metadata") or {}).get("labels") or {})
    kind = manifest.get("kind")
    if kind == "Service":
        return problems + _service_problems(manifest)
    if kind not in ("Job", "StatefulSet"):
        return problems
    spec = manifest.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    if kind == "Job" and pod.get("restartPolicy") not in ("Never", "OnFailure"):
        problems.append(
            f"spec.template.spec.restartPolicy: a Job's pods need Never or OnFailure, got {pod.get('restartPolicy')!r}"
        )
    if kind == "StatefulSet":
        problems += _statefulset_problems(manifest)
    problems += _label_problems("spec.template.spec.nodeSelector", pod.get("nodeSelector") or {})
    volumes = {v.get("name") for v in pod.get("volumes") or []}
    for i, container in enumerate(pod.get("containers") or []):
        where = f"spec.template.spec.containers[{i}]"
        if not DNS_LABEL.match(container.get("name", "")):
            problems.append(f"{where}.name: {container.get('name')!r} is not a DNS label")
        problems += _resource_problems(where, container.get("resources") or {})
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") not in volumes:
                problems.append(f"{where}.volumeMounts: {mount.get('name')!r} is not a volume of the pod")
    problems += _port_problems(pod)
    return problems


# A StatefulSet's pods carry controller-revision-hash=<name>-<10 characters>, a label value.
MAX_STATEFULSET_NAME = 52


def _statefulset_problems(manifest: dict[str, Any]) -> list[str]:
    problems = []
    name = manifest["metadata"].get("name", "")
    if len(name) > MAX_STATEFULSET_NAME:
        problems.append(
            f"metadata.name: {name!r} is longer than {MAX_STATEFULSET_NAME} characters (a StatefulSet's "
            f"pods get a label value <name>-<10 characters>)"
        )
    spec = manifest["spec"]
    template = spec.get("template") or {}
    pod = template.get("spec") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        problems.append(f"spec.selector: {selector} does not select the template's labels {labels}")
    if pod.get("restartPolicy", "Always") != "Always":
        problems.append(
            f"spec.template.spec.restartPolicy: a StatefulSet's pods need Always, got {pod.get('restartPolicy')!r}"
        )
    return problems


def _service_problems(manifest: dict[str, Any]) -> list[str]:
    spec = manifest.get("spec") or {}
    names = [p.get("name") for p in spec.get("ports") or []]
    problems = []
    if len(spec.get("ports") or []) > 1 and (None in names or len(set(names)) != len(names)):
        problems.append("spec.ports: a Service with several ports needs a distinct name for each")
    return problems


def _port_problems(pod: dict[str, Any]) -> list[str]:
    """Container ports of one pod share its network namespace: no port twice, names unique (and
    IANA service names: at most 15 characters)."""
    seen: dict[int, str] = {}
    names: set[str] = set()
    problems = []
    for container in pod.get("containers") or []:
        for port in container.get("ports") or []:
            number, name = port.get("containerPort"), port.get("name")
            if number in seen:
                problems.append(f"containers {seen[number]!r} and {container.get('name')!r} both use port {number}")
            seen[number] = container.get("name")
            if name is not None:
                if name in names:
                    problems.append(f"port name {name!r} is used twice in the pod")
                if len(name) > 15:
                    problems.append(f"port name {name!r} is longer than 15 characters")
                names.add(name)
    return problems


def write_manifests(jobs: list[RenderedJob], out_dir: str | Path) -> list[Path]:
    """One YAML manifest per job (numbered in DAG order) and index.json: which file is which
    job, with its rule, wildcards, threads, resources and the apptainer image run inside."""
    import yaml

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths, index = [], []
    width = len(str(len(jobs)))
    for number, job in enumerate(jobs, 1):
        path = out_dir / f"{number:0{width}d}-{job.file_stem}.yaml"
        path.write_text(yaml.safe_dump(job.manifest, sort_keys=False, width=120))
        paths.append(path)
        index.append(
            {
                "file": path.name,
                "rule": job.rule,
                "wildcards": job.wildcards,
                "threads": job.threads,
                "resources": job.resources,
                "unknown_until_run": job.unknown_resources,
                "apptainer_image": job.apptainer_image,
            }
        )
    (out_dir / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return paths
