"""Accuracy-log truncation as MLCommons requires before submission.

The submitted ``mlperf_log_accuracy.json`` keeps only its first and last 4096 characters;
``accuracy.txt`` gains a ``hash=<sha256 of the full log>`` line so reviewers can ask for
the original (which stays outside the tree) and check it.
"""

from __future__ import annotations

from pathlib import Path

from ..hashing import sha256_file

KEEP_CHARS = 4096
ELLIPSIS = "\n\n...\n\n"


def truncated_text(text: str, keep: int = KEEP_CHARS) -> str:
    if len(text) < keep:
        return text
    return text[:keep] + ELLIPSIS + text[-keep:]


def write_truncated_log(original: str | Path, destination: str | Path, keep: int = KEEP_CHARS) -> str:
    """Write the truncated copy; return the sha256 of the untouched original."""
    digest = sha256_file(original)
    text = Path(original).read_text(encoding="utf-8")
    Path(destination).write_text(truncated_text(text, keep), encoding="utf-8")
    return digest


def hash_line(digest: str) -> str:
    return f"\nhash={digest}\n"
