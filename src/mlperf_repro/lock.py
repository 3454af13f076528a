"""The lock file: what one config resolves to in this environment, written beside the config
(``my.yaml`` -> ``my.lock.json``) by ``mlperf-repro lock``, and checked by the workflow before
any run.

A lock holds each model's and dataset's checksum manifest hash (builtin sources: the hash of
their kind and parameters), each system's container reference and digest, the quantization
recipes with the versions of the tools that apply them, the installed LoadGen and the round's
seeds, and the package set of every environment (the workflow's own, and Quark's and VBench's
when they are built). Same inputs, same bytes: keys are sorted and the one timestamp,
``created``, is kept when nothing else changed (and never compared).

The workflow resolves the same things at its start (:func:`check_environment`, no network)
and stops on any difference (:func:`lock_differences`) unless ``lock_override`` gives a reason;
the accepted differences and the reason then go into each run's provenance
(:func:`mlperf_repro.provenance.lock_record`).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from .benchmarks import load_round
from .errors import UserError
from .fetch import read_manifest, redact_url
from .fetch._manifest import format_manifest, normalize_hashes
from .hashing import sha256_bytes
from .provenance import lock_record

LOCK_FORMAT = "mlperf-repro lock 1"
LOCK_SUFFIX = ".lock.json"
ABSENT = "absent"
# Keys that describe the lock rather than the environment: never compared.
NOT_COMPARED = ("created", "config")
# The registry's answer for a container: the check at workflow start never asks a registry,
# so it compares the configured reference and digest only.
NOT_COMPARED_LEAVES = ("resolved",)
SKOPEO_TIMEOUT_S = 60


def lock_path(configfile: str | Path) -> Path:
    """``my.yaml`` -> ``my.lock.json`` in the same folder."""
    configfile = Path(configfile)
    return configfile.with_name(configfile.stem + LOCK_SUFFIX)


def canonical_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


# --- what a config resolves to -------------------------------------------------------------


def artifact_identity(entry: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """A models/datasets entry's identity: its source (secrets redacted) and the sha256 of its
    expected checksums, written as the acquire stage writes manifest.sha256 (so it equals the
    acquired folder's ACQUIRED.json ``manifest_sha256``, whatever form the checksums take);
    a builtin source: the hash of its kind and parameters."""
    source = entry["source"]
    if source.startswith("builtin:"):
        params = {"kind": source, "builtin": entry.get("builtin") or {}}
        return {"source": source, "builtin_sha256": sha256_bytes(canonical_json(params).encode())}
    shown = redact_url(source) if source.startswith(("https://", "http://")) else source
    if entry.get("sha256"):
        expected = normalize_hashes(entry["sha256"], "sha256 checksums")
        how = "sha256 map"
    elif entry.get("sha256_manifest"):
        manifest = Path(entry["sha256_manifest"])
        expected = read_manifest(manifest if manifest.is_absolute() else workdir / manifest)
        how = f"sha256_manifest {entry['sha256_manifest']}"
    else:
        return {"source": shown, "checksums": "none (allow_unverified: trust on first use)"}
    return {
        "source": shown,
        "checksums": how,
        "files": len(expected),
        "manifest_sha256": sha256_bytes(format_manifest(expected).encode()),
    }


def resolve_with_skopeo(image: str) -> str:
    """The digest a registry serves for ``image`` (``docker://repo@sha256:...``): the sha256 of
    the manifest ``skopeo inspect --raw`` reads, or ``not resolved: <why>``."""
    if not image.startswith("docker://"):
        return f"not resolved: skopeo reads docker:// references, not {image.split('://', 1)[0]}://"
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        return "not resolved: skopeo is not on PATH"
    try:
        done = subprocess.run(
            [skopeo, "inspect", "--raw", image], capture_output=True, timeout=SKOPEO_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"not resolved: skopeo: {exc}"
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or [f"exit {done.returncode}"]
        return f"not resolved: skopeo: {lines[-1]}"
    return "sha256:" + sha256_bytes(done.stdout)


def container_identity(image: str | None, resolve: Callable[[str], str] | None) -> dict[str, Any] | None:
    """The configured reference and its pinned digest, and with ``resolve`` the registry's answer."""
    if not image:
        return None
    digest = image.rsplit("@", 1)[1] if "@" in image else None
    if resolve is None:
        resolved = "not resolved: offline"
    else:
        resolved = resolve(image)
    return {"image": image, "digest": digest, "resolved": resolved}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages(site_packages: Iterable[str | Path] | None = None) -> dict[str, str]:
    """name -> version of every distribution on ``site_packages`` (default: this process's
    sys.path); the first of a name wins, as ``importlib.metadata.version`` picks it."""
    found = metadata.distributions(path=[str(p) for p in site_packages]) if site_packages else metadata.distributions()
    packages: dict[str, str] = {}
    for dist in found:
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            packages.setdefault(_normalized(name), dist.version)
    return dict(sorted(packages.items()))


def env_packages(env_root: Path) -> dict[str, str] | str:
    """The packages of another virtual environment, read from its site-packages' metadata
    (no interpreter started); ``absent`` when it is not built."""
    if not (env_root / "bin" / "python").exists():
        return ABSENT
    site = sorted(env_root.glob("lib/python3*/site-packages"))
    if not site:
        return f"{ABSENT}: no lib/python3*/site-packages in {env_root}"
    return installed_packages(site)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ABSENT


def quark_env_root() -> Path:
    from .quant.quark_tool import quark_env

    return quark_env()


def vbench_env_root(config: dict[str, Any]) -> Path:
    """VBench's environment: the first text-to-video benchmark's ``vbench.python``, else the default."""
    from .accuracy.vbench import resolve_setup

    configured = [b["vbench"] for b in (config.get("benchmarks") or {}).values() if (b.get("vbench") or {})]
    python = resolve_setup(configured[0] if configured else None)["python"]
    return Path(python).parent.parent


def environment_packages(
    config: dict[str, Any], quark_env: Path | None = None, vbench_env: Path | None = None
) -> dict[str, dict[str, str] | str]:
    """The package set of each environment a run of ``config`` may use: the workflow's own
    (this process's), Quark's and VBench's (:func:`env_packages`: a reason where not built)."""
    return {
        "workflow": installed_packages(),
        "quark": env_packages(quark_env or quark_env_root()),
        "vbench": env_packages(vbench_env or vbench_env_root(config)),
    }


def resolve(
    config: dict[str, Any],
    *,
    workdir: str | Path = ".",
    resolve_image: Callable[[str], str] | None = None,
    quark_env: Path | None = None,
    vbench_env: Path | None = None,
) -> dict[str, Any]:
    """Everything a lock holds, for a validated ``config`` in this environment (no ``created``).
    ``resolve_image``: asks a registry for a container's digest (None: nothing is asked)."""
    workdir = Path(workdir)
    rules = load_round(config["round"])
    packages = environment_packages(config, quark_env, vbench_env)
    quark, workflow = packages["quark"], packages["workflow"]
    artifacts = {
        kind: {name: artifact_identity(entry, workdir) for name, entry in (config.get(kind) or {}).items()}
        for kind in ("models", "datasets")
    }
    return {
        "format": LOCK_FORMAT,
        "round": config["round"],
        "artifacts": artifacts,
        "containers": {
            name: container_identity((system.get("software") or {}).get("container"), resolve_image)
            for name, system in (config.get("systems") or {}).items()
        },
        "quantization": {
            "recipes": config.get("quantization") or {},
            "tools": {
                "amd-quark": quark.get("amd-quark", ABSENT) if isinstance(quark, dict) else ABSENT,
                "torch": workflow.get("torch", ABSENT),
                "transformers": workflow.get("transformers", ABSENT),
            },
        },
        "loadgen": {"installed": _version("mlcommons-loadgen"), "seeds": rules.seeds},
        "packages": packages,
    }


# --- the lock file -------------------------------------------------------------------------


def _created() -> str:
    # SOURCE_DATE_EPOCH: reproducible builds' convention for a fixed timestamp.
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = (
        datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
        if epoch and epoch.isdigit()
        else datetime.datetime.now(datetime.UTC)
    )
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def without_metadata(lock: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in lock.items() if k not in NOT_COMPARED}


def write_lock(
    configfile: str | Path,
    config: dict[str, Any],
    *,
    workdir: str | Path = ".",
    resolve_image: Callable[[str], str] | None = resolve_with_skopeo,
    **envs: Path,
) -> tuple[Path, dict[str, Any]]:
    """Resolve the validated ``config`` of ``configfile`` and write its lock beside it. A lock
    whose content is unchanged keeps its ``created``, so the file keeps its bytes."""
    path = lock_path(configfile)
    lock = {"config": Path(configfile).name, **resolve(config, workdir=workdir, resolve_image=resolve_image, **envs)}
    previous = None
    if path.is_file():
        try:
            previous = read_lock(path)
        except UserError:
            previous = None  # a broken lock is simply replaced
    same = previous is not None and without_metadata(previous) == without_metadata(lock)
    lock["created"] = previous["created"] if same and "created" in previous else _created()
    path.write_text(canonical_json(lock))
    return path, lock


def read_lock(path: str | Path) -> dict[str, Any]:
    """A lock file's content; a clear one-line error for anything else."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"cannot read the lock file {path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path} is not a lock file (not JSON: {exc}); rewrite it with mlperf-repro lock, or delete it"
        ) from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != LOCK_FORMAT:
        raise UserError(
            f"{path} is a lock of format {found!r}, this version reads {LOCK_FORMAT!r}; "
            "rewrite it with mlperf-repro lock"
        )
    return data


# --- comparing -----------------------------------------------------------------------------


class _Missing:
    def __repr__(self) -> str:
        return ABSENT


MISSING = _Missing()


def _show(value: Any) -> str:
    if value is MISSING:
        return ABSENT
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    if len(text) <= 120:
        return text
    return f"{len(value)} entries" if isinstance(value, dict | list) else text[:117] + "..."


def _differences(prefix: str, locked: Any, here: Any, out: list[str]) -> None:
    if isinstance(locked, dict) and isinstance(here, dict):
        for key in sorted(set(locked) | set(here)):
            if key in NOT_COMPARED_LEAVES or (not prefix and key in NOT_COMPARED):
                continue
            _differences(f"{prefix}.{key}" if prefix else key, locked.get(key, MISSING), here.get(key, MISSING), out)
    elif locked != here:
        out.append(f"{prefix}: locked {_show(locked)}, here {_show(here)}")


def lock_differences(lock: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per key whose locked value differs from the current one, e.g.
    ``packages.workflow.torch: locked 2.13.0, here 2.12.0`` (``absent`` on a side that lacks it)."""
    out: list[str] = []
    _differences("", lock, current, out)
    return out


def find_lock(configfiles: Iterable[str | Path]) -> tuple[Path, Path] | None:
    """(config file, its lock) for the last config file given that has a lock beside it."""
    found = None
    for configfile in configfiles:
        path = lock_path(configfile)
        if path.is_file():
            found = (Path(configfile), path)
    return found


def check_environment(
    config: dict[str, Any],
    configfiles: Iterable[str | Path],
    *,
    workdir: str | Path = ".",
    log: Callable[[str], None] = print,
    **envs: Path,
) -> dict[str, Any] | None:
    """Compare this environment with the lock beside the config file (if any). Returns what
    each run records (:func:`mlperf_repro.provenance.lock_record`), None without a lock; raises
    a UserError naming each difference unless ``config['lock_override']`` gives a reason."""
    override = config.get("lock_override")
    found = find_lock(configfiles)
    if found is None:
        if override:
            log("lock: no lock file beside the config; lock_override is ignored")
        return None
    configfile, path = found
    differences = lock_differences(read_lock(path), resolve(config, workdir=workdir, resolve_image=None, **envs))
    if differences and not override:
        raise UserError(
            f"this environment differs from the lock {path} in {len(differences)} place(s):\n  "
            + "\n  ".join(differences)
            + f"\nIf the change is intended, rewrite the lock: mlperf-repro lock --configfile {configfile}\n"
            'To run anyway, give the reason: snakemake --config lock_override="<reason>" '
            "(the differences and the reason are recorded in each run's provenance.json)."
        )
    if differences:
        log(f"lock: running with {len(differences)} difference(s) from {path} accepted ({override}):")
        for line in differences:
            log(f"  {line}")
    else:
        log(f"lock: the environment matches {path}")
        if override:
            log("lock: nothing differs; lock_override is not recorded")
    return lock_record(path, override if differences else None, differences)
