"""Calibration rows: the token sequences static scales (and Quark's algorithms) are measured on.

Drawn from the benchmark's dataset file (the demo: its own dataset; llama2-70b: the MLCommons
OpenOrca calibration subset, acquired and checksummed like any dataset), chosen with a seed,
and packed into sequences of at most ``seq_len`` tokens in one of two ways (``packing``):

* ``concatenate`` (default): the rows' prompt tokens joined in row order and cut into pieces of
  exactly ``seq_len`` (Quark's pile-val convention; the short tail is dropped);
* ``per_row``: each row is one sequence, truncated to ``seq_len`` (the vendor's calibration
  note: "fixed-length sequences using dynamic padding and truncation"). Our own calibration runs
  one sequence, or equal lengths, at a time, so no pad token enters its activations; Quark's
  layer-wise algorithms need one length for all, so for them the sequences are right-padded to
  the longest (:func:`fixed_length`, with the model's pad or end-of-sequence token).

The file's sha256, the packing and the rows go into the manifest.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ..dataset_files import PROMPT_COLUMNS, read_table
from ..errors import UserError
from ..hashing import sha256_file

__all__ = [
    "DEFAULT_SAMPLES",
    "DEFAULT_SEED",
    "DEFAULT_SEQ_LEN",
    "PACKINGS",
    "fixed_length",
    "pad_token_id",
    "select_calibration",
]

DEFAULT_SAMPLES = 32
DEFAULT_SEQ_LEN = 512
DEFAULT_SEED = 0
PACKINGS = ("concatenate", "per_row")


def select_calibration(path: str | Path, calibration: dict[str, Any] | None) -> dict[str, Any]:
    """The calibration rows of a dataset file: ``{"input_ids", "rows", "seed", "file", "sha256"}``."""
    settings = dict(calibration or {})
    samples = int(settings.get("samples", DEFAULT_SAMPLES))
    seq_len = int(settings.get("seq_len", DEFAULT_SEQ_LEN))
    seed = int(settings.get("seed", DEFAULT_SEED))
    packing = settings.get("packing", PACKINGS[0])
    if packing not in PACKINGS:
        raise UserError(f"calibration.packing is {packing!r}; allowed values: {', '.join(PACKINGS)}")
    frame = read_table(path)
    column = next((c for c in PROMPT_COLUMNS if c in frame.columns), None)
    if column is None:
        raise UserError(f"calibration file {path} has none of the token columns {list(PROMPT_COLUMNS)}")
    if len(frame) == 0:
        raise UserError(f"calibration file {path} has no rows")
    rows = sorted(random.Random(seed).sample(range(len(frame)), min(samples, len(frame))))
    if packing == "per_row":
        input_ids = [[int(t) for t in frame[column].iloc[i]][:seq_len] for i in rows]
        input_ids = [ids for ids in input_ids if ids]
    else:
        tokens = [int(t) for i in rows for t in frame[column].iloc[i]]
        input_ids = [tokens[k : k + seq_len] for k in range(0, len(tokens), seq_len)]
        if len(input_ids) > 1 and len(input_ids[-1]) < seq_len:
            input_ids.pop()
    return {
        "file": str(path),
        "sha256": sha256_file(path),
        "column": column,
        "seed": seed,
        "samples": len(rows),
        "seq_len": seq_len,
        "packing": packing,
        "sequences": len(input_ids),
        "tokens": sum(len(x) for x in input_ids),
        "rows": rows,
        "input_ids": input_ids,
    }


def pad_token_id(model_dir: str | Path) -> int:
    """The token a model's calibration sequences are padded with: its ``pad_token_id``, else its
    ``eos_token_id`` (the first, where several), read from ``config.json`` then
    ``generation_config.json``. Llama 2 defines no pad token; Hugging Face practice, and Quark's
    own examples, pad with the end-of-sequence token then."""
    found: dict[str, Any] = {}
    for name in ("config.json", "generation_config.json"):
        path = Path(model_dir) / name
        if path.is_file():
            data = json.loads(path.read_text())
            for key in ("pad_token_id", "eos_token_id"):
                if found.get(key) is None and data.get(key) is not None:
                    found[key] = data[key]
    for key in ("pad_token_id", "eos_token_id"):
        value = found.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            return int(value)
    raise UserError(
        f"{model_dir}: neither config.json nor generation_config.json names a pad_token_id or eos_token_id, "
        "needed to pad calibration sequences of unequal length (calibration.packing: per_row); "
        "add one of them, or use calibration.packing: concatenate"
    )


def fixed_length(input_ids: list[list[int]], pad_id: int) -> tuple[list[list[int]], dict[str, Any]]:
    """Right-pad every sequence to the longest one's length: the vendor's "fixed-length sequences
    using dynamic padding and truncation" (rows truncated to ``seq_len`` by :func:`select_calibration`,
    then padded to the longest). Quark's layer-wise algorithms (AutoSmoothQuant, GPTQ) replay every
    cached layer input with the keyword arguments (rotary position embeddings) of the last
    calibration batch, so sequences of unequal length fail there. Padding on the right leaves each
    real token's activations as they were under a causal mask; the pad positions add their own
    activations to the statistics, as the vendor's padded batches do."""
    length = max((len(ids) for ids in input_ids), default=0)
    padded = [ids + [pad_id] * (length - len(ids)) for ids in input_ids]
    return padded, {
        "length": length,
        "pad_token_id": pad_id,
        "padded_sequences": sum(1 for ids in input_ids if len(ids) < length),
        "pad_tokens": sum(length - len(ids) for ids in input_ids),
    }
