"""MXFP4 quantization at scale: peak memory and throughput of our streaming writer vs llm-compressor.

Writes a synthetic Llama checkpoint once (random bf16 weights, real Llama tensor names and
shapes: hidden 4096, intermediate 14336, 32 heads / 8 KV heads, vocab 32000; ``--layers``
decoder blocks, 18 by default = 8.4 GB) to a scratch folder outside the repository, then,
each in a fresh child process on the same checkpoint:

* ours: :func:`mlperf_repro.quant.checkpoint.quantize_checkpoint` (scheme mxfp4_weight_only,
  evaluation off), which writes the Quark MXFP4 checkpoint AND the emulated bf16 copy and
  hashes the input and both outputs for the manifest;
* llm-compressor's data-free path, ``model_free_ptq(scheme="MXFP4A16", ignore=["lm_head"])``
  on CPU (the same W4A16 MXFP4, compressed-tensors layout, one output), run with the Python
  of its own venv (``--llmc-python``; install: ``python3 -m venv /tmp/llmc &&
  /tmp/llmc/bin/pip install llmcompressor``, kept out of the project's .venv).

Peak RSS is the child's ``ru_maxrss`` (os.wait4); throughput is source checkpoint bytes per
wall second. The source is read once before the runs so both start from a warm page cache.
Prints a Markdown table with the command and the date.

    .venv/bin/python bench/quantize.py [--scratch /tmp/quant-bench] [--layers 18] [--llmc-python /tmp/llmc/bin/python]
        [--shape llama3-8b|llama2-70b] [--paths ours,llmc,ours-eval,quark]

``--shape llama2-70b --paths ours,quark`` is the rehearsal of the vendor's job at the real
shape (issue 37): a few real-sized decoder blocks (80 would be 138 GB), each path's time per
block and peak RSS, which a whole model's job multiplies by 80 (ours) or holds all at once
(Quark loads the whole model: ``from_pretrained``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (hidden, intermediate, heads, KV heads, vocab) of the shapes --shape picks.
SHAPES = {
    "llama3-8b": (4096, 14336, 32, 8, 32000),  # the default: 18 layers = 8.4 GB
    "llama2-70b": (8192, 28672, 64, 8, 32000),  # Llama 2 70B's real dimensions (80 layers = 138 GB)
}
HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, VOCAB = SHAPES["llama3-8b"]
SHARD_BYTES = 2 * 10**9


def use_shape(name: str) -> None:
    global HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, VOCAB
    HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, VOCAB = SHAPES[name]


def llama_config(layers: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "num_hidden_layers": layers,
        "vocab_size": VOCAB,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def llama_shapes(layers: int) -> list[tuple[str, tuple[int, ...]]]:
    kv = HIDDEN // HEADS * KV_HEADS
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN))]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (HIDDEN,)),
            (p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN)),
            (p + "self_attn.k_proj.weight", (kv, HIDDEN)),
            (p + "self_attn.v_proj.weight", (kv, HIDDEN)),
            (p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN)),
            (p + "post_attention_layernorm.weight", (HIDDEN,)),
            (p + "mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN)),
            (p + "mlp.up_proj.weight", (INTERMEDIATE, HIDDEN)),
            (p + "mlp.down_proj.weight", (HIDDEN, INTERMEDIATE)),
        ]
    return out + [("model.norm.weight", (HIDDEN,)), ("lm_head.weight", (VOCAB, HIDDEN))]


def make_checkpoint(path: Path, layers: int) -> None:
    """Random bf16 weights (std 0.02, norms 1) in HF shards of ~2 GB with an index."""
    import torch
    from safetensors.torch import save_file

    marker = path / "BENCH_DONE"
    if marker.is_file() and marker.read_text() == str(layers):
        return
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(llama_config(layers), indent=2))
    gen = torch.Generator().manual_seed(0)
    groups: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, shape in llama_shapes(layers):
        n = 2 * math.prod(shape)
        if groups[-1] and size + n > SHARD_BYTES:
            groups.append([])
            size = 0
        groups[-1].append((name, shape))
        size += n
    weight_map, total = {}, 0
    for k, group in enumerate(groups, 1):
        fname = f"model-{k:05d}-of-{len(groups):05d}.safetensors"
        tensors = {}
        for name, shape in group:
            if len(shape) == 1:
                tensors[name] = torch.ones(shape, dtype=torch.bfloat16)
            else:
                tensors[name] = (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
            weight_map[name] = fname
            total += tensors[name].numel() * 2
        save_file(tensors, path / fname, metadata={"format": "pt"})
        del tensors
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    marker.write_text(str(layers))


OURS = """
import sys
from mlperf_repro.quant.checkpoint import quantize_checkpoint
quantize_checkpoint(sys.argv[1], sys.argv[2] + "/quark", sys.argv[2] + "/emulated", evaluate=False)
"""

OURS_EVAL = """
import json, sys
from mlperf_repro.quant.checkpoint import quantize_checkpoint
m = quantize_checkpoint(sys.argv[1], sys.argv[2] + "/quark", sys.argv[2] + "/emulated", mem_mb=8000)
print(json.dumps({"evaluation": m["evaluation"], "worst": m["layerwise_error"]["worst"], "mean": m["layerwise_error"]["mean"]}))
"""

# The vendor's Quark recipe through the quantize job (quark_job, as the workflow's rule runs
# it) on the CPU: AutoSmoothQuant through Quark's emulation of its fused kernel, then GPTQ, on a
# few calibration rows (the calibration's size is bench/quark_calibration.py's subject).
QUARK = """
import json, random, sys
from pathlib import Path
import pandas as pd
from mlperf_repro.quant.quark_tool import quark_job
src, out = Path(sys.argv[1]), Path(sys.argv[2])
rng = random.Random(1)
data = out / "calibration.pkl"
pd.DataFrame({"tok_input": [[rng.randrange(32000) for _ in range(160)] for _ in range(8)], "output": ["x"] * 8}).to_pickle(data)
recipe = {"scheme": "mxfp4", "tool": "quark", "kv_cache": "fp8", "algorithms": ["autosmoothquant", "gptq"],
          "exclude": ["lm_head"], "device": "cpu",
          "calibration": {"samples": 8, "seq_len": 128, "packing": "per_row", "seed": 0}}
