"""Building and verifying an offline bundle (see the package's docstring for its layout)."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..hashing import sha256_file
from . import BUNDLE_FORMAT, MANIFEST
from .wheels import Target, download_wheels, local_target

__all__ = ["build_bundle", "site_needs", "verify_bundle"]

ARTIFACT_KINDS = ("models", "datasets")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{root} is not a bundle: {MANIFEST} is missing (build one with mlperf-repro bundle)") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not readable: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT or not isinstance(data.get("files"), dict):
        raise UserError(f"{path} is not a {BUNDLE_FORMAT} manifest")
    if not isinstance(data.get("parts", {}), dict):
        raise UserError(f"{path}: 'parts' is not an object")
    for rel, entry in data["files"].items():
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or rel != Path(rel).as_posix():
            raise UserError(f"{path}: file {rel!r} is not a path inside the bundle")
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and type(entry.get("bytes")) is int
            and isinstance(entry.get("part"), str)
        ):
            raise UserError(f"{path}: the entry of {rel!r} is not {{sha256, bytes, part}}")
    for part, state in data.get("parts", {}).items():
        if not isinstance(state, dict):
            raise UserError(f"{path}: part {part!r} is not an object")
    data.setdefault("parts", {})
    return data


def _write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    tmp = root / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, root / MANIFEST)


def _record_files(root: Path, where: Path, manifest: dict[str, Any], part: str) -> None:
    """Hash ``where`` (a file, or every file under a folder) into the manifest as ``part``'s
    (kept where size and part are known)."""
    paths = [where] if where.is_file() else sorted(p for p in where.rglob("*") if p.is_file())
    for path in paths:
        rel = path.relative_to(root).as_posix()
        known = manifest["files"].get(rel)
        size = path.stat().st_size
        if not (known and known["bytes"] == size and known["part"] == part):
            manifest["files"][rel] = {"sha256": sha256_file(path), "bytes": size, "part": part}


def _part_done(root: Path, manifest: dict[str, Any], part: str) -> bool:
    state = manifest["parts"].get(part) or {}
    if state.get("status") != "done":
        return False
    files = [(rel, f) for rel, f in manifest["files"].items() if f["part"] == part]
    return all((root / rel).is_file() and (root / rel).stat().st_size == f["bytes"] for rel, f in files)


def _needs_env(config: dict[str, Any], env: str) -> bool:
    """Whether a run of ``config`` uses the environment: Quark's for a tool: quark recipe,
    VBench's for a benchmark scored on VBench dimensions (its rules table's accuracy)."""
    if env == "quark":
        return any(r.get("tool") == "quark" for r in (config.get("quantization") or {}).values())
    if env == "vbench":
        from ..benchmarks import load_round

        rules = load_round(config["round"])
        return any(
            "vbench_dimensions" in rules.benchmark(b["mlperf_benchmark"]).accuracy
            for b in config["benchmarks"].values()
            if b.get("mlperf_benchmark") in rules.benchmark_names
        )
    return True


def lock_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config the bundle's lock resolves: without the models and datasets still TODO:."""
    return {
        **config,
        **{
            kind: {name: e for name, e in (config.get(kind) or {}).items() if not _unpinned(e)}
            for kind in ARTIFACT_KINDS
        },
    }


def _unpinned(entry: dict[str, Any]) -> list[str]:
    """The keys of a models/datasets entry that are still placeholders (config.is_placeholder:
    ``TODO:`` or a made-up commit), which preflight would refuse."""
    from ..config import is_placeholder  # not at the top: `python -m mlperf_repro.bundle` needs none of it

    return [k for k in ("source", "sha256_manifest", "file") if is_placeholder(str(entry.get(k) or ""))]


