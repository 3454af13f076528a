"""compare reads the serving setup a submitter's published code states, ranks it above run
length, and lists spelling-only description differences apart.

The trees are small synthetic ones in the published v6.0 layout (the harness_llm shape: a
README command naming a YAML under src/<benchmark>/), with hand-written LoadGen detail logs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlperf_repro.compare.cosmetic import cosmetic_form, differs_only_cosmetically
from mlperf_repro.compare.diff import rank_causes
from mlperf_repro.compare.records import provenance_serving, read_submission
from mlperf_repro.compare.render import to_csv, to_html, to_markdown
from mlperf_repro.compare.report import compare_paths

SYSTEM = "8xGPU_2xCPU"
BENCH = "llama2-70b-99"
DESCRIPTION = {
    "system_name": "Test node",
    "number_of_nodes": 1,
    "accelerators_per_node": 8,
    "accelerator_model_name": "Test GPU",
    "accelerator_memory_capacity": "288 GB",
    "accelerator_host_interconnect": "PCIe Gen 5 x16",
    "host_memory_capacity": "3.0 TB",
    "framework": "vLLM 0.14, ROCm 7.0.0",
}
HARNESS_YAML = {
    "benchmark_name": "llama2-70b",
    "scenario": "offline",
    "vllm_env_config": {"VLLM_USE_V1": 1, "HIP_FORCE_DEV_KERNARG": 1},
    "vllm_engine_config": {
        "model": "/model/llama2-70b-chat-hf/fp4_quantized_gptq",
        "tensor_parallel_size": 1,
        "max_num_seqs": 2048,
        "kv_cache_dtype": "fp8",
    },
    "vllm_sampling_config": {"temperature": 0.0, "max_tokens": 1024, "min_tokens": 1},
    "harness_config": {"device_count": 1, "dataset_path": "/data/orca.pkl"},
}
README = """# Offline

