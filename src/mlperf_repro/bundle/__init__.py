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
    DIR/images/<system>.oci.tar     each system's container image (skopeo), else listed

Parts already complete are kept when the command runs again (resume), a file by its size and
hash. ``--verify DIR`` re-hashes every file against the manifest and says what a site needs
besides the bundle. A workflow given the bundle (config key ``bundle`` or ``MLPERF_REPRO_BUNDLE``)
acquires every artifact from it (:func:`bundled_entry`), checksums as the config states them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError

__all__ = ["BUNDLE_ENV", "BUNDLE_FORMAT", "MANIFEST", "bundled_entry"]

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