def build_bundle(
    config: dict[str, Any],
    configfile: str | Path,
    out: str | Path,
    *,
    target: Target | None = None,
    lock: dict[str, Any] | None = None,
    progress: Callable[[str], None] = print,
    workdir: str | Path = ".",
) -> dict[str, Any]:
    """Write (or complete) the bundle of a validated ``config`` in ``out``; return its manifest."""
    from ..lock import write_lock

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    target = target or local_target()
    try:
        manifest = _read_manifest(root)
    except UserError:
        manifest = {"format": BUNDLE_FORMAT, "files": {}, "parts": {}}
    manifest.update(config=Path(configfile).name, target=target.to_dict(), updated=_now())
    manifest.setdefault("created", manifest["updated"])

    # The config and its lock: the inventory of what follows.
    (root / "config").mkdir(exist_ok=True)
    shutil.copyfile(configfile, root / "config" / Path(configfile).name)
    if lock is None:
        # A TODO: entry cannot be resolved (its checksums are not known yet): it is listed as
        # missing below, and the lock holds the rest.
        _, lock = write_lock(
            root / "config" / Path(configfile).name, lock_config(config), workdir=workdir, resolve_image=None
        )
        os.replace(root / "config" / (Path(configfile).stem + ".lock.json"), root / "lock.json")
    else:
        (root / "lock.json").write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    _record_files(root, root / "config", manifest, "config")
    _record_files(root, root / "lock.json", manifest, "config")
    manifest["parts"]["config"] = {"status": "done"}
    _write_manifest(root, manifest)

    for env, packages in (lock.get("packages") or {}).items():
        part = f"wheels/{env}"
        if not _needs_env(config, env):
            continue
        if not isinstance(packages, dict):
            manifest["parts"][part] = {
                "status": "missing",
                "what": f"the {env} environment is not built here ({packages})",
                "command": f"./install.sh --{env} && mlperf-repro bundle --configfile {Path(configfile).name} -o {root}",
            }
            continue
        if _part_done(root, manifest, part):
            progress(f"bundle: {part}: complete, kept")
            continue
        pins = [f"{name}=={version}" for name, version in sorted(packages.items()) if name != "mlperf-repro"]
        progress(f"bundle: {part}: {len(pins)} packages")
        result = download_wheels(pins, root / part, target, lambda line, p=part: progress(f"bundle: {p}: {line}"))
        _record_files(root, root / part, manifest, part)
        manifest["parts"][part] = {"status": "done" if not result.missing else "missing", "built": result.built}
        if result.missing:
            manifest["parts"][part].update(
                what=f"no wheel for {', '.join(sorted(result.missing))}",
                command=f"pip download --no-deps {' '.join(sorted(result.missing))} -d {root / part}",
            )
        _write_manifest(root, manifest)

    _project_wheel(root, manifest, progress)
    _artifacts(config, root, manifest, progress, Path(workdir))
    _images(config, root, manifest, progress)
    manifest["site_needs"] = site_needs(config, target)
    manifest["bytes"] = sum(f["bytes"] for f in manifest["files"].values())
    _write_manifest(root, manifest)
    return manifest


def _project_wheel(root: Path, manifest: dict[str, Any], progress: Callable[[str], None]) -> None:
    import sys

    project = Path(__file__).resolve().parents[3]
    part = "wheels/project"
    dest = root / part
    if dest.exists():
        shutil.rmtree(dest)  # always this checkout's code: cheap to rebuild
    dest.mkdir(parents=True)
    # setuptools builds in the source folder's build/: two bundles built at once from one
    # checkout (parallel tests, two users) would delete each other's files there, and the
    # checkout would keep the leftovers. A private copy of what the wheel is made of avoids both.
    with tempfile.TemporaryDirectory(prefix="mlperf-repro-wheel-") as scratch:
        source = Path(scratch) / "source"
        source.mkdir()
        shutil.copy2(project / "pyproject.toml", source / "pyproject.toml")
        shutil.copytree(
            project / "src",
            source / "src",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-q",
                "-w",
                str(dest),
                str(source),
            ],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise UserError(f"building this project's wheel failed: {done.stderr.strip()[-500:]}")
    manifest["files"] = {k: v for k, v in manifest["files"].items() if v["part"] != part}
    _record_files(root, dest, manifest, part)
    manifest["parts"][part] = {"status": "done"}
    progress(f"bundle: {part}: {', '.join(p.name for p in dest.iterdir())}")
    _write_manifest(root, manifest)


