"""A Hub repository's commit as the round's published tree pins it, in any submitter's code.

A submitter's setup may download a checkpoint without a revision (AMD's v6.0 setup downloads
``meta-llama/Llama-2-70b-chat-hf`` so) while another submitter of the same round pins the same
repository to a full commit in its code (``HF_MODEL_REPO = {"meta-llama/Llama-2-70b-chat-hf":
'<40 hex>'}``). The importer takes that commit, naming the file and line it came from, where the
round's tree holds exactly one full commit for the repository; several different ones are
reported and leave the revision to the user.

Only text files of the submitters' code folders are read (``src``, ``code``, ``setup``), each up
to :data:`MAX_BYTES`; a line pins a repository when it names the repository (not a longer name
that starts with it) and holds a 40-hex-digit commit.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Pin", "find_pins", "round_pin"]

SUFFIXES = frozenset({".py", ".sh", ".md", ".txt", ".yaml", ".yml", ".json", ".cfg", ".conf"})
CODE_FOLDERS = ("src", "code", "setup")
DIVISIONS = ("closed", "open", "network")
MAX_BYTES = 256 * 1024
FULL_COMMIT = re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])")


@dataclass(frozen=True)
class Pin:
    commit: str
    path: Path
    line: int


def _code_files(root: Path):
    for division in DIVISIONS:
        folder = root / division
        if not folder.is_dir():
            continue
        for submitter in sorted(p for p in folder.iterdir() if p.is_dir()):
            for name in CODE_FOLDERS:
                top = submitter / name
                if not top.is_dir():
                    continue
                for dirpath, dirnames, filenames in os.walk(top):
                    dirnames.sort()
                    for filename in sorted(filenames):
                        path = Path(dirpath, filename)
                        if path.suffix in SUFFIXES and not path.is_symlink():
                            yield path


@functools.lru_cache(maxsize=64)
def find_pins(root: Path, repo: str) -> tuple[Pin, ...]:
    """Every line of the round's code under ``root`` that names ``repo`` with a full commit."""
    needle = repo.encode()
    names_repo = re.compile(re.escape(repo) + r"(?![\w.-])")
    pins: list[Pin] = []
    for path in _code_files(root):
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if needle not in data:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if names_repo.search(line):
                pins += [Pin(commit, path, number) for commit in FULL_COMMIT.findall(line)]
    return tuple(pins)


def round_pin(root: Path, repo: str, revision: str | None = None) -> tuple[Pin | None, list[str]]:
    """The one full commit the round's code pins ``repo`` to (agreeing with ``revision``, a
    short commit, where given), else ``None``; and the distinct commits found, for the report."""
    pins = [p for p in find_pins(Path(root), repo) if not revision or p.commit.startswith(revision.lower())]
    commits = sorted({p.commit for p in pins})
    if len(commits) != 1:
        return None, commits
    return pins[0], commits
