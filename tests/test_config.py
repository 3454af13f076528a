"""Config validation: the default config is valid; each broken one gets one clear line
naming the key path and what is allowed; snakemake reports it without a traceback."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from conftest import SCHEMA, make_workdir, run_snakemake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.errors import UserError

SYSTEM = "systems.cpu-2c-vllm"


def _set(config: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = config
    for key in parents:
        node = node[key]
    node[last] = value


def _delete(config: dict, dotted: str) -> None:
    *parents, last = dotted.split(".")
    node = config
    for key in parents:
        node = node[key]
    del node[last]


def test_default_config_is_valid_and_defaults_are_filled(default_config):
    validate_config(default_config, SCHEMA)
    assert default_config["quantization"]["mxfp4-w4a16"]["scale_mode"] == "even"
    assert default_config["test_scale"]["min_query_count"]["Server"] == 500
    assert default_config["systems"]["cpu-2c-vllm"]["engine"]["serve_quantized_as"] == "emulated"


# (mutation, expected fragments of the message: the key path and what is allowed)
BAD_CONFIGS = {
    "unknown top-level key": (lambda c: _set(c, "submiter", "X"), ["submiter", "unknown key", "allowed keys"]),
    "wrong division": (lambda c: _set(c, "division", "closd"), ["division", "'closd'", "closed, open, network"]),
    "unknown round": (lambda c: _set(c, "round", "v5.9"), ["round", "no rules table", "v6.0"]),
    "round not a version": (lambda c: _set(c, "round", "latest"), ["round", "'latest'", "v6.0"]),
    "submitter with a space": (lambda c: _set(c, "submitter", "My Org"), ["submitter", "'My Org'", "spaces"]),
    "target_qps is text": (
        lambda c: _set(c, f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.Offline.target_qps", "fast"),
        [f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.Offline.target_qps", "number", "'fast'"],
    ),
    "target_qps is zero": (
        lambda c: _set(c, f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.Server.target_qps", 0),
        ["Server.target_qps", "must be > 0"],
    ),
    "misspelt scenario": (
        lambda c: _set(c, f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.Ofline", {"target_qps": 1}),
        ["tiny-llama-mxfp4", "'Ofline'", "Offline, Server, Interactive"],
    ),
    "missing target_qps": (
        lambda c: _set(c, f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.Server", {}),
        ["Server.target_qps", "required key is missing"],
    ),
    "unknown quantization scheme": (
        lambda c: _set(c, "quantization.mxfp4-w4a16.scheme", "nvfp5"),
        ["quantization.mxfp4-w4a16.scheme", "mxfp4, mxfp4_weight_only"],
    ),
    "hidden size not a multiple of 32": (
        lambda c: _set(c, "models.tiny-llama", {"source": "builtin:tiny-llama", "builtin": {"hidden_size": 100}}),
        ["models.tiny-llama.builtin.hidden_size", "multiple of 32"],
    ),
    "bad source scheme": (
        lambda c: _set(c, "models.tiny-llama.source", "ftp://x/y"),
        ["models.tiny-llama.source", "ftp://x/y", "hf://"],
    ),
    "bad sha256": (
        lambda c: (
            _set(c, "models.tiny-llama.source", "file:///data/m"),
            _set(c, "models.tiny-llama.sha256", {"config.json": "abc"}),
        ),
        ["models.tiny-llama.sha256.config.json", "'abc'"],
    ),
    "benchmark names unknown model": (
        lambda c: _set(c, "benchmarks.tiny-llama-mxfp4.model", "llama-7b"),
        ["benchmarks.tiny-llama-mxfp4.model", "'llama-7b'", "tiny-llama"],
    ),
    "unknown mlperf benchmark": (
        lambda c: _set(c, "benchmarks.tiny-llama-mxfp4.mlperf_benchmark", "llama3-70b"),
        ["benchmarks.tiny-llama-mxfp4.mlperf_benchmark", "llama2-70b-99"],
    ),
    "scenario the benchmark lacks": (
        lambda c: _set(c, f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.SingleStream", {"target_qps": 1}),
        [
            f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.SingleStream",
            "llama2-70b-99 has no SingleStream",
            "Offline, Server, Interactive",
        ],
    ),
    "fetched model without checksums": (
        lambda c: (
            _set(c, "models.tiny-llama.source", "https://example.org/m"),
            _delete(c, "models.tiny-llama.sha256_manifest"),
        ),
        ["models.tiny-llama", "no checksums", "sha256"],
    ),
    "unpinned hub revision": (
        lambda c: (
            _set(c, "models.tiny-llama.source", "hf://meta-llama/Llama-2-70b-chat-hf"),
            _set(c, "models.tiny-llama.allow_unverified", True),
            _delete(c, "models.tiny-llama.sha256_manifest"),
        ),
        ["models.tiny-llama.source", "revision"],
    ),
    "closed division with test scale": (lambda c: _set(c, "division", "closed"), ["test_scale.enabled", "closed"]),
    "missing system description field": (
        lambda c: _delete(c, f"{SYSTEM}.description.status"),
        [f"{SYSTEM}.description.status", "required key is missing"],
    ),
    "number_of_nodes as text": (
        lambda c: _set(c, f"{SYSTEM}.description.number_of_nodes", "two"),
        [f"{SYSTEM}.description.number_of_nodes", "a positive integer or 'auto'"],
    ),
    "unknown engine backend": (
        lambda c: _set(c, f"{SYSTEM}.engine.backend", "tgi"),
        [f"{SYSTEM}.engine.backend", "vllm"],
    ),
    "engine.launch on an endpoints system": (
        lambda c: _set(c, f"{SYSTEM}.engine.launch", "shared"),
        [f"{SYSTEM}.engine.launch", "only backend diffusers", "engine.endpoints.launch"],
    ),
    "measured target without quantization": (
        lambda c: _set(c, "benchmarks.tiny-llama-mxfp4.quantization", None),
        ["benchmarks.tiny-llama-mxfp4.accuracy_target", "reference"],
    ),
}


# The text-to-video stand-in's open_accuracy (the whole default config, wan part included).
WAN_BAD_CONFIGS = {
    "open_accuracy without a measured target": (
        lambda c: _set(c, "benchmarks.tiny-wan-t2v.accuracy_target", "reference"),
        ["benchmarks.tiny-wan-t2v.open_accuracy", "needs accuracy_target: measured"],
    ),
    "open_accuracy for an LLM": (
        lambda c: _set(c, "benchmarks.tiny-llama-mxfp4.open_accuracy", {"metrics": ["temporal_flickering"]}),
        ["benchmarks.tiny-llama-mxfp4.open_accuracy", "only a text-to-video benchmark"],
    ),
    "open_accuracy that judges nothing": (
        lambda c: _set(c, "benchmarks.tiny-wan-t2v.open_accuracy.metrics", ["video_psnr"]),
        ["benchmarks.tiny-wan-t2v.open_accuracy.metrics", "temporal_flickering, video_ssim", "only reported"],
    ),
    "open_accuracy with a VBench dimension that needs weights": (
        lambda c: _set(c, "benchmarks.tiny-wan-t2v.open_accuracy.metrics", ["subject_consistency"]),
        ["benchmarks.tiny-wan-t2v.open_accuracy.metrics", "'subject_consistency'", "temporal_flickering"],
    ),
    "open_accuracy in the closed division": (
        lambda c: _set(c, "division", "closed"),
        ["benchmarks.tiny-wan-t2v.open_accuracy: the closed division is judged by the round's score"],
    ),
}


def assert_one_clear_message(config: dict, name: str, bad_configs: dict) -> None:
    mutate, fragments = bad_configs[name]
    mutate(config)
    with pytest.raises(UserError) as caught:
        validate_config(config, SCHEMA)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{name}: {fragment!r} not in {message!r}"
    assert "Traceback" not in message


@pytest.mark.parametrize("name", sorted(WAN_BAD_CONFIGS))
def test_bad_open_accuracy_is_one_clear_message(demo_config, name):
    assert_one_clear_message(demo_config, name, WAN_BAD_CONFIGS)


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_bad_config_is_one_clear_message(default_config, name):
    assert_one_clear_message(default_config, name, BAD_CONFIGS)


def test_the_text_to_video_stand_in_is_judged_by_weight_free_metrics(demo_config):
    validate_config(demo_config, SCHEMA)
    # SSIM's floor is the schema's default.
    assert demo_config["benchmarks"]["tiny-wan-t2v"]["open_accuracy"] == {
        "metrics": ["temporal_flickering", "video_ssim", "video_psnr"],
        "video_ssim_minimum": 0.85,
    }
    from mlperf_repro.plan import Plan

    assert Plan(demo_config).accuracy_targets("tiny-wan-t2v") == {
        "kind": "measured",
        "fraction": 0.99,
        "metrics": ["temporal_flickering"],
        "minimums": {"video_ssim": 0.85},
        "open_metrics": ["temporal_flickering", "video_ssim", "video_psnr"],
        "replaces": ["vbench_score"],
    }


def test_the_video_systems_launch_is_checked(demo_config):
    validate_config(copy.deepcopy(demo_config), SCHEMA)  # launch: shared, as the default has it
    _set(demo_config, "systems.cpu-2c-diffusers.engine.launch", "shard")
    with pytest.raises(UserError, match=r"systems\.cpu-2c-diffusers\.engine\.launch.*'shard'.*in_process, shared"):
        validate_config(demo_config, SCHEMA)


def test_all_problems_are_listed_at_once(default_config):
    _set(default_config, "division", "closd")
    _set(default_config, "models.tiny-llama", {"source": "builtin:tiny-llama", "builtin": {"hidden_size": 100}})
    with pytest.raises(UserError) as caught:
        validate_config(default_config, SCHEMA)
    assert "2 problems" in str(caught.value)


@pytest.mark.parametrize(
    "mutation, fragment",
    [
        (
            lambda c: _set(c, f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.Offline.target_qps", "fast"),
            f"{SYSTEM}.benchmarks.tiny-llama-mxfp4.Offline.target_qps",
        ),
        (lambda c: _set(c, "division", "closd"), "division: 'closd' is not allowed"),
    ],
)
@pytest.mark.slow
def test_snakemake_reports_bad_config_without_traceback(tmp_path, default_config, mutation, fragment):
    work = make_workdir(tmp_path)
    mutation(default_config)
    bad = work / "bad.yaml"
    bad.write_text(yaml.safe_dump(default_config))
    result = run_snakemake(work, "-n", "--configfile", str(bad), timeout=120)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert fragment in output
    assert "Traceback" not in output and 'File "' not in output


def test_the_shipped_checkpoints_are_found_from_any_working_folder(tmp_path, monkeypatch, default_config):
    """A config run with --directory elsewhere (the conformance example's command) still reads
    the demo checkpoints shipped in the project's artifacts/: relative file:// sources and
    manifests missing under the working folder are read from the project's folder."""
    from conftest import REPO

    monkeypatch.chdir(tmp_path)
    config = validate_config(copy.deepcopy(default_config), SCHEMA)
    model = config["models"]["tiny-llama"]
    assert model["source"] == f"file://{REPO / 'artifacts/models/tiny-llama'}"
    assert model["sha256_manifest"] == str(REPO / "artifacts/models/tiny-llama.sha256")
    # A builtin source, and a relative path present under the working folder, stay as written.
    assert (
        config["datasets"]["openorca-synthetic"]["source"] == default_config["datasets"]["openorca-synthetic"]["source"]
    )
    (tmp_path / "artifacts/models/tiny-llama").mkdir(parents=True)
    (tmp_path / "artifacts/models/tiny-llama.sha256").write_text("")
    config = validate_config(copy.deepcopy(default_config), SCHEMA)
    assert config["models"]["tiny-llama"]["source"] == "file://artifacts/models/tiny-llama"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.text(alphabet=st.sampled_from("ab./~-_ "), min_size=0, max_size=12))