def _artifacts(
    config: dict[str, Any], root: Path, manifest: dict[str, Any], progress: Callable[[str], None], workdir: Path
) -> None:
    from ..fetch.entries import _fetch

    for kind in ARTIFACT_KINDS:
        for name, entry in sorted((config.get(kind) or {}).items()):
            part = f"artifacts/{kind}/{name}"
            source = entry["source"]
            if source.startswith("builtin:"):
                manifest["parts"][part] = {"status": "built", "what": f"{source}: built by the project at run time"}
                continue
            unpinned = _unpinned(entry)
            if unpinned:
                manifest["parts"][part] = {
                    "status": "missing",
                    "what": f"{kind}.{name}.{unpinned[0]} is a placeholder (TODO: or a made-up digest)",
                    "command": f"fill in {kind}.{name}, then run mlperf-repro bundle again with -o {root}",
                }
                continue
            if _part_done(root, manifest, part):
                progress(f"bundle: {part}: complete, kept")
                continue
            if source.startswith("file://") and not source.startswith("file:///"):
                entry = {**entry, "source": "file://" + str((workdir / source[len("file://") :]).resolve())}
            progress(f"bundle: {part}: from {source}")
            try:
                _fetch(entry, root / part)
            except UserError as exc:
                manifest["parts"][part] = {
                    "status": "missing",
                    "what": str(exc).splitlines()[0],
                    "command": f"mlperf-repro bundle --configfile {manifest['config']} -o {root} on a machine "
                    f"that reaches {source}",
                }
                _write_manifest(root, manifest)
                continue
            _record_files(root, root / part, manifest, part)
            manifest["parts"][part] = {"status": "done", "source": source}
            _write_manifest(root, manifest)


def skopeo_copy(image: str, archive: str | Path) -> list[str]:
    """The command that copies ``image`` (``docker://repo@sha256:...``) into the OCI archive
    ``archive`` keeping its digest: ``--preserve-digests`` stores the manifest the reference pins
    as it is (a Docker schema 2 image is not converted to OCI, which would change its digest),
    ``--all`` keeps a multi-platform index and every image it lists (skopeo would otherwise
    pick this machine's platform and the index digest would be lost). skopeo reads the usual
    containers configuration (registries.conf: a registry served over plain http is marked
    ``insecure = true`` there; auth.json for credentials); a ``CONTAINERS_REGISTRIES_CONF``
    file is passed as ``--registries-conf``, as skopeo 1.9 (Debian 12) does not read that
    variable itself."""
    conf = os.environ.get("CONTAINERS_REGISTRIES_CONF")
    return [
        "skopeo",
        *(["--registries-conf", conf] if conf else []),
        "copy",
        "--all",
        "--preserve-digests",
        f"docker://{image.split('://', 1)[-1]}",
        f"oci-archive:{archive}",
    ]


def oci_archive_digest(archive: str | Path) -> str:
    """The digest of the manifest (or index) an OCI archive holds: its ``index.json``'s one
    entry, read with tarfile (headers only: an image of many gigabytes is not extracted)."""
    import tarfile

    try:
        with tarfile.open(archive, "r:") as tar:
            member = tar.getmember("index.json")
            handle = tar.extractfile(member)
            index = json.loads(handle.read()) if handle else None
    except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
        raise UserError(f"{archive} is not an OCI archive: {exc}") from None
    manifests = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(manifests, list) or len(manifests) != 1 or not isinstance(manifests[0], dict):
        raise UserError(f"{archive}: index.json does not list exactly one image")
    return str(manifests[0].get("digest"))


def _images(config: dict[str, Any], root: Path, manifest: dict[str, Any], progress: Callable[[str], None]) -> None:
    import shlex

    from . import image_archive

    skopeo = shutil.which("skopeo")
    for system, entry in sorted((config.get("systems") or {}).items()):
        image = (entry.get("software") or {}).get("container")
        if not image:
            continue
        part = f"images/{system}"
        archive = root / image_archive(system)
        command = shlex.join(skopeo_copy(image, archive))
        if _unpinned({"source": image}):
            manifest["parts"][part] = {
                "status": "missing",
                "what": f"systems.{system} image is a placeholder (TODO: or a made-up digest)",
            }
            continue
        if not image.startswith("docker://"):
            manifest["parts"][part] = {
                "status": "missing",
                "what": f"{image}: skopeo copies docker:// images only; pull this one into the site's own "
                "apptainer cache or library",
            }
            continue
        if skopeo is None:
            manifest["parts"][part] = {
                "status": "missing",
                "what": f"{image} (skopeo is not installed)",
                "command": command,
            }
            continue
        if _part_done(root, manifest, part) and manifest["parts"][part].get("image") == image:
            progress(f"bundle: {part}: complete, kept")
            continue
        manifest["files"] = {k: v for k, v in manifest["files"].items() if v["part"] != part}
        archive.parent.mkdir(exist_ok=True)
        partial = archive.with_name(archive.name + ".partial")
        partial.unlink(missing_ok=True)
        progress(f"bundle: {part}: {image}")
        done = subprocess.run([skopeo, *skopeo_copy(image, partial)[1:]], capture_output=True, text=True)
        digest = pinned = image.rsplit("@", 1)[1]
        if done.returncode == 0:
            try:
                digest = oci_archive_digest(partial)
            except UserError as exc:
                digest = str(exc)
        if done.returncode != 0 or digest != pinned:
            partial.unlink(missing_ok=True)
            what = done.stderr.strip()[-300:] if done.returncode != 0 else f"the archive holds {digest}, not {pinned}"
            manifest["parts"][part] = {"status": "missing", "what": what, "command": command}
            _write_manifest(root, manifest)
            continue
        os.replace(partial, archive)
        _record_files(root, archive, manifest, part)
        manifest["parts"][part] = {"status": "done", "image": image, "digest": digest}
        _write_manifest(root, manifest)


