"""Child process of :mod:`mlperf_repro.cluster.kubernetes`: plan the workflow with Snakemake's
own command line (profile, config, resources exactly as a real run would see them), then let
the installed Kubernetes executor plugin build the Job body of every job it would submit,
with its API client replaced by a recorder. Nothing is sent to a cluster.

    python -m mlperf_repro.cluster.preview_child OUT_JSON -- <snakemake arguments>

Writes OUT_JSON: {"jobs": [{"rule", "wildcards", "threads", "resources", "apptainer_image",
"manifest"}, ...]}. Runs in its own process because Snakemake changes directory, logging and
global state while it plans.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any


class _RecordingBatchApi:
    """Stands in for kubernetes.client.BatchV1Api: keeps the Job bodies instead of sending them."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    def create_namespaced_job(self, namespace: str, body: Any) -> Any:
        self.bodies.append((namespace, body))
        return body


def _preview_executor_class():
    from snakemake_executor_plugin_kubernetes import Executor, common_settings

    class PreviewExecutor(Executor):
        """The plugin's executor minus its cluster connection: run_job and format_job_exec are
        the plugin's and the interface's own code."""

        def __init__(self, workflow: Any, settings: Any, container_image: str, logger: Any) -> None:
            import os

            self.workflow = workflow
            self.logger = logger
            self.k8s_cpu_scalar = settings.cpu_scalar
            self.k8s_service_account_name = settings.service_account_name
            self.namespace = settings.namespace
            self.privileged = settings.privileged
            self.persistent_volumes = settings.persistent_volumes
            self.container_image = container_image
            # The plugin names jobs after a random per-run id; a fixed one keeps previews comparable.
            self.run_namespace = "mlperf-repro-preview"
            self.secret_envvars = {}
            self.lock = threading.Lock()
            self.batchapi = _RecordingBatchApi()
            self.snakefile = os.path.relpath(workflow.main_snakefile)
            self._tmpdir = None

        @property
        def common_settings(self):
            return common_settings

        def report_job_submission(self, job_info: Any, register_job: bool = True) -> None:
            pass

    return PreviewExecutor


class _KnownResources:
    """A job whose resources that a dry run cannot know yet (Snakemake's "<TBD>", e.g. disk_mb
    from the size of inputs not yet made) are left out, as if the profile had not set them."""

    def __init__(self, job: Any) -> None:
        self._job = job
        self.resources = {k: v for k, v in dict(job.resources).items() if type(v).__name__ != "TBDString"}
        self.unknown_resources = sorted(set(dict(job.resources)) - set(self.resources))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._job, name)


def jobs_of_dry_run(argv: list[str], submit_host: bool = True) -> list[Any]:
    """Every job of the plan, from Snakemake's dry run with these arguments (in this process:
    Snakemake changes its global state). ``submit_host``: plan as the submit host of a cluster
    run, not as a local run."""
    import snakemake.jobs
    from snakemake.cli import main as snakemake_main
    from snakemake.deployment import singularity

    jobs: list[Any] = []
    log_info = snakemake.jobs.Job.log_info

    def capture(self, *args, **kwargs):
        jobs.append(self)
        return log_info(self, *args, **kwargs)

    snakemake.jobs.Job.log_info = capture
    # Rendering neither pulls nor runs images, so apptainer need not be installed here.
    singularity.Singularity.check = lambda self: None
    # Rules that size themselves for a cluster ask workflow.non_local_exec, which a dry run
    # answers as a local run would; answer as the submit host of the Kubernetes run.
    if submit_host:
        from snakemake.workflow import Workflow

        Workflow.non_local_exec = property(lambda self: True)
    try:
        snakemake_main([*argv, "--dry-run"])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise SystemExit(f"snakemake --dry-run failed (exit {exc.code}); see the messages above") from None
    return jobs


def _prepare_remote_view(workflow: Any) -> None:
    """What Snakemake's API does before a run with this plugin (no shared file system, sources
    shipped as an archive through the default storage), minus uploading the archive."""
    from snakemake.workflow import SourceArchiveInfo

    workflow.storage_settings.shared_fs_usage = frozenset()
    workflow.remote_execution_settings.job_deploy_sources = True
    prefix = workflow.storage_settings.default_storage_prefix
    if not workflow.storage_settings.default_storage_provider or prefix is None:
        raise SystemExit(
            "the Kubernetes profile must set default-storage-provider and default-storage-prefix "
            "(the plugin's pods share no file system with this host)"
        )
    with tempfile.NamedTemporaryFile(suffix="snakemake-sources.tar.xz") as archive:
        workflow.write_source_archive(Path(archive.name))
        checksum = hashlib.sha256(Path(archive.name).read_bytes()).hexdigest()
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    workflow._source_archive = SourceArchiveInfo(f"{prefix}snakemake-workflow-sources.{checksum}.tar.xz", checksum)


def main(argv: list[str]) -> int:
    out_path, separator, *smk_args = argv
    assert separator == "--", "usage: preview_child OUT_JSON -- <snakemake arguments>"
    from kubernetes.client import ApiClient
    from snakemake.cli import parse_args
    from snakemake.logging import logger
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    _, args = parse_args(smk_args)
    if args.executor != "kubernetes":
        raise SystemExit(
            f"the profile selects executor {args.executor!r}; a Kubernetes preview needs 'executor: kubernetes'"
        )
    settings = ExecutorPluginRegistry().get_plugin("kubernetes").get_settings(args)
    jobs = jobs_of_dry_run(smk_args)
    records = []
    if jobs:
        workflow = jobs[0].dag.workflow
        _prepare_remote_view(workflow)
        executor = _preview_executor_class()(workflow, settings, args.container_image, logger)
        serialize = ApiClient().sanitize_for_serialization
        for job in jobs:
            # Local rules (and rules with nothing to run) stay in the main Snakemake process.
            if job.rule.name in workflow._localrules or job.rule.norun:
                continue
            view = _KnownResources(job)
            executor.run_job(view)
            namespace, body = executor.batchapi.bodies[-1]
            manifest = {"apiVersion": "batch/v1", "kind": "Job", **serialize(body)}
            manifest["metadata"]["namespace"] = namespace
            records.append(
                {
                    "rule": job.rule.name,
                    "wildcards": dict(job.wildcards_dict),
                    "threads": job.threads,
                    "resources": view.resources,
                    "unknown_resources": view.unknown_resources,
                    "apptainer_image": job.container_img_url,
                    "manifest": manifest,
                }
            )
    Path(out_path).write_text(json.dumps({"jobs": records}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
