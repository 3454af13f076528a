"""User-facing errors.

A :class:`UserError` is a problem the user can fix (a config key, an input file, a
checksum). Entry points print its message without a traceback and exit non-zero.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager


class UserError(Exception):
    """An error whose message alone tells the user what is wrong and what to do."""


@contextmanager
def user_errors_exit(prefix: str = "error"):
    """Turn a :class:`UserError` into one message on stderr and exit status 1."""
    try:
        yield
    except UserError as exc:
        print(f"{prefix}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
