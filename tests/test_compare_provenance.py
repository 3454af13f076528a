"""Provenance that can be diffed: two runs of one config on one machine record the same
provenance but for timings, and compare says "same except timings"; a real difference (a
package version, an environment variable, a driver) is named first."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile

import pytest
from tree_factory import BENCH, SUBMITTER, SYSTEM, build_tree, make_runs, patch_detail

from mlperf_repro import provenance
from mlperf_repro.compare.render import SAME_EXCEPT_TIMINGS, to_html, to_markdown
from mlperf_repro.compare.report import compare_paths

RESULTS = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"
ENGINE = {"backend": "vllm", "engine_args": {"dtype": "float32", "max_num_seqs": 8}, "env": {}}
COLLECT = (
    "import json, sys; from mlperf_repro import provenance; "
    "print(json.dumps(provenance.collect(engine=json.loads(sys.argv[1]), model_dir='m', "
    "model_manifest_sha256='a' * 64, dataset_manifest_sha256='b' * 64)))"
)


def collect_in_new_process(**env: str) -> dict:
    """A run's provenance, recorded by a process of its own (its own PID, temp names, start time)."""
    done = subprocess.run(
        [sys.executable, "-c", COLLECT, json.dumps(ENGINE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=dict(os.environ, **env),
    )
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def two_records():
    temp = tempfile.gettempdir()
    # What vLLM leaves in the environment with a per-process name (a temp path, its dist ident).
    first = collect_in_new_process(VLLM_RPC_BASE_PATH=f"{temp}/tmpa1b2c3", VLLM_DIST_IDENT="run-1")
    second = collect_in_new_process(VLLM_RPC_BASE_PATH=f"{temp}/tmpz9y8x7", VLLM_DIST_IDENT="run-2")
    return first, second


def test_two_processes_record_the_same_provenance(two_records):
    first, second = two_records
    assert first == second
    assert first["environment"]["VLLM_RPC_BASE_PATH"] == provenance.TEMP_PATH
    assert "VLLM_DIST_IDENT" not in first["environment"]
    assert not str(first["git_commit"] or "").endswith("-dirty")
    assert {"cpu_model", "cores_per_socket", "kernel", "accelerators", "drivers"} <= set(first["host"])


def test_pod_ips_are_left_out_of_the_servers_record():
    servers = [{"pod": "srv-0", "node": "n1", "host_ip": "10.0.0.1", "pod_ip": "10.244.1.7", "image_ids": []}]
    assert provenance.stable_servers(servers) == [
        {"pod": "srv-0", "node": "n1", "host_ip": "10.0.0.1", "image_ids": []}
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"))


def _tree(dest, runs, record: dict, target_qps: float | None = None):
    tree = build_tree(dest, runs, provenance={"performance": record, "accuracy": record})
    if target_qps is not None:  # target_qps: auto, as the find-performance pass leaves it
        for scenario in ("Offline", "Server", "Interactive"):
            folder = tree / RESULTS / scenario
            conf = folder / "user.conf"
            model_key = conf.read_text().split("=")[0].rsplit(".", 1)[0]
            conf.write_text(
                f"# target_qps auto: {target_qps} chosen by the find-performance pass of {dest.name} "
                f"on host (cpu): measured {target_qps / 1.1:.1f} (samples/s), margin 1.1 (x.json).\n"
                f"{model_key}.target_qps = {target_qps}\n"
            )
            patch_detail(folder / "performance/run_1/mlperf_log_detail.txt", {"effective_target_qps": target_qps})
    return tree


def test_two_runs_of_one_config_compare_as_same_except_timings(two_records, runs, tmp_path):
    first, second = two_records
    reference = _tree(tmp_path / "run1", runs, first, target_qps=440.0)
    partner = _tree(tmp_path / "run2", runs, second, target_qps=452.5)
    (comparison,) = compare_paths(str(reference), [str(partner)])
    assert len(comparison.rows) == 3
    for row in comparison.rows:
        assert row.causes == [], [c.describe() for c in row.causes]
        measured = {key for key, _, _ in row.measured}
        assert "loadgen.target_qps" in measured and any(k.startswith("user.conf.") for k in measured), measured
    text = to_markdown(comparison)
    assert text.count(f"**{SAME_EXCEPT_TIMINGS}**") == 3
    assert "Measured on each side, not causes" in text and "440" in text and "452.5" in text
    assert SAME_EXCEPT_TIMINGS in to_html(comparison)


@pytest.mark.parametrize(
    ("change", "first_cause", "kind"),
    [
        (lambda r: r["packages"].__setitem__("numpy", "0.0.1"), "software.numpy", "environment"),
        (lambda r: r["environment"].__setitem__("VLLM_USE_AITER", "0"), "serving.env.VLLM_USE_AITER", "configuration"),
        (lambda r: r["host"]["drivers"].__setitem__("amdgpu", "6.99.0"), "host.drivers.amdgpu", "environment"),
    ],
    ids=["package", "environment", "driver"],
)
def test_the_first_real_difference_is_named(two_records, runs, tmp_path, change, first_cause, kind):
    first, _ = two_records
    second = copy.deepcopy(first)
    change(second)
    reference = _tree(tmp_path / "run1", runs, first)
    partner = _tree(tmp_path / "run2", runs, second)
    (comparison,) = compare_paths(str(reference), [str(partner)])
    for row in comparison.rows:
        assert [c.name for c in row.causes] == [first_cause]
        assert row.causes[0].kind == kind
    text = to_markdown(comparison)
    assert f"First real difference: **{first_cause}**" in text and SAME_EXCEPT_TIMINGS not in text
