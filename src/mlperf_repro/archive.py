"""Safe extraction of other people's archives.

Partners send tarballs. Nothing in one may write outside the scratch directory or exhaust
the machine: absolute names, ``..`` components, links that point outside, device files and
FIFOs are refused, and so are archives that expand beyond the byte or file-count limit
(counted as the bytes are written, so a lying header or a compression bomb is stopped
too). Nothing extracted is ever executed or made executable.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

_CHUNK = 1 << 20
# The names of the tarballs partners send (tarfile reads every one of these compressions).
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".txz")


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 20 * 2**30  # expanded size
    max_files: int = 200_000


def _safe_name(name: str, archive: Path) -> str:
    if name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        raise UserError(f"{archive}: member {name!r} has an absolute path; refusing the archive")
    normalized = posixpath.normpath(name.replace("\\", "/"))
    if normalized == ".." or normalized.startswith("../") or "/../" in f"/{normalized}/":
        raise UserError(f"{archive}: member {name!r} escapes the extraction folder ('..'); refusing the archive")
    return normalized


def _inside(root: Path, target: Path) -> bool:
    try:
        target.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def extract(archive: str | Path, dest: str | Path, limits: Limits = Limits()) -> Path:
    """Extract ``archive`` into the (new, empty) folder ``dest``; return ``dest``."""
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=False)
    written = 0
    files = 0
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            for member in tar:
                files += 1
                if files > limits.max_files:
                    raise UserError(
                        f"{archive}: more than {limits.max_files} entries; refusing the archive "
                        "(raise the limit if this is expected)"
                    )
                name = _safe_name(member.name, archive)
                if name == ".":
                    continue
                target = dest / name
                if not _inside(dest, target.parent):
                    raise UserError(
                        f"{archive}: member {member.name!r} would be written outside the folder "
                        "(through a link); refusing the archive"
                    )
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isreg():
                    if member.size > limits.max_bytes - written:
                        raise UserError(f"{archive}: expands beyond {limits.max_bytes} bytes; refusing the archive")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    with open(target, "wb") as out:
                        while chunk := source.read(_CHUNK):
                            written += len(chunk)
                            if written > limits.max_bytes:
                                raise UserError(
                                    f"{archive}: expands beyond {limits.max_bytes} bytes; refusing the archive"
                                )
                            out.write(chunk)
                    os.chmod(target, 0o644)  # never executable
                elif member.issym():
                    link = posixpath.normpath(posixpath.join(posixpath.dirname(name), member.linkname))
                    if member.linkname.startswith("/") or link.startswith("..") or not _inside(dest, dest / link):
                        raise UserError(
                            f"{archive}: symbolic link {member.name!r} -> {member.linkname!r} points "
                            "outside the archive; refusing the archive"
                        )
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(member.linkname, target)
                elif member.islnk():
                    source_name = _safe_name(member.linkname, archive)
                    source = dest / source_name
                    if not _inside(dest, source) or not source.is_file():
                        raise UserError(
                            f"{archive}: hard link {member.name!r} -> {member.linkname!r} points "
                            "outside the archive; refusing the archive"
                        )
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, target)  # a copy, never a link to something else
                    written += target.stat().st_size
                    if written > limits.max_bytes:
                        raise UserError(f"{archive}: expands beyond {limits.max_bytes} bytes; refusing the archive")
                else:
                    raise UserError(f"{archive}: member {member.name!r} is a device file or FIFO; refusing the archive")
    except tarfile.TarError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise UserError(f"{archive} is not a readable tar archive: {exc}") from None
    except OSError as exc:  # e.g. a member repeated as a link and a file
        shutil.rmtree(dest, ignore_errors=True)
        raise UserError(f"{archive}: cannot extract safely ({exc}); refusing the archive") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest
