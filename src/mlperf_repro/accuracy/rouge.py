"""ROUGE-1/2/L/Lsum exactly as ``rouge_score`` computes them, much faster.

The reference llama2-70b evaluation calls HF ``evaluate``'s "rouge" metric with
``use_stemmer=True, use_aggregator=False``; that is
``rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL",
"rougeLsum"], use_stemmer=True).score(reference, prediction)`` per sample,
keeping each f-measure. Every per-sample precision, recall and f-measure here is
the same float as rouge_score's (same integer counts, same float expressions);
only the way the integers are found differs:

* Tokenising: rouge_score lowercases, turns every run of characters outside
  ``[a-z0-9]`` into a space, Porter-stems (NLTK, default mode) tokens longer
  than 3 characters and keeps stems that are still ``[a-z0-9]+``. We do the
  same with the stem of each distinct word memoised, map stems to small ints,
  and tokenise each newline-separated line once: because ``"\\n"`` is itself a
  separator, the whole text's tokens are the concatenation of its lines'.
* ROUGE-N: multiset intersections with ``collections.Counter`` over int keys.
* ROUGE-L: LCS length with the bit-parallel algorithm of Allison & Dix /
  Hyyrö on Python ints, O(n * m / word) instead of a Python O(n * m) table.
* ROUGE-Lsum: rouge_score's union-LCS counts the reference tokens on *one
  particular* LCS per (reference line, prediction line) pair, the one its table
  backtrack picks, so the exact path matters. The bit-parallel columns encode
  the table: bit k of column j is 1 iff ``T[k+1][j] == T[k][j]``. Its rule "on a
  token match go diagonal, else go up iff ``T[i-1][j] >= T[i][j-1]``" is then
  "go up while bit i-1 is set and no match", so a whole column is resolved by
  one highest-set-bit query, and runs of prediction tokens absent from the
  reference line (which leave the column unchanged) collapse to one step.
* Work is spread over a process pool.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext
from typing import NamedTuple

import numpy as np

from .. import progress

__all__ = [
    "ROUGE_TYPES",
    "Score",
    "aggregate_fmeasures",
    "per_sample_scores",
    "rouge_scores",
    "score_pair",
]

ROUGE_TYPES: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")

# rouge_score keeps a stem only if it matches ^[a-z0-9]+$; ``$`` also matches
# before a final newline, which a stem never contains.
_WORD_RE = re.compile(r"[a-z0-9]+")
_VALID_TOKEN_RE = re.compile(r"^[a-z0-9]+$")

# Below this many samples a pool costs more than it saves.
_MIN_SAMPLES_FOR_POOL = 64
# With the default worker count, nor below this many characters of predictions and
# references: a pool of two adds ~0.1 s (fork, chunk transfer) and in process scoring
# runs ~2 us a character, so on 2 cores it pays from ~100k characters (the demo's 64
# answers and references, 14k characters: 0.03 s in process, 0.12 s pooled).
_MIN_CHARS_FOR_POOL = 200_000
_SERIAL_CHUNK = 256


class Score(NamedTuple):
    """Mirrors ``rouge_score.scoring.Score``."""

    precision: float
    recall: float
    fmeasure: float


_ZERO = Score(0.0, 0.0, 0.0)


def _fmeasure(precision: float, recall: float) -> float:
    # Same expression, same evaluation order as rouge_score.scoring.fmeasure.
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


class _Vocabulary:
    """Per-process memo: raw word -> int id of its stem (-1 when dropped)."""

    def __init__(self) -> None:
        from nltk.stem.porter import PorterStemmer

        self._stem: Callable[[str], str] = PorterStemmer().stem
        self._word_ids: dict[str, int] = {}
        self._stem_ids: dict[str, int] = {}

    def _add(self, word: str) -> int:
        stem = self._stem(word) if len(word) > 3 else word
        if _VALID_TOKEN_RE.match(stem):
            ident = self._stem_ids.setdefault(stem, len(self._stem_ids))
        else:
            ident = -1
        self._word_ids[word] = ident
        return ident

    def tokenize(self, text: str) -> list[int]:
        words = _WORD_RE.findall(text.lower())
        ids = self._word_ids
        try:
            out = [ids[w] for w in words]
        except KeyError:
            add = self._add
            out = [ids[w] if w in ids else add(w) for w in words]
        if out and min(out) < 0:
            out = [t for t in out if t >= 0]
        return out


_VOCAB: _Vocabulary | None = None


def _vocabulary() -> _Vocabulary:
    global _VOCAB
    if _VOCAB is None:
        _VOCAB = _Vocabulary()
    return _VOCAB


def _analyse(text: str) -> tuple[list[list[int]], list[int]]:
    """(token ids per non-empty line, token ids of the whole text)."""
    tokenize = _vocabulary().tokenize
    lines = [tokenize(line) for line in text.split("\n") if line]
    flat = [t for line in lines for t in line]
    return lines, flat


def _ngram_score(target: Counter[int], prediction: Counter[int], n_target: int, n_pred: int) -> Score:
    if len(prediction) < len(target):
        overlap = sum(min(c, target[k]) for k, c in prediction.items() if k in target)
    else:
        overlap = sum(min(c, prediction[k]) for k, c in target.items() if k in prediction)
    precision = overlap / max(n_pred, 1)
    recall = overlap / max(n_target, 1)
    return Score(precision, recall, _fmeasure(precision, recall))


def _bigrams(tokens: list[int]) -> Counter[int]:
    return Counter([(a << 32) | b for a, b in zip(tokens, tokens[1:])])


def _position_masks(tokens: Sequence[int]) -> dict[int, int]:
    masks: dict[int, int] = {}
    for pos, tok in enumerate(tokens):
        masks[tok] = masks.get(tok, 0) | (1 << pos)
    return masks


def _lcs_length(a: list[int], b: list[int]) -> int:
    # Bits over the longer sequence: Python int ops cost about the same for 1 or
    # 10 digits, so the loop count (the shorter one) is what matters.
    if len(a) < len(b):
        a, b = b, a
    masks = _position_masks(a)
    full = (1 << len(a)) - 1
    v = full
    get = masks.get
    for tok in b:
        m = get(tok)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _score_lcs(target: list[int], prediction: list[int]) -> Score:
    if not target or not prediction:
        return _ZERO
    lcs = _lcs_length(target, prediction)
    precision = lcs / len(prediction)
    recall = lcs / len(target)
    return Score(precision, recall, _fmeasure(precision, recall))


def _backtracked_lcs(masks: dict[int, int], m: int, candidate: list[int]) -> int:
    """Bitmask of the reference positions on rouge_score's backtracked LCS.

    ``masks``/``m`` describe the reference line, ``candidate`` one prediction line.
    """
    full = (1 << m) - 1
    v = full
    # Only tokens present in the reference change the column. Each kept column
    # records whether unmatched tokens precede it; those share the previous
    # column and cost one step in the backtrack.
    columns: list[tuple[int, int, bool]] = []
    gap = False
    for match in map(masks.get, candidate):
        if match:
            u = v & match
            v = ((v + u) | (v - u)) & full
            columns.append((v, match, gap))
            gap = False
        else:
            gap = True
    chosen = 0
    i = m
    pending_gap = gap
    for v, match, gap in reversed(columns):
        low = (1 << i) - 1
        if pending_gap:
            # Unmatched columns to the right equal this one: climb to just above
            # the highest zero bit below row i.
            i = (~v & low).bit_length()
            if not i:
                break
            low = (1 << i) - 1
        stop = (match | ~v) & low
        if not stop:
            break
        k = stop.bit_length() - 1
        if (match >> k) & 1:
            chosen |= 1 << k
            i = k
            if not i:
                break
        else:
            i = k + 1
        pending_gap = gap
    return chosen


def _score_lsum(
    target_lines: list[list[int]],
    prediction_lines: list[list[int]],
    n_target: int,
    n_pred: int,
    prediction_counts: Counter[int],
) -> Score:
    if not target_lines or not prediction_lines or not n_target or not n_pred:
        return _ZERO
    candidates = [(line, set(line)) for line in prediction_lines if line]
    on_lcs: Counter[int] = Counter()
    for ref in target_lines:
        if not ref:
            continue
        masks = _position_masks(ref)
        m = len(ref)
        # Once every position whose token occurs in the prediction is on the
        # union, further prediction lines cannot add to it.
        reachable = 0
        for tok, mask in masks.items():
            if tok in prediction_counts:
                reachable |= mask
        union = 0
        for cand, cand_set in candidates:
            if union == reachable:
                break
            if masks.keys().isdisjoint(cand_set):
                continue
            union |= _backtracked_lcs(masks, m, cand)
        while union:
            lowest = union & -union
            on_lcs[ref[lowest.bit_length() - 1]] += 1
            union ^= lowest
    # rouge_score decrements per-type counters so a type never scores more hits
    # than it has in either text; a reference type's LCS positions never exceed
    # its reference count, so only the prediction count can bind.
    hits = sum(min(c, prediction_counts[t]) for t, c in on_lcs.items())
    recall = hits / n_target
    precision = hits / n_pred
    return Score(precision, recall, _fmeasure(precision, recall))


def score_pair(target: str, prediction: str) -> dict[str, Score]:
    """``RougeScorer(ROUGE_TYPES, use_stemmer=True).score(target, prediction)``."""
    t_lines, t_flat = _analyse(target)
    p_lines, p_flat = _analyse(prediction)
    n_t, n_p = len(t_flat), len(p_flat)
    t_uni, p_uni = Counter(t_flat), Counter(p_flat)
    return {
        "rouge1": _ngram_score(t_uni, p_uni, n_t, n_p),
        "rouge2": _ngram_score(_bigrams(t_flat), _bigrams(p_flat), max(n_t - 1, 0), max(n_p - 1, 0)),
        "rougeL": _score_lcs(t_flat, p_flat),
        "rougeLsum": _score_lsum(t_lines, p_lines, n_t, n_p, p_uni),
    }


def _fmeasures(target: str, prediction: str) -> tuple[float, float, float, float]:
    s = score_pair(target, prediction)
    return (s["rouge1"].fmeasure, s["rouge2"].fmeasure, s["rougeL"].fmeasure, s["rougeLsum"].fmeasure)


# --------------------------------------------------------------------------- pool


def _chunk_worker(
    args: tuple[list[str], list[str], bool],
) -> tuple[list[tuple[float, float, float, float]], list[int]]:
    """Score one chunk; optionally apply the reference's sentence post-processing first.

    Returns per-sample f-measures and the character length of each
    (post-processed) prediction, which the reference reports as gen_len.
    """
    predictions, references, postprocess = args
    if postprocess:
        from .sentences import split_sentences_joined

        predictions = [split_sentences_joined(p) for p in predictions]
        references = [split_sentences_joined(r) for r in references]
    scores = [_fmeasures(r, p) for p, r in zip(predictions, references)]
    return scores, [len(p) for p in predictions]


def default_workers() -> int:
    """Usable CPU cores (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def pool_context() -> BaseContext:
    """The multiprocessing start method used for scoring pools."""
    # fork where available: spawn/forkserver re-import the caller's __main__ in
    # every worker, which breaks scripts without a main guard (e.g. workflow
    # scripts). The workers run only pure-Python scoring and take no lock a
    # parent thread could hold, so inheriting the parent is safe here.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _run_chunks(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    postprocess: bool,
    workers: int | None,
) -> tuple[list[tuple[float, float, float, float]], list[int]]:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    n = len(predictions)
    small = n < _MIN_SAMPLES_FOR_POOL
    if workers is None:
        workers = default_workers()
        small = small or sum(map(len, predictions)) + sum(map(len, references)) < _MIN_CHARS_FOR_POOL
    workers = max(1, int(workers))
    scores: list[tuple[float, float, float, float]] = []
    lengths: list[int] = []
    if workers == 1 or small:
        # In pieces, so the step's progress reporter (mlperf_repro.progress) sees samples done.
        for i in range(0, n, _SERIAL_CHUNK):
            chunk_scores, chunk_lengths = _chunk_worker(
                (list(predictions[i : i + _SERIAL_CHUNK]), list(references[i : i + _SERIAL_CHUNK]), postprocess)
            )
            scores.extend(chunk_scores)
            lengths.extend(chunk_lengths)
            progress.advance(len(chunk_scores))
        return scores, lengths
    # Several chunks per worker so a slow chunk does not idle the others.
    size = max(1, math.ceil(n / (workers * 8)))
    chunks = [(list(predictions[i : i + size]), list(references[i : i + size]), postprocess) for i in range(0, n, size)]
    # Forked workers inherit NLTK, the Punkt model and the stemmer instead of each
    # importing and building them (~0.3-0.5 s apiece on 2 cores).
    _vocabulary()
    if postprocess:
        from .sentences import sent_tokenize

        sent_tokenize("")
    with ProcessPoolExecutor(max_workers=workers, mp_context=pool_context()) as pool:
        for chunk_scores, chunk_lengths in pool.map(_chunk_worker, chunks):
            scores.extend(chunk_scores)
            lengths.extend(chunk_lengths)
            progress.advance(len(chunk_scores))
    return scores, lengths


