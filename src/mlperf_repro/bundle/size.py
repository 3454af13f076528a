"""How large a config's offline bundle will be, before it is built (the plan view's line).

Wheels: each environment's pins (as installed here, what the lock records) looked up in the
package sources pip is configured with: ``find-links`` folders and ``file://`` simple indexes
read from disk, then the remote index (PyPI's simple API in JSON, PEP 691/700, which states
each file's size; projects asked in parallel) for the rest. The wheel pip would take for the
target (its best tag) gives the size, a pin with none its source archive's. A pin no source
answers for (no network) is counted as unknown. Remote answers are cached by pin and target
(``$XDG_CACHE_HOME/mlperf-repro/wheel-sizes.json``: a published file never changes). Artifacts:
a ``file://`` source's files; ``builtin:`` sources add nothing; a remote source is unknown until
fetched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from .wheels import Target, local_target

__all__ = ["BundleSize", "estimate_bundle"]

_HREF = re.compile(r'href="([^"#]+)')


@dataclass
class BundleSize:
    wheels: int = 0
    packages: int = 0
    artifacts: int = 0
    unknown: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.wheels + self.artifacts


def _pip_sources() -> tuple[list[Path], list[Path]]:
    """(find-links folders, file:// simple index folders) of pip's configuration."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "config", "list"], capture_output=True, text=True
    )
    links: list[Path] = []
    indexes: list[Path] = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        for item in value.strip("'\"").split():
            path = Path(unquote(urlparse(item).path)) if item.startswith("file://") else Path(item)
            if key.endswith("find-links") and path.is_dir():
                links.append(path)
            elif key.endswith("index-url") and item.startswith("file://") and path.is_dir():
                indexes.append(path)
    for item in os.environ.get("PIP_FIND_LINKS", "").split():
        if Path(item).is_dir():
            links.append(Path(item))
    return links, indexes


def _ranked_tags(target: Target) -> dict[str, int]:
    from packaging import tags

    major, minor = (int(x) for x in target.python.split(".")[:2])
    ordered = [
        *tags.cpython_tags((major, minor), platforms=list(target.platforms)),
        *tags.compatible_tags((major, minor), platforms=list(target.platforms)),
    ]
    return {str(tag): rank for rank, tag in enumerate(ordered)}


class _Sources:
    def __init__(self, links: list[Path], indexes: list[Path], target: Target) -> None:
        self.files: dict[str, list[Path]] = {}
        for folder in links:
            for path in folder.iterdir():
                self.files.setdefault(canonicalize_name(re.split(r"-\d", path.name, maxsplit=1)[0]), []).append(path)
        self.indexes = indexes
        self.ranks = _ranked_tags(target)

    def candidates(self, name: str) -> list[Path]:
        out = list(self.files.get(canonicalize_name(name), []))
        for index in self.indexes:
            page = index / canonicalize_name(name)
            html = page / "index.html" if (page / "index.html").is_file() else page
            if html.is_file():
                for href in _HREF.findall(html.read_text(errors="replace")):
                    path = Path(unquote(urlparse(href).path)) if href.startswith("file://") else (page / unquote(href))
                    if path.is_file():
                        out.append(path.resolve())
        return out

    def size(self, name: str, version: str) -> int | None:
        return self.pick(name, version, [(p.name, p.stat().st_size) for p in self.candidates(name)])

    def pick(self, name: str, version: str, files: Iterable[tuple[str, int]]) -> int | None:
        """The size of the file pip would take for ``name==version`` among ``(filename, size)``."""
        from packaging.utils import (
            InvalidSdistFilename,
            InvalidWheelFilename,
            parse_sdist_filename,
            parse_wheel_filename,
        )
        from packaging.version import InvalidVersion, Version

        try:
            wanted = Version(version)
        except InvalidVersion:
            return None
        best: tuple[int, int] | None = None
        sdist: int | None = None
        for filename, bytes_ in files:
            try:
                if filename.endswith(".whl"):
                    _, found, _, wheel_tags = parse_wheel_filename(filename)
                    if found != wanted:
                        continue
                    rank = min((self.ranks[str(t)] for t in wheel_tags if str(t) in self.ranks), default=None)
                    if rank is not None and (best is None or rank < best[0]):
                        best = (rank, bytes_)
                elif filename.endswith((".tar.gz", ".zip")) and parse_sdist_filename(filename)[1] == wanted:
                    sdist = bytes_
            except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
                continue
        return best[1] if best else sdist