manifest = quark_job(str(src), str(out / "quark"), str(out / "emulated"), recipe, calibration_file=str(data))
print(json.dumps({"quark_seconds": manifest["quark"]["seconds"]}))
"""

LLMC = """
import sys
from llmcompressor.entrypoints.model_free import model_free_ptq
model_free_ptq(sys.argv[1], sys.argv[2], scheme="MXFP4A16", ignore=["lm_head"], max_workers=1, device="cpu")
"""


def run_child(python: str, code: str, src: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "CUDA_VISIBLE_DEVICES": ""}
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-c", code, str(src), str(out)], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{python} child failed with status {status}")
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {"wall_s": wall, "peak_rss": usage.ru_maxrss * 1024, "written": written}


def warm(path: Path) -> None:
    for f in sorted(path.glob("*.safetensors")):
        with open(f, "rb") as fh:
            while fh.read(64 * 2**20):
                pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/quant-bench"))
    ap.add_argument("--layers", type=int, default=18)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b")
    ap.add_argument("--llmc-python", default="/tmp/llmc/bin/python")
    ap.add_argument(
        "--paths",
        default="ours,llmc",
        help="comma-separated: ours, llmc, ours-eval (ours with the evaluation a job of mem_mb=8000 picks), "
        "quark (the vendor's recipe through the Quark quantize job on the CPU)",
    )
    ap.add_argument("--make-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    use_shape(args.shape)

    suffix = "" if args.shape == "llama3-8b" else f"-{args.shape}"
    src = args.scratch / f"llama-synth-{args.layers}l{suffix}"
    if args.make_only:
        make_checkpoint(src, args.layers)
        return
    # In a child of its own: a parent that had held the weights would pass its peak RSS on to
    # every child it forks (ru_maxrss counts the time before exec).
    subprocess.run(
        [sys.executable, __file__, "--make-only", "--scratch", str(args.scratch), "--layers", str(args.layers)]
        + ["--shape", args.shape],
        check=True,
    )
    shapes = llama_shapes(args.layers)
    src_bytes = sum(f.stat().st_size for f in src.glob("*.safetensors"))
    largest_name, largest_shape = max(shapes, key=lambda s: math.prod(s[1]))
    largest = 2 * math.prod(largest_shape)
    goal = 2 * largest + 10**9

    paths = args.paths.split(",")
    results = {}
    if "ours" in paths:
        warm(src)
        results["ours (quantize_checkpoint: quark + emulated bf16 + hashes)"] = run_child(
            sys.executable, OURS, src, args.scratch / "out-ours"
        )
    if "llmc" in paths:
        warm(src)
        results["llm-compressor model_free_ptq (MXFP4A16)"] = run_child(
            args.llmc_python, LLMC, src, args.scratch / "out-llmc"
        )
    if "ours-eval" in paths:
        warm(src)
        results["ours + evaluation chosen for mem_mb=8000 (layer-wise)"] = run_child(
            sys.executable, OURS_EVAL, src, args.scratch / "out-ours-eval"
        )
    if "quark" in paths:
        warm(src)
        results["Quark quantize job, CPU (AutoSmoothQuant emulated + GPTQ, 8 x 128 calibration)"] = run_child(
            sys.executable, QUARK, src, args.scratch / "out-quark"
        )
    llmc_version = ""
    if "llmc" in paths:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        llmc_version = (
            subprocess.run(
                [args.llmc_python, "-c", "import llmcompressor; print(llmcompressor.__version__)"],
                capture_output=True,
                text=True,
                env=env,
            )
            .stdout.strip()
            .splitlines()[-1]
        )

    gb = 1e9
    cmd = " ".join(["python bench/quantize.py", *sys.argv[1:]])
    print(f"`{cmd}`, {dt.date.today().isoformat()}, {platform.machine()} {os.cpu_count()} CPUs")
    print(
        f"source: {src_bytes / gb:.2f} GB bf16, {args.layers} layers; largest tensor {largest_name} "
        f"{tuple(largest_shape)} = {largest / gb:.3f} GB; goal: peak RSS < 2 x largest + 1 GB = {goal / gb:.2f} GB"
        + (f"; llmcompressor {llmc_version}" if llmc_version else "")
    )
    print()
    print(
        "| path | wall s | s per layer | GB/s (source) | written GB | peak RSS GB | peak RSS / largest tensor | under goal |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['wall_s']:.1f} | {r['wall_s'] / args.layers:.1f} | {src_bytes / gb / r['wall_s']:.3f} | "
            f"{r['written'] / gb:.2f} | {r['peak_rss'] / gb:.2f} | {r['peak_rss'] / largest:.1f}x | "
            f"{'yes' if r['peak_rss'] < goal else 'no'} |"
        )


if __name__ == "__main__":
    main()