def test_any_relative_source_is_kept_or_anchored_to_an_existing_project_file(tmp_path_factory, raw):
    from mlperf_repro.config import anchor_project_files

    project, work = tmp_path_factory.mktemp("project"), tmp_path_factory.mktemp("work")
    (project / "a").mkdir()
    (project / "a" / "b").write_text("x")
    config = {"models": {"m": {"source": f"file://{raw}", "sha256_manifest": raw}}}
    changed = anchor_project_files(config, project, work)
    entry = config["models"]["m"]
    for key, value in (("source", entry["source"][len("file://") :]), ("sha256_manifest", entry["sha256_manifest"])):
        if f"models.m.{key}" in changed:
            assert Path(value).is_absolute() and Path(value).exists() and Path(value) == project / raw
        else:
            assert value == raw


def test_the_codes_defaults_are_the_schemas(default_config):
    """The sections whose defaults the code also holds (for configs read without the schema)."""
    from mlperf_repro.find_performance import DEFAULTS
    from mlperf_repro.plan import COMPLIANCE_DEFAULTS

    config = validate_config(copy.deepcopy(default_config), SCHEMA)
    assert config["compliance"] == COMPLIANCE_DEFAULTS
    assert {k: config["find_performance"][k] for k in DEFAULTS} == {
        **DEFAULTS,
        **default_config.get("find_performance", {}),
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_as_a_config_file_load_or_are_a_clear_error_naming_it(tmp_path, data):
    """Whatever a config file holds (not UTF-8, not YAML, YAML of any shape), load_yaml gives
    its data or a UserError that names the file, never a traceback."""
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    try:
        load_yaml(path)
    except UserError as exc:
        assert str(path) in str(exc)


def test_a_folder_given_as_the_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match=f"config file {tmp_path} cannot be read"):
        load_yaml(tmp_path)
