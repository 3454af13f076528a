"""The quantize stage on a Diffusers pipeline (wan-2.2-t2v-a14b's model): the demo's tiny Wan 2.2
pipeline, acquired as the workflow acquires it, quantized by the stage through the format
registry (FP8 with dynamic activation scales, MXFP4), validated by ``quant-check``, and its
emulated copy loaded and rendered by diffusers' WanPipeline as the diffusers backend serves it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from mlperf_repro.errors import UserError
from mlperf_repro.hashing import sha256_file
from mlperf_repro.quant.pipeline import WAN_EXCLUDE, quantize_pipeline
from mlperf_repro.quant.stage import MANIFEST_NAME, quantize_job

TRANSFORMERS = ("transformer", "transformer_2")
UNCHANGED = ("scheduler", "text_encoder", "tokenizer", "vae")
WEIGHTS = "diffusion_pytorch_model.safetensors"
#: Per tiny transformer: 2 blocks x (attn1 q/k/v/out + attn2 q/k/v/out + ffn 2).
LINEARS_PER_TRANSFORMER = 2 * 10
SCHEMES = ("fp8_dynamic", "mxfp4")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # The tiny pipeline gains nothing from a second thread and slows ~15x when the other core is busy.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """builtin:tiny-wan, acquired as the workflow's acquire stage does (manifest.sha256, ACQUIRED.json)."""
    from mlperf_repro.fetch.entries import acquire_model_entry

    root = tmp_path_factory.mktemp("acquired")
    acquire_model_entry({"source": "builtin:tiny-wan", "builtin": {"seed": 0}}, root / "tiny-wan", root / "rec.json")
    return root / "tiny-wan"


@pytest.fixture(scope="module")
def quantized(model_dir, tmp_path_factory) -> dict[str, tuple[Path, Path, dict]]:
    """Each scheme through the stage's entry point: ``{scheme: (quantized, emulated, manifest)}``."""
    out = {}
    for scheme in SCHEMES:
        root = tmp_path_factory.mktemp(scheme)
        recipe = {"scheme": scheme, "exclude": ["lm_head"]}  # the schema's default exclude, for LLMs
        manifest = quantize_job(str(model_dir), str(root / "q"), str(root / "e"), recipe, mem_mb=4000)
        out[scheme] = (root / "q", root / "e", manifest)
    return out


