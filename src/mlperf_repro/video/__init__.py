"""Text-to-video generation for ``wan-2.2-t2v-a14b``: the settings (:mod:`.settings`), one or
several videos from a diffusers ``WanPipeline`` with a fixed initial latent (:mod:`.generate`)
and deterministic H.264 mp4 files (:mod:`.mp4`).

Importing this package is cheap: torch, diffusers and imageio load inside the functions that
need them.
"""

from __future__ import annotations

from .generate import fixed_latent, generate_video, generate_videos, load_pipeline
from .mp4 import read_mp4, write_mp4
from .settings import VideoSettings

__all__ = [
    "VideoSettings",
    "fixed_latent",
    "generate_video",
    "generate_videos",
    "load_pipeline",
    "read_mp4",
    "write_mp4",
]
