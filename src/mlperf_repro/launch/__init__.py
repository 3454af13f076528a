"""Server launchers: what starts (and stops) the inference servers an ``endpoints`` engine
sends its queries to, chosen by the config's ``engine.endpoints.launch``.

Every launcher has one signature (:class:`Launcher`): a context manager that takes the
system's engine config, the model directory, a log directory and (``launch: slurm``) the
system's GPU-screening settings, starts the servers, and yields the engine config to run
with: its ``endpoints.list`` naming the hosts the servers really run on, plus what the
launcher wants recorded (``gpu_screening``, ``servers``). Leaving the context stops the
servers, whatever happened.

``LAUNCHERS`` maps each ``launch`` value to its launcher; :func:`register_launcher` adds
one. The built-in ones live in one module each: ``external`` (servers already running:
nothing to start) here, :mod:`.local`, :mod:`.shared`, :mod:`.slurm`, :mod:`.slurm_shared`, :mod:`.kubernetes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from ..errors import UserError


class Launcher(Protocol):
    def __call__(
        self, engine: dict[str, Any], model_path: str, log_dir: str | Path, *, screening: dict | None = None
    ) -> AbstractContextManager[dict[str, Any]]:
        """Start the servers of ``engine`` (serving ``model_path``, logs in ``log_dir``); the
        context's value is the engine config to run with. ``screening``: ``{"settings": the
        system's gpu_screening, "system": its name}`` or None."""


LAUNCHERS: dict[str, Launcher] = {}


def register_launcher(name: str) -> Callable[[Launcher], Launcher]:
    """Decorator: ``@register_launcher("mine")`` makes a launcher the one for ``launch: mine``
    (replacing any launcher of that name)."""

    def register(launcher: Launcher) -> Launcher:
        LAUNCHERS[name] = launcher
        return launcher

    return register


def get_launcher(name: str) -> Launcher:
    try:
        return LAUNCHERS[name]
    except KeyError:
        raise UserError(
            f"unknown server launcher '{name}' (systems.<name>.engine.endpoints.launch); "
            f"registered: {', '.join(sorted(LAUNCHERS))}"
        ) from None


@register_launcher("external")
@contextmanager
def launch_external(
    engine: dict[str, Any], model_path: str, log_dir: str | Path, *, screening: dict | None = None
) -> Iterator[dict[str, Any]]:
    """The servers are already running at the configured hosts: nothing to start or stop."""
    yield engine


# The built-in launchers register themselves on import (after the registry exists).
from . import kubernetes, local, shared, slurm, slurm_shared  # noqa: E402, F401
