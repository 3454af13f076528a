"""GPU check: the parts of the workflow that only a GPU runs, run on a real one.

Nothing in the test suite has a GPU. This script is the prepared check for a machine that
has one (the workplace lends an NVIDIA H200 to some tasks); it runs the product code, not
copies of it, and writes what it saw to ``OUT/gpu_check.json`` after every stage, so a
stage cut short by a time limit leaves the earlier ones on record:

* ``facts``: :func:`mlperf_repro.sysfacts.detect_accelerators` against the real
  ``nvidia-smi`` / ``amd-smi`` (the system description's accelerator fields);
* ``screen``: ``python -m mlperf_repro.cluster.screen --json --expected N`` (the
  ``screen_gpus`` job's check: enumeration, memory, the timed bf16 matmul, the verdict);
* ``quark``: the vendor's recipe for llama2-70b (OCP MXFP4 weights and activations, FP8 KV
  cache, AutoSmoothQuant then GPTQ, ``lm_head`` excluded: ``config/examples/mi355x-llama2-70b.yaml``)
  through :func:`mlperf_repro.quant.quark_tool.quark_job` on a tiny random Llama: Quark on
  the GPU, then our validation, emulated copy and manifest. (The suite runs AutoSmoothQuant
  only on the CPU, where the quark runner emulates Quark's fused ``qdq_mxfp4`` kernel;)
* ``emulation``: that CPU emulation (``quark_runner.cpu_qdq_mxfp4``, Quark's own
  ``fake_quantize_mx``) against the fused kernel on the GPU, bit for bit, on random bf16
  activations of Llama 2 70B's widths; and a call past 2**31 elements through the runner's
  chunking (it must succeed) next to the same call whole (which failed on an H200);
* ``qdq``: the same recipe once more with Quark's own quantize-dequantize of every weight
  saved; our MXFP4 codec decoding Quark's packed export must equal it bit for bit;
* ``cpu_vs_gpu``: GPTQ alone (the one algorithm of the recipe a CPU runs) on the tiny model
  on the CPU and on the GPU: the share of identical FP4 codes and E8M0 scales.
* ``scale``: the recipe on a Llama 2 70B-shaped model (hidden 8192, intermediate 28672, 64
  query / 8 KV heads, vocab 32000; ``--scale-layers`` decoder blocks, random bf16 weights)
  with ``--scale-samples`` calibration rows of up to 1,024 tokens (``packing: per_row``, as
  the vendor), last, in a child process given what is left of ``--deadline-s``: seconds per decoder block and peak GPU
  memory, then our validation of the export. The vendor's 1,000 rows need about 210 GB of GPU
  memory in AutoSmoothQuant's scale search (the down projection's input, 1,024,000 tokens x
  28,672 in bf16 = 58.7 GB, three copies of it and two outputs): an MI355X's 288 GB, not an
  H200's 141 GB, so the default counts (128, 512) are the ones an H200 holds;

Usage (Quark installed from its wheel beside the image's torch; ``MLPERF_REPRO_QUARK_ENV``
names a Python that imports it)::

    PYTHONPATH=src python3 bench/gpu_check.py --out DIR [--deadline-s 480] [--stages ...]

On a machine without a GPU every stage that needs one records that and is skipped, unless
``--rehearse-on-cpu``: then they run on the CPU (AutoSmoothQuant through the emulated kernel;
the emulation stage compares the emulation with itself) and a 1/16-width model in the scale
stage, to try the script before a GPU lease.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

STAGES = ("facts", "screen", "quark", "qdq", "emulation", "cpu_vs_gpu", "scale")
# Settings that change what Quark does, recorded with the results.
RECORDED_ENV = ("QUARK_DISABLE_COMPILE", "QUARK_MXFP4_IMPL", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CUDA_VISIBLE_DEVICES")
# The vendor's recipe for llama2-70b (config/examples/mi355x-llama2-70b.yaml), calibration cut
# to what a tiny model needs; the scale stage puts the vendor's calibration settings back.
VENDOR_RECIPE = {
    "scheme": "mxfp4",
    "tool": "quark",
    "scale_mode": "even",
    "kv_cache": "fp8",
    "algorithms": ["autosmoothquant", "gptq"],
    "exclude": ["lm_head"],
    "calibration": {"samples": 16, "seed": 3, "seq_len": 64, "packing": "per_row"},
}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
TINY.update(num_key_value_heads=2, vocab_size=128)
LLAMA2_70B = {"hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64}
LLAMA2_70B.update(num_key_value_heads=8, vocab_size=32000)
# The device comparison runs GPTQ alone: AutoSmoothQuant on a CPU runs the emulated kernel, a
# difference of its own. --rehearse-on-cpu runs the vendor's recipe (emulated) and the scale
# model at 1/16 of the width.
CPU_RECIPE = {**VENDOR_RECIPE, "algorithms": ["gptq"]}
REHEARSAL_SHAPE = {"hidden_size": 512, "intermediate_size": 1792, "num_attention_heads": 4}
REHEARSAL_SHAPE.update(num_key_value_heads=1, vocab_size=2000)
REHEARSE = False  # set by --rehearse-on-cpu


def accelerator() -> str:
    return "cpu" if REHEARSE else "cuda"


def recipe() -> dict[str, Any]:
    return {**VENDOR_RECIPE, "device": "cpu"} if REHEARSE else VENDOR_RECIPE


def build_llama(path: Path, shape: dict[str, Any], layers: int, device: str, seed: int = 0) -> Path:
    """A random bf16 Llama of ``shape`` saved with transformers (initialised on ``device``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        **{**shape, "num_hidden_layers": layers},
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)
    (path / "tokenizer_config.json").write_text('{"model_max_length": 4096}\n')
    del model
    return path


