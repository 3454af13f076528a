"""The preflight check: config problems the round's checker would reject after hours of runs."""

from __future__ import annotations

import hashlib

import pytest
from conftest import REPO, SCHEMA, with_artifacts
from hypothesis import given
from hypothesis import strategies as st

from mlperf_repro.check.preflight import estimated_bytes, made_up_hex, placeholders, preflight
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.plan import Plan

SYSTEM, BENCH = "cpu-2c-vllm", "tiny-llama-mxfp4"


@pytest.fixture(autouse=True)
def _workflow_folder(tmp_path):
    """Each test's tmp_path is the workflow's folder, holding the default's shipped models."""
    with_artifacts(tmp_path)


def conformance():
    return validate_config(load_yaml(REPO / "config/examples/conformance-cpu.yaml"), SCHEMA)


def rules_of(findings, severity="error"):
    return sorted({f.rule for f in findings if f.severity == severity})


def test_default_and_conformance_configs_pass(tmp_path, default_config):
    assert rules_of(preflight(validate_config(default_config, SCHEMA), tmp_path)) == []
    assert rules_of(preflight(conformance(), tmp_path)) == []


def test_short_duration_at_full_scale(tmp_path):
    config = conformance()
    config["systems"][SYSTEM]["benchmarks"][BENCH]["Server"]["min_duration_ms"] = 60000
    findings = preflight(config, tmp_path)
    assert rules_of(findings) == ["run-length"]
    assert any(f.path.endswith("Server.min_duration_ms") for f in findings)


def test_dataset_too_small_for_the_round(tmp_path):
    config = conformance()
    config["datasets"]["openorca-synthetic"]["builtin"]["samples"] = 5000
    findings = [f for f in preflight(config, tmp_path) if f.severity == "error"]
    assert {f.path for f in findings} == {"datasets.openorca-synthetic"}
    assert any("24576" in f.message for f in findings)


def test_closed_offline_samples_reachable(tmp_path):
    config = conformance()
    config["division"] = "closed"
    config["benchmarks"] = {"llama2-70b-99": dict(config["benchmarks"][BENCH], accuracy_target="reference")}
    config["systems"][SYSTEM]["benchmarks"] = {"llama2-70b-99": config["systems"][SYSTEM]["benchmarks"][BENCH]}
    config["systems"][SYSTEM]["benchmarks"]["llama2-70b-99"]["Offline"] = {"target_qps": 10, "min_query_count": 1000}
    findings = preflight(config, tmp_path)
    assert rules_of(findings) == ["run-length"]
    assert "Offline would issue 6600 samples" in " ".join(f.message for f in findings)


def test_too_few_server_queries_for_early_stopping_is_a_warning(tmp_path, default_config):
    default_config["test_scale"]["min_query_count"] = {"Server": 100}
    default_config["systems"][SYSTEM]["benchmarks"][BENCH]["Server"]["target_qps"] = 5
    findings = preflight(validate_config(default_config, SCHEMA), tmp_path)
    assert rules_of(findings) == [] and rules_of(findings, "warning") == ["run-length"]


def test_incomplete_system_description(tmp_path, default_config):
    default_config["systems"][SYSTEM]["description"]["cooling"] = ""
    findings = preflight(validate_config(default_config, SCHEMA), tmp_path)
    assert [f.path for f in findings] == [f"systems.{SYSTEM}.description.cooling"]


def test_a_benchmark_its_systems_backend_cannot_serve_is_refused_before_running(tmp_path, default_config):
    default_config["benchmarks"][BENCH]["mlperf_benchmark"] = "wan-2.2-t2v-a14b"
    default_config["systems"][SYSTEM]["benchmarks"][BENCH] = {"Offline": {"target_qps": 1}}
    findings = preflight(validate_config(default_config, SCHEMA), tmp_path)
    assert set(rules_of(findings)) == {"support"}
    messages = " ".join(f.message for f in findings)
    # The task, its evaluator and TEST04 exist; a vLLM system cannot render videos.
    assert "backend 'endpoints' cannot serve wan-2.2-t2v-a14b (text-to-video benchmarks run on: diffusers)" in messages


def test_gpt_oss_evaluator_and_compliance_tests_are_supported(tmp_path, default_config):
    default_config["benchmarks"][BENCH]["mlperf_benchmark"] = "gpt-oss-120b"
    findings = preflight(validate_config(default_config, SCHEMA), tmp_path)
    assert "support" not in rules_of(findings)


def test_disk_estimate_for_a_hub_model(tmp_path, default_config):
    default_config["models"]["tiny-llama"] = {
        "source": "hf://meta-llama/Llama-2-70b-chat-hf@" + "0" * 40,
        "allow_unverified": True,
    }
    default_config["datasets"]["openorca-synthetic"]["builtin"]["model"] = "tiny-llama"
    plan = Plan(validate_config(default_config, SCHEMA))
    needed = estimated_bytes(plan, tmp_path)
    # fp16 weights + MXFP4 checkpoint + the emulated copy the CPU system serves
    assert needed == 137953316864 + int(137953316864 * (1 + 0.53125 / 2))  # MXFP4: 4.25 of 16 bits


