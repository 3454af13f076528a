"""The shipped demo checkpoints (artifacts/models): acquired like a downloaded model, and
rebuilt from their recorded spec by ``mlperf-repro demo-checkpoints``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import DEFAULT_CONFIG, REPO

from mlperf_repro.benchmarks import load_round
from mlperf_repro.config import load_yaml
from mlperf_repro.demo import checkpoints, pinned_build
from mlperf_repro.errors import UserError
from mlperf_repro.fetch import read_manifest
from mlperf_repro.fetch.entries import acquire_model_entry
from mlperf_repro.hashing import sha256_file

SHIPPED = REPO / "artifacts" / "models"


def test_the_default_config_acquires_the_shipped_checkpoint_verified(tmp_path, monkeypatch):
    """The default's stand-in goes through the real acquisition path: a file:// source checked
    against its sha256 manifest, whose record carries the build report for the summary."""
    monkeypatch.chdir(REPO)  # the config's paths are relative to the workflow's folder
    entry = load_yaml(DEFAULT_CONFIG)["models"]["tiny-llama"]
    assert entry["source"].startswith("file://") and entry["sha256_manifest"]
    record = acquire_model_entry(entry, tmp_path / "tiny-llama", tmp_path / "record.json")
    assert record["status"] == "verified"
    assert record["build"]["source"] == "builtin:tiny-llama"
    assert record["build"]["rouge_trained"]["rouge1"] > 90
    assert json.loads((tmp_path / "record.json").read_text()) == record


def test_a_tampered_shipped_checkpoint_is_refused_by_name(tmp_path, monkeypatch):
    source = tmp_path / "tiny-llama"
    shutil.copytree(SHIPPED / "tiny-llama", source)
    with open(source / "config.json", "a") as handle:
        handle.write(" ")
    entry = {"source": f"file://{source}", "sha256_manifest": str(SHIPPED / "tiny-llama.sha256")}
    with pytest.raises(UserError, match="config.json"):
        acquire_model_entry(entry, tmp_path / "acquired", tmp_path / "record.json")
    assert not (tmp_path / "acquired").exists()


def test_the_gpt_oss_examples_acquire_the_shipped_stand_in_verified(tmp_path, monkeypatch):
    """gpt-oss-demo.yaml and gpt-oss-conformance-cpu.yaml acquire the same shipped stand-in,
    trained from the demo's spec (200 steps), which met the round's exact-match target sampled
    at temperature 1.0 on its held-out questions."""
    monkeypatch.chdir(REPO)
    entries = [
        load_yaml(REPO / "config" / "examples" / name)["models"]["tiny-gpt-oss"]
        for name in ("gpt-oss-demo.yaml", "gpt-oss-conformance-cpu.yaml")
    ]
    assert entries[0] == entries[1] and entries[0]["source"].startswith("file://") and entries[0]["sha256_manifest"]
    record = acquire_model_entry(entries[0], tmp_path / "tiny-gpt-oss", tmp_path / "record.json")
    assert record["status"] == "verified"
    build = record["build"]
    assert build["source"] == "builtin:tiny-gpt-oss" and build["builtin"]["train_steps"] == 200
    target = load_round("v6.0").benchmark("gpt-oss-120b").absolute_targets()["exact_match"]
    assert build["sampling_temperature"] == 1.0 and build["exact_match_sampled"] >= target


def test_every_shipped_checkpoint_matches_its_manifest():
    names = checkpoints.shipped_names()
    assert {"tiny-llama", "tiny-gpt-oss", "tiny-wan"} <= set(names)
    for name in names:
        manifest = read_manifest(SHIPPED / f"{name}.sha256")
        files = {p.relative_to(SHIPPED / name).as_posix(): p for p in (SHIPPED / name).rglob("*") if p.is_file()}
        assert set(manifest) == set(files), name
        assert {path: sha256_file(files[path]) for path in files} == manifest, name
        report = checkpoints.shipped_report(name)
        assert report["source"] in checkpoints.BUILDERS


@pytest.fixture(scope="module")
def shipped_wan(tmp_path_factory):
    """A shipped checkpoint made by the real builder (tiny-wan builds in seconds, in its pinned
    child process): ``wan/`` and ``wan.sha256`` in a folder the tests copy."""
    root = tmp_path_factory.mktemp("shipped")
    checkpoints.build_model("builtin:tiny-wan", {"seed": 3}, root / "wan", log=lambda _: None)
    (root / "wan.sha256").write_text(checkpoints.manifest_lines(root / "wan"))
    return root


@pytest.mark.slow  # rebuilds in a child process that imports torch: 6-11 s
def test_a_rebuild_reproduces_a_shipped_checkpoint_and_names_what_differs(tmp_path, shipped_wan):
    root = tmp_path / "shipped"
    shutil.copytree(shipped_wan, root)
    assert checkpoints.check("wan", root=root, log=lambda _: None) == []
    tampered = sorted(p for p in (root / "wan").rglob("*.safetensors"))[0]
    tampered.write_bytes(tampered.read_bytes()[:-1] + b"\0")
    (root / "wan.sha256").write_text(checkpoints.manifest_lines(root / "wan"))
    assert checkpoints.check("wan", root=root, log=lambda _: None) == [tampered.relative_to(root / "wan").as_posix()]


@pytest.mark.slow  # rebuilds in a child process that imports torch: 6-11 s
def test_a_build_runs_with_pinned_kernels_and_a_rebuild_that_differs_names_them(tmp_path, shipped_wan):
    """Every build runs in a child held to AVX2 kernels (demo/pinned_build.py) and records
    them; a shipped report built with other numerics is named as the likely cause."""
    root = tmp_path / "shipped"
    shutil.copytree(shipped_wan, root)
    report = json.loads((root / "wan" / checkpoints.REPORT_NAME).read_text())
    assert report["numerics"]["cpu_kernels"] == pinned_build.PINNED_KERNELS
    report["numerics"] = {**report["numerics"], "cpu_kernels": "AVX512"}
    (root / "wan" / checkpoints.REPORT_NAME).write_text(json.dumps(report))
    (root / "wan.sha256").write_text(checkpoints.manifest_lines(root / "wan"))
    assert checkpoints.check("wan", root=root, log=lambda _: None) == [
        checkpoints.REPORT_NAME,
        f"numerics.cpu_kernels: shipped AVX512, rebuilt {pinned_build.PINNED_KERNELS}",
    ]


def test_a_cpu_without_the_pinned_kernels_is_refused_with_the_reason(tmp_path, monkeypatch):
    """As on a CPU without AVX2: the child's torch offers other kernels than the pinned ones."""
    monkeypatch.setattr(pinned_build, "PINNED_ENV", {**pinned_build.PINNED_ENV, "ATEN_CPU_CAPABILITY": "default"})
    with pytest.raises(UserError, match=r"trained with AVX2 kernels.*this CPU offers DEFAULT.*acquire the model"):
        checkpoints.build_model("builtin:tiny-wan", {"seed": 3}, tmp_path / "wan", log=lambda _: None)
    assert not (tmp_path / "wan").exists()


