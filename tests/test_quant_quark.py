"""tool: quark - AMD Quark run for real (its own environment, .venv-quark) on a tiny Llama.

The tiny random Llama (hidden 64, 2 layers, vocab 128) is built locally; the calibration
rows come from a small OpenOrca-shaped pickle (tok_input) written here. Skipped only when
the Quark environment is not built (./install.sh --quark).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mlperf_repro.errors import UserError
from mlperf_repro.hashing import sha256_file
from mlperf_repro.quant import quark_tool
from mlperf_repro.quant.calibration import fixed_length, pad_token_id, select_calibration
from mlperf_repro.quant.tools import TOOLS, calibration_lines, transformations
from mlperf_repro.quant.validate import dequantized_shards, validate_checkpoint

# Every test that runs Quark: slow, and skipped only when its environment is not built.
runs_quark = [
    pytest.mark.slow,
    pytest.mark.skipif(quark_tool.quark_python() is None, reason="build it with ./install.sh --quark"),
]


def _runs_quark(test):
    for mark in runs_quark:
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from conftest import save_tiny_llama

    path = save_tiny_llama(tmp_path_factory.mktemp("src") / "tiny-llama")
    (path / "tokenizer_config.json").write_text('{"model_max_length": 128}\n')
    return path


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory) -> Path:
    import pandas as pd

    rng = random.Random(1)
    rows = [[rng.randrange(128) for _ in range(rng.randrange(8, 40))] for _ in range(20)]
    path = tmp_path_factory.mktemp("data") / "calibration.pkl"
    pd.DataFrame({"tok_input": rows, "output": ["x"] * len(rows)}).to_pickle(path)
    return path


RECIPE = {
    "scheme": "mxfp4",
    "tool": "quark",
    "kv_cache": "fp8",
    "algorithms": ["gptq"],
    "calibration": {"samples": 6, "seed": 3, "seq_len": 16},
}


TARGET = "results/models/tiny-llama-vendor"


@pytest.fixture(scope="module")
def quark_run(model_dir, dataset_file, tmp_path_factory):
    """The recipe through the workflow's quantize rule, as a user runs it: the model and the
    calibration dataset acquired from local folders against their checksums, Quark run in its
    environment, the manifest written. One Quark run serves the tests that read its output
    (importing quark.torch alone takes about a minute on 2 cores)."""
    import shutil

    from conftest import DEFAULT_CONFIG, llama2_part, make_workdir, run_snakemake, write_recipe_config

    from mlperf_repro.config import load_yaml

    root = tmp_path_factory.mktemp("quark")
    work = make_workdir(root)
    hub = root / "hub"
    shutil.copytree(model_dir, hub / "tiny-llama")
    (hub / "data").mkdir()
    shutil.copyfile(dataset_file, hub / "data" / "calibration.pkl")
    config = llama2_part(load_yaml(DEFAULT_CONFIG))
    config["models"] = {
        "tiny-llama": {
            "source": f"file://{hub / 'tiny-llama'}",
            "sha256": {p.name: sha256_file(p) for p in sorted((hub / "tiny-llama").iterdir())},
        }
    }
    config["datasets"] = {
        "openorca-synthetic": {
            "source": f"file://{hub / 'data'}",
            "file": "calibration.pkl",
            "sha256": {"calibration.pkl": sha256_file(dataset_file)},
        }
    }
    configfile = write_recipe_config(work, config, "vendor", RECIPE)
    result = run_snakemake(work, TARGET, "--cores", "2", "--configfile", configfile, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return work


def test_registered():
    assert TOOLS["quark"].job == "quark_tool:quark_job"


def test_calibration_rows_are_seeded(dataset_file):
    import pandas as pd

    a = select_calibration(dataset_file, {"samples": 5, "seed": 7, "seq_len": 10})
    b = select_calibration(dataset_file, {"samples": 5, "seed": 7, "seq_len": 10})
    c = select_calibration(dataset_file, {"samples": 5, "seed": 8, "seq_len": 10})
    assert a == b and a["rows"] != c["rows"] and len(a["rows"]) == 5
    frame = pd.read_pickle(dataset_file)
    tokens = [t for i in a["rows"] for t in frame["tok_input"].iloc[i]]
    assert all(len(r) == 10 for r in a["input_ids"]) and len(a["input_ids"]) == len(tokens) // 10
    assert [t for r in a["input_ids"] for t in r] == tokens[: 10 * len(a["input_ids"])]
    assert a["sha256"] == sha256_file(dataset_file)
    assert a["packing"] == "concatenate"


def test_per_row_calibration_truncates_each_row_and_joins_none(dataset_file):
    import pandas as pd

    rows = select_calibration(dataset_file, {"samples": 5, "seed": 7, "seq_len": 10, "packing": "per_row"})
    frame = pd.read_pickle(dataset_file)
    assert rows["input_ids"] == [[int(t) for t in frame["tok_input"].iloc[i]][:10] for i in rows["rows"]]
    assert rows["sequences"] == 5 and rows["packing"] == "per_row"
    with pytest.raises(UserError, match="calibration.packing.*concatenate, per_row"):
        select_calibration(dataset_file, {"packing": "padded"})


def test_fixed_length_pads_on_the_right_to_the_longest():
    padded, info = fixed_length([[5, 6, 7], [8], [9, 10]], pad_id=2)
    assert padded == [[5, 6, 7], [8, 2, 2], [9, 10, 2]]
    assert info == {"length": 3, "pad_token_id": 2, "padded_sequences": 2, "pad_tokens": 3}


def test_pad_token_is_the_models_pad_else_its_end_of_sequence(tmp_path):
    (tmp_path / "config.json").write_text('{"eos_token_id": [7, 8]}')
    assert pad_token_id(tmp_path) == 7
    (tmp_path / "generation_config.json").write_text('{"pad_token_id": 0}')
    assert pad_token_id(tmp_path) == 0
    (tmp_path / "config.json").write_text('{"pad_token_id": 3, "eos_token_id": 2}')
    assert pad_token_id(tmp_path) == 3
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "generation_config.json").unlink()
    with pytest.raises(UserError, match=r"config.json.*pad_token_id or eos_token_id.*packing: concatenate"):
        pad_token_id(tmp_path)


@pytest.mark.slow
def test_device_cpu_hides_the_gpus_from_quark(monkeypatch, tmp_path, model_dir):
    """Quark's GPTQ synchronises CUDA whenever torch sees a GPU, also for a model on the CPU
    (seen on an H200 host): asked for the CPU, the runner's environment shows it no GPU. The
    Quark environment here is a stand-in Python that records the environment it was given."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text(
        "#!/bin/sh\n"
        f"exec {sys.executable} -c 'import json, os, sys; a = json.load(open(sys.argv[2])); "
        'json.dump({k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}, '
        'open(a["report"], "w"))\' "$@"\n'
    )
    (env / "bin" / "python").chmod(0o755)
    monkeypatch.setenv(quark_tool.ENV_VARIABLE, str(env))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    calibration = {"input_ids": [[1, 2, 3]], "seed": 0}
    seen = quark_tool.run_quark(model_dir, tmp_path / "q", RECIPE, calibration, work_dir=tmp_path, device="cpu")
    assert seen == {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    seen = quark_tool.run_quark(model_dir, tmp_path / "q", RECIPE, calibration, work_dir=tmp_path, device=None)
    assert seen["CUDA_VISIBLE_DEVICES"] == "0,1"


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 40),
    width=st.sampled_from([1, 8, 24, 32, 40, 48, 96, 100]),
    max_elements=st.integers(1, 5000),
)
def test_row_chunks_hold_whole_mx_blocks_and_join_to_the_one_call(rows, width, max_elements):
    """quark_runner.chunked_qdq against one call, with a kernel that scales each block of 32
    consecutive elements of the flattened tensor by its own maximum: a chunk boundary inside a
    block would change the result. (Quark's kernels block along rows, a weaker condition.)"""
    from mlperf_repro.quant import quark_runner

    def kernel(x, mode="even"):
        flat = x.reshape(-1)
        pad = (-flat.numel()) % 32
        blocks = torch.nn.functional.pad(flat, (0, pad)).reshape(-1, 32)
        scaled = blocks / blocks.abs().amax(dim=1, keepdim=True).clamp(min=1e-6)
        return scaled.reshape(-1)[: flat.numel()].reshape(x.shape)

    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(rows * 1000 + width))
    stats = {"calls": 0, "chunked_calls": 0, "chunks": 0, "largest_call_elements": 0}
    chunked = quark_runner.chunked_qdq(kernel, max_elements, stats, torch)(x)
    assert torch.equal(chunked, kernel(x))
    step = quark_runner.chunk_rows(rows, width, max_elements)
    assert (step * width) % 32 == 0 and (step * width <= max_elements or step * width <= 32 * width)
    assert stats["chunked_calls"] == (x.numel() > max_elements)


