"""H.264 mp4 files that are the same bytes for the same frames: written in-process with PyAV
(FFmpeg's libraries and its libx264, pinned in envs/workflow.txt), read with imageio's ffmpeg
plugin.

The encoding is diffusers' ``export_to_video``'s (libx264, yuv420p, imageio quality 5 = CRF
25, macroblock 16) with what makes it reproducible: one encoder thread (x264's bitstream
depends on its thread count, which FFmpeg otherwise takes from the machine's cores), a fixed
preset, and ``+bitexact`` so the container carries no FFmpeg version. In-process: an ffmpeg
process per video (imageio's writer) cost 26-52 ms of a small video's 0.15 s, on the critical
path of every SingleStream query; PyAV encodes it in about 2 ms.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

CODEC = "libx264"
PIXEL_FORMAT = "yuv420p"


def mp4_bytes(frames: np.ndarray, fps: int, *, quality: float = 5.0, preset: str = "medium", threads: int = 1) -> bytes:
    """uint8 frames ``[frames, H, W, 3]`` (H and W multiples of 16: never rescaled) as mp4
    bytes. ``quality`` is imageio's 1-10 scale (CRF = int((1 - quality / 10) x 51), as
    imageio-ffmpeg maps it for libx264)."""
    import av
    import numpy as np

    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or not len(frames):
        raise ValueError(f"write_mp4 wants uint8 frames [frames, H, W, 3], got {frames.dtype} {list(frames.shape)}")
    if frames.shape[1] % 16 or frames.shape[2] % 16:
        raise ValueError(f"write_mp4 wants H and W multiples of 16, got {frames.shape[1]}x{frames.shape[2]}")
    crf = int((1 - quality / 10.0) * 51)
    out = io.BytesIO()
    with av.open(out, mode="w", format="mp4", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream(
            CODEC, rate=fps, options={"crf": str(crf), "preset": preset, "threads": str(threads)}
        )
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], PIXEL_FORMAT
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return out.getvalue()


def write_mp4(
    frames: np.ndarray, path: str | Path, fps: int, *, quality: float = 5.0, preset: str = "medium", threads: int = 1
) -> Path:
    """:func:`mp4_bytes` written to ``path`` atomically (a temporary file renamed into place);
    returns the path."""
    data = mp4_bytes(frames, fps, quality=quality, preset=preset, threads=threads)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.mp4")
    try:
        tmp.write_bytes(data)
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
