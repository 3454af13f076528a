"""Harness overhead: Offline tokens/s through LoadGen + our SUT vs vLLM's own generate.

Both sides use the same vLLM engine object (same model, engine arguments, greedy
sampling) on the same prompt set, in one fresh process per round after a shared warm-up.
The baseline is ``LLM.generate`` over N prompts; the harness side is one LoadGen Offline
PerformanceOnly test issuing N samples (LoadGen's tokens/s). Rounds alternate which side
goes first; the report gives each round's ratio and the median (harness / baseline).

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

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO / "results/models/tiny-llama-mxfp4-w4a16-emulated"
DEFAULT_DATASET = REPO / "resources/datasets/openorca-synthetic/open_orca_synthetic.pkl"
# The default config's engine for the demo model (one place).
_ENGINE = yaml.safe_load((REPO / "config/config.yaml").read_text())["systems"]["cpu-2c-vllm"]["engine"]
ENGINE_ARGS, ENV = dict(_ENGINE["engine_args"]), dict(_ENGINE["env"])


def _measure(model: str, dataset: str, samples: int, max_new_tokens: int, workdir: str, harness_first: bool) -> dict:
    """Baseline and harness in one process on one engine (LoadGen's one-test rule holds:
    there is one LoadGen test), in the given order, after a shared warm-up."""
    from mlperf_repro.backends import GenerationSettings
    from mlperf_repro.backends.vllm_engine import VllmEngineBackend, create_llm, sampling_params
    from mlperf_repro.harness.dataset import load_token_dataset
    from mlperf_repro.harness.run import LoadgenTest, run_loadgen_test
    from mlperf_repro.loadgen_logs import read_detail

    data = load_token_dataset(dataset)
    settings = GenerationSettings(max_new_tokens=max_new_tokens)
    params = sampling_params(settings, stream=False)
    llm = create_llm(model, ENGINE_ARGS)
    llm.generate([{"prompt_token_ids": p} for p in data.prompts[:32]], params, use_tqdm=False)  # warm-up

    def baseline() -> dict:
        prompts = [{"prompt_token_ids": data.prompts[i % len(data)]} for i in range(samples)]
        started = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - started
        tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
        return {"tokens": tokens, "tokens_per_second": tokens / seconds}

    def harness() -> dict:
        conf = Path(workdir) / "user.conf"
        # One Offline query of exactly `samples` samples, no duration floor.
        conf.write_text(
            f"llama2-70b.Offline.min_query_count = {samples}\nllama2-70b.Offline.min_duration = 0\n"
            f"llama2-70b.Offline.target_qps = 0.001\n"
            f"llama2-70b.Offline.sample_concatenate_permutation = 0\n"
            f"llama2-70b.Offline.performance_sample_count_override = {len(data)}\n"
        )
        test = LoadgenTest(
            user_conf=conf,
            loadgen_model="llama2-70b",
            loadgen_scenario="Offline",
            mode="performance",
            out_dir=Path(workdir) / "run",
            performance_sample_count=len(data),
        )

        def factory(sut):
            return VllmEngineBackend(
                model_path=model,
                engine_args=ENGINE_ARGS,
                generation=settings,
                stream=False,
                on_first_tokens=None,
                on_completions=sut.completions,
                llm=llm,
            )

        record = run_loadgen_test(test, data, factory)
        detail = read_detail(Path(workdir) / "run" / "mlperf_log_detail.txt")
        return {
            "tokens": record["generated_tokens"],
            "tokens_per_second": float(detail["result_tokens_per_second"]),
            "valid_errors": detail["errors"],
        }

    if harness_first:
        ours = harness()
        base = baseline()
    else:
        base = baseline()
        ours = harness()
    return {"baseline": base, "harness": ours}


def _child(args) -> None:
    os.environ.update(ENV)
    with tempfile.TemporaryDirectory() as tmp:
        result = _measure(
            args.model, args.dataset, args.samples, args.max_new_tokens, tmp, args.child == "harness-first"
        )
    print("RESULT " + json.dumps(result))


def _spawn(order: str, args) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        order,
        "--model",
        str(args.model),
        "--dataset",
        str(args.dataset),
        "--samples",
        str(args.samples),
        "--max-new-tokens",
        str(args.max_new_tokens),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **ENV), timeout=1800)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{order} run failed:\n{out.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--child", choices=["baseline-first", "harness-first"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    ratios = []
    for round_index in range(args.rounds):
        # Alternate the order so warm-up drift and machine noise hit both sides equally.
        result = _spawn("harness-first" if round_index % 2 else "baseline-first", args)
        base, ours = result["baseline"], result["harness"]
        if ours["tokens"] != base["tokens"]:
            print(f"note: token counts differ (baseline {base['tokens']}, harness {ours['tokens']})")
        ratio = ours["tokens_per_second"] / base["tokens_per_second"]
        ratios.append(ratio)
        print(
            f"round {round_index + 1}: vLLM generate {base['tokens_per_second']:.0f} tok/s, "
            f"LoadGen+SUT {ours['tokens_per_second']:.0f} tok/s, ratio {ratio:.3f}"
        )
    print(
        f"median ratio (LoadGen+SUT / vLLM generate) over {args.rounds} rounds: {statistics.median(ratios):.3f}"
        f" (samples {args.samples}, model {args.model})"
    )


if __name__ == "__main__":
    main()
