"""Text-to-video accuracy metrics that need no downloaded weights: what an open-division
stand-in for wan-2.2-t2v-a14b is judged by where VBench's six dimensions cannot run (their
checkpoints are not on the machine). The real benchmark keeps ``vbench_score``.

* ``temporal_flickering``: VBench's model-free dimension, computed here with numpy exactly as
  VBench 0.1.5 defines it (``vbench/temporal_flickering.py``): every decoded frame of a video,
  the mean absolute difference of each pair of consecutive frames over all pixels and
  channels (float32 levels), the video's score ``(255 - mean of those differences) / 255``
  (1.0: a still video), and the dimension the mean over videos. VBench decodes with OpenCV
  (BGR); the project decodes with imageio's ffmpeg (RGB): the channel order does not change a
  mean absolute difference, and tests/test_video_quality.py runs VBench itself on the same
  mp4s. Here every sample of the accuracy log counts once (VBench's custom_input mode scores
  one file per distinct prompt); a video of one frame has no pair and is not scored (VBench
  would make the whole dimension NaN).
* ``video_ssim``: fidelity to the unquantized pipeline: each accuracy-run video against the
  unquantized pipeline's video of the same prompt, fixed latent and settings (the reference
  run's mp4s), by SSIM (Wang et al. 2004: Gaussian window sigma 1.5 over 11 pixels, K1 0.01,
  K2 0.03, L 255; each RGB channel of each frame, borders reflected, the map averaged), the
  mean over frames and channels per video, then over videos. The unquantized pipeline scores
  exactly 1.0 against its own videos (the same frames give the same mp4 bytes: video.mp4).
* ``video_psnr``: the same comparison as PSNR in dB over every pixel of every video
  (``10 log10(255^2 / MSE)``, MSE over all of them; None when they are identical). Reported
  for reading the SSIM, not judged: an identical video's PSNR is infinite, so it has no
  reference value a fraction could be taken of.

Videos are decoded by OpenCV, as VBench reads them; a video that does not decode is an error
naming its sample (the accuracy log holds what the SUT answered: an mp4 per sample).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    import numpy as np

#: SSIM's constants (Wang et al. 2004) for uint8 levels.
SSIM_L = 255.0
SSIM_K1, SSIM_K2 = 0.01, 0.03
SSIM_SIGMA, SSIM_RADIUS = 1.5, 5


@dataclass(frozen=True)
class OpenMetric:
    """One weight-free metric an open-division text-to-video stand-in may declare."""

    name: str
    # Compares the run's videos with the unquantized pipeline's (the reference run's videos).
    needs_reference_videos: bool
    # How it is judged: "fraction" - at least accuracy_fraction x the unquantized pipeline's
    # value (as a measured target); "minimum" - at least the config's floor
    # (open_accuracy.<name>_minimum); None - reported, not judged.
    target: str | None
    what: str


OPEN_METRICS: dict[str, OpenMetric] = {
    m.name: m
    for m in (
        OpenMetric(
            "temporal_flickering",
            False,
            "fraction",
            "VBench's temporal_flickering (its model-free dimension, numpy): (255 - mean |frame t+1 - frame t|) / 255, "
            "mean over videos",
        ),
        OpenMetric(
            "video_ssim",
            True,
            "minimum",
            "SSIM against the unquantized pipeline's video of the same prompt and latent, mean over videos "
            "(the unquantized pipeline: 1.0)",
        ),
        OpenMetric(
            "video_psnr",
            True,
            None,
            "PSNR in dB against the unquantized pipeline's videos, over all their pixels (reported, not judged)",
        ),
    )
}


def check_metric_names(names: Iterable[str], where: str) -> list[str]:
    """``names`` as a list; an unknown one is an error naming ``where`` and the known ones."""
    names = list(names)
    unknown = [n for n in names if n not in OPEN_METRICS]
    if unknown:
        raise UserError(f"{where}: unknown metric(s) {', '.join(unknown)}; known: {', '.join(OPEN_METRICS)}")
    return names


# --------------------------------------------------------------------------- reading videos


def read_video(path: str | Path, what: str | None = None) -> np.ndarray:
    """uint8 RGB frames ``[frames, H, W, 3]`` of a video file, every frame, decoded by OpenCV
    (VBench's reader; the same frames as :func:`mlperf_repro.video.read_mp4`, without an ffmpeg
    process per video). A file OpenCV reads no frame of is a UserError naming ``what``."""
    import cv2
    import numpy as np

    what = what or str(path)
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)  # no warning per unreadable file
    capture = cv2.VideoCapture(str(path))
    frames = []
    try:
        while capture.isOpened():
            ok, frame = capture.read()
            if not ok:
                break
            frames.append(frame)
    finally:
        capture.release()
    size = Path(path).stat().st_size if Path(path).is_file() else 0
    if not frames:
        raise UserError(f"{what} is not a readable video ({size} bytes): no frame decodes")
    try:
        video = np.stack(frames)
    except ValueError:
        raise UserError(f"{what}: its frames are not all of one size") from None
    if video.ndim != 4 or video.shape[-1] != 3 or video.dtype != np.uint8:
        raise UserError(f"{what} decodes to {video.dtype} {list(video.shape)}, not 8-bit colour frames")
    return np.ascontiguousarray(video[..., ::-1])  # OpenCV's BGR to RGB


def decode_video(data: bytes | Any, what: str = "video") -> np.ndarray:
    """:func:`read_video` of one video file's bytes (an accuracy-log entry: a uint8 array)."""
    import numpy as np

    raw = bytes(data) if isinstance(data, bytes | bytearray) else np.asarray(data, dtype=np.uint8).tobytes()
    with tempfile.TemporaryDirectory(prefix="mlperf-repro-decode-") as scratch:
        path = Path(scratch) / "video.mp4"
        path.write_bytes(raw)
        return read_video(path, what)


