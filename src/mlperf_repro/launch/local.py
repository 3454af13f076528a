"""``launch: local``: one ``vllm serve`` process per endpoint on this host (the demo, tests,
a single multi-GPU node). The servers are stopped whatever happens (run failure, Ctrl-C),
so no engine worker outlives the run."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import UserError
from . import register_launcher
from .common import serve_command, stop_process, wait_until_healthy


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
            procs.append(
                subprocess.Popen(
                    serve_command(model_path, served_model_name, host, port, engine_args),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=dict(os.environ, **(env or {})),
                    start_new_session=True,  # its own process group: stop() takes the engine workers too
                )
            )
            log.close()
        proc_of = dict(zip(ports, procs))

        def exited(waiting: set) -> None:
            for _, port in waiting:
                if proc_of[port].poll() is not None:
                    raise UserError(
                        f"vllm serve on port {port} exited with code {proc_of[port].returncode} during "
                        f"start-up; see {log_dir / f'vllm-serve-{port}.log'}"
                    )

        wait_until_healthy(
            [(host, port) for port in ports],
            startup_timeout_s,
            check=exited,
            describe=lambda waiting: f"see the logs in {log_dir}",
            what="vllm serve",
        )
        yield procs
    finally:
        for proc in procs:
            stop_process(proc)


@register_launcher("local")
@contextmanager
def launch_local(
    engine: dict[str, Any], model_path: str, log_dir: str | Path, *, screening: dict | None = None
) -> Iterator[dict[str, Any]]:
    """The engine's endpoints (their ports) started here; yields the engine unchanged."""
    endpoints = engine["endpoints"]
    with local_vllm_servers(
        model_path,
        endpoints.get("served_model_name", "model"),
        [e["port"] for e in endpoints["list"]],
        engine.get("engine_args", {}),
        log_dir,
        env=engine.get("env"),
        startup_timeout_s=endpoints.get("startup_timeout_s", 600),
    ):
        yield engine