def calibration_file(path: Path, vocab: int, rows: int, min_len: int, max_len: int, seed: int = 1) -> Path:
    """A calibration table shaped as the benchmark's (a ``tok_input`` column of token lists)."""
    import pandas as pd

    rng = random.Random(seed)
    tokens = [[rng.randrange(vocab) for _ in range(rng.randrange(min_len, max_len + 1))] for _ in range(rows)]
    pd.DataFrame({"tok_input": tokens, "output": ["x"] * rows}).to_pickle(path)
    return path


def tiny_inputs(work: Path) -> tuple[Path, Path]:
    """The tiny random Llama and its calibration table, made once per work folder."""
    model, calib = work / "tiny-llama", work / "calibration.pkl"
    if not model.is_dir():
        build_llama(model, TINY, TINY["num_hidden_layers"], "cpu")
        calibration_file(calib, TINY["vocab_size"], 40, 16, 96)
    return model, calib


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


# -- stages: each returns a JSON-able record ---------------------------------------------------
def stage_facts(args, work: Path) -> dict[str, Any]:
    from mlperf_repro.sysfacts import detect_accelerators, driver_versions, summarize_accelerators

    gpus, tool, why = detect_accelerators()
    return {
        "tool": tool,
        "gpus": gpus,
        "why_none": why,
        "summary": summarize_accelerators(gpus),
        "drivers": driver_versions(),
    }


def stage_screen(args, work: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "mlperf_repro.cluster.screen", "--json", "--expected", str(max(1, gpu_count()))]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=_env())
    record: dict[str, Any] = {"exit": done.returncode, "seconds": round(time.time() - started, 1)}
    try:
        record["result"] = json.loads(done.stdout)
    except json.JSONDecodeError:
        record["stdout"], record["stderr"] = done.stdout[-2000:], done.stderr[-2000:]
    return record


def _manifest_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    validation = manifest["validation"]
    return {
        "quark": manifest["quark"],
        "validation_ok": validation.get("ok"),
        "weight_format": manifest["weight_format"],
        "quantized_layers": validation.get("quantized_layers"),
        "findings": validation.get("findings"),
        "worst_layers": validation.get("worst_layers"),
        "evaluation": manifest.get("evaluation"),
        "logit_error": manifest.get("logit_error"),
        "calibration": {k: manifest["calibration"].get(k) for k in ("samples", "sequences", "tokens", "seq_len")},
    }


def stage_quark(args, work: Path) -> dict[str, Any]:
    from mlperf_repro.quant.quark_tool import quark_job

    model, calib = tiny_inputs(work)
    started = time.time()
    manifest = quark_job(
        str(model),
        str(work / "tiny-llama-mxfp4"),
        str(work / "tiny-llama-mxfp4-emulated"),
        recipe(),
        calibration_file=str(calib),
    )
    config = json.loads((work / "tiny-llama-mxfp4" / "config.json").read_text())["quantization_config"]
    return {
        "seconds": round(time.time() - started, 1),
        "algo_config": [a.get("name") for a in config.get("algo_config") or []],
        "kv_cache": sorted(config.get("kv_cache_quant_config") or {}),
        **_manifest_summary(manifest),
    }