def _tensors(path: Path) -> dict[str, tuple[str, list[int]]]:
    with safe_open(path, framework="pt") as f:
        return {k: (str(f.get_slice(k).get_dtype()), list(f.get_slice(k).get_shape())) for k in f.keys()}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_transformers_block_linears_are_stored_quantized_with_their_scales(quantized, model_dir, scheme):
    qdir, _, manifest = quantized[scheme]
    for name in TRANSFORMERS:
        src = load_file(model_dir / name / WEIGHTS)
        stored = load_file(qdir / name / WEIGHTS)
        inventory = _tensors(qdir / name / WEIGHTS)
        chosen = manifest["pipeline"]["quantized_components"][name]["quantized_tensors"]["names"]
        assert len(chosen) == LINEARS_PER_TRANSFORMER and all(n.startswith("blocks.") for n in chosen)
        for weight in chosen:
            module = weight[: -len(".weight")]
            out, inp = src[weight].shape
            if scheme == "fp8_dynamic":
                assert inventory[weight] == ("F8_E4M3", [out, inp])
                assert inventory[f"{module}.weight_scale"] == ("F32", [])
                assert f"{module}.input_scale" not in inventory  # activation scales at run time
            else:
                assert inventory[weight] == ("U8", [out, inp // 2])
                assert inventory[f"{module}.weight_scale"] == ("U8", [out, inp // 32])
        # Everything else is the source tensor, byte for byte: embeddings, norms, biases, proj_out, ...
        untouched = sorted(k for k in src if k not in chosen)
        assert {"patch_embedding.weight", "proj_out.weight", "scale_shift_table"} <= set(untouched)
        assert any(k.startswith("condition_embedder.") for k in untouched)
        for key in untouched:
            assert torch.equal(stored[key], src[key]), key
        config = json.loads((qdir / name / "config.json").read_text())
        qc = config.pop("quantization_config")
        assert config == json.loads((model_dir / name / "config.json").read_text())
        assert qc["quant_method"] == "quark" and qc["exclude"] == list(WAN_EXCLUDE)
        assert qc["global_quant_config"]["weight"]["dtype"] == ("fp8_e4m3" if scheme == "fp8_dynamic" else "fp4")
        assert qc["global_quant_config"]["input_tensors"]["is_dynamic"] is True
    # The other components and model_index.json as acquired; the workflow's records are not copied.
    for folder in (qdir, quantized[scheme][1]):
        assert sha256_file(folder / "model_index.json") == sha256_file(model_dir / "model_index.json")
        for component in UNCHANGED:
            files = sorted(p.relative_to(model_dir) for p in (model_dir / component).rglob("*") if p.is_file())
            assert files and all(sha256_file(folder / f) == sha256_file(model_dir / f) for f in files)
        assert not (folder / "ACQUIRED.json").exists() and not (folder / "manifest.sha256").exists()
        assert (folder / MANIFEST_NAME).is_file()


def test_the_selection_is_every_nn_linear_inside_the_blocks(quantized, model_dir):
    """The writer picks tensors by name and shape; the model class agrees on what they are."""
    from diffusers import WanTransformer3DModel

    model = WanTransformer3DModel.from_config(WanTransformer3DModel.load_config(model_dir / "transformer"))
    linears = sorted(
        f"{name}.weight"
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.startswith("blocks.")
    )
    manifest = quantized["mxfp4"][2]
    assert manifest["pipeline"]["quantized_components"]["transformer"]["quantized_tensors"]["names"] == linears


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_emulated_folder_loads_in_diffusers_and_renders_a_video(quantized, model_dir, scheme):
    from mlperf_repro.video.generate import generate_video, load_pipeline
    from mlperf_repro.video.settings import VideoSettings

    qdir, edir, manifest = quantized[scheme]
    pipe = load_pipeline(edir)
    settings = VideoSettings(height=32, width=48, num_frames=5, num_inference_steps=2, seed=42)
    video = generate_video(pipe, "Two dogs play with a ball in a green park.", settings=settings)
    assert video.shape == (5, 32, 48, 3) and video.dtype.name == "uint8"
    # The served weights are the checkpoint's, decoded by the codec (bf16 in the copy).
    from mlperf_repro.quant.formats import format_for

    fmt = format_for(scheme)
    stored = load_file(qdir / "transformer" / WEIGHTS)
    module = "blocks.1.ffn.net.0.proj"
    decoded = fmt.dequantize(stored[f"{module}.weight"], stored[f"{module}.weight_scale"], torch.float32)
    served = pipe.transformer.get_submodule(module).weight.detach()
    assert torch.equal(served, decoded.to(torch.bfloat16).float())
    assert not torch.equal(served, load_file(model_dir / "transformer" / WEIGHTS)[f"{module}.weight"])


def test_quant_check_passes_and_names_a_tampered_scale(quantized, model_dir, tmp_path, capsys):
    from mlperf_repro.cli import main

    for scheme in SCHEMES:
        assert main(["quant-check", str(quantized[scheme][0]), "--reference", str(model_dir)]) == 0, scheme
        assert "OK" in capsys.readouterr().out
    # FP8: a weight scale x4 decodes every value of the layer 4x too large.
    fp8 = tmp_path / "fp8"
    shutil.copytree(quantized["fp8_dynamic"][0], fp8)
    path = fp8 / "transformer_2" / WEIGHTS
    tensors = load_file(path)
    tensors["blocks.0.attn1.to_q.weight_scale"] = tensors["blocks.0.attn1.to_q.weight_scale"] * 4
    save_file(tensors, path, metadata={"format": "pt"})
    assert main(["quant-check", str(fp8), "--reference", str(model_dir), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "diffusers-pipeline" and not report["ok"]
    assert [(f["tensor"], f["rule"]) for f in report["findings"]] == [
        ("transformer_2/blocks.0.attn1.to_q.weight", "weight-error")
    ]
    # MXFP4: an E8M0 scale of 0xFF is NaN, found without a reference.
    mx = tmp_path / "mx"
    shutil.copytree(quantized["mxfp4"][0], mx)
    path = mx / "transformer" / WEIGHTS
    tensors = load_file(path)
    tensors["blocks.1.ffn.net.2.weight_scale"][0, 0] = 0xFF
    save_file(tensors, path, metadata={"format": "pt"})
    assert main(["quant-check", str(mx)]) == 1
    out = capsys.readouterr().out
    assert "FINDING transformer/blocks.1.ffn.net.2" in out and "[non-finite]" in out
    # A scale of the wrong shape is a layout finding.
    tensors["blocks.1.ffn.net.2.weight_scale"] = tensors["blocks.1.ffn.net.2.weight_scale"][:, :1].clone()
    save_file(tensors, path, metadata={"format": "pt"})
    assert main(["quant-check", str(mx)]) == 1
    assert "[scale-shape]" in capsys.readouterr().out
    # The unquantized pipeline is no quantized checkpoint (exit 2).
    assert main(["quant-check", str(model_dir)]) == 2


def test_the_manifest_records_weight_and_video_error(quantized):
    fp8, mx = quantized["fp8_dynamic"][2], quantized["mxfp4"][2]
    for manifest in (fp8, mx):
        assert manifest["model_kind"] == "diffusers-pipeline"
        assert manifest["quantized_tensors"]["count"] == 2 * LINEARS_PER_TRANSFORMER
        assert set(manifest["weight_error"]) == set(TRANSFORMERS)
        assert all(
            len(w["layers"]) == LINEARS_PER_TRANSFORMER and not w["above_bound"]
            for w in manifest["weight_error"].values()
        )
        assert (
            manifest["evaluation"]["method"] == "video" and manifest["evaluation"]["mem_source"] == "resources.mem_mb"
        )
        video = manifest["video_error"]
        assert video["video_shape"] == [9, 64, 64, 3] and video["settings"]["boundary_ratio"] == 0.875
        # Both experts ran (the boundary splits the steps) and every quantized Linear was measured.
        layers = video["layer_output_error"]
        assert layers["count"] == 2 * LINEARS_PER_TRANSFORMER and all(layers["calls"][t] > 0 for t in TRANSFORMERS)
        # W+A schemes: the activation quantization adds to the served (weights-only) error.
        assert 0 < video["served"]["mean_abs_diff"] < video["scheme"]["mean_abs_diff"]
    # FP8 moves the weights, the layers and the video less than MXFP4.
    for name in TRANSFORMERS:
        assert fp8["weight_error"][name]["max"] < mx["weight_error"][name]["mean"]
    assert fp8["video_error"]["layer_output_error"]["max"] < mx["video_error"]["layer_output_error"]["mean"]
    assert fp8["video_error"]["served"]["psnr_db"] > mx["video_error"]["served"]["psnr_db"]
    assert fp8["activation_format"].startswith("fp8_e4m3 dynamic per-tensor")


def test_a_small_job_records_weight_error_only(model_dir, tmp_path):
    manifest = quantize_pipeline(model_dir, tmp_path / "q", tmp_path / "e", scheme="mxfp4_weight_only", mem_mb=100)
    assert manifest["evaluation"]["method"] is None and "do not fit" in manifest["evaluation"]["reason"]
    assert manifest["video_error"] is None and manifest["weight_error"]["transformer"]["count"] == 20
    assert manifest["cpu_serving_matches_scheme"] is True


def test_sharded_transformers_get_the_diffusers_index(model_dir, tmp_path):
    """The A14B's transformers come in shards with diffusion_pytorch_model.safetensors.index.json;
    output shards split at the cap get that index too, and diffusers and the validator read them."""
    from mlperf_repro.quant.validate import validate_checkpoint
    from mlperf_repro.video.generate import load_pipeline

    q, e = tmp_path / "q", tmp_path / "e"
    quantize_pipeline(model_dir, q, e, scheme="fp8_dynamic", shard_cap_bytes=60_000, evaluate=False)
    for folder in (q, e):
        index = json.loads((folder / "transformer" / "diffusion_pytorch_model.safetensors.index.json").read_text())
        shards = sorted(p.name for p in (folder / "transformer").glob("*.safetensors"))
        assert len(shards) > 1 and sorted(set(index["weight_map"].values())) == shards
        assert not (folder / "transformer" / "model.safetensors.index.json").exists()
    assert validate_checkpoint(q, model_dir).ok
    pipe = load_pipeline(e)
    served = pipe.transformer_2.get_submodule("blocks.0.attn2.to_v").weight.detach()
    reference = load_file(model_dir / "transformer_2" / WEIGHTS)["blocks.0.attn2.to_v.weight"]
    assert 0 < (served - reference).norm() / reference.norm() < 0.05


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scheme": "fp8"}, "needs static activation scales .* use scheme fp8_dynamic"),
        ({"scheme": "nvfp4"}, "transformers' inputs while generating videos from the benchmark's prompts"),
        ({"scheme": "fp8_dynamic", "kv_cache": "fp8"}, "keeps no KV cache"),
        ({"scheme": "mxfp4", "exclude": ["re:("]}, "not a valid regex"),
    ],
)
def test_what_a_pipeline_cannot_be_quantized_with(model_dir, tmp_path, kwargs, message):
    with pytest.raises(UserError, match=message):
        quantize_pipeline(model_dir, tmp_path / "q", tmp_path / "e", **kwargs)
    assert not (tmp_path / "q").exists()


def test_the_stage_refuses_other_tools_on_a_pipeline(model_dir, tmp_path):
    from mlperf_repro.quant.tools import quantize_recipe

    with pytest.raises(UserError, match="only tool 'native' quantizes"):
        quantize_recipe(str(model_dir), str(tmp_path / "q"), str(tmp_path / "e"), {"scheme": "mxfp4", "tool": "quark"})


def test_the_config_and_plan_take_a_quantized_text_to_video_benchmark(demo_config):
    from conftest import SCHEMA

    from mlperf_repro.config import validate_config
    from mlperf_repro.plan import Plan

    config = demo_config
    config["benchmarks"]["tiny-wan-t2v"]["quantization"] = "fp8-dit"
    plan = Plan(validate_config(config, SCHEMA))
    assert plan.serving_dir("cpu-2c-diffusers", "tiny-wan-t2v") == "results/models/tiny-wan-fp8-dit-emulated"
    assert ("tiny-wan", "fp8-dit") in plan.quantized_models
    assert plan.quantizes_pipeline("tiny-wan", "fp8-dit") and plan.calibration_source("tiny-wan", "fp8-dit") is None
    for recipe, message in (
        ("fp8-kv8", "sets kv_cache"),
        ("nvfp4", "scheme nvfp4 needs static activation scales .* use fp8_dynamic"),
        ("mxfp4-quark-gptq", "uses tool quark"),
    ):
        config["benchmarks"]["tiny-wan-t2v"]["quantization"] = recipe
        with pytest.raises(UserError, match=f"benchmarks.tiny-wan-t2v.quantization: .*{message}"):
            validate_config(config, SCHEMA)


@pytest.mark.slow
def test_the_quantize_rule_takes_the_pipeline_and_no_calibration_rows(tmp_path, demo_config):
    import yaml
    from conftest import make_workdir, run_snakemake

    work = make_workdir(tmp_path)
    demo_config["benchmarks"]["tiny-wan-t2v"]["quantization"] = "mxfp4-w4a4"
    (work / "wan.yaml").write_text(yaml.safe_dump(demo_config))
    target = "results/models/tiny-wan-mxfp4-w4a4"
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "wan.yaml", "-p", target, timeout=120)
    assert result.returncode == 0, result.stderr
    quantize = result.stdout.split("rule quantize:", 1)[1].split("\n\n", 1)[0]
    assert "input: resources/models/tiny-wan\n" in quantize and "resources/datasets" not in quantize
    assert f"output: {target}, {target}-emulated" in quantize


def test_the_package_texts_name_the_pipeline_scope():
    from mlperf_repro.quant.tools import calibration_lines, transformations

    recipe = {"scheme": "fp8_dynamic", "exclude": ["lm_head"]}
    text = transformations(recipe, {}, pipeline=True)
    assert "lm_head" not in text and "excluded: patch_embedding" in text and "inside the blocks" in text
    assert "no calibration" in text
    lines = calibration_lines(recipe, {}, {}, pipeline=True)
    assert lines[0].startswith("- Quantized: every nn.Linear inside the blocks of the pipeline's transformers")
    assert "- Calibration data: none (weight scales from the weights, activation scales at run time)." in lines
