"""Partners' archives: nothing in one may write outside the scratch folder or exhaust the machine."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    # Spelled out, w/w/../../outside is the folder's own "outside"; through w -> "." it is two up.
    "a link through another link, then written through": [
        dict(name="w", type=tarfile.SYMTYPE, linkname="."),
        dict(name="y", type=tarfile.SYMTYPE, linkname="w/w/../../outside/target.txt"),
        dict(name="y", data=b"overwritten"),
    ],
    "a link that leads outside once a later link is made": [
        dict(name="y", type=tarfile.SYMTYPE, linkname="w/w/../../outside/target.txt"),
        dict(name="w", type=tarfile.SYMTYPE, linkname="."),
    ],
    "a hard link through a link": [
        dict(name="w", type=tarfile.SYMTYPE, linkname="."),
        dict(name="y", type=tarfile.LNKTYPE, linkname="w/w/../../outside/target.txt"),
    ],
    "links in a loop": [
        dict(name="a", type=tarfile.SYMTYPE, linkname="b"),
        dict(name="b", type=tarfile.SYMTYPE, linkname="a"),
        dict(name="a/x"),
    ],
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


def test_a_link_to_itself_as_published_trees_have_extracts(sandbox):
    """The v6.0 results repository holds closed/<submitter>/src/code -> code (a link to itself):
    it leads nowhere, so not outside, and the tree around it extracts."""
    archive = build(
        sandbox / "published.tar.gz", [dict(name="submission/src/code", type=tarfile.SYMTYPE, linkname="code")]
    )
    out = extract(archive, sandbox / "scratch")
    assert os.readlink(out / "submission" / "src" / "code") == "code"
    assert (out / "submission" / "closed" / "Org" / "results" / "readme.txt").read_text() == "fine"


def test_not_an_archive(sandbox):
    bad = sandbox / "notes.tar.gz"
    bad.write_bytes(gzip.compress(b"not a tar file at all" * 100))
    with pytest.raises(UserError, match="not a readable tar archive"):
        extract(bad, sandbox / "scratch")


# Archives generated from a few names, links among them and up out of the folder: whatever the
# members and their order, an extraction either ends with every link inside the folder or is
# refused with a clear message, and nothing outside the folder changes.
PARTS = ["a", "b", "w", "sub", ".", "..", "outside", "target.txt"]
paths = st.lists(st.sampled_from(PARTS), min_size=1, max_size=4).map("/".join)
members = st.one_of(
    st.builds(lambda n, d: dict(name=n, data=d), paths, st.binary(max_size=8)),
    st.builds(lambda n: dict(name=n, type=tarfile.DIRTYPE), paths),
    st.builds(lambda n, to: dict(name=n, type=tarfile.SYMTYPE, linkname=to), paths, paths | st.just("/etc")),
    st.builds(lambda n, to: dict(name=n, type=tarfile.LNKTYPE, linkname=to), paths, paths),
)


def contents(root: Path) -> dict[str, tuple]:
    """Every entry below ``root``: link target, or bytes and mode bits."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_file():
            found[key] = ("file", path.read_bytes(), path.stat().st_mode)
        else:
            found[key] = ("dir",)
    return found


@settings(max_examples=400, deadline=None)
@given(st.lists(members, min_size=1, max_size=8))
def test_any_archive_stays_inside_its_folder_or_is_refused(archive_members):
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Path(tmp)
        (sandbox / "outside").mkdir()
        (sandbox / "outside" / "target.txt").write_text("secret")
        archive = sandbox / "partner.tar"
        with tarfile.open(archive, "w") as tar:
            for member in archive_members:
                member = dict(member)
                add(tar, member.pop("name"), member.pop("data", b"x"), **member)
        before = contents(sandbox)
        dest = sandbox / "scratch" / "x"
        try:
            extract(archive, dest)
        except UserError as exc:
            assert "refusing the archive" in str(exc)
            assert not dest.exists()
        else:
            for path in dest.rglob("*"):
                if path.is_symlink():  # realpath, not resolve: a link in a loop leads nowhere, not outside
                    assert Path(os.path.realpath(path)).is_relative_to(dest.resolve()), (path, os.readlink(path))
                elif path.is_file():
                    assert not os.access(path, os.X_OK)
        after = contents(sandbox)
        for key in list(after):
            if key == "scratch" or key.startswith("scratch/"):
                after.pop(key)
        assert after == before