def _decode_against_quark(qdir: Path, qdq: Path) -> dict[str, Any]:
    import torch
    from safetensors.torch import load_file

    from mlperf_repro.quant.validate import dequantized_shards

    reference = load_file(qdq)
    decoded: dict[str, Any] = {}
    for _, tensors in dequantized_shards(qdir, dtype=torch.float32):
        decoded.update({name: tensors[name] for name in tensors if name in reference})
    unequal = {}
    for name, expected in reference.items():
        got = decoded.get(name)
        if got is None:
            unequal[name] = "not decoded"
        elif not torch.equal(got, expected):
            unequal[name] = float((got - expected).abs().max())
    return {"tensors": len(reference), "bit_equal": len(reference) - len(unequal), "unequal": unequal}


def stage_qdq(args, work: Path) -> dict[str, Any]:
    from mlperf_repro.quant.calibration import select_calibration
    from mlperf_repro.quant.quark_tool import run_quark

    model, calib = tiny_inputs(work)
    out, run_dir = work / "qdq", work / "qdq-run"
    out.mkdir(exist_ok=True)
    run_dir.mkdir(exist_ok=True)
    calibration = select_calibration(calib, recipe()["calibration"])
    report = run_quark(model, out / "q", recipe(), calibration, work_dir=run_dir, qdq_reference=out / "qdq.safetensors")
    return {"quark": report, **_decode_against_quark(out / "q", out / "qdq.safetensors")}


# Runs in the Quark environment: the runner's emulation and chunking against the fused kernel.
_EMULATION = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import quark_runner
from quark.torch.kernel import mx
device = "cpu" if sys.argv[2] == "cpu" else "cuda"
fused = quark_runner.cpu_qdq_mxfp4 if device == "cpu" else mx.qdq_mxfp4
gen = torch.Generator().manual_seed(0)
out = {"device": device, "fused": getattr(fused, "__name__", str(fused)), "shapes": {}}
for rows, width in ((64, 8192), (64, 28672), (1024, 1024), (3, 32)):
    x = (torch.randn(rows, width, generator=gen) * torch.rand(rows, 1, generator=gen) * 8).to(torch.bfloat16)
    emulated = quark_runner.cpu_qdq_mxfp4(x)
    kernel = fused(x.to(device)).cpu()
    out["shapes"][f"{rows}x{width}"] = {"elements": x.numel(), "bit_equal": int((emulated == kernel).sum()),
                                        "max_abs_diff": float((emulated.float() - kernel.float()).abs().max())}