# The vendor's algorithms and packing, with every MXFP4 fake-quantize call above 1,000 elements
# cut into chunks (qdq_max_elements): one Quark run that two tests read.
VENDOR_CHUNKED = {
    **RECIPE,
    "algorithms": ["autosmoothquant", "gptq"],
    "calibration": {"samples": 8, "seed": 3, "seq_len": 32, "packing": "per_row"},
}


@pytest.fixture(scope="module")
def vendor_chunked(model_dir, dataset_file, tmp_path_factory):
    work = tmp_path_factory.mktemp("vendor-chunked")
    calibration = select_calibration(dataset_file, VENDOR_CHUNKED["calibration"])
    report = quark_tool.run_quark(
        model_dir,
        work / "q",
        VENDOR_CHUNKED,
        calibration,
        work_dir=work,
        qdq_reference=work / "qdq.safetensors",
        device="cpu",
        qdq_max_elements=1000,
    )
    return work, calibration, report


def _checkpoint_tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {name: t for shard in sorted(folder.glob("*.safetensors")) for name, t in load_file(shard).items()}


@_runs_quark
def test_vendor_packing_per_row_runs_through_autosmoothquant_and_gptq(vendor_chunked):
    """The vendor's calibration (each row one sequence, truncated: ``packing: per_row``) gives
    sequences of unequal length; Quark's layer-wise replay (GPTQ, AutoSmoothQuant) failed on them
    ("The size of tensor a (33) must match the size of tensor b (17)"). They are padded to one
    length, and the codec still decodes Quark's own quantize-dequantize bit for bit."""
    from safetensors.torch import load_file

    work, calibration, report = vendor_chunked
    lengths = [len(ids) for ids in calibration["input_ids"]]
    assert len(set(lengths)) > 1
    padding = report["calibration_padding"]
    assert padding["length"] == max(lengths) and padding["pad_tokens"] == sum(max(lengths) - n for n in lengths)
    assert report["calibration_tokens"] == max(lengths) * len(lengths)
    sent = json.loads((work / "calibration.json").read_text())["input_ids"]
    assert {len(ids) for ids in sent} == {max(lengths)}
    assert [ids[:n] for ids, n in zip(sent, lengths)] == calibration["input_ids"]
    decoded: dict[str, torch.Tensor] = {}
    for _, tensors in dequantized_shards(work / "q", dtype=torch.float32):
        decoded.update(tensors)
    assert all(torch.equal(decoded[name], expected) for name, expected in load_file(work / "qdq.safetensors").items())


