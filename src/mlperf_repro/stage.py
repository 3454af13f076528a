"""Glue between Snakemake's ``script:`` directive and the package.

Every script in scripts/ is ``run(snakemake, function)``: the job's stdout and stderr go
to its log file, a :class:`UserError` becomes one readable line (also on the terminal)
and a non-zero exit, and the function receives plain Python values.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any


def run(snakemake: Any, function: Callable[..., Any], **kwargs: Any) -> None:
    from . import progress
    from .errors import UserError

    log_path = snakemake.log[0] if len(snakemake.log) else None
    terminal = sys.__stderr__
    if log_path:
        # Keep a handle on the terminal before fds 1/2 are pointed at the log.
        terminal = os.fdopen(os.dup(2), "w")
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        log_file = open(log_path, "a", buffering=1)
        sys.stdout = sys.stderr = log_file
        # Child processes and C libraries (LoadGen, torch) write to fds 1 and 2.
        os.dup2(log_file.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
    # The config's progress section, from Snakemake's config rather than a rule's params: a
    # different interval changes no result, so it must not rerun jobs. Stall lines are also
    # echoed to the terminal, where the user is looking.
    progress.configure(
        progress.settings_from_config(getattr(snakemake, "config", None)),
        terminal=terminal if log_path else None,
        terminal_note=f" (rule {snakemake.rule}, log: {log_path})" if log_path else "",
    )
    try:
        function(snakemake, **kwargs)
    except UserError as exc:
        message = f"error in rule {snakemake.rule}: {exc}"
        print(message, file=sys.stderr)
        _to_terminal(terminal, message + (f" (log: {log_path})" if log_path else ""))
        sys.exit(1)
    except Exception:
        traceback.print_exc()
        _to_terminal(terminal, f"error in rule {snakemake.rule}: unexpected failure; see {log_path}")
        sys.exit(1)


def _to_terminal(stream, message: str) -> None:
    try:
        stream.write(message + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def optional_input(snakemake: Any, name: str) -> str | None:
    """A named input that an input function may leave empty (``[]``)."""
    value = snakemake.input.get(name)
    if not value:
        return None
    return value if isinstance(value, str) else value[0]


def apply_env(env: dict[str, str]) -> None:
    """Set a system's engine environment before vLLM is imported (it reads env at import)."""
    for key, value in env.items():
        os.environ[key] = str(value)
