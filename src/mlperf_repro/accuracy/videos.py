"""Text-to-video accuracy outputs: the videos of an accuracy log, written back to files.

The SUT answers each sample with its mp4 file's bytes (harness.video_sut), so the accuracy
log holds every video. From it come:

* ``videos/<sample>.mp4`` for the samples the round names (rules table
  ``accuracy.extra_files.videos``; the official checker looks for them next to
  accuracy.txt), and ``videos/captions.txt``, which the checker expects beside them: one line
  per video, ``<sample>  <prompt>`` (the layout of the text-to-image benchmark's captions, the
  round documents none for videos);
* every video under VBench's own name, ``<prompt>-0.mp4``, for scoring (:func:`vbench_folder`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError

CAPTIONS = "captions.txt"


def _videos_by_sample(entries: list) -> dict[int, bytes]:
    """The first video of each sample (an accuracy run issues each sample once)."""
    videos: dict[int, bytes] = {}
    for index, data in entries:
        videos.setdefault(int(index), bytes(data))
    return videos


def write_named_videos(entries: list, prompts: list[str], stems: list[str], out_dir: str | Path) -> dict[str, Any]:
    """``out_dir/videos/<stem>.mp4`` and ``captions.txt`` for the samples ``stems`` names.
    A named sample the log lacks is an error naming it: the package would miss it."""
    videos = _videos_by_sample(entries)
    missing = [s for s in stems if int(s) not in videos]
    if missing:
        raise UserError(
            f"the accuracy log has no video for sample(s) {', '.join(missing)}, which the round's accuracy "
            f"folder must carry (rules table accuracy.extra_files.videos; the dataset has {len(prompts)} prompts)"
        )
    folder = Path(out_dir) / "videos"
    folder.mkdir(parents=True, exist_ok=True)
    for stem in stems:
        (folder / f"{stem}.mp4").write_bytes(videos[int(stem)])
    (folder / CAPTIONS).write_text("".join(f"{stem}  {prompts[int(stem)]}\n" for stem in stems), encoding="utf-8")
    return {"videos": len(stems), "captions": CAPTIONS}


def vbench_name(prompt: str) -> str:
    """VBench's file name of a prompt's first video; it reads the prompt back from the name,
    so only a path separator is replaced (VBench's own evaluation does the same)."""
    return f"{prompt.replace('/', ' ')}-0.mp4"


def vbench_folder(entries: list, prompts: list[str], out_dir: str | Path) -> Path:
    """Every video of the log under its VBench name in ``out_dir``."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for index, video in sorted(_videos_by_sample(entries).items()):
        (folder / vbench_name(prompts[index])).write_bytes(video)
    return folder