def test_gpt_oss_accuracy_file_is_counted_after_the_run_not_from_the_performance_set(tmp_path):
    config = load_yaml(REPO / "config/examples/gpt-oss-demo.yaml")
    config["test_scale"] = {"enabled": False}
    config["datasets"]["gpt-oss-synthetic"]["builtin"]["samples"] = 6396
    findings = preflight(validate_config(config, SCHEMA), tmp_path)
    assert rules_of(findings) == [], findings
    config["datasets"]["gpt-oss-synthetic"]["builtin"]["samples"] = 4395  # too few for performance runs
    findings = preflight(validate_config(config, SCHEMA), tmp_path)
    errors = [f for f in findings if f.severity == "error"]
    assert [f.rule for f in errors] == ["run-length"] and "6396" in errors[0].message


def test_disk_estimate_counts_a_prequantized_checkpoint(tmp_path, default_config):
    """tool: prequantized: the published checkpoint (its own models entry) is counted at the
    format's size, besides the benchmark's model, the served copy and the emulated copy."""
    default_config["models"]["tiny-llama"] = {
        "source": "hf://meta-llama/Llama-2-70b-chat-hf@" + "0" * 40,
        "allow_unverified": True,
    }
    default_config["models"]["published"] = {
        "source": "hf://amd/Llama-2-70b-chat-hf-WMXFP4@" + "1" * 40,
        "sha256": {"model.safetensors": "0" * 64},
    }
    default_config["quantization"]["pub"] = {"tool": "prequantized", "checkpoint": "published", "scheme": "mxfp4"}
    default_config["benchmarks"][BENCH]["quantization"] = "pub"
    default_config["datasets"]["openorca-synthetic"]["builtin"]["model"] = "tiny-llama"
    plan = Plan(validate_config(default_config, SCHEMA))
    model_bytes = 137953316864
    checkpoint = int(model_bytes * 0.53125 / 2)
    assert estimated_bytes(plan, tmp_path) == model_bytes + int(model_bytes * (1 + 0.53125 / 2)) + checkpoint


def test_disk_estimate_of_local_sources_is_their_own_size(tmp_path, default_config):
    """file:// sources, the base model and a published quantized checkpoint alike, count what
    their folders hold, not the benchmark's 70B at the format's size (a prequantized recipe on two
    small local folders was once priced at 37 GB)."""
    sizes = {"base": 3000, "published": 800}
    for name, size in sizes.items():
        (tmp_path / "hub" / name).mkdir(parents=True)
        (tmp_path / "hub" / name / "model.safetensors").write_bytes(b"\0" * size)
    default_config["models"]["tiny-llama"] = {"source": f"file://{tmp_path / 'hub' / 'base'}", "allow_unverified": True}
    default_config["models"]["published"] = {
        "source": f"file://{tmp_path / 'hub' / 'published'}",
        "sha256": {"model.safetensors": "0" * 64},
    }
    default_config["quantization"]["pub"] = {"tool": "prequantized", "checkpoint": "published", "scheme": "mxfp4"}
    default_config["benchmarks"][BENCH]["quantization"] = "pub"
    default_config["datasets"]["openorca-synthetic"]["builtin"]["model"] = "tiny-llama"
    plan = Plan(validate_config(default_config, SCHEMA))
    work = tmp_path / "work"
    work.mkdir()
    # base + published + (the served checkpoint + the emulated bf16 copy, priced from the base)
    assert estimated_bytes(plan, work) == 3000 + 800 + int(3000 * (1 + 0.53125 / 2))


def test_placeholders_pass_validation_but_preflight_names_each(tmp_path):
    """The imported vendor gpt-oss example carries the facts its published tree does not state as
    TODO placeholders: it validates (the plan view prices it), and preflight refuses to run it,
    naming each key and what to put there."""
    config = validate_config(load_yaml(REPO / "config/examples/mi355x-gpt-oss-120b.yaml"), SCHEMA)
    found = {f.path: f for f in preflight(config, tmp_path) if f.rule == "placeholder"}
    assert set(found) == {
        "models.gpt-oss-120b.sha256_manifest",
        "models.gpt-oss-120b-w-mxfp4-a-fp8-mlperf.source",
        "models.gpt-oss-120b-w-mxfp4-a-fp8-mlperf.sha256_manifest",
        "datasets.gpt-oss-eval.source",
        "datasets.gpt-oss-eval.sha256_manifest",
        # The LiveCodeBench release, which the reference loads with no revision.
        "datasets.livecodebench-release-v6.source",
        "datasets.livecodebench-release-v6.sha256_manifest",
        "systems.8xMI355X_2xEPYC_9575F.software.container",
        "systems.94xMI355X_24xEPYC_9575F.software.container",
    }
    source = found["models.gpt-oss-120b-w-mxfp4-a-fp8-mlperf.source"].message
    assert "put the 40 hex commit you verified there" in source
    assert all(f.severity == "error" for f in found.values())


