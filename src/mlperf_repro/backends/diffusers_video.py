"""A diffusers text-to-video pipeline serving LoadGen (``engine.backend: diffusers``).

``engine.launch: in_process`` (the default) loads the pipeline inside the LoadGen process, as
the vendor's v6.0 wan-2.2 harness does (``WanPipeline`` in process; its eight GPUs share one
video through xDiT sequence parallelism). ``launch: shared`` loads it once per workflow run in
the system's video server (:mod:`mlperf_repro.video.server`), which every run attaches to.

Requests queue up from LoadGen's issue thread; the main thread takes up to
``engine_args.batch_size`` prompts per pipeline call (Offline issues every sample at once;
SingleStream one at a time). In process, an encoder thread writes each video as an mp4 and
hands its bytes to the SUT while the main thread renders the next batch (each mp4 is an ffmpeg
process, ~50 ms on the CPU, most of it starting the process: a third of a small video's time,
hidden in Offline); the server does the same with two batches in flight. Every video starts
from the same fixed latent, so a sample's video does not depend on its batch
(tests/test_wan_pipeline.py).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from typing import Any

from ..video.renderer import VideoRenderer, engine_options, split_generation

#: How long one batch may take the shared video server (a 720p Wan 2.2 batch takes minutes).
RENDER_TIMEOUT_S = 3600.0


class _QueuedVideoBackend:
    """What both video backends share: LoadGen's issue thread queues requests (``submit``);
    the harness's main thread takes up to ``engine_args.batch_size`` of them at a time
    (``serve_until``) and hands each batch to ``_respond``, whose answers may complete on
    worker threads; an answer that failed stops ``serve_until`` with its reason."""

    def __init__(self, *, engine_args: dict[str, Any], on_complete: Callable[[int, bytes], None], workers: int) -> None:
        self.options = engine_options(engine_args)
        self.on_complete = on_complete
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Event()
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="video-answer")
        self._pending: set[Future] = set()
        self._errors: list[BaseException] = []
        self.stats: dict[str, Any] = {"videos": 0, "batches": 0, "generate_seconds": 0.0, "encode_seconds": 0.0}

    def submit(self, requests: Sequence[Any]) -> None:
        with self._lock:
            self._queue.extend(requests)
        self._arrived.set()

    def _take(self) -> list[Any]:
        with self._lock:
            batch = [self._queue.popleft() for _ in range(min(self.options["batch_size"], len(self._queue)))]
            if not self._queue:
                self._arrived.clear()
        return batch

    def serve_until(self, done: threading.Event) -> None:
        while True:
            self._raise_answer_error()
            batch = self._take()
            if not batch:
                if done.is_set():
                    wait(list(self._pending))  # the answers still on their way
                    self._raise_answer_error()
                    return
                self._arrived.wait(0.05)
                continue
            self._respond(batch)
            self.stats["videos"] += len(batch)
            self.stats["batches"] += 1

    def _respond(self, batch: Sequence[Any]) -> None:
        raise NotImplementedError

    def _answer_later(self, work: Callable[..., None], *args: Any) -> Future:
        """Run ``work(*args)`` on a worker thread; a failure is reported on the main thread."""

        def guarded() -> None:
            try:
                work(*args)
            except BaseException as exc:
                self._errors.append(exc)

        future = self._workers.submit(guarded)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    def _raise_answer_error(self) -> None:
        if self._errors:
            # LoadGen waits for a sample that will never complete: the harness answers it.
            error = self._errors[0]
            raise RuntimeError(f"encoding or answering a video failed: {error}") from error

    def _finish_stats(self) -> None:
        for key in ("generate_seconds", "encode_seconds"):
            self.stats[key] = round(self.stats[key], 3)
        if self.stats["videos"]:
            self.stats["seconds_per_video"] = round(
                (self.stats["generate_seconds"] + self.stats["encode_seconds"]) / self.stats["videos"], 3
            )

    def stop(self) -> None:
        self._workers.shutdown(wait=True)
        self._finish_stats()


class DiffusersVideoBackend(_QueuedVideoBackend):
    """The pipeline in the LoadGen process (``engine.launch: in_process``, the default)."""

    def __init__(
        self,
        *,
        model_path: str,
        generation: dict[str, Any],
        engine_args: dict[str, Any],
        on_complete: Callable[[int, bytes], None],
    ) -> None:
        # One encoder thread: the videos of a batch complete in order, one ffmpeg at a time
        # beside the pipeline (whose torch threads keep their core).
        super().__init__(engine_args=engine_args, on_complete=on_complete, workers=1)
        self.renderer = VideoRenderer(model_path=model_path, generation=generation, engine_args=engine_args)
        self.settings = self.renderer.settings

    def start(self) -> None:
        self.renderer.load()
        self.stats["latent"] = self.renderer.latent_source

    def _respond(self, batch: Sequence[Any]) -> None:
        """One pipeline call for the batch; its videos are encoded and answered on the encoder thread."""
        for request, frames in zip(batch, self._render(batch)):
            self._answer_later(self._encode_and_complete, request.request_id, frames)

    def _render(self, batch: Sequence[Any]) -> list:
        """The batch's videos as uint8 frames, from one pipeline call."""
        started = time.perf_counter()
        videos = self.renderer.render([r.prompt for r in batch])
        self.stats["generate_seconds"] += time.perf_counter() - started
        return videos

    def _encode_and_complete(self, request_id: int, frames) -> None:
        started = time.perf_counter()
        video = self._mp4_bytes(frames)
        self.stats["encode_seconds"] += time.perf_counter() - started
        self.on_complete(request_id, video)

    def _mp4_bytes(self, frames) -> bytes:
        return self.renderer.mp4_bytes(frames)

    def stop(self) -> None:
        super().stop()
        self.renderer.close()


