"""Tokenizers as the reference evaluations load them (the task registry names one per evaluator)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError

# Model types for which AutoTokenizer takes a tokenizer_config.json naming TokenizersBackend
# as is (it overrides the named class only for the types in its
# MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS, by URL pattern, or for Mistral's tekken.json);
# tests/test_accuracy_tokenizers.py pins that AutoTokenizer builds the same tokenizer.
_AS_NAMED_MODEL_TYPES = frozenset({"llama", "gpt_oss"})


def _tokenizers_backend(model_dir: str):
    """transformers' TokenizersBackend class when AutoTokenizer would pick exactly it for
    ``model_dir`` (the demo models' tokenizer.json-only tokenizers), else None.

    Importing it directly skips AutoTokenizer's module graph, which imports torch: ~5 of
    the ~7.5 s an accuracy job spent loading a 50 kB tokenizer on 2 cores."""
    folder = Path(model_dir)
    try:
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return None
    if (
        not isinstance(tokenizer_config, dict)
        or tokenizer_config.get("tokenizer_class") != "TokenizersBackend"
        or "auto_map" in tokenizer_config
        or model_type not in _AS_NAMED_MODEL_TYPES
        or not (folder / "tokenizer.json").is_file()
        or (folder / "tekken.json").exists()
    ):
        return None
    try:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # a transformers without it (4.x) names no such class either
        return None
    return TokenizersBackend


def load_tokenizer(model_dir: str):
    """The tokenizer as the reference evaluation loads it (slow when one exists)."""
    direct = _tokenizers_backend(model_dir)
    if direct is not None:
        # AutoTokenizer would drop use_fast and call exactly this.
        return direct.from_pretrained(model_dir, model_max_length=2048, padding_side="left")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_dir, model_max_length=2048, padding_side="left")
    except (ValueError, OSError, TypeError):
        # Tokenizers that exist only as tokenizer.json (the demo's byte-level BPE).
        return AutoTokenizer.from_pretrained(model_dir, model_max_length=2048, padding_side="left")


def load_fast_tokenizer(model_dir: str):
    """The tokenizer as the gpt-oss reference loads it (``AutoTokenizer.from_pretrained``)."""
    try:
        direct = _tokenizers_backend(model_dir)
        if direct is not None:
            return direct.from_pretrained(model_dir)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the tokenizer of {model_dir}: {exc}") from exc
