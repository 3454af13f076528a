"""Benchmark: our exact ROUGE vs a plain rouge_score loop on llama2-sized data.

    /work/venv/bin/python bench/accuracy_eval.py [--samples 24576] [--baseline-samples 256]

Builds deterministic synthetic (prediction, reference) pairs shaped like
llama2-70b OpenOrca outputs (~300 tokens, 10-20 sentences), applies the
reference post-processing (sentence split, newline join), then times on the
same texts:

* baseline: ``RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"],
  use_stemmer=True).score(ref, pred)`` in one process, over the first
  ``--baseline-samples`` pairs, extrapolated linearly to all samples (the full
  loop takes tens of minutes; pass ``--baseline-samples`` equal to
  ``--samples`` to run it all);
* ours: :func:`mlperf_repro.accuracy.rouge_scores` over all samples with a
  process pool, and single-process over the baseline subset.

It checks that every per-sample f-measure of the subset is identical and that
the aggregated scores (mean ×100, 4 decimals) agree, then prints the ratio.
Sentence splitting (NLTK Punkt, identical in both pipelines) is timed apart.

    /work/venv/bin/python bench/accuracy_eval.py --case gpt-oss [--problems 1055] [--workers N]

times the gpt-oss-120b evaluation (:func:`mlperf_repro.accuracy.gpt_oss.evaluate_gpt_oss`)
on 4,395 synthetic entries shaped like the accuracy set: 30 AIME questions x 8, 198 GPQA x 5
and 1,055 LiveCodeBench problems x 3 (3,165 code entries, each run in the sandbox against 8
stdin or call-based tests of up to 1,000 numbers). Outputs are harmony texts tokenized with
the stand-in's BPE tokenizer; the code ones are correct, wrong, without code, raising or not
compiling in known proportions, so the bench checks the per-family counts it gets against
the ones it built. No program runs into a timeout (each would cost the reference's 60 s per
test of one worker).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from mlperf_repro.accuracy import ROUGE_TYPES, postprocess_text, rouge_scores
from mlperf_repro.accuracy.rouge import default_workers, pool_context
from mlperf_repro.accuracy.synthetic import synthetic_pairs


def _split_chunk(args: tuple[list[str], list[str]]) -> tuple[list[str], list[str]]:
    return postprocess_text(*args)


def split_all(predictions: list[str], references: list[str], workers: int) -> tuple[list[str], list[str]]:
    if workers == 1:
        return postprocess_text(predictions, references)
    size = max(1, math.ceil(len(predictions) / (workers * 8)))
    chunks = [(predictions[i : i + size], references[i : i + size]) for i in range(0, len(predictions), size)]
    preds: list[str] = []
    refs: list[str] = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=pool_context()) as pool:
        for p, r in pool.map(_split_chunk, chunks):
            preds.extend(p)
            refs.extend(r)
    return preds, refs


def baseline_loop(predictions: list[str], references: list[str]) -> dict[str, list[float]]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    out: dict[str, list[float]] = {name: [] for name in ROUGE_TYPES}
    for pred, ref in zip(predictions, references):
        score = scorer.score(ref, pred)
        for name in ROUGE_TYPES:
            out[name].append(score[name].fmeasure)
    return out


# The LiveCodeBench stand-in problems: (stdin program, wrong program, expected output) or, for
# call-based ones, fn_name and the method.
_LCB_STDIN = {
    "sum": (
        "n = int(input())\nnums = list(map(int, input().split()))\nprint(sum(nums))",
        "n = int(input())\nnums = list(map(int, input().split()))\nprint(max(nums))",
        lambda nums: str(sum(nums)),
    ),
    "sorted": (
        "import sys\ndata = sys.stdin.read().split()\nprint(' '.join(map(str, sorted(map(int, data[1:])))))",
        "import sys\ndata = sys.stdin.read().split()\nprint(' '.join(data[1:]))",
        lambda nums: " ".join(map(str, sorted(nums))),
    ),
    "mean": (
        "n = int(input())\nnums = list(map(int, input().split()))\nprint(float(f'{sum(nums) / n:.6f}'))",
        "n = int(input())\nnums = list(map(int, input().split()))\nprint(sum(nums) // n)",
        lambda nums: f"{sum(nums) / len(nums):.6f}",  # "1.5" against "1.500000": equal as Decimals
    ),
}
_LCB_CALL = (
    "class Solution:\n    def largestGap(self, nums: List[int]) -> int:\n"
    "        s = sorted(nums)\n        return max((b - a for a, b in zip(s, s[1:])), default=0)",
    "class Solution:\n    def largestGap(self, nums: List[int]) -> int:\n        return max(nums) - min(nums)",
)
_HARMONY = (
    "<|channel|>analysis<|message|>{analysis}<|end|><|start|>assistant<|channel|>final<|message|>{final}<|return|>"
)


def _lcb_problem(rng: np.random.Generator, index: int) -> tuple[dict, str, str]:
    """(input_output sample, right program, wrong program) for problem ``index``."""
    tests_in, tests_out = [], []
    kinds = [*_LCB_STDIN, "call"]
    kind = kinds[index % len(kinds)]
    for _ in range(8):
        nums = rng.integers(-(10**6), 10**6, size=int(rng.integers(1, 1000))).tolist()
        if kind == "call":
            s = sorted(nums)
            tests_in.append(json.dumps(nums))
            tests_out.append(json.dumps(max((b - a for a, b in zip(s, s[1:])), default=0)))
        else:
            tests_in.append(f"{len(nums)}\n{' '.join(map(str, nums))}\n")
            tests_out.append(_LCB_STDIN[kind][2](nums) + "\n")
    if kind == "call":
        return {"inputs": tests_in, "outputs": tests_out, "fn_name": "largestGap"}, *_LCB_CALL
    return {"inputs": tests_in, "outputs": tests_out, "fn_name": None}, *_LCB_STDIN[kind][:2]


def gpt_oss_case(args: argparse.Namespace) -> int:
    import pandas as pd

    from mlperf_repro.accuracy.gpt_oss import evaluate_gpt_oss, load_gpt_oss_rows
    from mlperf_repro.accuracy.livecodebench import pool_size
    from mlperf_repro.accuracy.sandbox import best_isolation
    from mlperf_repro.benchmarks import load_round
    from mlperf_repro.demo import gpt_oss_corpus
    from mlperf_repro.demo.gpt_oss_model import train_tokenizer

    rules = load_round("v6.0").benchmark("gpt-oss-120b").accuracy
    repeats = rules["dataset_repeats"]
    rng = np.random.default_rng(args.seed)
    rows: list[dict] = []
    outputs: list[tuple[int, str]] = []
    expected: dict[str, int] = {}

    def add(dataset: str, truth: str, texts: list[tuple[str, bool]], tests: str | None = None) -> None:
        rows.append({"dataset": dataset, "ground_truth": truth, "input_output": tests})
        for text, correct in texts:
            outputs.append((len(rows) - 1, text))
            expected[dataset] = expected.get(dataset, 0) + int(correct)

    for q in range(30):
        truth = int(rng.integers(0, 1000))
        texts = []
        for _ in range(repeats["aime25"]):
            answer = truth if rng.random() < 0.6 else (truth + 1) % 1000
            texts.append((_HARMONY.format(analysis=f"question {q}", final=rf"\boxed{{{answer}}}"), answer == truth))
        add("aime25", str(truth), texts)
    for q in range(198):
        truth = "ABCD"[int(rng.integers(0, 4))]
        texts = []
        for _ in range(repeats["gpqa_diamond"]):
            answer = truth if rng.random() < 0.7 else "ABCD"[("ABCD".index(truth) + 1) % 4]
            texts.append((_HARMONY.format(analysis=f"question {q}", final=f"**{answer}**"), answer == truth))
        add("gpqa_diamond", truth, texts)
    fates = ["right"] * 12 + ["wrong"] * 5 + ["none", "raise", "syntax"]
    for q in range(args.problems):
        sample, right, wrong = _lcb_problem(rng, q)
        texts = []
        for _ in range(repeats["livecodebench_v6"]):
            fate = fates[int(rng.integers(0, len(fates)))]
            program = {"right": right, "wrong": wrong, "raise": "raise RuntimeError('no')", "syntax": "def f(:"}.get(
                fate
            )
            final = "I could not solve it." if program is None else f"Here is the solution:\n```python\n{program}\n```"
            texts.append((_HARMONY.format(analysis=f"Think about problem {q}.", final=final), fate == "right"))
        add("livecodebench_v6", f"lcb_{q:04d}", texts, json.dumps(sample))

    t0 = time.perf_counter()
    tokenizer = train_tokenizer(gpt_oss_corpus.corpus_texts(gpt_oss_corpus.generate_examples(400, seed=5)), 600)
    ids = tokenizer([text for _, text in outputs], add_special_tokens=False)["input_ids"]
    entries = [(qsl, np.asarray(tokens, dtype=np.int32)) for (qsl, _), tokens in zip(outputs, ids)]
    t_prep = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "acc_eval_inputs.parquet"
        pd.DataFrame(rows).to_parquet(path)
        dataset_rows = load_gpt_oss_rows(path)
        workers = args.workers or pool_size()
        isolation = best_isolation()
        code = sum(1 for qsl, _ in entries if rows[qsl]["dataset"] == "livecodebench_v6")
        print(f"entries: {len(entries)} ({code} LiveCodeBench, 8 tests each); workers: {workers}; sandbox: {isolation}")
        print(f"data + tokenizer + tokenization: {t_prep:.1f} s")
        t0 = time.perf_counter()
        result = evaluate_gpt_oss(
            entries, dataset_rows, tokenizer, families=rules["families"], repeats=repeats, code_workers=workers
        )
        t_eval = time.perf_counter() - t0
    got = {name: s["correct"] for name, s in result["per_dataset"].items()}
    print(f"evaluate_gpt_oss: {t_eval:.1f} s ({1000 * t_eval / code:.1f} ms per code entry, all entries included)")
    print(f"exact_match: {result['exact_match']}; correct per family: {got}")
    ran = {mode: len(positions) for mode, positions in result["sandbox"]["isolation"].items()}
    print(f"entries whose code ran, by sandbox mode: {ran}")
    print(f"correct counts equal to the ones built: {got == expected} (built: {expected})")
    return 0 if got == expected else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=["rouge", "gpt-oss"], default="rouge")
    parser.add_argument("--problems", type=int, default=1055, help="gpt-oss: LiveCodeBench problems (x3 entries)")
    parser.add_argument("--samples", type=int, default=24576)
    parser.add_argument("--baseline-samples", type=int, default=256)
    parser.add_argument("--workers", type=int, default=None, help="default: all usable cores")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.case == "gpt-oss":
        return gpt_oss_case(args)
    workers = args.workers or default_workers()
    n_base = min(args.baseline_samples, args.samples)

    t0 = time.perf_counter()
    raw_preds, raw_refs = synthetic_pairs(args.samples, seed=args.seed)
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    preds, refs = split_all(raw_preds, raw_refs, workers)
    t_split = time.perf_counter() - t0
    mean_words = np.mean([len(p.split()) for p in preds[:2000]])
    mean_lines = np.mean([p.count("\n") + 1 for p in preds[:2000]])
    print(f"samples: {args.samples} (seed {args.seed}); workers: {workers}")
    print(f"prediction size: {mean_words:.0f} words, {mean_lines:.1f} sentences (first 2000)")
    print(
        f"data generation: {t_gen:.1f} s; sentence split of {2 * args.samples} texts ({workers} procs): {t_split:.1f} s"
    )

    # Ours first, from a cold process (no memoised stems inherited by the pool).
    t0 = time.perf_counter()
    ours = rouge_scores(preds, refs, workers=workers, return_per_sample=True)
    t_ours = time.perf_counter() - t0

    t0 = time.perf_counter()
    base = baseline_loop(preds[:n_base], refs[:n_base])
    t_base_subset = time.perf_counter() - t0
    t_base = t_base_subset * args.samples / n_base
    extrapolated = n_base < args.samples

    t0 = time.perf_counter()
    ours_subset = rouge_scores(preds[:n_base], refs[:n_base], workers=1, return_per_sample=True)
    t_ours_subset = time.perf_counter() - t0

    per_sample = ours["per_sample"]
    assert isinstance(per_sample, dict)
    identical = all(per_sample[name][:n_base] == base[name] for name in ROUGE_TYPES)
    identical &= ours_subset["per_sample"] == base
    base_agg = {name: float(round(np.mean(base[name]) * 100, 4)) for name in ROUGE_TYPES}
    ours_agg = {name: ours_subset[name] for name in ROUGE_TYPES}
    agg_equal = base_agg == ours_agg

    note = f" (timed on {n_base}, extrapolated x{args.samples / n_base:.1f})" if extrapolated else ""
    print(f"baseline rouge_score loop, 1 proc: {t_base:.1f} s for {args.samples}{note}")
    print(f"ours, 1 proc, {n_base} samples: {t_ours_subset:.2f} s -> x{t_base_subset / t_ours_subset:.1f}")
    print(f"ours, {workers} procs, {args.samples} samples: {t_ours:.1f} s")
    print(f"speed-up vs baseline: x{t_base / t_ours:.1f}")
    print(f"scores over all samples: { {k: ours[k] for k in ROUGE_TYPES} }")
    print(f"subset aggregate baseline: {base_agg}")
    print(f"subset aggregate ours:     {ours_agg}")
    print(
        f"per-sample f-measures identical on the {n_base} baseline samples: {identical}; "
        f"aggregates equal to 4 decimals: {agg_equal}"
    )
    return 0 if identical and agg_equal else 1


if __name__ == "__main__":
    sys.exit(main())