```bash
python /x/code/main.py \\
   --config-path /x/code/{bench}/ \\
   --config-name offline_x \\
   test_mode=performance \\
   harness_config.device_count=8
```
"""
DETAIL = {
    "loadgen_version": "6.0.6 @ abc",
    "effective_scenario": "Offline",
    "effective_target_qps": 370,
    "effective_min_duration_ms": 3600000,
    "effective_min_query_count": 1,
    "effective_samples_per_query": 1465200,
    "effective_performance_sample_count": 24576,
    "result_validity": "VALID",
    "result_tokens_per_second": 100000.0,
}
USER_CONF = {
    "llama2-70b.Offline.target_qps": "370",
    "llama2-70b.Offline.min_duration": "3600000",
    "llama2-70b.Server.target_qps": "360",
}


def write_detail(path: Path, values: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        ":::MLLOG "
        + json.dumps(
            {
                "key": key,
                "value": value,
                "time_ms": 1.0,
                "namespace": "mlperf::logging",
                "event_type": "POINT_IN_TIME",
                "metadata": {"is_error": False, "is_warning": False},
            }
        )
        for key, value in values.items()
    ]
    path.write_text("\n".join(lines) + "\n")


def published_tree(
    root: Path,
    submitter: str,
    *,
    harness: dict | None = None,
    detail: dict | None = None,
    user_conf: dict | None = None,
    description: dict | None = None,
    yaml_name: str = "offline_x.yaml",
) -> Path:
    """root/closed/<submitter>/ in the published v6.0 layout; returns root."""
    import yaml

    base = root / "closed" / submitter
    (base / "systems").mkdir(parents=True)
    (base / "systems" / f"{SYSTEM}.json").write_text(
        json.dumps({**(description or DESCRIPTION), "submitter": submitter})
    )
    (base / "src" / BENCH).mkdir(parents=True)
    (base / "src" / BENCH / yaml_name).write_text(yaml.safe_dump(harness or HARNESS_YAML))
    (base / "src" / "main.py").write_text("# the harness\n")
    result = base / "results" / SYSTEM / BENCH / "Offline"
    result.mkdir(parents=True)
    (result / "README.md").write_text(README.format(bench=BENCH))
    conf = user_conf or USER_CONF
    (result / "user.conf").write_text("".join(f"{key} = {value}\n" for key, value in conf.items()))
    write_detail(result / "performance" / "run_1" / "mlperf_log_detail.txt", detail or DETAIL)
    return root


def partner_harness() -> dict:
    harness = json.loads(json.dumps(HARNESS_YAML))
    harness["vllm_engine_config"]["model"] = "/model/llama2-70b-chat-hf/fp4_quantized"
    harness["vllm_engine_config"]["max_num_seqs"] = 1792
    harness["vllm_env_config"]["HIP_FORCE_DEV_KERNARG"] = 0
    return harness


@pytest.fixture
def vendor(tmp_path):
    return published_tree(tmp_path / "vendor", "Vendor")


@pytest.fixture
def partner(tmp_path):
    return published_tree(
        tmp_path / "partner",
        "Partner",
        harness=partner_harness(),
        detail={
            **DETAIL,
            "effective_min_duration_ms": 600000,
            "effective_samples_per_query": 244200,
            "result_tokens_per_second": 97200.0,
        },
        # A Server line changed too: it does not apply to an Offline result.
        user_conf={**USER_CONF, "llama2-70b.Offline.min_duration": "600000", "llama2-70b.Server.target_qps": "352"},
        description={**DESCRIPTION, "accelerator_host_interconnect": "PCIe Gen5 x16"},
    )


def test_serving_differences_rank_above_run_length_and_cosmetic_ones_stand_apart(vendor, partner):
    (comparison,) = compare_paths(str(vendor), [str(partner)])
    (row,) = comparison.rows
    assert row.ratio == pytest.approx(0.972)
    names = [c.name for c in row.causes]
    serving = {"serving.checkpoint", "serving.engine.max_num_seqs", "serving.env.HIP_FORCE_DEV_KERNARG"}
    assert serving <= set(names)
    assert max(names.index(n) for n in serving) < names.index("min_duration_ms")
    assert names[0] == "serving.checkpoint"
    causes = {c.name: c for c in row.causes}
    assert causes["serving.checkpoint"].evidence == [
        (
            "serving.checkpoint",
            "/model/llama2-70b-chat-hf/fp4_quantized_gptq",
            "/model/llama2-70b-chat-hf/fp4_quantized",
        )
    ]
    assert ("serving.engine.max_num_seqs", "2048", "1792") in causes["serving.engine.max_num_seqs"].evidence
    # min_duration is one cause seen in user.conf and LoadGen's log; samples_per_query follows from it.
    assert {k for k, _, _ in causes["min_duration_ms"].evidence} == {
        "loadgen.min_duration_ms",
        "user.conf.llama2-70b.Offline.min_duration",
        "loadgen.samples_per_query",
    }
    assert "target_qps" not in causes  # only the Server line differs
    # The spelling of the host interconnect is no cause; it is listed apart.
    assert "system.accelerator_host_interconnect" not in causes
    assert row.cosmetic == [("system.accelerator_host_interconnect", "PCIe Gen 5 x16", "PCIe Gen5 x16")]
    assert "system.submitter" in causes and causes["system.submitter"].weight < causes["min_duration_ms"].weight

    markdown = to_markdown(comparison)
    assert "1. **serving.checkpoint** (configuration: checkpoint)" in markdown
    assert "Cosmetic differences (spelling only, not causes): `system.accelerator_host_interconnect`" in markdown
    assert "Serving setup (src/llama2-70b-99/offline_x.yaml / src/llama2-70b-99/offline_x.yaml)" in markdown
    csv_row = to_csv(comparison).splitlines()[1]
    assert csv_row.endswith("system.accelerator_host_interconnect: 'PCIe Gen 5 x16' / 'PCIe Gen5 x16'")
    assert "cosmetic differences (spelling only, not causes)" in to_html(comparison)


def test_harness_file_change_names_the_serving_keys_it_changed(vendor, partner):
    (comparison,) = compare_paths(str(vendor), [str(partner)])
    causes = {c.name: c for c in comparison.rows[0].causes}
    harness_files = causes["harness config files"]
    assert [k for k, _, _ in harness_files.evidence] == ["src/llama2-70b-99/offline_x.yaml"]
    assert "serving.checkpoint" in harness_files.note and "serving.engine.max_num_seqs" in harness_files.note
    assert harness_files.weight < causes["min_duration_ms"].weight
    assert "code" not in causes  # main.py is the same; the YAML is explained by its settings


def test_a_reformatted_harness_file_with_the_same_setup_is_said_to_be_the_same(vendor, tmp_path):
    import yaml

    partner = published_tree(tmp_path / "partner", "Partner", yaml_name="offline_X.yaml")
    yaml_path = partner / f"closed/Partner/src/{BENCH}/offline_X.yaml"
    yaml_path.write_text("# tuned on our node\n" + yaml.safe_dump(HARNESS_YAML, default_flow_style=True))
    (comparison,) = compare_paths(str(vendor), [str(partner)])
    row = comparison.rows[0]
    assert not [c for c in row.causes if c.name.startswith("serving")]
    harness_files = next(c for c in row.causes if c.name == "harness config files")
    assert "the serving setup read from them is the same" in harness_files.note
    assert "settings compared key by key, 0 differ." in to_markdown(comparison)


def test_unstated_serving_setup_is_one_cause(vendor, tmp_path):
    partner = published_tree(tmp_path / "partner", "Partner")
    shutil.rmtree(partner / "closed/Partner/src" / BENCH)
    (comparison,) = compare_paths(str(vendor), [str(partner)])
    causes = {c.name: c for c in comparison.rows[0].causes}
    assert not [n for n in causes if n.startswith("serving.")]
    (key, stated, missing) = causes["serving setup"].evidence[0]
    assert stated == "src/llama2-70b-99/offline_x.yaml"
    assert missing == "not stated: README.md runs /x/code/llama2-70b-99/offline_x.yaml, which the published code lacks"


def test_partner_results_of_a_repository_keep_their_own_numbers(vendor, tmp_path):
    """A results repository holds several submitters under one system name: each result keeps its own metric."""
    repo = tmp_path / "repo"
    published_tree(repo, "Alpha", detail={**DETAIL, "result_tokens_per_second": 90000.0})
    published_tree(repo, "Beta", detail={**DETAIL, "result_tokens_per_second": 80000.0})
    (comparison,) = compare_paths(str(vendor), [str(repo)])
    ratios = {row.partner.submitter: row.ratio for row in comparison.rows}
    assert ratios == {"Alpha": pytest.approx(0.9), "Beta": pytest.approx(0.8)}


def test_our_provenance_uses_the_published_key_names(vendor, tmp_path):
    perf = {
        "engine": {
            "backend": "endpoints",
            "engine_args": {"tensor_parallel_size": 1, "max_num_seqs": 2048, "kv_cache_dtype": "fp8"},
            "env": {"HIP_FORCE_DEV_KERNARG": "1"},
            "endpoints": {
                "launch": "slurm",
                "list": [{"name": f"n{i}", "accelerator": "Test GPU", "accelerator_count": 1} for i in range(8)],
            },
        },
        "environment": {"VLLM_USE_V1": "1"},
        "generation": {"max_new_tokens": 1024, "min_new_tokens": 1, "greedy": True},
        "model_dir": "results/quantized/llama2-70b-chat/mxfp4",
    }
    ours = provenance_serving(perf).flat()
    (published,) = read_submission(vendor, "vendor")
    shared = {k: v for k, v in ours.items() if published.settings.get(k) == v}
    assert set(shared) == {
        "serving.backend",
        "serving.engine.tensor_parallel_size",
        "serving.engine.max_num_seqs",
        "serving.engine.kv_cache_dtype",
        "serving.env.HIP_FORCE_DEV_KERNARG",
        "serving.env.VLLM_USE_V1",
        "serving.parallel.tensor_parallel_size",
        "serving.parallel.servers",
        "serving.parallel.devices",
        "serving.sampling.max_tokens",
        "serving.sampling.min_tokens",
        "serving.sampling.temperature",
    }
    assert ours["serving.checkpoint"] == "results/quantized/llama2-70b-chat/mxfp4"
    # One of our trees against a published one: the serving keys meet key by key.
    result = tmp_path / "ours/closed/Ours/results" / SYSTEM / BENCH / "Offline"
    published_tree(tmp_path / "ours", "Ours")
    (result / "provenance.json").write_text(json.dumps({"performance": perf}))
    (record,) = read_submission(tmp_path / "ours", "ours")
    assert record.serving_source == "provenance.json"
    causes = [c.name for c in rank_causes(published, record).causes]
    assert "serving.checkpoint" in causes and "serving.engine.max_num_seqs" not in causes
    assert "serving setup" not in causes


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("PCIe Gen 5 x16", "PCIe Gen5 x16"),
        ("3.0 TB", "3 TB"),
        ("288GB", "288 GB"),
        ("HBM3e", "HBM3E"),
        ("2.50 GHz", "2.5GHz"),
        ("400 Gbps", "400 Gbit/s"),
        ("128 GByte", "128GB"),
        ("Gen-5", "Gen5"),
        ("8\u2011GPU fabric", "8-GPU fabric"),
        ("", "N/A"),
        (None, "none"),
    ],
)
def test_spelling_only_differences_are_cosmetic(a, b):
    assert differs_only_cosmetically(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("3 TiB", "3 TB"),  # binary and decimal prefixes state different sizes
        ("10 Gb", "10 GB"),  # bits and bytes
        ("PCIe Gen5", "PCIe Gen5 x16"),
        ("ROCm 7.0.0", "ROCm 7.0"),  # a dotted version keeps its zeros
        ("Ubuntu 22.04", "Ubuntu 24.04"),
        ("DDR5-6400", "DDR5 6400"),
    ],
)
def test_different_facts_are_not_cosmetic(a, b):
    assert not differs_only_cosmetically(a, b)


def test_cosmetic_form_is_one_spelling():
    assert cosmetic_form(" PCIe  Gen 5 x16 ") == "pciegen5x16"
    assert cosmetic_form("3.0 TB DDR5") == "3TBddr5"
    assert cosmetic_form("N/A") == cosmetic_form("") == ""


WRAPPER_README = """# Running

