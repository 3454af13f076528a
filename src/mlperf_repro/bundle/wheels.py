"""The wheels of an environment, exactly as its lock pins them, for a target platform.

The lock (``mlperf-repro lock``) holds every environment's installed package set. Each pin is
fetched as a wheel for the target Python and platform with pip (``pip download --no-deps
--only-binary``, the package indexes pip is configured with); a package published only as a
source archive is built into a wheel here (``pip wheel --no-deps``): a pure-Python one serves
any target, a compiled one only this machine's platform, which the bundle then says.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Target", "WheelResult", "download_wheels", "local_target"]

NOT_FOUND = re.compile(r"No matching distribution found for ([A-Za-z0-9_.\-]+)==")
_PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


@dataclass(frozen=True)
class Target:
    """Where the bundle installs: a CPython version (``3.11``) and manylinux platform tags."""

    python: str
    platforms: tuple[str, ...]

    def args(self) -> list[str]:
        out = ["--python-version", self.python, "--implementation", "cp", "--only-binary=:all:"]
        for platform in self.platforms:
            out += ["--platform", platform]
        return out

    def to_dict(self) -> dict[str, object]:
        return {"python": self.python, "platforms": list(self.platforms)}


def local_target() -> Target:
    """This machine's Python and every platform tag it installs (packaging's: manylinux_2_36
    down to manylinux_2_5 on glibc 2.36)."""
    from packaging import tags  # not at the top: `python -m mlperf_repro.bundle` runs on the standard library

    return Target(f"{sys.version_info.major}.{sys.version_info.minor}", tuple(dict.fromkeys(tags.platform_tags())))


@dataclass
class WheelResult:
    downloaded: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)  # from source archives, for this platform only if compiled
    missing: dict[str, str] = field(default_factory=dict)  # pin -> why


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True)


def _download_one(pin: str, dest: Path, target: Target) -> tuple[str, str | None]:
    """``(pin, None)`` when its target wheel is in ``dest``, else ``(pin, pip's last line)``."""
    done = _run([*_PIP, "download", "--no-deps", "-q", "-d", str(dest), *target.args(), pin])
    if done.returncode == 0:
        return pin, None
    lines = done.stderr.strip().splitlines()
    return pin, lines[-1] if lines else "pip download failed"


def download_wheels(
    pins: Iterable[str],
    dest: Path,
    target: Target,
    progress: Callable[[str], None] = lambda line: None,
    workers: int = 4,
) -> WheelResult:
    """Every ``name==version`` of ``pins`` as a wheel in ``dest``: one pip call for them all (pip
    stops at the first pin with no target wheel: that pin is set aside and the call repeated);
    where pip fails otherwise, pip per pin, ``workers`` at a time; the pins with no target wheel
    are built from their source archive here."""
    from concurrent.futures import ThreadPoolExecutor

    from packaging.utils import canonicalize_name

    dest.mkdir(parents=True, exist_ok=True)
    pending = sorted(set(pins))
    result = WheelResult()
    from_source: list[str] = []
    while pending:
        requirements = dest / ".requirements.txt"
        requirements.write_text("".join(f"{pin}\n" for pin in pending))
        done = _run([*_PIP, "download", "--no-deps", "-q", "-d", str(dest), *target.args(), "-r", str(requirements)])
        requirements.unlink()
        if done.returncode == 0:
            result.downloaded += pending
            pending = []
            break
        found = NOT_FOUND.search(done.stderr)
        pin = None
        if found:
            name = canonicalize_name(found.group(1))
            pin = next((p for p in pending if canonicalize_name(p.split("==")[0]) == name), None)
        if pin is None:
            break  # not one missing wheel: pin by pin below
        pending.remove(pin)
        from_source.append(pin)
    if pending:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for pin, problem in pool.map(lambda p: _download_one(p, dest, target), pending):
                if problem is None:
                    result.downloaded.append(pin)
                elif "No matching distribution" in problem:
                    from_source.append(pin)
                else:
                    result.missing[pin] = problem
    progress(f"{len(result.downloaded)} wheels for Python {target.python} ({target.platforms[0]})")
    for pin in from_source:
        built = _run([*_PIP, "wheel", "--no-deps", "-q", "-w", str(dest), pin])
        if built.returncode == 0:
            result.built.append(pin)
        else:
            lines = (built.stderr or built.stdout).strip().splitlines()
            result.missing[pin] = lines[-1] if lines else "pip wheel failed"
    if from_source:
        progress(f"{len(result.built)} built from source, {len(result.missing)} missing")
    return result
