"""Accuracy evaluators (llama2-70b ROUGE, gpt-oss-120b), offline and exact; the evaluate stage
that runs them is `mlperf_repro.stages.accuracy`.

Importing this package is cheap: NLTK, the Punkt model and any tokenizer are
loaded only when first used.
"""

from .llama2 import (
    RESULT_KEYS,
    evaluate_llama2,
    format_accuracy_txt,
    load_llama2_tokenizer,
    postprocess_text,
)
from .loadgen_log import iter_accuracy_entries, read_accuracy_log
from .rouge import ROUGE_TYPES, aggregate_fmeasures, per_sample_scores, rouge_scores, score_pair
from .sentences import sent_tokenize, split_sentences_joined

__all__ = [
    "RESULT_KEYS",
    "ROUGE_TYPES",
    "aggregate_fmeasures",
    "evaluate_llama2",
    "format_accuracy_txt",
    "iter_accuracy_entries",
    "load_llama2_tokenizer",
    "per_sample_scores",
    "postprocess_text",
    "read_accuracy_log",
    "rouge_scores",
    "score_pair",
    "sent_tokenize",
    "split_sentences_joined",
]