# --------------------------------------------------------------------------- API


def per_sample_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    workers: int | None = None,
) -> dict[str, list[float]]:
    """Per-sample f-measures, keyed like ``evaluate``'s rouge with use_aggregator=False."""
    scores, _ = _run_chunks(predictions, references, postprocess=False, workers=workers)
    return _columns(scores)


def _columns(scores: list[tuple[float, float, float, float]]) -> dict[str, list[float]]:
    return {name: [s[i] for s in scores] for i, name in enumerate(ROUGE_TYPES)}


def aggregate_fmeasures(values: Iterable[float]) -> float:
    """The reference's ``round(np.mean(v) * 100, 4)``, as a plain float.

    ``np.mean`` (pairwise summation) and numpy's own ``round`` are kept on
    purpose: a plain ``sum()`` or Python's ``round`` could differ in the last
    place and, rarely, in the fourth decimal.
    """
    array = np.asarray(list(values), dtype=np.float64)
    if array.size == 0:
        raise ValueError("no samples to aggregate")
    return float(round(np.mean(array) * 100, 4))


def rouge_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    workers: int | None = None,
    return_per_sample: bool = False,
) -> dict[str, object]:
    """Mean ROUGE f-measures ×100 rounded to 4 decimals, like the reference.

    Texts are scored as given (the reference splits sentences first; see
    :func:`mlperf_repro.accuracy.llama2.postprocess_text`). With
    ``return_per_sample`` the result also has ``"per_sample"``: rouge type ->
    list of f-measures in input order.
    """
    columns = per_sample_scores(predictions, references, workers=workers)
    result: dict[str, object] = {name: aggregate_fmeasures(columns[name]) for name in ROUGE_TYPES}
    if return_per_sample:
        result["per_sample"] = columns
    return result
