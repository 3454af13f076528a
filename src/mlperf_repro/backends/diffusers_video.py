"""A diffusers text-to-video pipeline inside the LoadGen process (``engine.backend: diffusers``).

The vendor's v6.0 wan-2.2 harness works the same way: ``WanPipeline`` in process, no server
(its eight GPUs share one video through xDiT sequence parallelism). Requests queue up from
LoadGen's issue thread; the main thread takes up to ``engine_args.batch_size`` prompts per
pipeline call (Offline issues every sample at once; SingleStream one at a time), and an encoder
thread writes each video as an mp4 and hands its bytes to the SUT while the main thread renders
the next batch (each mp4 is an ffmpeg process, ~50 ms on the CPU, most of it starting the
process: a third of a small video's time, hidden in Offline). Every video starts from the same
fixed latent, so a sample's video does not depend on its batch (tests/test_wan_pipeline.py).
"""

from __future__ import annotations

import itertools
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..video.generate import fixed_latent, generate_videos, load_pipeline
from ..video.mp4 import write_mp4
from ..video.settings import VideoSettings

#: Generation parameters that choose how the pipeline loads and starts, not what a video is:
#: dtypes, and the reference's fixed initial latent (a file in the dataset folder, if any).
LOAD_KEYS = ("dtype", "vae_dtype", "latent_file")
#: engine_args this backend reads, with their defaults.
ENGINE_ARGS = {"batch_size": 1, "device": "cpu", "threads": None}


def split_generation(generation: dict[str, Any]) -> tuple[VideoSettings, dict[str, Any]]:
    """(the video settings, the pipeline's load options) of the plan's generation parameters."""
    load = {k: generation[k] for k in LOAD_KEYS if k in generation}
    settings = VideoSettings.from_mapping(
        {k: v for k, v in generation.items() if k not in LOAD_KEYS}, "the benchmark's generation settings"
    )
    return settings, load


def engine_options(engine_args: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(engine_args) - set(ENGINE_ARGS))
    if unknown:
        raise UserError(
            f"systems.<name>.engine.engine_args: {', '.join(unknown)} mean nothing to the diffusers backend "
            f"(it reads {', '.join(ENGINE_ARGS)})"
        )
    options = {**ENGINE_ARGS, **engine_args}
    if not isinstance(options["batch_size"], int) or options["batch_size"] < 1:
        raise UserError(f"engine_args.batch_size must be a positive integer, not {options['batch_size']!r}")
    return options


def load_latent(path: str, shape: tuple[int, ...]):
    """The reference's fixed initial latent (its ``data/fixed_latent.pt``): a tensor of exactly
    the settings' latent shape, loaded as data only (no pickled code)."""
    import torch

    if not Path(path).is_file():
        raise UserError(
            f"fixed latent {path} does not exist: copy the reference's data/fixed_latent.pt "
            "(text_to_video/wan-2.2-t2v-a14b in mlcommons/inference) into the dataset folder with the prompts"
        )
    try:
        latent = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling errors of many kinds
        raise UserError(f"cannot read the fixed latent {path}: {exc}") from exc
    if isinstance(latent, dict) and len(latent) == 1:
        latent = next(iter(latent.values()))
    if not isinstance(latent, torch.Tensor) or tuple(latent.shape[-4:]) != tuple(shape[-4:]):
        found = list(latent.shape) if isinstance(latent, torch.Tensor) else type(latent).__name__
        raise UserError(
            f"fixed latent {path} is {found}; these video settings need {list(shape)} "
            "(a stand-in's smaller videos cannot use the reference's latent: drop the file from its dataset)"
        )
    return latent.reshape(shape).to(torch.float32)