def test_unknown_names_and_keys_are_clear_errors(tmp_path):
    with pytest.raises(UserError, match="no shipped demo checkpoint 'nope'.*tiny-llama"):
        checkpoints.shipped_report("nope")
    with pytest.raises(UserError, match="hidden_sise mean nothing to builtin:tiny-llama"):
        checkpoints.build_model("builtin:tiny-llama", {"hidden_sise": 3}, tmp_path / "m")
    with pytest.raises(UserError, match="unknown builtin model"):
        checkpoints.build_model("builtin:nope", {}, tmp_path / "m")


def check_reproduces(name: str) -> None:
    """``mlperf-repro demo-checkpoints --check NAME`` passes: a rebuild from the recorded spec
    equals the committed manifest file for file."""
    result = subprocess.run(
        [sys.executable, "-m", "mlperf_repro", "demo-checkpoints", "--check", name],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{name}: reproduced" in result.stdout


# exclusive: bit-exact training needs its two threads to itself (65-75 s alone on 2 cores; 550 to
# 610 s among three xdist workers, the slowest test of the parallel run).
def _cpu_vendor() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("vendor_id")), "")
    except OSError:
        return ""


# The shipped tiny-llama was trained on an Intel CPU under MKL_CBWR=AVX2. MKL's conditional
# numerical reproducibility holds on Intel CPUs only: on an AMD EPYC (this project's CI machine
# since 2026-12-07) the rebuild's loss ends at 0.2668 where the shipped one's is 0.1325, as
# issue 52 reported. Until the rebuild is judged by tolerance there (issue 52), the bit-exact
# check runs where it can hold, and says why it does not elsewhere.
BIT_EXACT_HERE = _cpu_vendor() in ("GenuineIntel", "")


@pytest.mark.slow
@pytest.mark.exclusive
@pytest.mark.skipif(
    not BIT_EXACT_HERE,
    reason=f"{_cpu_vendor()}: MKL_CBWR=AVX2 reproduces the shipped Intel-built bits on Intel CPUs only (issue 52)",
)
def test_the_trainer_reproduces_the_shipped_tiny_llama():
    """``mlperf-repro demo-checkpoints --check`` trains tiny-llama again from its recorded spec
    (about 70 s on 2 cores) and finds every file equal to the committed manifest: training is
    seeded and runs in float32 on a fixed number of threads with its CPU kernels pinned (AVX2:
    on any x86-64 CPU that has it, not only the one it was shipped from). (tiny-gpt-oss is built by the
    same trainer; its rebuild takes about 5 minutes, so it is checked by hand after a change to
    its builder: `mlperf-repro demo-checkpoints --check tiny-gpt-oss`, bench/README.md.)"""
    check_reproduces("tiny-llama")