if device == "cuda":
    big = torch.randn(75_000, 28_672, dtype=torch.bfloat16, device=device)  # 2.15e9 elements > 2**31
    stats = {"calls": 0, "chunked_calls": 0, "chunks": 0, "largest_call_elements": 0}
    chunked = quark_runner.chunked_qdq(fused, 2**30, stats, torch)
    try:
        y = chunked(big); torch.cuda.synchronize(); out["past_2_31_chunked"] = {"ok": True, **stats}
        del y
    except Exception as exc:
        out["past_2_31_chunked"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    try:
        y = fused(big); torch.cuda.synchronize(); out["past_2_31_one_call"] = {"ok": True}
    except Exception as exc:
        out["past_2_31_one_call"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
print(json.dumps(out))
"""


def stage_emulation(args, work: Path) -> dict[str, Any]:
    from mlperf_repro.quant.quark_tool import RUNNER, quark_python

    python = quark_python()
    if python is None:
        return {"error": "no Quark environment (MLPERF_REPRO_QUARK_ENV)"}
    device = "cpu" if REHEARSE else "cuda"
    done = subprocess.run(
        [str(python), "-c", _EMULATION, str(RUNNER.parent), device], capture_output=True, text=True, timeout=900
    )
    if done.returncode:
        return {"error": f"exit {done.returncode}", "stderr_tail": done.stderr[-2000:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["all_bit_equal"] = all(s["bit_equal"] == s["elements"] for s in result["shapes"].values())
    return result


def stage_scale(args, work: Path) -> dict[str, Any]:
    """One child process per ``--scale-samples`` count, each with what is left of the deadline
    (a GPU-sized run must not eat the whole lease); Quark's log of each goes to OUT."""
    records: dict[str, Any] = {}
    for samples in [int(n) for n in str(args.scale_samples).split(",")]:
        command = [sys.executable, __file__, "--scale-child", str(work), "--scale-layers", str(args.scale_layers)]
        command += ["--scale-samples", str(samples)] + (["--rehearse-on-cpu"] if REHEARSE else [])
        timeout = args.deadline_at - time.time()
        if timeout < 30:
            records[str(samples)] = {"skipped": "deadline passed"}
            continue
        started = time.time()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_env())
            record: dict[str, Any] = {"exit": done.returncode}
            if done.returncode:
                record["stderr_tail"] = done.stderr[-2000:]
        except subprocess.TimeoutExpired as exc:
            record = {
                "error": f"did not finish within {timeout:.0f} s",
                "stderr_tail": _text(exc.stderr or b"")[-1500:],
            }
        record["wall_s"] = round(time.time() - started, 1)
        result, log = work / "scale" / "result.json", work / "scale" / "run" / "quark.log"
        if result.is_file():
            record.update(json.loads(result.read_text()))
        if log.is_file():
            shutil.copyfile(log, args.out / f"scale-{samples}-quark.log")
        records[str(samples)] = record
    return records


def scale_child(work: Path, layers: int, samples: int) -> None:
    import torch

    from mlperf_repro.quant.calibration import select_calibration
    from mlperf_repro.quant.quark_tool import run_quark
    from mlperf_repro.quant.validate import validate_checkpoint

    root = work / "scale"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shape = REHEARSAL_SHAPE if REHEARSE else LLAMA2_70B
    record: dict[str, Any] = {"shape": {**shape, "num_hidden_layers": layers}}

    def save() -> None:
        (root / "result.json").write_text(json.dumps(record, indent=2))

    started = time.time()
    model = build_llama(root / "llama2-70b-shaped", shape, layers, accelerator())
    if not REHEARSE:
        torch.cuda.empty_cache()
    record["build_s"] = round(time.time() - started, 1)
    record["checkpoint_gb"] = round(sum(f.stat().st_size for f in model.glob("*.safetensors")) / 1e9, 2)
    calib = calibration_file(root / "calibration.pkl", shape["vocab_size"], samples, 256, 1024)
    settings = {**recipe(), "calibration": {"samples": samples, "seed": 3, "seq_len": 1024, "packing": "per_row"}}
    calibration = select_calibration(calib, settings["calibration"])
    record["calibration"] = {k: calibration[k] for k in ("samples", "sequences", "tokens", "seq_len", "packing")}
    save()
    run_dir = root / "run"
    run_dir.mkdir()
    with GpuMemoryPeak() as peak:
        report = run_quark(model, root / "q", settings, calibration, work_dir=run_dir)
    record["quark"] = report
    record["peak_gpu_memory_gib"] = round(peak.peak_mib / 1024, 1) if peak.peak_mib else None
    seconds = report["seconds"]["calibrate_quantize"]
    record["calibrate_quantize_s_per_block"] = round(seconds / layers, 1)
    # Llama 2 70B has 80 decoder blocks; the recipe's time grows with blocks x calibration tokens.
    record["llama2_70b_80_blocks_estimate_h"] = round(seconds / layers * 80 / 3600, 2)
    save()
    started = time.time()
    validation = validate_checkpoint(root / "q", model)
    record["validation"] = {
        "ok": validation.ok,
        "seconds": round(time.time() - started, 1),
        "quantized_layers": len(validation.quantized),
        "findings": [str(f) for f in validation.findings[:10]],
        "worst": [(e.module, round(e.rel_error, 5)) for e in validation.worst()],
    }
    save()


class GpuMemoryPeak:
    """The most GPU memory nvidia-smi shows in use while the block runs (Quark runs in a child
    process, so torch's own counters in this one do not see it). None where nvidia-smi is absent."""

    def __init__(self, interval_s: float = 0.5):
        import threading

        self.interval_s, self.peak_mib, self._stop = interval_s, None, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
        while not self._stop.is_set():
            try:
                used = max(int(x) for x in subprocess.run(query, capture_output=True, text=True).stdout.split())
            except (OSError, ValueError):
                return
            self.peak_mib = max(self.peak_mib or 0, used)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> GpuMemoryPeak:
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def stage_cpu_vs_gpu(args, work: Path) -> dict[str, Any]:
    import torch
    from safetensors.torch import load_file

    from mlperf_repro.quant.calibration import select_calibration
    from mlperf_repro.quant.quark_tool import run_quark

    model, calib = tiny_inputs(work)
    calibration = select_calibration(calib, CPU_RECIPE["calibration"])
    packed = []
    for side, device in enumerate(("cpu", accelerator())):
        run_dir = work / f"gptq-{side}-{device}"
        run_dir.mkdir(exist_ok=True)
        run_quark(model, run_dir / "q", CPU_RECIPE, calibration, work_dir=run_dir, device=device)
        tensors: dict[str, Any] = {}
        for shard in sorted((run_dir / "q").glob("*.safetensors")):
            tensors.update(load_file(shard))
        packed.append(tensors)
    cpu, gpu = packed
    record: dict[str, Any] = {"weights": {}, "scales": {}}
    for name in sorted(cpu):
        kind = "scales" if name.endswith("weight_scale") else "weights" if name.endswith(".weight") else None
        if kind is None or name not in gpu or cpu[name].dtype != torch.uint8:
            continue
        a, b = cpu[name], gpu[name]
        if kind == "weights":  # two FP4 codes a byte
            a = torch.stack((a & 0xF, a >> 4), dim=-1)
            b = torch.stack((b & 0xF, b >> 4), dim=-1)
        record[kind][name] = round(float((a == b).float().mean()), 5)
    for kind in ("weights", "scales"):
        values = list(record[kind].values())
        record[f"{kind}_identical_share_mean"] = round(sum(values) / len(values), 5) if values else None
    return record


# -- driver ------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return env


def _text(data: Any) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else str(data)


def run_stage(stage: str, args: argparse.Namespace) -> dict[str, Any]:
    try:
        return globals()[f"stage_{stage}"](args, args.work)
    except Exception as exc:  # noqa: BLE001 - a failed stage is recorded and the next one runs
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-check"))
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    parser.add_argument("--deadline-s", type=float, default=480, help="seconds after which no stage starts")
    parser.add_argument("--scale-layers", type=int, default=1)
    parser.add_argument(
        "--scale-samples",
        default="128,512",
        help="calibration rows; several, comma-separated, run in turn (the vendor's 1000 needs a 288 GB GPU)",
    )
    parser.add_argument("--rehearse-on-cpu", action="store_true", help="run the GPU stages on the CPU (see above)")
    parser.add_argument("--scale-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global REHEARSE
    REHEARSE = args.rehearse_on_cpu
    if args.scale_child:
        scale_child(args.scale_child, args.scale_layers, int(args.scale_samples))
        return 0
    args.deadline_at = time.time() + args.deadline_s
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "python": platform.python_version(),
        "gpus": gpu_count(),
        "rehearsal_on_cpu": REHEARSE,
        "env": {name: os.environ[name] for name in RECORDED_ENV if name in os.environ},
        "stages": {},
    }
    import torch

    record["torch"] = torch.__version__
    out = args.out / "gpu_check.json"
    failed = 0
    for stage in [s for s in args.stages.split(",") if s]:
        if stage not in STAGES:
            parser.error(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
        if time.time() > args.deadline_at:
            record["stages"][stage] = {"skipped": "deadline passed"}
            continue
        if stage not in ("facts",) and not record["gpus"] and not REHEARSE:
            record["stages"][stage] = {"skipped": "no GPU visible to torch"}
            continue
        print(f"== {stage}", flush=True)
        started = time.time()
        result = run_stage(stage, args)
        if stage == "quark" and "error" in result and "QUARK_MXFP4_IMPL" not in os.environ and not REHEARSE:
            # Quark's default MXFP4 kernels are C++/CUDA built on first use; where that build fails,
            # its Triton kernels are the other implementation it ships. Later stages use them too.
            os.environ["QUARK_MXFP4_IMPL"] = "triton"
            result = {**run_stage(stage, args), "first_try_with_default_kernels": result}
            record["env"]["QUARK_MXFP4_IMPL"] = "triton"
        failed += "error" in result
        result["stage_s"] = round(time.time() - started, 1)
        record["stages"][stage] = result
        out.write_text(json.dumps(record, indent=2, default=str) + "\n")
        print(json.dumps(result, default=str)[:1500], flush=True)
    out.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
