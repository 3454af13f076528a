"""The vendor's Quark recipe at the vendor's calibration size, on a CPU, at reduced width (issue 37).

amd-quark 0.13's AutoSmoothQuant fake-quantizes a whole calibration set's activations in one
kernel call, and on an H200 calls of 2**31 elements or more failed: Llama 2 70B's down
projection (28,672 wide) at 128 sequences of 1,024 tokens. The quark runner cuts larger calls
into exact row chunks (``qdq_max_elements``). This bench shows, on this machine:

* the quantize job (:func:`mlperf_repro.quant.quark_tool.quark_job`, what the workflow's rule
  runs) with the vendor's recipe (MXFP4 weights and activations, FP8 KV cache, AutoSmoothQuant
  then GPTQ, 1,000 rows cut per row to 1,024 tokens, ``device: cpu``: Quark's emulation of its
  fused kernel) on a random Llama of reduced width: hidden 64 and intermediate 224 (Llama 2
  70B's ratio, 28,672 / 8,192 = 3.5), ``--layers`` decoder blocks;
* once with ``qdq_max_elements`` at 2**24 = 2**31 x 224 / 28,672, the real kernel's limit
  scaled by the width, so that the calls are cut where the real model's would be, and once
  with no limit (a CPU has none): the two checkpoints must be the same bytes;
* each run's wall time, peak RSS (the job's process tree: ``ru_maxrss`` of its children), the
  calibration tokens used and the fake-quantize calls (how many, how many cut, the largest).

    .venv/bin/python bench/quark_calibration.py [--layers 2] [--rows 1000] [--seq-len 1024] [--scratch DIR]

Needs ``./install.sh --quark``. Prints a Markdown table with the command and the date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HIDDEN, INTERMEDIATE, VOCAB = 64, 224, 128
REAL_INTERMEDIATE, REAL_KERNEL_LIMIT = 28_672, 2**31
SCALED_LIMIT = REAL_KERNEL_LIMIT * INTERMEDIATE // REAL_INTERMEDIATE  # 2**24
NO_LIMIT = 2**62


def build(scratch: Path, layers: int, rows: int, seq_len: int) -> tuple[Path, Path]:
    import pandas as pd
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    model_dir, data = scratch / "llama-reduced", scratch / "calibration.pkl"
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=layers,
        num_attention_heads=1,
        num_key_value_heads=1,
        vocab_size=VOCAB,
        max_position_embeddings=2 * seq_len,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(model_dir)  # float32: the CPU's fast path
    (model_dir / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 2 * seq_len}) + "\n")
    rng = random.Random(1)
    tokens = [[rng.randrange(VOCAB) for _ in range(seq_len + rng.randrange(0, 64))] for _ in range(rows)]
    pd.DataFrame({"tok_input": tokens, "output": ["x"] * rows}).to_pickle(data)
    return model_dir, data


def child(args: argparse.Namespace) -> None:
    """One quantize job in this process; prints one JSON line."""
    from mlperf_repro.quant.quark_tool import quark_job

    recipe = {
        "scheme": "mxfp4",
        "tool": "quark",
        "kv_cache": "fp8",
        "algorithms": ["autosmoothquant", "gptq"],
        "exclude": ["lm_head"],
        "device": "cpu",
        "qdq_max_elements": args.limit,
        "calibration": {"samples": args.rows, "seq_len": args.seq_len, "packing": "per_row", "seed": 0},
    }
    out = Path(args.out)
    started = time.perf_counter()
    manifest = quark_job(str(args.model), str(out / "q"), str(out / "e"), recipe, calibration_file=str(args.data))
    wall = time.perf_counter() - started
    quark = manifest["quark"]
    digest = hashlib.sha256()
    for shard in sorted((out / "q").glob("*.safetensors")):
        digest.update(shard.read_bytes())
    print(
        json.dumps(
            {
                "wall_s": round(wall, 1),
                "rows": quark["calibration_rows"],
                "tokens": quark["calibration_tokens"],
                "qdq": quark["mxfp4_qdq"],
                "quark_seconds": quark["seconds"],
                "checkpoint_sha256": digest.hexdigest(),
            }
        )
    )


def run_child(args: argparse.Namespace, model: Path, data: Path, limit: int, out: Path) -> dict:
    command = [sys.executable, __file__, "--child", "--model", str(model), "--data", str(data), "--out", str(out)]
    command += ["--limit", str(limit), "--rows", str(args.rows), "--seq-len", str(args.seq_len)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    stdout = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"the quantize job failed (limit {limit}); its output: {stdout[-2000:]}")
    report = json.loads(stdout.strip().splitlines()[-1])
    # The job's peak: the child's own or its Quark runner's, whichever is larger (ru_maxrss of
    # the waited-for tree reports the largest single process).
    report["peak_rss_mb"] = round(usage.ru_maxrss / 1024)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--scratch", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="quark-calibration-"))
    scratch.mkdir(parents=True, exist_ok=True)
    model, data = build(scratch, args.layers, args.rows, args.seq_len)
    runs = {}
    for label, limit in (("chunked (2**24, the kernel's limit scaled)", SCALED_LIMIT), ("one call each", NO_LIMIT)):
        runs[label] = run_child(args, model, data, limit, scratch / f"run-{limit}")
    same = len({r["checkpoint_sha256"] for r in runs.values()}) == 1
    today = dt.date.today().isoformat()
    print(
        f"\n`.venv/bin/python bench/quark_calibration.py --layers {args.layers} --rows {args.rows} "
        f"--seq-len {args.seq_len}`, {today}, {os.cpu_count()} CPUs, Quark on the CPU (emulated kernel)\n"
    )
    print("| run | rows | tokens | qdq calls | cut | chunks | largest call (elements) | wall s | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, r in runs.items():
        q = r["qdq"]
        print(
            f"| {label} | {r['rows']:,} | {r['tokens']:,} | {q['calls']:,} | {q['chunked_calls']:,} | "
            f"{q['chunks']:,} | {q['largest_call_elements']:,} | {r['wall_s']} | {r['peak_rss_mb']:,} |"
        )
    print(
        f"\ncheckpoints identical: {same} (sha256 of the shards: "
        + ", ".join(r["checkpoint_sha256"][:16] for r in runs.values())
        + ")"
    )
    print(
        json.dumps(
            {
                "runs": runs,
                "identical": same,
                "max_rss_self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            }
        )
    )
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
