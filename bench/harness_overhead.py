"""Harness overhead: Offline tokens/s through LoadGen + our SUT vs vLLM's own generate.

Both sides serve the same model with the same engine arguments and the same greedy
sampling on the same prompts, each in a fresh process (LoadGen allows one test per
process), after a warm-up generate. The baseline is ``LLM.generate`` over all prompts;
the harness side is a LoadGen Offline PerformanceOnly test issuing the same number of
samples. Rounds alternate baseline/harness so machine noise hits both; the report gives
the median ratio (harness / baseline).

    .venv/bin/python bench/harness_overhead.py [--model DIR] [--dataset FILE] [--rounds 3]

Defaults are the default workflow's outputs (run the workflow first).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO / "results/models/tiny-llama-mxfp4-w4a16-emulated"
DEFAULT_DATASET = REPO / "resources/datasets/openorca-synthetic/open_orca_synthetic.pkl"
ENGINE_ARGS = {"dtype": "float32", "enforce_eager": True, "max_model_len": 2048, "gpu_memory_utilization": 0.3,
               "seed": 0}
ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def _baseline(model: str, dataset: str, samples: int, max_new_tokens: int) -> dict:
    from mlperf_repro.backends import GenerationSettings
    from mlperf_repro.backends.vllm_engine import create_llm, sampling_params
    from mlperf_repro.harness.dataset import load_token_dataset

    data = load_token_dataset(dataset)
    prompts = [{"prompt_token_ids": data.prompts[i % len(data)]} for i in range(samples)]
    llm = create_llm(model, ENGINE_ARGS)
    params = sampling_params(GenerationSettings(max_new_tokens=max_new_tokens), stream=False)
    llm.generate(prompts[:32], params, use_tqdm=False)  # warm-up
    started = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - started
    tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    return {"tokens": tokens, "seconds": seconds, "tokens_per_second": tokens / seconds}


def _harness(model: str, dataset: str, samples: int, max_new_tokens: int, workdir: str) -> dict:
    from mlperf_repro.backends import GenerationSettings
    from mlperf_repro.backends.vllm_engine import VllmEngineBackend, create_llm, sampling_params
    from mlperf_repro.harness.dataset import load_token_dataset
    from mlperf_repro.harness.run import LoadgenTest, run_loadgen_test
    from mlperf_repro.loadgen_logs import read_detail

    data = load_token_dataset(dataset)
    settings = GenerationSettings(max_new_tokens=max_new_tokens)
    llm = create_llm(model, ENGINE_ARGS)
    llm.generate([{"prompt_token_ids": p} for p in data.prompts[:32]], sampling_params(settings, stream=False),
                 use_tqdm=False)  # the same warm-up as the baseline
    conf = Path(workdir) / "user.conf"
    # One Offline query of exactly `samples` samples; no duration floor.
    conf.write_text(f"llama2-70b.Offline.min_query_count = {samples}\nllama2-70b.Offline.min_duration = 0\n"
                    f"llama2-70b.Offline.target_qps = 0.001\nllama2-70b.Offline.sample_concatenate_permutation = 0\n"
                    f"llama2-70b.Offline.performance_sample_count_override = {len(data)}\n")
    test = LoadgenTest(user_conf=conf, loadgen_model="llama2-70b", loadgen_scenario="Offline", mode="performance",
                       out_dir=Path(workdir) / "run", performance_sample_count=len(data))

    def factory(sut):
        return VllmEngineBackend(model_path=model, engine_args=ENGINE_ARGS, generation=settings, stream=False,
                                 on_first_token=None, on_complete=sut.complete, llm=llm)

    record = run_loadgen_test(test, data, factory)
    detail = read_detail(Path(workdir) / "run" / "mlperf_log_detail.txt")
    return {"tokens": record["generated_tokens"], "samples": record["completed_samples"],
            "tokens_per_second": float(detail["result_tokens_per_second"])}


def _child(args) -> None:
    os.environ.update(ENV)
    if args.child == "baseline":
        result = _baseline(args.model, args.dataset, args.samples, args.max_new_tokens)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = _harness(args.model, args.dataset, args.samples, args.max_new_tokens, tmp)
    print("RESULT " + json.dumps(result))


def _spawn(kind: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--model", str(args.model), "--dataset", str(args.dataset),
           "--samples", str(args.samples), "--max-new-tokens", str(args.max_new_tokens)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **ENV), timeout=1800)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{kind} run failed:\n{out.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=["baseline", "harness"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    ratios = []
    for round_index in range(args.rounds):
        base = _spawn("baseline", args)
        ours = _spawn("harness", args)
        if ours["tokens"] != base["tokens"]:
            print(f"note: token counts differ (baseline {base['tokens']}, harness {ours['tokens']})")
        ratio = ours["tokens_per_second"] / base["tokens_per_second"]
        ratios.append(ratio)
        print(f"round {round_index + 1}: vLLM generate {base['tokens_per_second']:.0f} tok/s, "
              f"LoadGen+SUT {ours['tokens_per_second']:.0f} tok/s, ratio {ratio:.3f}")
    print(f"median ratio (LoadGen+SUT / vLLM generate) over {args.rounds} rounds: {statistics.median(ratios):.3f}"
          f" (samples {args.samples}, model {args.model})")


if __name__ == "__main__":
    main()
