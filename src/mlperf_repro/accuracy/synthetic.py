"""Deterministic English-like (prediction, reference) pairs for tests and benchmarks.

Shaped like llama2-70b OpenOrca outputs: references and predictions of roughly
300 tokens in 10-20 sentences, with abbreviations, numbers and punctuation
that exercise the sentence splitter, inflected words that exercise the Porter
stemmer, and predictions that are noisy rewrites of their references so the
ROUGE overlap (and so the LCS work) is realistic.
"""

from __future__ import annotations

import itertools
import random

__all__ = ["synthetic_pairs", "synthetic_text"]

_COMMON = (
    "the of and to a in is that for it as was with be by on not he she this are or his "
    "from at which but have an they you were her their one all we can has there been if "
    "more when will would who so no other its into some could time these two may then do "
    "first any my now such like our over man me even most made after also did many before "
    "must through back years where much your way well down should because each just those "
    "people how too little state good very make world still own see men work long get here "
    "between both life being under never day same another know while last might us great "
    "old year off come since against go came right used take three answer question example "
    "important however therefore provide information result because number different"
).split()
_STEMS = (
    "connect relat generat argu happen condit nation rational differ decis operat "
    "analy organ commun develop manag produc experi improv consider educat govern "
    "increas measur observ perform requir suggest determin explain describ includ"
).split()
_SUFFIXES = ("", "s", "ed", "ing", "ion", "ions", "ive", "ly", "ness", "ment", "er", "ers", "al", "ally")
_EXTRAS = ("e.g.", "i.e.", "Dr.", "U.S.", "etc.", "vs.", "3.14", "42", "1990", "2.5%", "$10", "No.")
_ENDINGS = (".", ".", ".", ".", "?", "!")


def _vocabulary(rng: random.Random) -> list[str]:
    words = list(_COMMON)
    words += [stem + suffix for stem in _STEMS for suffix in _SUFFIXES]
    syllables = ["ka", "lo", "mi", "ter", "on", "ra", "ste", "vu", "pli", "dor", "gen", "xa", "qui"]
    for _ in range(1500):
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
        words.append(word + rng.choice(_SUFFIXES))
    return words


def _zipf_cum_weights(n: int) -> list[float]:
    # Cumulative, so random.choices bisects instead of re-summing per call.
    return list(itertools.accumulate(1.0 / (rank + 1) ** 1.05 for rank in range(n)))


def _sentence(rng: random.Random, vocab: list[str], weights: list[float]) -> list[str]:
    length = rng.randint(8, 26)
    words = rng.choices(vocab, cum_weights=weights, k=length)
    for i in range(length):
        if rng.random() < 0.03:
            words[i] = rng.choice(_EXTRAS)
        elif rng.random() < 0.05:
            words[i] += ","
    words[0] = words[0][:1].upper() + words[0][1:]
    words[-1] = words[-1].rstrip(",") + rng.choice(_ENDINGS)
    return words


def _rewrite(rng: random.Random, sentence: list[str], vocab: list[str], weights: list[float]) -> list[str]:
    out: list[str] = []
    for word in sentence:
        roll = rng.random()
        if roll < 0.18:
            continue
        if roll < 0.58:
            out.append(rng.choices(vocab, cum_weights=weights)[0])
        else:
            out.append(word)
        if rng.random() < 0.08:
            out.append(rng.choices(vocab, cum_weights=weights)[0])
    if not out:
        return sentence[:1]
    # Keep it a well-formed sentence, as model outputs are.
    out[0] = out[0][:1].upper() + out[0][1:]
    ending = sentence[-1][-1]
    if not out[-1].endswith(ending):
        out[-1] = out[-1].rstrip(",") + ending
    return out


def synthetic_text(rng: random.Random, sentences: int) -> str:
    vocab = _vocabulary(random.Random(0))
    weights = _zipf_cum_weights(len(vocab))
    return " ".join(" ".join(_sentence(rng, vocab, weights)) for _ in range(sentences))


def synthetic_pairs(count: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``count`` (predictions, references), reproducible for a given seed."""
    rng = random.Random(seed)
    vocab = _vocabulary(random.Random(0))
    weights = _zipf_cum_weights(len(vocab))
    predictions: list[str] = []
    references: list[str] = []
    for _ in range(count):
        ref = [_sentence(rng, vocab, weights) for _ in range(rng.randint(9, 18))]
        pred = [_rewrite(rng, s, vocab, weights) for s in ref if rng.random() < 0.7]
        pred += [_sentence(rng, vocab, weights) for _ in range(rng.randint(0, 4))]
        if len(pred) > 2 and rng.random() < 0.3:
            i = rng.randrange(len(pred) - 1)
            pred[i], pred[i + 1] = pred[i + 1], pred[i]
        glue = "\n" if rng.random() < 0.1 else " "
        references.append(glue.join(" ".join(s) for s in ref))
        predictions.append(" ".join(" ".join(s) for s in pred))
    return predictions, references