def test_a_missing_file_source_is_named_before_any_run(tmp_path, default_config):
    """A relative file:// path is read from the workflow's folder: missing there, an error that
    says so; an absolute one may be on the compute nodes only: a warning."""
    config = validate_config(default_config, SCHEMA)
    (tmp_path / "artifacts").unlink()
    findings = [f for f in preflight(config, tmp_path) if f.rule == "source-missing"]
    assert [(f.path, f.severity) for f in findings] == [("models.tiny-llama.source", "error")]
    assert "file://artifacts/models/tiny-llama: no such file or folder under the workflow's folder" in (
        findings[0].message
    )
    config["models"]["tiny-llama"]["source"] = "file:///nowhere/tiny-llama"
    findings = [f for f in preflight(config, tmp_path) if f.rule == "source-missing"]
    assert [(f.path, f.severity) for f in findings] == [("models.tiny-llama.source", "warning")]


@given(st.binary(min_size=1, max_size=64), st.sampled_from([40, 64]))
def test_a_computed_hash_is_never_taken_for_a_made_up_one(data, length):
    """Any sha256 (or a commit, 40 hex digits of one) is a real address."""
    assert not made_up_hex(hashlib.sha256(data).hexdigest()[:length])


@given(
    st.sampled_from([40, 64]),
    st.text("0123456789abcdef", min_size=1, max_size=16),
    st.text("0123456789abcdef", max_size=5),
)
def test_typed_digests_are_made_up(length, pattern, tail):
    """A repeated pattern of up to 16 digits, or zeros with a few digits at the end (the
    Kubernetes example's "...0355"), is a typed address."""
    repeated = (pattern * length)[:length]
    assert made_up_hex(repeated)
    assert made_up_hex(("0" * length + tail)[-length:])


@pytest.mark.parametrize(
    "key, value",
    [
        ("systems.cpu-2c-vllm.software.container", "docker://rocm/vllm@sha256:" + "0" * 61 + "355"),
        ("models.tiny-llama.source", "hf://meta-llama/Llama-2-70b-chat-hf@" + "deadbeef" * 5),
    ],
)
def test_preflight_refuses_a_made_up_digest_or_commit(default_config, tmp_path, key, value):
    *parents, last = key.split(".")
    entry = default_config
    for part in parents:
        entry = entry.setdefault(part, {})
    entry[last] = value
    found = [f for f in placeholders(default_config) if f.rule == "placeholder"]
    assert [f.path for f in found] == [key]
    assert "made-up" in found[0].message and found[0].severity == "error"
    real = hashlib.sha256(b"an image").hexdigest()
    entry[last] = value.rsplit("@", 1)[0] + ("@sha256:" + real if "sha256:" in value else "@" + real[:40])
    assert [f for f in placeholders(default_config) if f.rule == "placeholder"] == []


def test_the_kubernetes_examples_image_digest_is_a_todo_preflight_refuses(tmp_path):
    """The imported Kubernetes example names the vendor's image without its digest (the source
    has none): preflight names both places it stands, the system's and the server pods'."""
    config = validate_config(load_yaml(REPO / "config/examples/mi355x-multinode-kubernetes.yaml"), SCHEMA)
    found = [f for f in preflight(config, tmp_path) if f.rule == "placeholder" and "sha256:TODO" in str(f)]
    assert sorted(f.path for f in found) == [
        "systems.87xMI355X_22xEPYC_9575F.engine.endpoints.kubernetes.image",
        "systems.87xMI355X_22xEPYC_9575F.software.container",
    ]


def test_an_imported_configs_notes_are_warnings_before_any_run(tmp_path, default_config):
    """The multi-node SLURM example was imported from a tree whose harness ran 87 engines on 11
    nodes of 8 GPUs; the allocation runs 8 per node and 7 on the last (allocation.servers). The
    import's note says so, and preflight repeats it as a warning (not an error: the config runs)."""
    config = validate_config(load_yaml(REPO / "config/examples/mi355x-multinode-slurm.yaml"), SCHEMA)
    notes = [f for f in preflight(config, tmp_path) if f.rule == "imported-note"]
    assert len(notes) == len(config["imported"]["notes"]) and all(f.severity == "warning" for f in notes)
    assert any("87 engines" in f.message and "7 on the last" in f.message for f in notes)
    assert len(config["systems"]["87xMI355X_22xEPYC_9575F"]["engine"]["endpoints"]["list"]) == 87
    assert not [f for f in preflight(validate_config(default_config, SCHEMA), tmp_path) if f.rule == "imported-note"]
