"""Generation settings of one text-to-video benchmark run, checked before any model loads.

``WanPipeline`` silently rounds a ``num_frames`` that is not ``4k + 1`` and fails late on a
size that is not a multiple of 16; here either is a :class:`~mlperf_repro.errors.UserError`
naming the key, so a config mistake never costs a model load. No imports beyond the
standard library: the plan reads these settings in the workflow's main process.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

from ..errors import UserError

#: The Wan 2.1/2.2 VAE of the A14B model: 4x temporal and 8x spatial compression, 16 latent
#: channels; the transformer's patch is (1, 2, 2), so sizes are multiples of 8 * 2.
TEMPORAL_FACTOR = 4
SPATIAL_FACTOR = 8
SIZE_MULTIPLE = 16
LATENT_CHANNELS = 16

#: Config keys of the MLPerf reference's ``inference_config.yaml`` read under our names.
ALIASES = {"sample_steps": "num_inference_steps"}


@dataclass(frozen=True)
class VideoSettings:
    """What one video's generation depends on besides the prompt and the model."""

    height: int
    width: int
    num_frames: int
    num_inference_steps: int
    guidance_scale: float = 4.0
    #: The low-noise expert's guidance (``transformer_2``); ``None``: ``guidance_scale``.
    guidance_scale_2: float | None = None
    #: Share of the 1000 training timesteps run by the high-noise expert (``transformer``);
    #: ``None``: one transformer for every step (Wan 2.1).
    boundary_ratio: float | None = 0.875
    negative_prompt: str = ""
    seed: int = 0
    fps: int = 16

    def __post_init__(self) -> None:
        for key in ("height", "width"):
            value = _int(self, key, minimum=SIZE_MULTIPLE)
            if value % SIZE_MULTIPLE:
                raise UserError(f"video setting {key}={value} must be a multiple of {SIZE_MULTIPLE} (VAE 8x, patch 2)")
        frames = _int(self, "num_frames", minimum=1)
        if (frames - 1) % TEMPORAL_FACTOR:
            below = (frames - 1) // TEMPORAL_FACTOR * TEMPORAL_FACTOR + 1
            raise UserError(
                f"video setting num_frames={frames} must be 4k+1 (the VAE compresses time 4x): "
                f"use {below} or {below + TEMPORAL_FACTOR}"
            )
        _int(self, "num_inference_steps", minimum=1)
        _int(self, "seed", minimum=0)
        _int(self, "fps", minimum=1)
        _number(self, "guidance_scale")
        if self.guidance_scale_2 is not None:
            _number(self, "guidance_scale_2")
            if self.boundary_ratio is None:
                raise UserError("video setting guidance_scale_2 needs boundary_ratio (it guides transformer_2)")
        if self.boundary_ratio is not None and not 0 < _number(self, "boundary_ratio") < 1:
            raise UserError(f"video setting boundary_ratio={self.boundary_ratio} must lie strictly between 0 and 1")
        if not isinstance(self.negative_prompt, str):
            raise UserError(
                f"video setting negative_prompt must be a string, not {type(self.negative_prompt).__name__}"
            )

    @property
    def latent_frames(self) -> int:
        return (self.num_frames - 1) // TEMPORAL_FACTOR + 1

    def latent_shape(self, batch: int = 1, channels: int = LATENT_CHANNELS) -> tuple[int, int, int, int, int]:
        """The initial latent's shape: ``[batch, channels, (frames-1)//4+1, height//8, width//8]``."""
        return (batch, channels, self.latent_frames, self.height // SPATIAL_FACTOR, self.width // SPATIAL_FACTOR)

    @classmethod
    def from_mapping(cls, values: Mapping, where: str = "video settings") -> VideoSettings:
        """Settings from a config mapping; the reference config's ``sample_steps`` is accepted
        for ``num_inference_steps``. An unknown or missing key is a :class:`UserError`."""
        known = {f.name for f in fields(cls)}
        data = {}
        for key, value in values.items():
            name = ALIASES.get(key, key)
            if name not in known:
                raise UserError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
            if name in data:
                raise UserError(f"{where}: {key!r} repeats {name!r}")
            data[name] = value.strip() if name == "negative_prompt" and isinstance(value, str) else value
        missing = [name for name in ("height", "width", "num_frames", "num_inference_steps") if name not in data]
        if missing:
            raise UserError(f"{where}: missing {', '.join(missing)}")
        return cls(**data)


def _int(settings: VideoSettings, key: str, minimum: int) -> int:
    value = getattr(settings, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"video setting {key}={value!r} must be an integer")
    if value < minimum:
        raise UserError(f"video setting {key}={value} must be at least {minimum}")
    return value


def _number(settings: VideoSettings, key: str) -> float:
    value = getattr(settings, key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise UserError(f"video setting {key}={value!r} must be a finite number >= 0")
    return float(value)
