"""Reading LoadGen's ``mlperf_log_accuracy.json`` without loading it whole.

LoadGen writes a JSON array with one object per completed sample::

    [
    { "seq_id" : 0, "qsl_idx" : 17, "data" : "0A000000...", "token_count" : 3 },
    ...
    ]

``data`` is the hex of the response bytes (for LLMs, the generated token ids
as int32 or int64). A full llama2-70b accuracy log is 100-300 MB of hex, so the
array is decoded one object at a time and each hex string becomes a compact
numpy array straight away.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError

__all__ = ["DTYPES", "iter_accuracy_entries", "read_accuracy_log", "resolve_dtype"]

# The reference script's --dtype choices and what they mean.
# "uint8": a response that is a file's bytes (text-to-video: one mp4 per sample).
DTYPES: dict[str, type[np.generic]] = {"int32": np.int32, "int64": np.int64, "float": np.float32, "uint8": np.uint8}

_READ_SIZE = 1 << 20
_WHITESPACE = " \t\r\n"


def resolve_dtype(dtype: str | np.dtype[Any] | type[np.generic]) -> np.dtype[Any]:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise UserError(f"accuracy log dtype {dtype!r} is not one of {sorted(DTYPES)}")
        return np.dtype(DTYPES[dtype])
    return np.dtype(dtype)


def iter_accuracy_entries(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield every object of the log's top-level array, in file order."""
    path = Path(path)
    decoder = json.JSONDecoder()
    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read accuracy log {path}: {exc}") from exc
    with handle:
        buf, pos, eof = "", 0, False
        state = "start"  # start -> value|close -> separator|close -> ...
        while True:
            pos = _skip(buf, pos)
            if pos >= len(buf):
                if eof:
                    if state == "start":
                        raise UserError(f"{path} is empty, not a LoadGen accuracy log")
                    raise UserError(f"{path} ends before its JSON array is closed (truncated log?)")
                chunk = handle.read(_READ_SIZE)
                buf, pos, eof = chunk, 0, not chunk
                continue
            char = buf[pos]
            if state == "start":
                if char != "[":
                    raise UserError(f"{path} is not a LoadGen accuracy log (no JSON array)")
                state, pos = "first", pos + 1
            elif char == "]" and state in ("first", "separator"):
                if (buf[pos + 1 :] + handle.read()).strip(_WHITESPACE):
                    raise UserError(f"{path} has data after the end of its JSON array")
                return
            elif state == "separator":
                if char != ",":
                    raise UserError(f"{path}: expected ',' or ']' between log entries")
                state, pos = "value", pos + 1
            else:
                try:
                    entry, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as exc:
                    if eof:
                        raise UserError(f"{path} is not valid JSON: {exc}") from exc
                    # The object straddles the block boundary: read on and retry.
                    chunk = handle.read(_READ_SIZE)
                    buf, pos, eof = buf[pos:] + chunk, 0, not chunk
                    continue
                if not isinstance(entry, dict):
                    raise UserError(f"{path}: array element is {type(entry).__name__}, not an object")
                yield entry
                state, pos = "separator", end


def _skip(buf: str, pos: int) -> int:
    n = len(buf)
    while pos < n and buf[pos] in _WHITESPACE:
        pos += 1
    return pos


def read_accuracy_log(
    path: str | os.PathLike[str],
    dtype: str | np.dtype[Any] | type[np.generic] = "int32",
    *,
    first_per_sample: bool = True,
) -> list[tuple[int, np.ndarray]]:
    """``[(qsl_idx, tokens)]`` in log order, keeping the first entry per qsl_idx.

    Like the llama2 reference: later duplicates of a qsl_idx are ignored, even if
    their data differ. ``first_per_sample=False`` keeps every entry (the gpt-oss
    reference scores each one).
    """
    np_dtype = resolve_dtype(dtype)
    seen: set[int] = set()
    out: list[tuple[int, np.ndarray]] = []
    for entry in iter_accuracy_entries(path):
        try:
            qsl_idx = int(entry["qsl_idx"])
            data = entry["data"]
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{path}: entry without a usable qsl_idx/data: {exc}") from exc
        if first_per_sample:
            if qsl_idx in seen:
                continue
            seen.add(qsl_idx)
        try:
            raw = bytes.fromhex(data)
        except (TypeError, ValueError) as exc:
            raise UserError(f"{path}: qsl_idx {qsl_idx} has non-hex data") from exc
        if len(raw) % np_dtype.itemsize:
            raise UserError(
                f"{path}: qsl_idx {qsl_idx} has {len(raw)} bytes, not a whole number of "
                f"{np_dtype.name} values; is --dtype right?"
            )
        out.append((qsl_idx, np.frombuffer(raw, dtype=np_dtype)))
    return out
