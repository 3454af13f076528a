"""AMD Quark, run for the ``quark`` tool inside its own environment (envs/quark.txt).

Executed by path, ``QUARK_ENV/bin/python .../quark_runner.py ARGS.json``, never imported by
the package: it imports only quark, torch, transformers and the standard library, so the
Quark environment needs nothing of the workflow's (vLLM, pandas, ...). ARGS.json::

    {"model_dir": ..., "output_dir": ..., "report": "report.json",
     "calibration": "calib.json",            # {"input_ids": [[int, ...], ...]}
     "scheme": "mxfp4" | "mxfp4_weight_only",
     "kv_cache": "fp8" | null, "algorithms": ["autosmoothquant", "gptq"],
     "exclude": ["lm_head"], "device": "cpu", "qdq_reference": "qdq.safetensors" | null}

What it does, in Quark's own API (the v6.0 calibration document's recipe): ``LLMTemplate``
for the model type, ``get_config(scheme, algorithm, kv_cache_scheme, exclude_layers)`` (OCP
MXFP4 weights static, activations dynamic, E8M0 scales rounded "even"; KV cache FP8 e4m3
per tensor), ``ModelQuantizer.quantize_model`` over the calibration token sequences,
``freeze`` and ``export_safetensors`` (``quant_method: quark``, real quantized). With
``qdq_reference`` it also saves Quark's own quantize-dequantize of every quantized weight
(the frozen weight quantizer applied to the weight) so a caller can compare our codec's
decoding against it.

On CPU, AutoSmoothQuant with MXFP4 cannot run: its scale search calls Quark's fused
``qdq_mxfp4`` kernel (quark/torch/kernel/mx/hip.py), which is implemented for CUDA/HIP
devices only ("qdq_mxfp4 is only implemented in CUDA devices!", amd-quark 0.13). The runner
refuses that combination up front with that reason. GPTQ runs on CPU (column by column,
without CUDA graphs).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ALGORITHMS = ("autosmoothquant", "gptq")


class RunnerError(Exception):
    pass


def _calibration(path: str, torch: Any) -> list[Any]:
    data = json.loads(Path(path).read_text())
    rows = data["input_ids"]
    if not rows:
        raise RunnerError(f"calibration file {path} has no rows")
    return [torch.tensor([row], dtype=torch.long) for row in rows]


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
    if device == "cpu" and scheme.startswith("mxfp4"):
        gpu_only = args.get("gpu_only_with_mxfp4") or {}
        blocked = [f"{a}: {gpu_only[a]}" for a in algorithms if a in gpu_only]
        if blocked:
            raise RunnerError("cannot run on CPU with amd-quark " + quark_version + ": " + "; ".join(blocked))
    # Refused before this import: importing quark.torch takes about a minute on 2 cores (it parses
    # every transformers modeling file looking for MoE expert classes).
    import transformers
    from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors

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
