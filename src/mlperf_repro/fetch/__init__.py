"""Acquire stage: fetch models and datasets into place, verified against pinned checksums.

``acquire()`` stages the download next to ``dest_dir``, verifies every file, writes
``manifest.sha256`` and ``ACQUIRED.json`` and only then renames the staging dir into place, so
a directory that carries ``ACQUIRED.json`` is always complete and verified. Sources:
``file://``, ``https://`` (``http://`` only on request) and ``hf://org/name@revision``.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ._download import fetch_hf, fetch_https, fetch_local, make_ssl_context
from ._manifest import (
    MANIFEST_NAME,
    RECORD_NAME,
    STATUS_UNVERIFIED,
    STATUS_VERIFIED,
    compare,
    file_entries,
    load_record,
    normalize_hashes,
    payload_hashes,
    read_manifest,
    verify_dir,
    write_record,
)
from ._sources import COMMIT_RE, Scrubber, Source, parse_source, redact_url

__all__ = [
    "MANIFEST_NAME",
    "RECORD_NAME",
    "STATUS_UNVERIFIED",
    "STATUS_BUILT",
    "STATUS_VERIFIED",
    "acquire",
    "record_built",
    "read_manifest",
    "redact_url",
    "verify_dir",
]


def acquire(
    source: str,
    dest_dir: str | Path,
    *,
    sha256: dict[str, str] | None = None,
    manifest: str | Path | None = None,
    allow_unverified: bool = False,
    log: Callable[[str], None] = print,
    ssl_context: ssl.SSLContext | None = None,
    ca_bundle: str | Path | None = None,
    allow_insecure_http: bool = False,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Fetch ``source`` into ``dest_dir``, verify it, and return the acquisition record.

    Expected checksums come from ``sha256`` ({relpath: hex}) or ``manifest`` (sha256sum or
    JSON file). Without either, acquisition is refused unless ``allow_unverified`` is set.
    Raises :class:`UserError` for anything the user has to fix; no secret (URL password,
    HF_TOKEN) ever appears in the record, the written files, log lines or error messages.
    """
    dest_dir = Path(dest_dir)
    hf_token = os.environ.get("HF_TOKEN") or None
    scrub = Scrubber((hf_token,))
    try:
        src = parse_source(source, allow_insecure_http=allow_insecure_http)
        scrub = Scrubber((hf_token, *src.secrets))
        return _acquire(
            src,
            dest_dir,
            expected=_expected_hashes(sha256, manifest),
            allow_unverified=allow_unverified,
            log=lambda msg: log(scrub(msg)),
            hf_token=hf_token,
            ssl_context=ssl_context,
            ca_bundle=ca_bundle,
            allow_insecure_http=allow_insecure_http,
            timeout=timeout,
        )
    except UserError as exc:
        raise UserError(scrub(str(exc))) from None


def _expected_hashes(sha256: dict[str, str] | None, manifest: str | Path | None) -> dict[str, str] | None:
    if sha256 is not None and manifest is not None:
        raise UserError("give the expected checksums either as sha256= or as manifest=, not both.")
    if sha256 is not None:
        return normalize_hashes(sha256, "sha256 checksums")
    if manifest is not None:
        return read_manifest(manifest)
    return None


