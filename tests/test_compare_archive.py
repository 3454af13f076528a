"""Partners' archives: nothing in one may write outside the scratch folder or exhaust the machine."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from mlperf_repro.archive import Limits, extract
from mlperf_repro.errors import UserError


def snapshot(root: Path) -> dict[str, tuple]:
    return {
        p.relative_to(root).as_posix(): (p.is_symlink(), p.stat().st_size if p.is_file() else 0)
        for p in sorted(root.rglob("*"))
    }


def add(tar: tarfile.TarFile, name: str, data: bytes = b"x", **attrs) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data) if attrs.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
    for key, value in attrs.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if info.size else None)


def build(path: Path, members) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        add(tar, "submission/closed/Org/results/readme.txt", b"fine")
        for member in members:
            add(tar, **member)
    return path


MALICIOUS = {
    "absolute path": [dict(name="/tmp/mlperf-evil-absolute")],
    "dot-dot": [dict(name="submission/../../outside/evil.txt")],
    "symlink outside then write through it": [
        dict(name="submission/link", type=tarfile.SYMTYPE, linkname="../../outside"),
        dict(name="submission/link/evil.txt"),
    ],
    "absolute symlink": [dict(name="submission/passwd", type=tarfile.SYMTYPE, linkname="/etc/passwd")],
    "hardlink outside": [dict(name="submission/hard", type=tarfile.LNKTYPE, linkname="../outside/target.txt")],
    "character device": [dict(name="submission/dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)],
    "fifo": [dict(name="submission/pipe", type=tarfile.FIFOTYPE)],
}


@pytest.fixture
def sandbox(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "target.txt").write_text("secret")
    return tmp_path


@pytest.mark.parametrize("name", sorted(MALICIOUS))
def test_malicious_archive_is_refused_and_nothing_outside_changes(sandbox, name):
    archive = build(sandbox / "partner.tar.gz", MALICIOUS[name])
    before = snapshot(sandbox)
    with pytest.raises(UserError) as caught:
        extract(archive, sandbox / "scratch" / "x")
    assert "refusing the archive" in str(caught.value)
    after = snapshot(sandbox)
    after.pop("scratch", None)  # the (now empty) scratch folder itself
    assert after == before
    assert not (sandbox / "scratch" / "x").exists()
    assert not Path("/tmp/mlperf-evil-absolute").exists()


def test_size_limit_stops_a_compression_bomb_while_writing(sandbox):
    archive = sandbox / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add(tar, "submission/zeros.bin", b"\0" * (20 * 2**20))
    assert archive.stat().st_size < 100_000  # tiny on disk
    with pytest.raises(UserError, match="expands beyond"):
        extract(archive, sandbox / "scratch", Limits(max_bytes=5 * 2**20))
    assert not (sandbox / "scratch").exists()


def test_file_count_limit(sandbox):
    archive = build(sandbox / "many.tar.gz", [dict(name=f"submission/f{i}.txt") for i in range(50)])
    with pytest.raises(UserError, match="more than 10 entries"):
        extract(archive, sandbox / "scratch", Limits(max_files=10))


def test_a_clean_archive_extracts_without_executable_bits(sandbox):
    archive = build(
        sandbox / "ok.tar.gz",
        [
            dict(name="submission/run.sh", mode=0o755),
            dict(name="submission/inner", type=tarfile.SYMTYPE, linkname="run.sh"),
        ],
    )
    out = extract(archive, sandbox / "scratch")
    assert (out / "submission" / "run.sh").read_text() == "x"
    assert not os.access(out / "submission" / "run.sh", os.X_OK)
    assert os.readlink(out / "submission" / "inner") == "run.sh"


def test_not_an_archive(sandbox):
    bad = sandbox / "notes.tar.gz"
    bad.write_bytes(gzip.compress(b"not a tar file at all" * 100))
    with pytest.raises(UserError, match="not a readable tar archive"):
        extract(bad, sandbox / "scratch")