@_runs_quark
def test_autosmoothquant_runs_on_cpu_and_chunked_calls_change_nothing(vendor_chunked, model_dir, tmp_path):
    """The vendor's algorithms on a CPU (Quark's emulation of its fused MXFP4 kernel), with every
    fake-quantize call cut into chunks of at most 1,000 elements and with every call whole: the
    exported checkpoints are the same bytes."""
    chunked_work, calibration, chunked_report = vendor_chunked
    whole_report = quark_tool.run_quark(
        model_dir, tmp_path / "q", VENDOR_CHUNKED, calibration, work_dir=tmp_path, device="cpu", qdq_max_elements=2**30
    )
    whole, chunked = whole_report["mxfp4_qdq"], chunked_report["mxfp4_qdq"]
    assert "emulation" in whole["implementation"] and whole["calls"] > 0
    assert whole["chunked_calls"] == 0 and chunked["chunked_calls"] > 0
    assert chunked["largest_call_elements"] > 1000 and chunked["chunks"] > chunked["chunked_calls"]
    one_call, in_chunks = _checkpoint_tensors(tmp_path / "q"), _checkpoint_tensors(chunked_work / "q")
    assert one_call.keys() == in_chunks.keys() and one_call
    assert all(torch.equal(one_call[n], in_chunks[n]) for n in one_call)


