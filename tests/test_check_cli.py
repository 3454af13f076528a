"""``mlperf-repro check`` on folders and tarballs, as a partner runs it on a tree they got."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile

import pytest
from tree_factory import BENCH, SUBMITTER, SYSTEM, build_tree, make_runs

RESULTS = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"


@pytest.fixture(scope="module")
def good_tree(tmp_path_factory):
    runs = make_runs(tmp_path_factory.mktemp("loadgen-runs"))
    return build_tree(tmp_path_factory.mktemp("good") / "tree", runs)


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlperf_repro", "check", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def tarball(tree, dest, wrap: str = ""):
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(tree, arcname=wrap or ".")
    return dest


def test_a_good_folder_passes_and_the_round_comes_from_the_logs(good_tree):
    result = check(good_tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("PASS against the v6.0 rules (0 error(s), 0 warning(s))")


def test_a_tarball_wrapped_in_a_folder_is_checked_through_safe_extraction(good_tree, tmp_path):
    result = check(tarball(good_tree, tmp_path / "partner.tar.gz", wrap="submission"), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "PASS" and report["round"] == "v6.0" and report["findings"] == []


def test_a_defect_fails_with_one_line_naming_the_rule_and_the_file(good_tree, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(good_tree, tree)
    (tree / RESULTS / "Server/user.conf").unlink()
    result = check(tarball(tree, tmp_path / "broken.tgz"))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert f"[ERROR] required-files: {RESULTS}/Server/user.conf: missing or empty" in lines
    assert "FAIL against the v6.0 rules (1 error(s)" in lines[-1]


def test_an_explicit_round_applies_that_rounds_seeds(good_tree):
    result = check(good_tree, "--round", "v6.1", "--json")
    assert result.returncode == 1
    seeds = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "seeds"]
    assert seeds and all("v6.0 seeds" in f["message"] and "6.0.17" in f["message"] for f in seeds)


@pytest.mark.parametrize("kind", ["empty folder", "missing", "plain file", "tar without a tree"])
def test_a_path_that_is_not_a_submission_gets_a_clear_error(tmp_path, kind):
    if kind == "empty folder":
        path = tmp_path / "empty"
        path.mkdir()
    elif kind == "missing":
        path = tmp_path / "nowhere"
    elif kind == "plain file":
        path = tmp_path / "notes.txt"
        path.write_text("hello")
    else:
        (tmp_path / "stuff").mkdir()
        (tmp_path / "stuff" / "a.txt").write_text("x")
        path = tarball(tmp_path / "stuff", tmp_path / "stuff.tar")
    result = check(path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert str(path) in result.stderr
