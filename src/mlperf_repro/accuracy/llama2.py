"""The llama2-70b accuracy evaluation (reference ``evaluate-accuracy.py``), offline and fast.

Same steps and same numbers as the MLCommons script: decode the deduplicated
token ids of ``mlperf_log_accuracy.json`` with ``batch_decode(...,
skip_special_tokens=True)``, strip, split predictions and targets into
sentences joined by newlines, score ROUGE per sample with the stemmer, and
report the mean f-measures ×100 rounded to 4 decimals plus gen_len (characters
of the post-processed predictions), gen_num, gen_tok_len and tokens_per_sample.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from ..errors import UserError
from .loadgen_log import read_accuracy_log
from .rouge import ROUGE_TYPES, _run_chunks, aggregate_fmeasures
from .sentences import split_sentences_joined

__all__ = [
    "RESULT_KEYS",
    "evaluate_llama2",
    "format_accuracy_txt",
    "load_llama2_tokenizer",
    "postprocess_text",
]

#: Keys of the reference's ``final_result``, in its print order.
RESULT_KEYS: tuple[str, ...] = (*ROUGE_TYPES, "gen_len", "gen_num", "gen_tok_len", "tokens_per_sample")


class BatchDecoder(Protocol):
    def batch_decode(self, sequences: Any, skip_special_tokens: bool = ...) -> list[str]: ...


def postprocess_text(predictions: Sequence[str], targets: Sequence[str]) -> tuple[list[str], list[str]]:
    """The reference's ``postprocess_text``: strip, sentence-split, join with newlines."""
    return (
        [split_sentences_joined(p) for p in predictions],
        [split_sentences_joined(t) for t in targets],
    )


def evaluate_llama2(
    accuracy_log: str | os.PathLike[str] | Sequence[tuple[int, np.ndarray]],
    dataset_targets: Sequence[str] | Mapping[int, str],
    tokenizer: BatchDecoder,
    *,
    dtype: str = "int32",
    workers: int | None = None,
) -> dict[str, float | int]:
    """The reference's ``final_result``, with plain Python numbers.

    ``accuracy_log`` is a path to ``mlperf_log_accuracy.json`` or the output of
    :func:`read_accuracy_log`; ``dtype`` is the reference's ``--dtype`` (its
    script defaults to int64, submissions' SUTs usually log int32).
    ``dataset_targets[qsl_idx]`` is the reference answer (the processed
    dataset's ``output`` column). ``tokenizer`` needs only ``batch_decode``; for
    the reference's exact text use :func:`load_llama2_tokenizer`.
    """
    entries = read_accuracy_log(accuracy_log, dtype) if isinstance(accuracy_log, (str, os.PathLike)) else accuracy_log
    if not entries:
        raise UserError("the accuracy log has no samples")
    targets: list[str] = []
    for qsl_idx, _ in entries:
        try:
            targets.append(dataset_targets[qsl_idx])
        except (IndexError, KeyError):
            raise UserError(f"the accuracy log has qsl_idx {qsl_idx}, which the dataset lacks") from None
    token_ids = [tokens for _, tokens in entries]
    gen_tok_len = sum(len(tokens) for tokens in token_ids)
    decoded = list(tokenizer.batch_decode(token_ids, skip_special_tokens=True))
    if len(decoded) != len(token_ids):
        raise ValueError(f"batch_decode returned {len(decoded)} texts for {len(token_ids)} samples")
    scores, prediction_lengths = _run_chunks(decoded, targets, postprocess=True, workers=workers)

    gen_num = len(scores)
    result: dict[str, float | int] = {
        name: aggregate_fmeasures(s[i] for s in scores) for i, name in enumerate(ROUGE_TYPES)
    }
    result["gen_len"] = int(sum(prediction_lengths))
    result["gen_num"] = gen_num
    result["gen_tok_len"] = int(gen_tok_len)
    result["tokens_per_sample"] = round(gen_tok_len / gen_num, 1)
    return result


def load_llama2_tokenizer(checkpoint_path: str | os.PathLike[str]) -> Any:
    """The tokenizer exactly as the reference builds it (slow SentencePiece one).

    ``use_fast=False`` matters: fast and slow Llama tokenizers can decode the
    same ids to different text.
    """
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(checkpoint_path, model_max_length=2048, padding_side="left", use_fast=False)


def _plain(value: Any) -> Any:
    # numpy >= 2 reprs scalars as np.float64(...), which the checker's regexes miss.
    if isinstance(value, np.generic):
        return value.item()
    return value


def format_accuracy_txt(result: Mapping[str, Any]) -> str:
    """What the reference prints: a ``Results`` header then the dict on one line.

    The submission checker reads this with ``'rouge1':\\s+'?([\\d.]+)`` and
    ``'tokens_per_sample':\\s([\\d.]+)``; values are made plain Python numbers so
    no ``np.float64(`` wrapper breaks those patterns.
    """
    plain = {str(key): _plain(value) for key, value in result.items()}
    for key, value in plain.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"accuracy value {key!r} is {type(value).__name__}, not a number")
    return f"\nResults\n\n{plain!r}\n"