def site_needs(config: dict[str, Any], target: Target) -> list[str]:
    """What a site needs besides the bundle (built for ``target``) to run ``config``."""
    needs = [f"Linux with Python {target.python} (the bundle's target) and bash"]
    systems = (config.get("systems") or {}).values()
    if any(
        "accelerator_model_name" in (s.get("description") or {})
        and "CPU only" not in str((s.get("description") or {}).get("accelerator_model_name"))
        for s in systems
    ):
        needs.append("the accelerators' drivers and runtime (ROCm or CUDA) on the run nodes")
    if any((s.get("software") or {}).get("container") for s in systems):
        needs.append("a container runtime (apptainer) on the run nodes")
    launches = {str(((s.get("engine") or {}).get("endpoints") or {}).get("launch", "")) for s in systems}
    if any(launch.startswith("slurm") for launch in launches):
        needs.append("SLURM (sbatch, srun) for the servers' allocation")
    if "kubernetes" in launches:
        needs.append("a Kubernetes API server and the cluster's image pull access")
    needs.extend(kubernetes_image_needs(config))
    needs.append("bubblewrap and libseccomp for the code sandbox (Debian packages; docs/sandbox.md)")
    return needs


def kubernetes_image_needs(config: dict[str, Any]) -> list[str]:
    """For each ``launch: kubernetes`` system with an image: the kubelet pulls the server pods'
    image from a registry and cannot read the bundle's archive, so the site loads it into its
    own registry (the digest is kept: ``--preserve-digests``) and names it there."""
    from . import image_archive

    needs = []
    for system, entry in sorted((config.get("systems") or {}).items()):
        endpoints = (entry.get("engine") or {}).get("endpoints") or {}
        image = (entry.get("software") or {}).get("container")
        if endpoints.get("launch") != "kubernetes" or not image or "@" not in image:
            continue
        repo, digest = image.split("://", 1)[-1].rsplit("@", 1)
        path = repo.split("/", 1)[1] if "." in repo.split("/", 1)[0] or ":" in repo.split("/", 1)[0] else repo
        path = path.split(":", 1)[0]  # a tag beside the digest is not kept
        needs.append(
            f"systems.{system} (launch: kubernetes): its server pods pull from a registry, not the bundle: in the "
            f"bundle's folder run `skopeo copy --all --preserve-digests oci-archive:{image_archive(system)} "
            f"docker://SITE_REGISTRY/{path}:bundle` (SITE_REGISTRY: the cluster's registry) and set "
            f"systems.{system}.engine.endpoints.kubernetes.image: docker://SITE_REGISTRY/{path}@{digest}"
        )
    return needs


def verify_bundle(root: str | Path) -> tuple[dict[str, Any], list[str]]:
    """``(manifest, problems)``: every file re-hashed against the manifest, and the parts not complete."""
    root = Path(root)
    manifest = _read_manifest(root)
    problems: list[str] = []
    for rel, entry in sorted(manifest["files"].items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: missing from the bundle {root}")
        elif path.stat().st_size != entry["bytes"] or sha256_file(path) != entry["sha256"]:
            problems.append(f"{rel}: its sha256 differs from the bundle's manifest (damaged or changed)")
    for part, state in sorted(manifest["parts"].items()):
        if state.get("status") == "missing":
            problems.append(
                f"{part}: not in the bundle: {state.get('what')}"
                + (f"; complete it with: {state['command']}" if state.get("command") else "")
            )
    return manifest, problems