def _acquire(
    src: Source,
    dest_dir: Path,
    *,
    expected: dict[str, str] | None,
    allow_unverified: bool,
    log: Callable[[str], None],
    hf_token: str | None,
    ssl_context: ssl.SSLContext | None,
    ca_bundle: str | Path | None,
    allow_insecure_http: bool,
    timeout: float,
) -> dict[str, Any]:
    if expected is None:
        if not allow_unverified:
            raise UserError(
                f"no checksums for {src.display}: give a sha256 map or a manifest file so the download "
                "can be verified (or explicitly allow unverified trust-on-first-use acquisition)."
            )
        log(f"warning: {src.display} has no checksums; recording the hashes seen now (trust on first use).")
    if src.scheme == "hf" and src.revision and not _is_commit(src.revision):
        log(
            f"warning: revision {src.revision!r} of {src.display} is a branch or tag and can move; pin the commit hash."
        )

    reused = _reuse_existing(src, dest_dir, expected, log)
    if reused is not None:
        return reused
    _check_replaceable(dest_dir)
    # Whatever is there no longer matches the request: stop it looking complete even if this run fails.
    (dest_dir / RECORD_NAME).unlink(missing_ok=True)

    dest_dir.parent.mkdir(parents=True, exist_ok=True)
    # Staging lives next to dest_dir (same filesystem) so publishing is a single rename.
    staging = Path(tempfile.mkdtemp(prefix=f"{dest_dir.name}.staging-", dir=dest_dir.parent))
    try:
        files_dir = staging / "files"
        files_dir.mkdir()
        extra: dict[str, Any] = {}
        if src.scheme == "file":
            log(f"copying {src.display} -> {dest_dir}")
            fetch_local(src, files_dir)
        elif src.scheme in ("https", "http"):
            fetch_https(
                src,
                files_dir,
                expected,
                ssl_context=make_ssl_context(ssl_context, ca_bundle),
                timeout=timeout,
                allow_insecure_http=allow_insecure_http,
                log=log,
            )
        else:
            log(f"downloading {src.display} from the Hugging Face Hub")
            extra["revision"] = fetch_hf(src, files_dir, staging / "hf-cache", expected, token=hf_token)

        actual = payload_hashes(files_dir)
        if expected is None:
            if not actual:
                raise UserError(f"{src.display} contains no files; check the source.")
        else:
            problems = compare(files_dir, expected, actual, dest_dir, src.display)
            if problems:
                raise UserError(
                    f"verification of {src.display} failed:\n  - "
                    + "\n  - ".join(problems)
                    + f"\n{dest_dir} was not created/marked as acquired. Re-run to download again; if the "
                    "source is right and the checksums are outdated, fix the sha256 map / manifest."
                )
        record: dict[str, Any] = {
            "source": src.display,
            "scheme": src.scheme,
            "status": STATUS_VERIFIED if expected is not None else STATUS_UNVERIFIED,
            "files": file_entries(files_dir, actual),
            **extra,
        }
        write_record(files_dir, record, actual)
        _publish(files_dir, dest_dir, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"acquired {src.display} -> {dest_dir} ({len(actual)} files, {record['status']})")
    return record


def _is_commit(revision: str) -> bool:
    return COMMIT_RE.fullmatch(revision) is not None


def _reuse_existing(
    src: Source, dest_dir: Path, expected: dict[str, str] | None, log: Callable[[str], None]
) -> dict[str, Any] | None:
    """The existing record if dest_dir already holds this exact artifact and still verifies."""
    record = load_record(dest_dir)
    if record is None or record.get("source") != src.display:
        return None
    files = record.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        return None
    recorded = {f.get("path"): f.get("sha256") for f in files}
    if expected is not None and (recorded != expected or record.get("status") != STATUS_VERIFIED):
        log(f"checksums for {src.display} changed since it was acquired; fetching again.")
        return None
    try:
        verify_dir(dest_dir)
    except UserError as exc:
        log(f"warning: existing copy is damaged, fetching again: {exc}")
        return None
    log(f"{dest_dir} already holds {src.display} and verifies; nothing to download.")
    return record


def _check_replaceable(dest_dir: Path) -> None:
    """Only ever replace an empty dir or one this stage created (it has our manifest)."""
    if not dest_dir.exists() and not dest_dir.is_symlink():
        return
    if dest_dir.is_dir() and not dest_dir.is_symlink():
        if not any(dest_dir.iterdir()) or (dest_dir / MANIFEST_NAME).is_file():
            return
    raise UserError(
        f"{dest_dir} already exists and was not created by the acquire stage; move it away or "
        "choose another destination (it is not overwritten to avoid losing data)."
    )


def _publish(files_dir: Path, dest_dir: Path, staging: Path) -> None:
    """Rename the verified staging dir into place, swapping out any previous copy."""
    if dest_dir.exists():
        os.rename(dest_dir, staging / "previous")  # removed with the staging dir
    os.rename(files_dir, dest_dir)


STATUS_BUILT = "built locally (deterministic from seed)"


def record_built(dest_dir: str | Path, source: str, details: dict[str, Any]) -> dict[str, Any]:
    """Give a locally built artifact the same manifest.sha256 + ACQUIRED.json an acquired one
    has, so downstream stages verify both kinds the same way (``verify_dir``)."""
    dest_dir = Path(dest_dir)
    hashes = payload_hashes(dest_dir)
    record: dict[str, Any] = {
        "source": source,
        "scheme": "builtin",
        "status": STATUS_BUILT,
        "files": file_entries(dest_dir, hashes),
        "build": details,
    }
    write_record(dest_dir, record, hashes)
    return record
