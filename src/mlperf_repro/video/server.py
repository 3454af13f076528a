"""The shared video server of ``engine.launch: shared`` (backend diffusers): one process holds
a system's text-to-video pipeline for every LoadGen run of the workflow, as ``vllm serve`` does
for an LLM (no standard serving API exists for video generation, so this is a small one).

    python -m mlperf_repro.video.server --model DIR --generation JSON --engine-args JSON --port N

``GET /health`` answers 200 once the pipeline is loaded and has rendered its warm-up video
(``{"status": "ok", "latent": where its fixed latent came from}``).
``POST /render`` with ``{"prompts": [...]}`` renders them in one pipeline call (the calls are
serialised: one pipeline) and answers ``{"videos": [base64 mp4, ...], "generate_seconds",
"encode_seconds"}``; the mp4 files are encoded outside the pipeline's lock, so a second request
renders while the first one's videos encode. Nothing carries over from one request to the next
but the pipeline itself: every video starts from the same fixed latent.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODULE = "mlperf_repro.video.server"


def server_command(model_path: str, generation: dict[str, Any], engine_args: dict[str, Any], port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        MODULE,
        "--model",
        model_path,
        "--generation",
        json.dumps(generation, sort_keys=True),
        "--engine-args",
        json.dumps(engine_args, sort_keys=True),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


class VideoServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], renderer) -> None:
        super().__init__(address, _Handler)
        self.renderer = renderer
        self.pipeline_lock = threading.Lock()

    def render(self, prompts: list[str]) -> dict[str, Any]:
        started = time.perf_counter()
        with self.pipeline_lock:
            frames = self.renderer.render(prompts)
        rendered = time.perf_counter()
        videos = [self.renderer.mp4_bytes(f) for f in frames]
        return {
            "videos": [base64.b64encode(v).decode() for v in videos],
            "generate_seconds": rendered - started,
            "encode_seconds": time.perf_counter() - rendered,
        }


class _Handler(BaseHTTPRequestHandler):
    server: VideoServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/health":
            self._reply(200, {"status": "ok", "latent": self.server.renderer.latent_source})
        else:
            self._reply(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/render":
            self._reply(404, {"error": f"no route {self.path}"})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            prompts = body["prompts"]
            if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
                raise ValueError("prompts must be a non-empty list of strings")
        except (ValueError, KeyError, TypeError) as exc:
            self._reply(400, {"error": f"bad request: {exc}"})
            return
        try:
            reply = self.server.render(prompts)
        except Exception as exc:  # the run that asked fails with the reason; the server stays
            self.log_error("rendering %d prompt(s) failed: %r", len(prompts), exc)
            self._reply(500, {"error": f"rendering failed: {exc!r}"})
            return
        self._reply(200, reply)

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        if not (self.command == "GET" and self.path == "/health"):  # the supervisor's polls
            super().log_message(format, *args)


def main(argv: list[str] | None = None) -> int:
    from ..errors import UserError
    from .renderer import VideoRenderer

    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--generation", required=True, help="the benchmark's generation settings (JSON)")
    parser.add_argument("--engine-args", default="{}", help="the system's engine_args (JSON)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    renderer = VideoRenderer(
        model_path=args.model, generation=json.loads(args.generation), engine_args=json.loads(args.engine_args)
    )
    started = time.perf_counter()
    try:
        renderer.load()  # /health answers only after this: no run sees a half-loaded pipeline
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(
        f"pipeline {args.model} loaded and warmed up in {time.perf_counter() - started:.1f} s "
        f"(latent {renderer.latent_source}); serving on {args.host}:{args.port}",
        flush=True,
    )
    server = VideoServer((args.host, args.port), renderer)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        renderer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