```bash
python3 submission.py --model {bench} experiment --scenario Server --model-conf {code}/server_x.yaml --user-conf {conf}
python3 submission.py --model {bench} experiment --scenario Offline --model-conf {code}/offline_x.yaml --user-conf {conf}
```
"""


def test_a_partner_running_the_harness_through_its_submission_wrapper_is_read_per_scenario(vendor, tmp_path):
    """A partner's README lists every scenario's `submission.py ... --model-conf <yaml>` command:
    the Offline result reads the Offline YAML, and its changed engine setting is a cause."""
    import yaml

    partner = published_tree(tmp_path / "partner", "Partner", harness=partner_harness())
    code = partner / "closed/Partner/src" / BENCH
    server = json.loads(json.dumps(HARNESS_YAML))
    server["vllm_engine_config"]["max_num_seqs"] = 64  # a Server YAML an Offline result must not read
    (code / "server_x.yaml").write_text(yaml.safe_dump(server))
    (partner / "closed/Partner/results" / SYSTEM / BENCH / "Offline/README.md").write_text(
        WRAPPER_README.format(bench=BENCH, code=f"/x/code/{BENCH}", conf=f"/x/code/{BENCH}/user.conf")
    )
    (comparison,) = compare_paths(str(vendor), [str(partner)])
    causes = {c.name: c for c in comparison.rows[0].causes}
    assert "serving setup" not in causes  # stated on both sides
    assert causes["serving.engine.max_num_seqs"].evidence[0][1:] == ("2048", "1792")
    assert causes["serving.checkpoint"].evidence[0][2] == "/model/llama2-70b-chat-hf/fp4_quantized"


def test_where_and_on_what_a_checkpoint_was_quantized_are_causes(tmp_path):
    """Two partners' trees whose quantize jobs differ only in the device (GPTQ on a CPU and on a
    GPU agreed on 95% of FP4 codes), the calibration rows' hash, or the tool's version: each
    difference is a cause, named by its key."""
    quantization = {
        "recipe": "vendor",
        "scheme": "mxfp4",
        "codec_version": "1",
        "software": {"amd-quark": "0.13", "torch": "2.9.0"},
        "device": {"kind": "gpu", "name": "AMD Instinct MI355X"},
        "calibration": {"samples": 1000, "seq_len": 1024, "sha256": "a" * 64},
    }
    changed = {
        "quantization.device.kind": ("device", "kind", "cpu"),
        "quantization.calibration.sha256": ("calibration", "sha256", "b" * 64),
        "quantization.software.amd-quark": ("software", "amd-quark", "0.11"),
    }
    records = {}
    for side in ("a", *changed):
        record = json.loads(json.dumps(quantization))
        if side != "a":
            part, key, value = changed[side]
            record[part][key] = value
        published_tree(tmp_path / side.replace(".", "_"), "Ours")
        result = tmp_path / side.replace(".", "_") / "closed/Ours/results" / SYSTEM / BENCH / "Offline"
        (result / "provenance.json").write_text(json.dumps({"quantization": record}))
        (records[side],) = read_submission(tmp_path / side.replace(".", "_"), side)
    for key in changed:
        causes = rank_causes(records["a"], records[key]).causes
        assert [c.name for c in causes] == [key], [c.describe() for c in causes]


def test_the_loadgen_head_that_ran_is_a_cause(tmp_path):
    """Two runs of this workflow on the same servers, one with the head in one process and one
    split across four dispatch workers (engine.dispatch.head_workers: auto decides per host):
    the head is named, key by key, as what differs."""
    perf = {
        "engine": {"backend": "endpoints", "engine_args": {}, "endpoints": {"launch": "external", "list": []}},
        "generation": {"max_new_tokens": 1024, "min_new_tokens": 1, "greedy": True},
    }
    records = {}
    for side, head in (("single", {"workers": 0}), ("split", {"workers": 4, "tick_ms": 2.0})):
        published_tree(tmp_path / side, "Ours")
        result = tmp_path / side / "closed/Ours/results" / SYSTEM / BENCH / "Offline"
        (result / "provenance.json").write_text(json.dumps({"performance": {**perf, "head": head}}))
        (records[side],) = read_submission(tmp_path / side, side)
    assert records["split"].settings["serving.head.workers"] == "4"
    causes = [c.name for c in rank_causes(records["single"], records["split"]).causes]
    assert "serving.head.workers" in causes and "serving.head.tick_ms" in causes, causes
    # A head recorded as something else than an object: the provenance is named, not read.
    (tmp_path / "split/closed/Ours/results" / SYSTEM / BENCH / "Offline/provenance.json").write_text(
        json.dumps({"performance": {**perf, "head": [4]}})
    )
    (broken,) = read_submission(tmp_path / "split", "split")
    assert broken.serving_source == "not stated: provenance.json has performance.head of type list, not dict"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=JSON)
def test_any_recorded_head_is_read_or_named(tmp_path, head):
    """A provenance.json's ``performance.head`` of any JSON shape: an object becomes serving.head.*
    settings, one per key; anything else makes the provenance "not stated" with the reason; never
    an exception."""
    root = tmp_path / "tree"
    shutil.rmtree(root, ignore_errors=True)
    published_tree(root, "Ours")
    perf = {"engine": {"backend": "endpoints", "engine_args": {}}, "head": head}
    (root / "closed/Ours/results" / SYSTEM / BENCH / "Offline/provenance.json").write_text(
        json.dumps({"performance": perf})
    )
    (record,) = read_submission(root, "ours")
    if isinstance(head, dict) or head is None or head == []:
        assert record.serving_source == "provenance.json"
        assert {k for k in record.settings if k.startswith("serving.head.")} == {
            f"serving.head.{k}" for k in (head or {})
        }
    else:
        assert record.serving_source.startswith("not stated: provenance.json has performance.head of type")
