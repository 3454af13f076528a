"""Tokenizers as the reference evaluations load them (the task registry names one per evaluator)."""

from __future__ import annotations

from ..errors import UserError


def load_tokenizer(model_dir: str):
    """The tokenizer as the reference evaluation loads it (slow when one exists)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_dir, model_max_length=2048, padding_side="left", use_fast=False)
    except (ValueError, OSError, TypeError):
        # Tokenizers that exist only as tokenizer.json (the demo's byte-level BPE).
        return AutoTokenizer.from_pretrained(model_dir, model_max_length=2048, padding_side="left")


def load_fast_tokenizer(model_dir: str):
    """The tokenizer as the gpt-oss reference loads it (``AutoTokenizer.from_pretrained``)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the tokenizer of {model_dir}: {exc}") from exc