def _check_frames(frames: np.ndarray, what: str) -> np.ndarray:
    import numpy as np

    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or 0 in frames.shape:
        raise UserError(f"{what}: expected uint8 frames [frames, H, W, 3], got {frames.dtype} {list(frames.shape)}")
    return frames


# --------------------------------------------------------------------------- the metrics


def temporal_flickering(frames: np.ndarray) -> float | None:
    """VBench's temporal_flickering of one video (uint8 ``[frames, H, W, 3]``): 1.0 for a still
    video, lower the more consecutive frames differ; None for a single frame (no pair)."""
    import numpy as np

    frames = _check_frames(frames, "temporal_flickering")
    if len(frames) < 2:
        return None
    as_float = frames.astype(np.float32)
    # Per pair of consecutive frames, the mean over pixels and channels (float64 sums; VBench's
    # float32 means agree to ~1e-6 of a level).
    per_pair = np.abs(as_float[1:] - as_float[:-1]).reshape(len(frames) - 1, -1).mean(axis=1, dtype=np.float64)
    return float((255.0 - per_pair.mean()) / 255.0)


def _gaussian_window() -> np.ndarray:
    import numpy as np

    x = np.arange(-SSIM_RADIUS, SSIM_RADIUS + 1, dtype=np.float64)
    window = np.exp(-(x * x) / (2 * SSIM_SIGMA**2))
    return window / window.sum()


def _blur(images: np.ndarray) -> np.ndarray:
    """The Gaussian window over the last two axes, borders reflected (``d c b | a b c d | c b a``,
    repeated for images smaller than the window)."""
    import numpy as np

    window = _gaussian_window()
    out = images
    for axis in (-2, -1):
        size = out.shape[axis]
        pad = [(0, 0)] * out.ndim
        pad[axis] = (SSIM_RADIUS, SSIM_RADIUS)
        padded = np.pad(out, pad, mode="symmetric")
        acc = np.zeros_like(out)
        for k, weight in enumerate(window):
            acc += weight * np.take(padded, np.arange(k, k + size), axis=axis)
        out = acc
    return out


def ssim(reference: np.ndarray, other: np.ndarray) -> float:
    """SSIM of two videos of one shape (uint8 ``[frames, H, W, 3]``): the mean of the SSIM map
    of every channel of every frame. 1.0 for identical videos, in [-1, 1] always."""
    import numpy as np

    reference = _check_frames(reference, "ssim reference")
    other = _check_frames(other, "ssim video")
    if reference.shape != other.shape:
        raise UserError(f"videos of shapes {list(reference.shape)} and {list(other.shape)} cannot be compared")
    # [frames, 3, H, W] in float64 levels.
    x = np.moveaxis(reference, -1, 1).astype(np.float64)
    y = np.moveaxis(other, -1, 1).astype(np.float64)
    c1, c2 = (SSIM_K1 * SSIM_L) ** 2, (SSIM_K2 * SSIM_L) ** 2
    mu_x, mu_y = _blur(x), _blur(y)
    # Not clipped at 0: for x == y the numerator's 2 cov and the denominator's var_x + var_y are
    # then the same number, so identical videos score exactly 1.0 (c2 keeps the denominator > 0).
    var_x = _blur(x * x) - mu_x * mu_x
    var_y = _blur(y * y) - mu_y * mu_y
    cov = _blur(x * y) - mu_x * mu_y
    ssim_map = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / ((mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2))
    return float(np.clip(ssim_map.mean(), -1.0, 1.0))


