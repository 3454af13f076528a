"""Safe extraction of other people's archives.

Partners send tarballs. Nothing in one may write outside the scratch directory or exhaust
the machine: absolute names, ``..`` components, links that point outside, device files and
FIFOs are refused, and so are archives that expand beyond the byte or file-count limit
(counted as the bytes are written, so a lying header or a compression bomb is stopped
too). Links are judged where they really lead (through the links made before them, and again
once the whole archive is out), and nothing is ever written through one. Nothing extracted is
ever executed or made executable.
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


def _write(target: Path, source, written: int, limits: Limits, archive: Path) -> int:
    """Write ``source`` as the new file ``target`` (never executable); return the bytes written
    so far. A member of the same name met earlier is replaced, and never written through: an
    earlier link of that name may point anywhere."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with open(fd, "wb") as out:
        os.fchmod(fd, 0o644)  # whatever the umask or the archive says
        while chunk := source.read(_CHUNK):
            written += len(chunk)
            if written > limits.max_bytes:
                raise UserError(f"{archive}: expands beyond {limits.max_bytes} bytes; refusing the archive")
            out.write(chunk)
    return written


def _links_stay_inside(dest: Path, archive: Path) -> None:
    """Every link, as the whole archive left it, points inside: a link checked when it was made
    may point elsewhere once later members made links along its way."""
    for folder, dirs, files in os.walk(dest):
        for name in dirs + files:
            path = Path(folder) / name
            if not path.is_symlink():
                continue
            try:
                outside = not _inside(dest, path)
            except RuntimeError:  # a loop leads nowhere; published trees have src/code -> code
                continue
            if outside:
                raise UserError(
                    f"{archive}: symbolic link {path.relative_to(dest).as_posix()!r} -> {os.readlink(path)!r} "
                    "points outside the archive once extracted; refusing the archive"
                )


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
                    written = _write(target, tar.extractfile(member), written, limits, archive)
                elif member.issym():
                    # Where the link really points: from its real folder (which may be reached
                    # through links made earlier), not from its name spelled out.
                    if member.linkname.startswith("/") or not _inside(dest, target.parent.resolve() / member.linkname):
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
                    with open(source, "rb") as data:  # a copy, never a link to something else
                        written = _write(target, data, written, limits, archive)
                else:
                    raise UserError(f"{archive}: member {member.name!r} is a device file or FIFO; refusing the archive")
        _links_stay_inside(dest, archive)
    except tarfile.TarError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise UserError(f"{archive} is not a readable tar archive: {exc}") from None
    except OSError as exc:  # e.g. a member repeated as a link and a file
        shutil.rmtree(dest, ignore_errors=True)
        raise UserError(f"{archive}: cannot extract safely ({exc}); refusing the archive") from None
    except RuntimeError as exc:  # pathlib's word for links that lead round in a loop
        shutil.rmtree(dest, ignore_errors=True)
        raise UserError(f"{archive}: its links lead round in a loop ({exc}); refusing the archive") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest
