"""H.264 mp4 files that are the same bytes for the same frames, written and read with imageio's
ffmpeg plugin (the static ffmpeg that ``imageio-ffmpeg`` bundles).

The encoding is diffusers' ``export_to_video``'s (libx264, yuv420p, imageio quality 5 = CRF
25, macroblock 16) with what makes it reproducible: one encoder thread (x264's bitstream
depends on its thread count, which ffmpeg otherwise takes from the machine's cores), a fixed
preset, and ``+bitexact`` with no metadata so the container carries no ffmpeg version.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

CODEC = "libx264"
PIXEL_FORMAT = "yuv420p"


def write_mp4(
    frames: np.ndarray, path: str | Path, fps: int, *, quality: float = 5.0, preset: str = "medium", threads: int = 1
) -> Path:
    """Write uint8 frames ``[frames, H, W, 3]`` (H and W multiples of 16: never rescaled) to
    ``path`` atomically (a temporary file renamed into place); returns the path."""
    import imageio.v2 as imageio
    import numpy as np

    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or not len(frames):
        raise ValueError(f"write_mp4 wants uint8 frames [frames, H, W, 3], got {frames.dtype} {list(frames.shape)}")
    if frames.shape[1] % 16 or frames.shape[2] % 16:
        raise ValueError(f"write_mp4 wants H and W multiples of 16, got {frames.shape[1]}x{frames.shape[2]}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.mp4")
    params = ["-preset", preset, "-threads", str(threads)]
    params += ["-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1"]
    try:
        with imageio.get_writer(
            tmp,
            format="FFMPEG",
            fps=fps,
            codec=CODEC,
            pixelformat=PIXEL_FORMAT,
            quality=quality,
            macro_block_size=16,
            ffmpeg_params=params,
            ffmpeg_log_level="error",
        ) as writer:
            for frame in frames:
                writer.append_data(frame)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_mp4(path: str | Path) -> np.ndarray:
    """Decode an mp4 to uint8 frames ``[frames, H, W, 3]`` (RGB)."""
    import imageio.v2 as imageio
    import numpy as np

    with imageio.get_reader(Path(path), format="FFMPEG") as reader:
        return np.stack([np.asarray(frame) for frame in reader])


def mp4_info(path: str | Path) -> dict:
    """What ffmpeg reports of an mp4's video stream: codec, pixel format, size, fps, duration."""
    import imageio.v2 as imageio

    with imageio.get_reader(Path(path), format="FFMPEG") as reader:
        meta = reader.get_meta_data()
    return {key: meta.get(key) for key in ("codec", "pix_fmt", "size", "fps", "duration")}