class SharedVideoBackend(_QueuedVideoBackend):
    """The pipeline in the system's shared video server (``engine.launch: shared``): started
    by the first run of the workflow, attached to by every later one (:func:`shared_video_server`),
    held by this run alone from :meth:`start` to :meth:`stop`. Two batches are in flight, so
    the server renders one while it encodes the other's mp4 files."""

    IN_FLIGHT = 2

    def __init__(
        self,
        *,
        model_path: str,
        generation: dict[str, Any],
        engine: dict[str, Any],
        on_complete: Callable[[int, bytes], None],
    ) -> None:
        engine_args = engine.get("engine_args", {})
        super().__init__(engine_args=engine_args, on_complete=on_complete, workers=self.IN_FLIGHT)
        split_generation(generation)  # bad settings fail here, not in the server
        self.model_path, self.generation, self.engine = model_path, generation, engine
        self._slots = threading.BoundedSemaphore(self.IN_FLIGHT)
        self._attached = ExitStack()
        self.url = ""

    def start(self) -> None:
        from ..launch.shared import shared_video_server

        state = self._attached.enter_context(shared_video_server(self.engine, self.model_path, self.generation))
        server = state["servers"][0]
        self.url = f"http://127.0.0.1:{server['port']}"
        self.stats["server"] = {"started": state["started"], "run_on_it": state["runs"], "log": server["log"]}
        self.stats["latent"] = server_health(self.url)["latent"]  # as the in-process backend records it

    def describe(self) -> str:
        return f"the shared video server ({self.url})"

    def _respond(self, batch: Sequence[Any]) -> None:
        self._slots.acquire()
        try:
            self._answer_later(self._request_and_complete, list(batch))
        except BaseException:
            self._slots.release()
            raise

    def _request_and_complete(self, batch: list[Any]) -> None:
        try:
            reply = render_request(self.url, [r.prompt for r in batch])
        finally:
            self._slots.release()
        with self._lock:
            self.stats["generate_seconds"] += reply["generate_seconds"]
            self.stats["encode_seconds"] += reply["encode_seconds"]
        for request, video in zip(batch, reply["videos"]):
            self.on_complete(request.request_id, video)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._attached.close()


def server_health(url: str) -> dict[str, Any]:
    """A video server's /health answer (its status and where its fixed latent came from)."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
        return json.loads(response.read())


def render_request(url: str, prompts: list[str], timeout_s: float = RENDER_TIMEOUT_S) -> dict[str, Any]:
    """POST the prompts to a video server's /render; its reply with the videos as mp4 bytes."""
    import base64
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{url}/render",
        data=json.dumps({"prompts": prompts}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[-1000:]
        raise RuntimeError(f"the video server at {url} refused {len(prompts)} prompt(s): {exc.code} {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(f"the video server at {url} did not answer: {exc}; its log is in results/servers/") from None
    if len(reply.get("videos", [])) != len(prompts):
        raise RuntimeError(
            f"the video server at {url} answered {len(reply.get('videos', []))} of {len(prompts)} prompts"
        )
    reply["videos"] = [base64.b64decode(v) for v in reply["videos"]]
    return reply
