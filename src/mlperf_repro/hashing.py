"""sha256 helpers shared by every stage that records provenance."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 20


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks so large weights never sit in memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_tree(root: str | Path) -> dict[str, str]:
    """Map every regular file under ``root`` (relative POSIX path) to its sha256, sorted."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def tree_digest(root: str | Path) -> str:
    """One sha256 summarising a directory: over the sorted 'path  hash' lines."""
    lines = "".join(f"{h}  {p}\n" for p, h in sha256_tree(root).items())
    return sha256_bytes(lines.encode())