@_runs_quark
def test_manifest_records_tool_version_and_calibration(quark_run, dataset_file):
    quantized, emulated = quark_run / TARGET, quark_run / f"{TARGET}-emulated"
    on_disk = json.loads((quantized / "quant_manifest.json").read_text())
    assert on_disk == json.loads((emulated / "quant_manifest.json").read_text())
    assert on_disk["tool"] == "quark" and on_disk["quark_version"] == "0.13"
    assert on_disk["software"]["amd-quark"] == "0.13"
    assert on_disk["calibration"]["sha256"] == sha256_file(dataset_file)
    assert on_disk["calibration"]["seed"] == 3 and len(on_disk["calibration"]["rows"]) == 6
    # The workflow's recipe: the config's, with the schema's defaults filled in.
    calibration = {**RECIPE["calibration"], "packing": "concatenate"}
    assert on_disk["recipe"] == {**RECIPE, "exclude": ["lm_head"], "scale_mode": "even", "calibration": calibration}
    assert on_disk["quark"]["algorithms"] == ["gptq"]
    # documentation/calibration.md and measurements.json name the tool, not the project codec
    text = "\n".join(calibration_lines(RECIPE, {}, on_disk))
    assert "AMD Quark 0.13" in text and on_disk["calibration"]["sha256"] in text and "gptq" in text
    assert "by AMD Quark" in transformations(RECIPE, {}) and "project codec" not in transformations(RECIPE, {})
    assert not on_disk["validation"].get("findings")
    # The served copy against the unquantized model, by the job's memory (the rule's mem_mb).
    assert on_disk["evaluation"]["method"] in ("logits", "layerwise")
    error = on_disk["logit_error"] or on_disk["layerwise_error"]
    assert error and (error.get("rel_mean") or error.get("max")) < 0.5