class DiffusersVideoBackend:
    def __init__(
        self,
        *,
        model_path: str,
        generation: dict[str, Any],
        engine_args: dict[str, Any],
        on_complete: Callable[[int, bytes], None],
    ) -> None:
        self.model_path = model_path
        self.settings, self.load_options = split_generation(generation)
        self.options = engine_options(engine_args)
        self.on_complete = on_complete
        self.pipe = None
        self.latent = None
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Event()
        self._scratch = tempfile.TemporaryDirectory(prefix="mlperf-repro-video-")
        # One encoder thread: the videos of a batch complete in order, one ffmpeg at a time
        # beside the pipeline (whose torch threads keep their core).
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mp4-encoder")
        self._encode_errors: list[BaseException] = []
        self._names = itertools.count()
        self.stats: dict[str, Any] = {"videos": 0, "batches": 0, "generate_seconds": 0.0, "encode_seconds": 0.0}

    def start(self) -> None:
        import torch

        if self.options["threads"]:
            torch.set_num_threads(int(self.options["threads"]))
        self.pipe = load_pipeline(
            self.model_path,
            dtype=self.load_options.get("dtype", "float32"),
            vae_dtype=self.load_options.get("vae_dtype", "float32"),
            boundary_ratio=self.settings.boundary_ratio,
            device=self.options["device"],
        )
        transformer = self.pipe.transformer if self.pipe.transformer is not None else self.pipe.transformer_2
        channels = transformer.config.in_channels
        latent_file = self.load_options.get("latent_file")
        self.latent = (
            load_latent(latent_file, self.settings.latent_shape(1, channels))
            if latent_file
            else fixed_latent(self.settings, channels=channels)
        )
        self.stats["latent"] = latent_file or f"drawn from seed {self.settings.seed}"
        # One video before LoadGen's clock starts: the first pipeline call pays one-off
        # set-up, which would otherwise land on the first sample's latency.
        self._mp4_bytes(generate_videos(self.pipe, ["warm-up"], settings=self.settings, latent=self.latent)[0])

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
            self._raise_encode_error()
            batch = self._take()
            if not batch:
                if done.is_set():
                    self._encoder.submit(lambda: None).result()  # the videos still encoding
                    self._raise_encode_error()
                    return
                self._arrived.wait(0.05)
                continue
            self._respond(batch)
            self.stats["videos"] += len(batch)
            self.stats["batches"] += 1

    def _respond(self, batch: Sequence[Any]) -> None:
        """One pipeline call for the batch; its videos are encoded and answered on the encoder thread."""
        for request, frames in zip(batch, self._render(batch)):
            self._encoder.submit(self._encode_and_complete, request.request_id, frames)

    def _render(self, batch: Sequence[Any]) -> list:
        """The batch's videos as uint8 frames, from one pipeline call."""
        started = time.perf_counter()
        videos = generate_videos(self.pipe, [r.prompt for r in batch], settings=self.settings, latent=self.latent)
        self.stats["generate_seconds"] += time.perf_counter() - started
        return videos

    def _raise_encode_error(self) -> None:
        if self._encode_errors:
            # LoadGen waits for a sample that will never complete: the harness answers it.
            error = self._encode_errors[0]
            raise RuntimeError(f"encoding or answering a video failed: {error}") from error

    def _encode_and_complete(self, request_id: int, frames) -> None:
        try:
            started = time.perf_counter()
            video = self._mp4_bytes(frames)
            self.stats["encode_seconds"] += time.perf_counter() - started
            self.on_complete(request_id, video)
        except BaseException as exc:  # reported on the main thread
            self._encode_errors.append(exc)

    def _mp4_bytes(self, frames) -> bytes:
        path = write_mp4(frames, Path(self._scratch.name) / f"video-{next(self._names)}.mp4", self.settings.fps)
        try:
            return path.read_bytes()
        finally:
            path.unlink()

    def stop(self) -> None:
        self._encoder.shutdown(wait=True)
        self.pipe = None
        for key in ("generate_seconds", "encode_seconds"):
            self.stats[key] = round(self.stats[key], 3)
        if self.stats["videos"]:
            self.stats["seconds_per_video"] = round(
                (self.stats["generate_seconds"] + self.stats["encode_seconds"]) / self.stats["videos"], 3
            )
        self._scratch.cleanup()