REMOTE_INDEX = "https://pypi.org/simple"


def _remote_files(name: str, index: str = REMOTE_INDEX, timeout: float = 15) -> list[tuple[str, int]] | None:
    """``(filename, size)`` of every file the remote simple index lists for ``name``; None when
    it cannot be asked."""
    import urllib.request

    request = urllib.request.Request(
        f"{index.rstrip('/')}/{canonicalize_name(name)}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read())
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        return None
    return [(f["filename"], int(f["size"])) for f in files if isinstance(f, dict) and "filename" in f and "size" in f]


def _read_cache(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}


def _write_cache(path: Path, cache: dict[str, int]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs the next plan view the lookups


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def estimate_bundle(
    config: dict[str, Any],
    *,
    workdir: str | Path = ".",
    target: Target | None = None,
    environments: dict[str, dict[str, str] | str] | None = None,
    sources: tuple[list[Path], list[Path]] | None = None,
    remote_index: str | None = REMOTE_INDEX,
) -> BundleSize:
    """The size of ``config``'s bundle; ``environments``: each environment's pins (default: as
    installed here, as ``mlperf-repro lock`` records them); ``remote_index``: the simple index
    asked for what the local sources lack (None: none is asked)."""
    from .build import _needs_env

    if environments is None:
        from ..lock import environment_packages

        environments = environment_packages(config)
    target = target or local_target()
    lookup = _Sources(*(sources or _pip_sources()), target)
    size = BundleSize()
    remote: list[tuple[str, str]] = []
    for env, pins in environments.items():
        if not _needs_env(config, env) or not isinstance(pins, dict):
            continue
        for name, version in sorted(pins.items()):
            if name == "mlperf-repro":
                continue
            size.packages += 1
            found = lookup.size(name, version)
            if found is None:
                remote.append((name, version))
            else:
                size.wheels += found
    cache_path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mlperf-repro/wheel-sizes.json"
    cache = _read_cache(cache_path)
    key = hashlib.sha256(json.dumps(target.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
    asked = [pin for pin in remote if f"{pin[0]}=={pin[1]}|{key}" not in cache]
    if asked and remote_index:
        with ThreadPoolExecutor(max_workers=16) as pool:
            listed = list(pool.map(lambda pin: _remote_files(pin[0], remote_index), asked))
        for (name, version), files in zip(asked, listed, strict=True):
            found = lookup.pick(name, version, files) if files is not None else None
            if found is not None:
                cache[f"{name}=={version}|{key}"] = found
        _write_cache(cache_path, cache)
    for name, version in remote:
        found = cache.get(f"{name}=={version}|{key}")
        if found is None:
            size.unknown.append(f"{name}=={version}")
        else:
            size.wheels += found
    size.wheels += _project_bytes()
    for kind in ("models", "datasets"):
        for name, entry in sorted((config.get(kind) or {}).items()):
            source = str(entry.get("source", ""))
            if source.startswith("builtin:"):
                continue
            if source.startswith("file://"):
                folder = Path(source[len("file://") :])
                folder = folder if folder.is_absolute() else Path(workdir) / folder
                if folder.is_dir():
                    size.artifacts += _folder_bytes(folder)
                    continue
            size.unknown.append(f"{kind}.{name}")
    return size


def _project_bytes() -> int:
    """This project's wheel: its package, zip-compressed (about a third of the sources)."""
    package = Path(__file__).resolve().parents[1]
    return sum(p.stat().st_size for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts) // 3
