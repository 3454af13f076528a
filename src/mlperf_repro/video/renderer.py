"""One text-to-video pipeline ready to render: loaded from a Diffusers folder with the
benchmark's settings, warmed up, prompts in, frames out, frames to mp4 bytes. Both homes of a
pipeline use it: the LoadGen process (:mod:`mlperf_repro.backends.diffusers_video`) and the
shared video server (:mod:`mlperf_repro.video.server`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError
from .generate import fixed_latent, generate_videos, load_pipeline
from .mp4 import mp4_bytes
from .settings import VideoSettings

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


class VideoRenderer:
    """The pipeline of one (model, generation settings, engine_args): loaded and warmed up by
    :meth:`load`, then prompts in, uint8 frames out (:meth:`render`), frames in, mp4 bytes out
    (:meth:`mp4_bytes`). In the LoadGen process (``launch: in_process``) or in the shared
    video server (:mod:`mlperf_repro.video.server`)."""

    def __init__(self, *, model_path: str, generation: dict[str, Any], engine_args: dict[str, Any]) -> None:
        self.model_path = model_path
        self.settings, self.load_options = split_generation(generation)
        self.options = engine_options(engine_args)
        self.pipe = None
        self.latent = None
        self.latent_source = ""

    def load(self) -> None:
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
        self.latent_source = latent_file or f"drawn from seed {self.settings.seed}"
        # One video before LoadGen's clock starts: the first pipeline call pays one-off
        # set-up, which would otherwise land on the first sample's latency.
        self.mp4_bytes(self.render(["warm-up"])[0])

    def render(self, prompts: Sequence[str]) -> list:
        """The prompts' videos as uint8 frames, from one pipeline call."""
        return generate_videos(self.pipe, list(prompts), settings=self.settings, latent=self.latent)

    def mp4_bytes(self, frames) -> bytes:
        return mp4_bytes(frames, self.settings.fps)

    def close(self) -> None:
        self.pipe = None
