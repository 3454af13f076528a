"""Checksum manifests, the acquisition record, quarantine and re-verification."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import UserError
from ..hashing import sha256_file, sha256_tree

MANIFEST_NAME = "manifest.sha256"
RECORD_NAME = "ACQUIRED.json"
# Files acquire() writes itself; never part of the payload and never "extra".
OWN_FILES = frozenset({MANIFEST_NAME, RECORD_NAME})
# Snakemake drops this marker into every directory() output; it is not part of the artifact.
WORKFLOW_MARKERS = frozenset({".snakemake_timestamp"})

STATUS_VERIFIED = "verified"
STATUS_UNVERIFIED = "unverified (trust on first use)"

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def check_relpath(relpath: str, where: str) -> str:
    """Normalise a manifest path; refuse anything that could escape dest_dir or clash with our files."""
    if relpath.startswith("./"):
        relpath = relpath[2:]
    parts = PurePosixPath(relpath).parts
    if (
        not relpath
        or "\\" in relpath
        or relpath.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
        or relpath != PurePosixPath(relpath).as_posix()
    ):
        raise UserError(
            f"{where}: invalid file path {relpath!r}; use a relative POSIX path without '..' "
            "(e.g. 'weights/model.safetensors')."
        )
    if relpath in OWN_FILES:
        raise UserError(f"{where}: {relpath!r} is reserved for the acquire stage's own record; rename it.")
    return relpath


def normalize_hashes(mapping: dict[str, str], where: str) -> dict[str, str]:
    """Validate a relpath -> sha256 mapping and return it with lowercase hex, sorted by path."""
    if not isinstance(mapping, dict) or not mapping:
        raise UserError(f"{where}: expected a non-empty mapping of relative path to sha256 hex digest.")
    out: dict[str, str] = {}
    for raw_path, digest in mapping.items():
        relpath = check_relpath(str(raw_path), where)
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise UserError(f"{where}: sha256 for {relpath!r} is {digest!r}, not a 64-character hex digest.")
        if relpath in out and out[relpath] != digest.lower():
            raise UserError(f"{where}: {relpath!r} is listed twice with different checksums.")
        out[relpath] = digest.lower()
    return dict(sorted(out.items()))


def read_manifest(path: str | Path) -> dict[str, str]:
    """Read expected checksums from a sha256sum-format file or a JSON object {relpath: hex}."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read checksum manifest {path}: {exc.strerror or exc}.") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: invalid JSON ({exc}); expected an object {{relpath: sha256}}.") from None
        return normalize_hashes(data, str(path))
    mapping: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        # sha256sum writes "<hex>  <path>" (text mode) or "<hex> *<path>" (binary mode).
        match = re.fullmatch(r"([0-9a-fA-F]{64}) [ *](.+)", line.rstrip("\r"))
        if not match:
            raise UserError(f"{path}:{lineno}: not a sha256sum line; expected '<64 hex digits>  <relative path>'.")
        digest, relpath = match.groups()
        if relpath in mapping and mapping[relpath] != digest.lower():
            raise UserError(f"{path}:{lineno}: {relpath!r} is listed twice with different checksums.")
        mapping[relpath] = digest
    return normalize_hashes(mapping, str(path))


def format_manifest(hashes: dict[str, str]) -> str:
    return "".join(f"{hashes[p]}  {p}\n" for p in sorted(hashes))


def quarantine_path(dest_dir: Path, relpath: str) -> Path:
    return dest_dir.parent / "quarantine" / dest_dir.name / relpath


def quarantine(file: Path, dest_dir: Path, relpath: str) -> Path:
    """Move a bad file out of reach of later stages; the newest bad copy wins."""
    target = quarantine_path(dest_dir, relpath)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(file, target)
    return target


def compare(root: Path, expected: dict[str, str], actual: dict[str, str], dest_dir: Path, origin: str) -> list[str]:
    """Describe every difference between expected and actual hashes; quarantine mismatching files.

    ``root`` holds the files (the staging dir or dest_dir itself); quarantine paths are named
    after ``dest_dir`` so the user finds them next to where the artifact was meant to go.
    """
    problems: list[str] = []
    for relpath, want in expected.items():
        got = actual.get(relpath)
        if got is None:
            problems.append(f"missing file {relpath!r} (listed in the checksums, not found in {origin})")
        elif got != want:
            moved = quarantine(root / relpath, dest_dir, relpath)
            problems.append(
                f"checksum mismatch for {relpath!r}: expected sha256 {want}, got {got}; "
                f"the bad copy was moved to {moved}"
            )
    extra = sorted(set(actual) - set(expected))
    if extra:
        problems.append(
            f"unexpected file(s) not listed in the checksums: {', '.join(map(repr, extra))} (from {origin})"
        )
    return problems


def payload_hashes(root: Path) -> dict[str, str]:
    """Hashes of everything under root except the files the acquire stage writes itself."""
    return {p: h for p, h in sha256_tree(root).items() if p not in OWN_FILES and p not in WORKFLOW_MARKERS}


def file_entries(root: Path, hashes: dict[str, str]) -> list[dict[str, Any]]:
    return [{"path": p, "sha256": hashes[p], "size": (root / p).stat().st_size} for p in sorted(hashes)]


def write_record(root: Path, record: dict[str, Any], hashes: dict[str, str]) -> None:
    (root / MANIFEST_NAME).write_text(format_manifest(hashes), encoding="utf-8")
    # The record carries the manifest's own hash so verify_dir can tell if it was edited.
    record["manifest_sha256"] = sha256_file(root / MANIFEST_NAME)
    (root / RECORD_NAME).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_record(dest_dir: Path) -> dict[str, Any] | None:
    """The ACQUIRED.json of dest_dir, or None if it is absent or unreadable."""
    try:
        record = json.loads((dest_dir / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def verify_dir(dest_dir: str | Path) -> None:
    """Re-check a previously acquired directory against its manifest.sha256.

    On any problem the directory stops looking acquired (ACQUIRED.json is removed) and bad
    files are quarantined, so no later stage can use them; the acquire stage re-fetches.
    """
    dest_dir = Path(dest_dir)
    record = load_record(dest_dir)
    if record is None or not (dest_dir / MANIFEST_NAME).is_file():
        raise UserError(
            f"{dest_dir} is not a completed acquisition (no {RECORD_NAME}/{MANIFEST_NAME}); "
            "run the acquire stage for it first."
        )
    problems: list[str] = []
    if sha256_file(dest_dir / MANIFEST_NAME) != record.get("manifest_sha256"):
        problems.append(f"{MANIFEST_NAME} was modified after acquisition")
    expected = read_manifest(dest_dir / MANIFEST_NAME)
    problems += compare(dest_dir, expected, payload_hashes(dest_dir), dest_dir, str(dest_dir))
    if problems:
        (dest_dir / RECORD_NAME).unlink(missing_ok=True)
        raise UserError(
            f"verification of {dest_dir} failed:\n  - "
            + "\n  - ".join(problems)
            + f"\n{dest_dir} is no longer marked as acquired; re-run the acquire stage to fetch a good copy."
        )