def squared_error(reference: np.ndarray, other: np.ndarray) -> tuple[float, int]:
    """(sum of squared level differences, values compared) of two videos of one shape."""
    import numpy as np

    reference = _check_frames(reference, "psnr reference")
    other = _check_frames(other, "psnr video")
    if reference.shape != other.shape:
        raise UserError(f"videos of shapes {list(reference.shape)} and {list(other.shape)} cannot be compared")
    diff = reference.astype(np.float64) - other.astype(np.float64)
    return float((diff * diff).sum()), int(diff.size)


def psnr_db(sum_squared: float, count: int) -> float | None:
    """PSNR in dB of a total squared error over ``count`` values; None when it is 0 (identical)."""
    if count <= 0:
        raise UserError("psnr of no values")
    mse = sum_squared / count
    return 10 * math.log10(SSIM_L**2 / mse) if mse > 0 else None


# --------------------------------------------------------------------------- a run's videos


def videos_by_sample(entries: Sequence, what: str) -> dict[int, np.ndarray]:
    """``{qsl_idx: frames}`` of ``[(qsl_idx, mp4 bytes)]``: the first entry of each sample."""
    first: dict[int, Any] = {}
    for index, data in entries:
        first.setdefault(int(index), data)
    return {index: decode_video(data, f"{what} sample {index}") for index, data in sorted(first.items())}


def read_reference_videos(folder: str | Path, samples: Iterable[int]) -> dict[int, np.ndarray]:
    """The unquantized pipeline's videos ``<folder>/<sample>.mp4`` (the reference run's) of
    ``samples``; a missing one is an error naming it and the rule that writes them."""
    folder = Path(folder)
    samples = sorted(set(samples))
    missing = [s for s in samples if not (folder / f"{s}.mp4").is_file()]
    if missing:
        raise UserError(
            f"{folder} has no video of sample(s) {', '.join(map(str, missing[:5]))}"
            f"{' ...' if len(missing) > 5 else ''}: the reference run (rule reference_accuracy) renders every "
            "accuracy prompt with the unquantized pipeline; rerun it"
        )
    return {
        s: read_video(folder / f"{s}.mp4", f"the unquantized pipeline's video {folder / f'{s}.mp4'}") for s in samples
    }


def score_videos(
    videos: Mapping[int, np.ndarray], metrics: Sequence[str], reference: Mapping[int, np.ndarray] | None = None
) -> dict[str, Any]:
    """The ``metrics`` (names of :data:`OPEN_METRICS`) of a run's videos ``{sample: frames}``,
    the fidelity ones against ``reference`` (the unquantized pipeline's videos of the same
    samples): ``{metric: value, "per_sample": {sample: {metric: value}}, "videos_scored":
    {metric: n}}``. A metric no video could give (temporal_flickering of one-frame videos) is
    None."""
    metrics = check_metric_names(metrics, "accuracy metrics")
    if not videos:
        raise UserError("no video to score")
    wants_reference = [m for m in metrics if OPEN_METRICS[m].needs_reference_videos]
    if wants_reference and reference is None:
        raise UserError(f"{', '.join(wants_reference)} compare with the unquantized pipeline's videos; none given")
    per_sample: dict[int, dict[str, float | None]] = {s: {} for s in videos}
    result: dict[str, Any] = {}
    counts: dict[str, int] = {}
    if "temporal_flickering" in metrics:
        values = {s: temporal_flickering(frames) for s, frames in videos.items()}
        scored = [v for v in values.values() if v is not None]
        for s, v in values.items():
            per_sample[s]["temporal_flickering"] = v
        result["temporal_flickering"] = sum(scored) / len(scored) if scored else None
        counts["temporal_flickering"] = len(scored)
    if wants_reference:
        total, count, similarities = 0.0, 0, []
        for s, frames in videos.items():
            if s not in reference:
                raise UserError(f"no unquantized video of sample {s} to compare with")
            if reference[s].shape != frames.shape:
                raise UserError(
                    f"sample {s}: the run's video is {list(frames.shape)}, the unquantized pipeline's "
                    f"{list(reference[s].shape)}: were they rendered with the same video settings?"
                )
            if "video_ssim" in metrics:
                similarity = ssim(reference[s], frames)
                per_sample[s]["video_ssim"] = similarity
                similarities.append(similarity)
            sq, n = squared_error(reference[s], frames)
            total, count = total + sq, count + n
            if "video_psnr" in metrics:
                per_sample[s]["video_psnr"] = psnr_db(sq, n)
        if "video_ssim" in metrics:
            result["video_ssim"] = sum(similarities) / len(similarities)
            counts["video_ssim"] = len(similarities)
        if "video_psnr" in metrics:
            result["video_psnr"] = psnr_db(total, count)
            counts["video_psnr"] = len(videos)
    return {
        **{m: result[m] for m in metrics},
        "per_sample": per_sample,
        "videos_scored": counts,
    }
