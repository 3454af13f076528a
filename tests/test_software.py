"""Software per stage: digest-pinned inference images from the config, recorded in
provenance, and reported by compare when two partners ran different images."""

from __future__ import annotations

import copy

import pytest
from conftest import MI355X_EXAMPLE, MI355X_SYSTEM, SCHEMA
from tree_factory import PROVENANCE, build_tree, make_runs

from mlperf_repro import provenance
from mlperf_repro.compare.report import compare_paths
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.plan import Plan

MI355X = MI355X_EXAMPLE
ROCM = "docker://rocm/vllm@sha256:" + "1" * 64
CUDA = "docker://vllm/vllm-openai@sha256:" + "2" * 64


def _with_image(config: dict, image: str) -> dict:
    config = copy.deepcopy(config)
    system = next(iter(config["systems"].values()))
    system["software"] = {"container": image}
    return config


@pytest.mark.parametrize(
    "image, expected",
    [
        ("docker://rocm/vllm:latest", "is not pinned by digest"),
        ("docker://rocm/vllm:v0.10.1", "is not pinned by digest"),
        ("docker://rocm/vllm@sha256:abc", "is not pinned by digest"),
        ("rocm/vllm@sha256:" + "a" * 64, "needs a scheme apptainer pulls from"),
    ],
)
def test_an_image_without_a_digest_is_rejected(default_config, image, expected):
    with pytest.raises(UserError) as err:
        validate_config(_with_image(default_config, image), SCHEMA)
    assert "systems.cpu-2c-vllm.software.container" in str(err.value)
    assert expected in str(err.value)


def test_digest_pinned_images_are_accepted(default_config):
    for image in (ROCM, CUDA, "docker://ghcr.io/org/img:tag@sha256:" + "f" * 64):
        config = validate_config(_with_image(default_config, image), SCHEMA)
        assert Plan(config).container("cpu-2c-vllm") == image


def test_cpu_default_uses_no_image(default_config):
    plan = Plan(validate_config(default_config, SCHEMA))
    assert plan.container("cpu-2c-vllm") is None
    assert plan.quantize_container("tiny-llama", "mxfp4-w4a16") is None


def test_example_gpu_config_pins_its_image():
    plan = Plan(validate_config(load_yaml(MI355X), SCHEMA))
    image = plan.container(MI355X_SYSTEM)
    # The image the vendor builds; its digest is the partner's to pin (a placeholder until then).
    assert image.startswith("docker://rocm/mlperf-inference@sha256:TODO:")
    # Quantization runs in the image of the system that serves the checkpoint.
    assert plan.quantize_container("llama-2-70b-chat-hf", "llama2-70b-99-mxfp4") == image


def test_quantization_takes_the_image_of_the_first_serving_system(default_config):
    config = _with_image(default_config, ROCM)
    second = copy.deepcopy(config["systems"]["cpu-2c-vllm"])
    second["software"] = {"container": CUDA}
    config["systems"]["b200"] = second
    plan = Plan(validate_config(config, SCHEMA))
    assert plan.container("b200") == CUDA
    assert plan.quantize_container("tiny-llama", "mxfp4-w4a16") == ROCM


def test_provenance_records_the_image_only_inside_a_container(monkeypatch):
    for name in provenance.CONTAINER_MARKERS:
        monkeypatch.delenv(name, raising=False)
    assert provenance.collect(container_image=ROCM)["container"] is None
    monkeypatch.setenv("APPTAINER_CONTAINER", "/cache/.snakemake/singularity/0a1b.simg")
    record = provenance.collect(container_image=ROCM)["container"]
    assert record == {"image": ROCM, "digest": "sha256:" + "1" * 64}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"))


def _provenance_with_image(image: str | None) -> dict:
    record = copy.deepcopy(PROVENANCE)
    record["performance"]["container"] = {"image": image, "digest": image.rsplit("@", 1)[1]} if image else None
    return record


@pytest.mark.slow
def test_compare_reports_a_different_image_as_a_software_difference(runs, tmp_path):
    reference = build_tree(tmp_path / "vendor", runs, provenance=_provenance_with_image(ROCM))
    same = build_tree(tmp_path / "same", runs, provenance=_provenance_with_image(ROCM))
    other = build_tree(
        tmp_path / "other", runs, provenance=_provenance_with_image("docker://rocm/vllm@sha256:" + "3" * 64)
    )
    (identical,) = compare_paths(str(reference), [str(same)])
    assert all(row.causes == [] for row in identical.rows)
    (comparison,) = compare_paths(str(reference), [str(other)])
    assert comparison.rows
    for row in comparison.rows:
        (cause,) = row.causes
        assert cause.name == "software.container_image"
        assert cause.category == "software stack"
        assert cause.evidence == [("software.container_image", ROCM, "docker://rocm/vllm@sha256:" + "3" * 64)]


def test_quantization_records_the_image_it_ran_in(tmp_path, monkeypatch):
    import json

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from mlperf_repro.fetch import acquire
    from mlperf_repro.quant.stage import MANIFEST_NAME, quantize_job

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(tmp_path / "src")
    acquire(f"file://{tmp_path / 'src'}", tmp_path / "model", allow_unverified=True, log=lambda _: None)
    recipe = {"scheme": "mxfp4_weight_only"}
    for name in provenance.CONTAINER_MARKERS:
        monkeypatch.delenv(name, raising=False)
    outside = quantize_job(
        str(tmp_path / "model"), str(tmp_path / "q1"), str(tmp_path / "e1"), recipe, container_image=ROCM
    )
    assert "container" not in outside["software"]
    monkeypatch.setenv("APPTAINER_CONTAINER", "/cache/0a1b.simg")
    quantize_job(str(tmp_path / "model"), str(tmp_path / "q2"), str(tmp_path / "e2"), recipe, container_image=ROCM)
    for folder in ("q2", "e2"):
        manifest = json.loads((tmp_path / folder / MANIFEST_NAME).read_text())
        assert manifest["software"]["container"] == {"image": ROCM, "digest": "sha256:" + "1" * 64}
