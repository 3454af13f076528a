"""An offline bundle: one folder that carries everything a config's run needs to a site without a network.

``mlperf-repro bundle --configfile my.yaml -o DIR`` (on a connected machine) writes::

    DIR/bundle.json                 the manifest: every file's sha256 and size, each part's state,
                                    what could not be fetched here and the command that completes it
    DIR/lock.json                   the config's lock (mlperf-repro lock), the bundle's inventory
    DIR/config/<configfile>         the config
    DIR/wheels/<env>/*.whl          each environment's locked packages, for the target Python/platform
    DIR/wheels/project/*.whl        this project
    DIR/artifacts/<kind>/<name>/    every model and dataset the config fetches, verified, with
                                    manifest.sha256 (builtin: sources are built by the project: nothing)
    DIR/images/<system>.oci.tar     each system's container image (skopeo), its digest kept, else
                                    listed with the skopeo copy command

Parts already complete are kept when the command runs again (resume), a file by its size and
hash. ``--verify DIR`` re-hashes every file against the manifest and says what a site needs
besides the bundle. A workflow given the bundle (config key ``bundle`` or ``MLPERF_REPRO_BUNDLE``)
acquires every artifact from it (:func:`bundled_entry`), checksums as the config states them,
and runs each system's image from the bundle's archive (:func:`bundled_image`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import UserError

__all__ = ["BUNDLE_ENV", "BUNDLE_FORMAT", "MANIFEST", "bundled_entry", "bundled_image", "image_archive"]

BUNDLE_FORMAT = "mlperf-repro bundle 1"
MANIFEST = "bundle.json"
BUNDLE_ENV = "MLPERF_REPRO_BUNDLE"


def bundled_entry(kind: str, name: str, entry: dict[str, Any], bundle: str | Path | None) -> dict[str, Any]:
    """The config entry ``kind.name`` as a run with ``bundle`` acquires it: from the bundle's
    copy (file://), checksums as the config states them; ``builtin:`` sources unchanged."""
    if not bundle or entry["source"].startswith("builtin:"):
        return entry
    folder = Path(bundle) / "artifacts" / kind / name
    if not folder.is_dir():
        raise UserError(
            f"{kind}.{name} ({entry['source']}) is not in the bundle {bundle}: expected {folder}; "
            "rebuild the bundle on a connected machine (mlperf-repro bundle) and check it with --verify"
        )
    return {**entry, "source": f"file://{folder.resolve()}", "bundled_from": entry["source"]}


def image_archive(system: str) -> str:
    """The bundle-relative path of ``system``'s image archive (the part ``images/<system>``)."""
    return f"images/{system}.oci.tar"


_PARTS_CACHE: dict[tuple[str, int, int], dict[str, Any]] = {}


def _parts(root: Path) -> dict[str, Any]:
    """The manifest's ``parts`` (read once per manifest version: Snakemake asks per job)."""
    path = root / MANIFEST
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        if key not in _PARTS_CACHE:
            data = json.loads(path.read_text())
            parts = data.get("parts") if isinstance(data, dict) else None
            _PARTS_CACHE.clear()
            _PARTS_CACHE[key] = parts if isinstance(parts, dict) else {}
        return _PARTS_CACHE[key]
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{root} is not a readable bundle ({MANIFEST}: {exc}); check it with mlperf-repro bundle --verify"
        ) from None


def bundled_image(system: str, image: str, bundle: str | Path) -> str:
    """The image apptainer runs for ``system`` (configured ``image``, a digest-pinned reference)
    in a run given ``bundle``: ``oci-archive:<absolute path of DIR/images/<system>.oci.tar>``.

    That form is what both Snakemake and apptainer take: Snakemake treats a ``container:`` value
    with a scheme other than file as an image to pull and runs ``apptainer pull
    oci-archive:/path`` (a local conversion, no network); a plain path would be handed to
    ``apptainer exec`` as an image file, which an OCI tar is not. The archive holds the manifest
    the reference pins (skopeo copied it with ``--preserve-digests``), so the run still records
    the configured reference and its digest (provenance, compare): only where the bytes come
    from changes.

    The archive must be in the bundle: an image part that is missing, built from another
    reference, or whose file is gone is an error naming the bundle and the part, not a fallback
    to the registry. A site that is given a bundle cannot reach the registry, where
    ``apptainer pull docker://...`` would fail late, once per job, after a network timeout; a
    clear stop before the first job says what to complete on a connected machine."""
    root = Path(bundle)
    part = f"images/{system}"
    state = _parts(root).get(part)
    state = state if isinstance(state, dict) else {}
    archive = root / image_archive(system)
    if state.get("status") != "done" or state.get("image") != image or not archive.is_file():
        if state.get("status") == "done" and state.get("image") != image:
            why = f"it holds {state.get('image')}, the config names {image}"
        elif state.get("status") == "done":
            why = f"{archive} is missing"
        elif state:
            why = f"{state.get('what')}" + (f"; complete it with: {state['command']}" if state.get("command") else "")
        else:
            why = "the bundle has no such part (built from another config?)"
        raise UserError(
            f"systems.{system}.software.container ({image}) is not in the bundle {bundle} (part {part}): {why}. "
            "A run from a bundle takes its images from the bundle alone: complete it on a connected machine "
            "(mlperf-repro bundle, skopeo installed) and check it with mlperf-repro bundle --verify"
        )
    path = str(archive.resolve())
    if any(c.isspace() for c in path) or ":" in path:
        raise UserError(
            f"the bundle's image archive {path} has a space or ':' in its path, which neither Snakemake nor "
            "apptainer accept in an oci-archive: reference; move the bundle to a path without them"
        )
    return f"oci-archive:{path}"
