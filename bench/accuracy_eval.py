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
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=24576)
    parser.add_argument("--baseline-samples", type=int, default=256)
    parser.add_argument("--workers", type=int, default=None, help="default: all usable cores")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
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
