"""What a submission tree holds, and the only way the checker reads it.

A submitted tree holds regular files and folders only. The checker lists the tree once,
with ``lstat`` (a link is never followed: a symbolic link to a folder is not descended
into, and nothing below it is part of the tree), and every rule asks this listing whether
a file or folder is there. A file is read only if the listing holds it as a regular file,
and it is opened without following a link (``O_NOFOLLOW``), without blocking on a FIFO
(``O_NONBLOCK``) and checked again after opening (``fstat``: a regular file, the inode the
listing saw), so a tree that changes under the checker cannot make it read something else.
The ``hygiene`` rule reports every link and special file the listing found.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

# How the listing names what is not a regular file or a folder.
_KINDS = (
    (stat.S_ISLNK, "symbolic link"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


class UnreadableFile(UserError):
    """A file the checker may not or cannot read (a link, a special file, gone, unreadable)."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path  # relative to the tree's root


@dataclass(frozen=True)
class Entry:
    kind: str  # "file", "folder", or what else it is ("symbolic link", "FIFO", ...)
    size: int = 0
    links: int = 1  # a regular file's hard-link count
    inode: tuple[int, int] = (0, 0)
    target: str = ""  # a symbolic link's target, as written


def _entry(path: str, info: os.stat_result) -> Entry:
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return Entry("file", info.st_size, info.st_nlink, (info.st_dev, info.st_ino))
    if stat.S_ISDIR(mode):
        return Entry("folder")
    for test, kind in _KINDS:
        if test(mode):
            target = ""
            if kind == "symbolic link":
                try:
                    target = os.readlink(path)
                except OSError:
                    target = "?"
            return Entry(kind, target=target)
    return Entry("unknown file type")


class TreeFiles:
    """The listing of one tree (everything under ``root``, the root itself a folder)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._root_text = os.fspath(self.root).rstrip("/") or "/"
        self._entries: dict[str, Entry] | None = None
        self._children: dict[str, list[str]] = {}
        self.problems: list[tuple[str, str]] = []  # (relative path, why it could not be listed)

    # -- the listing ------------------------------------------------------------------------

    def _list(self) -> dict[str, Entry]:
        if self._entries is not None:
            return self._entries
        entries: dict[str, Entry] = {".": Entry("folder")}
        children: dict[str, list[str]] = {}
        pending = ["."]
        while pending:
            rel = pending.pop()
            folder = self.root if rel == "." else self.root / rel
            names = []
            try:
                with os.scandir(folder) as scan:
                    for item in scan:
                        child = item.name if rel == "." else f"{rel}/{item.name}"
                        try:
                            info = item.stat(follow_symlinks=False)
                        except OSError as exc:
                            self.problems.append((child, f"cannot be listed: {exc.strerror or exc}"))
                            continue
                        entry = _entry(item.path, info)
                        entries[child] = entry
                        names.append(item.name)
                        if entry.kind == "folder":
                            pending.append(child)
            except OSError as exc:
                self.problems.append((rel, f"cannot be listed: {exc.strerror or exc}"))
            children[rel] = sorted(names)
        self._entries, self._children = entries, children
        return entries

    def relative(self, path: str | Path) -> str | None:
        """``path`` relative to the root (posix), or None if it lies outside."""
        text, root = os.fspath(path), self._root_text
        if text == root:
            return "."
        if root == "." and not text.startswith("/"):
            rel = text  # Path(".") / "x" is "x"
        elif text.startswith(root + "/"):
            rel = text[len(root) + 1 :]
        else:
            return None
        return None if "/../" in f"/{rel}/" else rel

    def entry(self, path: str | Path) -> Entry | None:
        rel = self.relative(path)
        return None if rel is None else self._list().get(rel)

    def kind(self, path: str | Path) -> str | None:
        found = self.entry(path)
        return found.kind if found else None

    def is_file(self, path: str | Path) -> bool:
        """A regular file (a hard-linked one too: hygiene reports the link)."""
        return self.kind(path) == "file"

    def is_dir(self, path: str | Path) -> bool:
        return self.kind(path) == "folder"

    def exists(self, path: str | Path) -> bool:
        return self.entry(path) is not None

    def size(self, path: str | Path) -> int:
        found = self.entry(path)
        return found.size if found else 0

    def children(self, path: str | Path) -> list[Path]:
        """A folder's entries (of every kind), sorted by name; [] for anything else."""
        rel = self.relative(path)
        if rel is None or self.kind(path) != "folder":
            return []
        self._list()
        base = Path(path)
        return [base / name for name in self._children.get(rel, [])]

    def folders(self, path: str | Path) -> list[Path]:
        return [p for p in self.children(path) if self.is_dir(p)]

    def files(self, path: str | Path) -> list[Path]:
        return [p for p in self.children(path) if self.is_file(p)]

    def walk(self, path: str | Path | None = None) -> Iterator[tuple[str, Entry]]:
        """(relative path, entry) of everything below ``path`` (default: the whole tree), in
        name order, each folder's entries before its subfolders' ; never the folder itself."""
        entries = self._list()
        start = self.relative(path) if path is not None else "."
        if start is None or entries.get(start, Entry("")).kind != "folder":
            return
        pending = [start]
        while pending:
            rel = pending.pop()
            inner = []
            for name in self._children.get(rel, []):
                child = name if rel == "." else f"{rel}/{name}"
                yield child, entries[child]
                if entries[child].kind == "folder":
                    inner.append(child)
            pending.extend(reversed(inner))

    # -- reading ------------------------------------------------------------------------------

    def _open(self, path: str | Path) -> int:
        found = self.entry(path)
        shown = self.relative(path) or str(path)
        if found is None:
            raise UnreadableFile(f"{shown} is not in the tree", shown)
        if found.kind != "file":
            raise UnreadableFile(f"{shown} is a {found.kind}, not a regular file; the checker does not read it", shown)
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as exc:
            raise UnreadableFile(f"{shown} cannot be opened: {exc.strerror or exc}", shown) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != found.inode:
            os.close(fd)
            raise UnreadableFile(f"{shown} changed while the tree was checked; check it again", shown)
        return fd

    def read_bytes(self, path: str | Path, limit: int | None = None) -> bytes:
        """The file's bytes (at most ``limit``)."""
        with os.fdopen(self._open(path), "rb") as handle:
            try:
                return handle.read() if limit is None else handle.read(limit)
            except OSError as exc:
                shown = self.relative(path) or str(path)
                raise UnreadableFile(f"{shown} cannot be read: {exc.strerror or exc}", shown) from None

    def read_text(self, path: str | Path, limit: int | None = None) -> str:
        """The file as text (bytes that are not UTF-8 shown as U+FFFD), its line ends read as
        Python's text mode reads them (\\r\\n and \\r are \\n)."""
        text = self.read_bytes(path, limit).decode("utf-8", errors="replace")
        return text.replace("\r\n", "\n").replace("\r", "\n")

    def lines(self, path: str | Path) -> Iterator[str]:
        """The file's lines, streamed (detail logs of long runs are large)."""
        fd = self._open(path)
        with open(fd, encoding="utf-8", errors="replace", closefd=True) as handle:
            try:
                yield from handle
            except OSError as exc:
                shown = self.relative(path) or str(path)
                raise UnreadableFile(f"{shown} cannot be read: {exc.strerror or exc}", shown) from None


def files_of(path: str | Path, files: TreeFiles | None) -> TreeFiles:
    """``files`` when it holds ``path``; else a listing rooted at ``path`` (a helper called
    on one folder from outside a check, e.g. by compare)."""
    if files is not None and files.relative(path) is not None:
        return files
    return TreeFiles(path)
