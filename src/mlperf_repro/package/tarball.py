"""Deterministic tarballs: the same tree always gives the same bytes.

Entries are sorted, mtimes fixed, owners anonymous and modes normalised; gzip's own
header timestamp and file name are zeroed. Partners can then compare a tarball's sha256
instead of unpacking it.
"""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

FIXED_MTIME = 0


def _normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
    return info


def write_tarball(tree: str | Path, out_path: str | Path, arcname: str | None = None) -> None:
    tree = Path(tree)
    arcname = arcname or tree.name
    paths = [tree] + sorted(tree.rglob("*"), key=lambda p: p.relative_to(tree).as_posix())
    out_path = Path(out_path)
    tmp = out_path.with_suffix(out_path.suffix + ".part")
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=FIXED_MTIME, compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in paths:
            rel = path.relative_to(tree).as_posix()
            name = arcname if rel == "." else f"{arcname}/{rel}"
            info = _normalised(tar.gettarinfo(str(path), arcname=name))
            if info.isreg():
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    os.replace(tmp, out_path)