@_runs_quark
def test_checkpoint_is_quark_mxfp4_with_fp8_kv_and_validates(quark_run, model_dir):
    quantized = quark_run / TARGET
    qc = json.loads((quantized / "config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "quark" and qc["exclude"] == ["lm_head"]
    weight, act = qc["global_quant_config"]["weight"], qc["global_quant_config"]["input_tensors"]
    assert (weight["dtype"], weight["group_size"], weight["scale_format"], weight["is_dynamic"]) == (
        "fp4",
        32,
        "e8m0",
        False,
    )
    assert weight["scale_calculation_mode"] == "even"
    assert act["dtype"] == "fp4" and act["is_dynamic"] is True
    assert qc["kv_cache_quant_config"]["*k_proj"]["output_tensors"]["dtype"] == "fp8_e4m3"
    assert [a["name"] for a in qc["algo_config"]] == ["gptq"]
    report = validate_checkpoint(quantized, model_dir)
    assert report.ok, report.findings
    assert report.weight_format == "mxfp4" and len(report.quantized) == 14
    assert report.activations == "dynamic" and report.declared["kv_cache"]["scales"] == 4  # k and v, 2 layers
    assert (quantized / "tokenizer_config.json").is_file()


@_runs_quark
def test_mxfp4_fp8_exports_static_fp8_activation_scales_that_validate(model_dir, dataset_file, tmp_path):
    """Quark's mxfp4_fp8 (AMD's gpt-oss-120b scheme: MXFP4 weights, FP8 activations with a static
    per-tensor scale) through the quantize job: the validator finds every scale Quark stored
    under the names it expects, and a missing one is named."""
    import shutil

    from safetensors.torch import load_file, save_file

    recipe = {**RECIPE, "scheme": "mxfp4_fp8", "algorithms": []}
    manifest = quark_tool.quark_job(
        str(model_dir), str(tmp_path / "q"), str(tmp_path / "e"), recipe, calibration_file=str(dataset_file)
    )
    act = manifest["validation"]["activations"]
    assert (act["dtype"], act["static"], act["scales"]) == ("fp8_e4m3", True, 14)
    assert manifest["validation"]["kv_cache"]["scales"] == 4
    assert "FP8, one static per-tensor scale per Linear" in "\n".join(calibration_lines(recipe, {}, manifest))
    broken = shutil.copytree(tmp_path / "q", tmp_path / "broken")
    for shard in broken.glob("*.safetensors"):
        tensors = load_file(shard)
        tensors.pop("model.layers.1.mlp.down_proj.input_scale")
        save_file(tensors, shard, metadata={"format": "pt"})
    findings = validate_checkpoint(broken, decode=False).findings
    assert [(f.tensor, f.rule) for f in findings] == [
        ("model.layers.1.mlp.down_proj.input_scale", "activation-scale-missing")
    ]


@_runs_quark
def test_our_codec_decodes_quarks_own_dequantization(model_dir, dataset_file, tmp_path):
    """Quark's quantize-dequantize of each weight (its frozen weight quantizer) against our
    MXFP4 codec decoding Quark's packed export: bit for bit."""
    from safetensors.torch import load_file

    calibration = select_calibration(dataset_file, RECIPE["calibration"])
    qdq = tmp_path / "qdq.safetensors"
    quark_tool.run_quark(
        model_dir, tmp_path / "q", RECIPE, calibration, work_dir=tmp_path, qdq_reference=qdq, device="cpu"
    )
    reference = load_file(qdq)
    decoded: dict[str, torch.Tensor] = {}
    for _, tensors in dequantized_shards(tmp_path / "q", dtype=torch.float32):
        decoded.update(tensors)
    assert len(reference) == 14
    for name, expected in reference.items():
        assert torch.equal(decoded[name], expected), name


@_runs_quark
def test_emulated_copy_is_plain_bf16_of_the_decoded_weights(quark_run):
    from safetensors.torch import load_file

    quantized, copy = quark_run / TARGET, quark_run / f"{TARGET}-emulated"
    config = json.loads((copy / "config.json").read_text())
    assert "quantization_config" not in config
    emulated = {}
    for f in sorted(copy.glob("*.safetensors")):
        emulated.update(load_file(f))
    assert all(t.dtype == torch.bfloat16 for t in emulated.values())
    assert not any(n.endswith(("_scale", "output_scale")) for n in emulated)
    decoded = {}
    for _, tensors in dequantized_shards(quantized):
        decoded.update(tensors)
    assert emulated.keys() == decoded.keys()
    assert all(torch.equal(emulated[n], decoded[n]) for n in decoded)


@_runs_quark
def test_missing_env_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv(quark_tool.ENV_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(UserError, match=r"install\.sh --quark"):
        quark_tool.run_quark(tmp_path, tmp_path / "q", RECIPE, {"input_ids": [[1]], "seed": 0}, work_dir=tmp_path)


def test_quark_recipe_keys_in_config(default_config):
    from conftest import SCHEMA

    from mlperf_repro.config import validate_config

    config = default_config
    config["quantization"]["vendor"] = dict(RECIPE, max_error=0.3)
    validate_config(config, SCHEMA)
    config["quantization"]["vendor"] = {"scheme": "mxfp4", "algorithms": ["gptq"]}
    with pytest.raises(UserError, match="quantization.vendor.algorithms: only for tool quark"):
        validate_config(config, SCHEMA)
    config["quantization"]["vendor"] = {"scheme": "mxfp4", "tool": "quark", "algorithms": ["awq"]}
    with pytest.raises(UserError, match="quantization.vendor.algorithms"):
        validate_config(config, SCHEMA)


@pytest.mark.slow
def test_quark_recipe_in_the_dag(tmp_path, default_config):
    """The quantize job of a quark recipe waits for the benchmark's dataset (its calibration rows)."""
    import yaml
    from conftest import llm_benchmarks, make_workdir, run_snakemake

    work = make_workdir(tmp_path)
    config = default_config
    config["quantization"]["vendor"] = RECIPE
    for bench in llm_benchmarks(config):  # tool quark quantizes LLM checkpoints
        bench["quantization"] = "vendor"
    (work / "vendor.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(work, "-n", "--cores", "2", "--configfile", "vendor.yaml", "-p", timeout=120)
    assert result.returncode == 0, result.stderr
    quantize = result.stdout.split("rule quantize:", 1)[1].split("\n\n", 1)[0]
    dataset = next(iter(config["benchmarks"].values()))["dataset"]
    assert f"resources/datasets/{dataset}" in quantize and "results/models/tiny-llama-vendor" in quantize


@_runs_quark
def test_calibration_rows_come_from_the_acquired_dataset(quark_run, dataset_file):
    manifest = json.loads((quark_run / TARGET / "quant_manifest.json").read_text())
    assert manifest["tool"] == "quark" and manifest["validation"]["ok"]
    assert manifest["calibration"]["sha256"] == sha256_file(dataset_file)
    assert manifest["calibration"]["file"].endswith("resources/datasets/openorca-synthetic/calibration.pkl")
    assert (quark_run / f"{TARGET}-emulated" / "model.safetensors").is_file()


def test_preflight_names_a_missing_quark_env(default_config, tmp_path, monkeypatch):
    from conftest import llm_benchmarks

    from mlperf_repro.check.preflight import preflight

    config = default_config
    config["quantization"]["vendor"] = RECIPE
    for bench in llm_benchmarks(config):  # tool quark quantizes LLM checkpoints
        bench["quantization"] = "vendor"
    monkeypatch.setenv(quark_tool.ENV_VARIABLE, str(tmp_path / "nowhere"))
    found = [f for f in preflight(config, tmp_path) if f.rule == "quark-env"]
    assert len(found) == 1 and "install.sh --quark" in found[0].message
    assert found[0].path == "quantization.vendor.tool"
    monkeypatch.setenv(quark_tool.ENV_VARIABLE, str(tmp_path / "env"))
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").write_text("")
    assert not [f for f in preflight(config, tmp_path) if f.rule == "quark-env"]
