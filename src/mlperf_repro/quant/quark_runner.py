"""AMD Quark, run for the ``quark`` tool inside its own environment (envs/quark.txt).

Executed by path, ``QUARK_ENV/bin/python .../quark_runner.py ARGS.json``, never imported by
the package: it imports only quark, torch, transformers and the standard library, so the
Quark environment needs nothing of the workflow's (vLLM, pandas, ...). ARGS.json::

    {"model_dir": ..., "output_dir": ..., "report": "report.json",
     "calibration": "calib.json",            # {"input_ids": [[int, ...], ...]}
     "scheme": "mxfp4" | "mxfp4_weight_only" | "mxfp4_fp8",
     "kv_cache": "fp8" | null, "algorithms": ["autosmoothquant", "gptq"],
     "exclude": ["lm_head"], "device": "cpu", "qdq_reference": "qdq.safetensors" | null,
     "qdq_max_elements": 1073741824}         # quark_tool.QDQ_MAX_ELEMENTS or the recipe's

What it does, in Quark's own API (the v6.0 calibration document's recipe): ``LLMTemplate``
for the model type, ``get_config(scheme, algorithm, kv_cache_scheme, exclude_layers)`` (OCP
MXFP4 weights static, activations dynamic, E8M0 scales rounded "even"; KV cache FP8 e4m3
per tensor), ``ModelQuantizer.quantize_model`` over the calibration token sequences,
``freeze`` and ``export_safetensors`` (``quant_method: quark``, real quantized). With
``qdq_reference`` it also saves Quark's own quantize-dequantize of every quantized weight
(the frozen weight quantizer applied to the weight) so a caller can compare our codec's
decoding against it.

MXFP4 fake-quantize calls (``quark.torch.kernel.mx.qdq_mxfp4``) go through
:func:`_install_mxfp4_qdq`, for two reasons:

* **Size.** AutoSmoothQuant's scale search (amd-quark 0.13) fake-quantizes the activations of
  the whole calibration set in one call: for Llama 2 70B's down projection at the vendor's
  1,000 x 1,024 calibration that is 1,024,000 tokens x 28,672 = 2.9e10 elements, and on an
  H200 such calls failed ("CUDA error: invalid argument") from 128 x 1,024 on, consistent with
  a 2**31-element limit of the kernel (bench/README.md, gpu_check.py). Calls above
  ``qdq_max_elements`` are cut into row chunks whose element counts are multiples of 32: MX
  blocks are 32 consecutive elements of a row, so each chunk holds whole blocks and the joined
  result is the one call's, bit for bit (tests/test_quant_quark.py checks it on whole runs).
* **CPU.** The fused kernel exists for CUDA/HIP only ("qdq_mxfp4 is only implemented in CUDA
  devices!"). On a CPU the same calls go to Quark's own emulation of the format
  (``quark.torch.kernel.hw_emulation.hw_emulation_interface.fake_quantize_mx``, FP4 elements,
  blocks of 32 along the last axis), so the vendor's recipe runs on a CPU too (slowly), and
  the report says which implementation ran.

GPTQ runs on CPU (column by column, without CUDA graphs).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ALGORITHMS = ("autosmoothquant", "gptq")
MX_BLOCK = 32


class RunnerError(Exception):
    pass


def _calibration(path: str, torch: Any) -> list[Any]:
    data = json.loads(Path(path).read_text())
    rows = data["input_ids"]
    if not rows:
        raise RunnerError(f"calibration file {path} has no rows")
    return [torch.tensor([row], dtype=torch.long) for row in rows]


def chunk_rows(rows: int, width: int, max_elements: int) -> int:
    """Rows per call: as many as fit in ``max_elements`` (at least one block's worth), and a
    count whose elements are a multiple of the MX block, so no block spans two calls however
    the kernel lays blocks out."""
    unit = MX_BLOCK // math.gcd(width, MX_BLOCK)
    return max(unit, (max_elements // max(width, 1)) // unit * unit)


def chunked_qdq(kernel: Callable[..., Any], max_elements: int, stats: dict[str, Any], torch: Any) -> Callable[..., Any]:
    """``kernel`` (x, scale_calculation_mode) applied in row chunks of at most ``max_elements``."""

    def qdq(x: Any, scale_calculation_mode: str = "even") -> Any:
        stats["calls"] += 1
        stats["largest_call_elements"] = max(stats["largest_call_elements"], int(x.numel()))
        if x.numel() <= max_elements or x.dim() == 0:
            return kernel(x, scale_calculation_mode)
        rows = x.reshape(-1, x.shape[-1])
        step = chunk_rows(rows.shape[0], rows.shape[1], max_elements)
        parts = [kernel(rows[i : i + step], scale_calculation_mode) for i in range(0, rows.shape[0], step)]
        stats["chunked_calls"] += 1
        stats["chunks"] += len(parts)
        return torch.cat(parts).reshape(x.shape)

    return qdq


def cpu_qdq_mxfp4(x: Any, scale_calculation_mode: str = "even") -> Any:
    """Quark's own emulation of the fused MXFP4 quantize-dequantize, for a CPU."""
    from quark.torch.kernel.hw_emulation.hw_emulation_interface import fake_quantize_mx

    return fake_quantize_mx(
        x, axis=-1, block_size=MX_BLOCK, scale_calculation_mode=scale_calculation_mode, mx_element_dtype="fp4"
    )


def _install_mxfp4_qdq(device: str, max_elements: int, torch: Any) -> dict[str, Any]:
    """Route Quark's MXFP4 fake-quantize calls through the chunker (and, on a CPU, the
    emulation); returns the statistics the report carries."""
    from quark.torch.kernel import mx

    fused = mx.qdq_mxfp4
    implementation = (
        "quark.torch.kernel.hw_emulation fake_quantize_mx (the fused kernel's CPU emulation)"
        if device == "cpu"
        else f"quark.torch.kernel.mx.qdq_mxfp4 ({fused.__name__})"
    )
    stats: dict[str, Any] = {
        "implementation": implementation,
        "max_elements_per_call": max_elements,
        "calls": 0,
        "chunked_calls": 0,
        "chunks": 0,
        "largest_call_elements": 0,
    }
    mx.qdq_mxfp4 = chunked_qdq(cpu_qdq_mxfp4 if device == "cpu" else fused, max_elements, stats, torch)
    return stats


def run(args: dict[str, Any]) -> dict[str, Any]:
    import os
    from importlib.metadata import version

    import torch

    quark_version = version("amd-quark")
    device = args.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RunnerError(
            "the recipe runs on a GPU (quantization.<recipe>.device: gpu) and torch sees none here: "
            "the job's GPU request (resources gpu), CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES"
        )
    if device == "cpu":
        # Quark's fake-quantize is torch.compile'd (inductor, mode max-autotune) by default: on a
        # CPU that is a C++ build per shape, minutes on 2 cores, and it failed on a clean CI
        # machine. QUARK_DISABLE_COMPILE is Quark's own switch to the same op run eagerly.
        os.environ.setdefault("QUARK_DISABLE_COMPILE", "1")
    algorithms = [a.lower() for a in args.get("algorithms") or []]
    unknown = sorted(set(algorithms) - set(ALGORITHMS))
    if unknown:
        raise RunnerError(f"unknown Quark algorithm(s) {unknown}; known: {list(ALGORITHMS)}")
    scheme = args["scheme"]
    # Importing quark.torch takes about a minute on 2 cores (it parses every transformers
    # modeling file looking for MoE expert classes): the checks above come first.
    import transformers
    from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors

    qdq_stats = _install_mxfp4_qdq(device, int(args["qdq_max_elements"]), torch)

    torch.manual_seed(int(args.get("seed", 0)))
    started = time.time()
    model = transformers.AutoModelForCausalLM.from_pretrained(args["model_dir"], dtype="auto").to(device).eval()
    template = LLMTemplate.get(model.config.model_type)
    config = template.get_config(
        scheme=scheme,
        algorithm=algorithms or None,
        kv_cache_scheme=args.get("kv_cache") or None,
        exclude_layers=list(args.get("exclude") or ["lm_head"]),
    )
    calib = [t.to(device) for t in _calibration(args["calibration"], torch)]
    quantizer = ModelQuantizer(config)
    model = quantizer.quantize_model(model, calib)
    quantized_s = time.time() - started
    model = quantizer.freeze(model)
    qdq_path = args.get("qdq_reference")
    if qdq_path:
        from safetensors.torch import save_file

        qdq = {}
        with torch.no_grad():
            for name, module in model.named_modules():
                wq = getattr(module, "_weight_quantizer", None)
                if wq is not None and getattr(module, "weight", None) is not None:
                    qdq[f"{name}.weight"] = wq(module.weight).detach().to("cpu", torch.float32).contiguous()
        save_file(qdq, qdq_path)
    export_safetensors(model, args["output_dir"], custom_mode="quark", weight_format="real_quantized")
    report = {
        "quark": quark_version,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "model_type": model.config.model_type,
        "scheme": scheme,
        "kv_cache": args.get("kv_cache") or None,
        "algorithms": algorithms,
        "calibration_rows": len(calib),
        "calibration_tokens": int(sum(t.numel() for t in calib)),
        "mxfp4_qdq": qdq_stats,
        "seconds": {"calibrate_quantize": round(quantized_s, 2), "total": round(time.time() - started, 2)},
    }
    return report


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: quark_runner.py ARGS.json", file=sys.stderr)
        return 2
    args = json.loads(Path(argv[1]).read_text())
    try:
        report = run(args)
    except RunnerError as exc:
        print(f"quark_runner: {exc}", file=sys.stderr)
        return 3
    Path(args["report"]).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
