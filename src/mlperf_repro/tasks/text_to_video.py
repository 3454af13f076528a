"""The text-to-video task (wan-2.2-t2v-a14b): prompt text in, one mp4 video per sample out.

The dataset is a prompt file (one prompt per line, the reference's ``vbench_prompts.txt``);
the SUT answers each sample with its video's mp4 bytes (harness.video_sut), served by a
diffusers pipeline in process or in the system's shared video server (backends.diffusers_video). Accuracy is VBench's score of the
accuracy run's videos (accuracy.vbench), and the accuracy folder carries the videos the round
names with their captions (accuracy.videos). An open-division stand-in may be judged instead by
metrics computed without downloaded weights (accuracy.video_quality), against the unquantized
pipeline's videos of the same prompts, which the reference run renders here. TEST04 checks that a sample issued again and
again is not served faster than the performance run (no result caching).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..errors import UserError
from .registry import Evaluator, Task, register_task


def read_dataset(path: str, limit: int | None = None):
    from ..harness.dataset import load_prompt_dataset

    return load_prompt_dataset(path, limit)


def make_sut(dataset, *, report_first_token: bool = False):
    from ..harness.video_sut import VideoSut

    return VideoSut(dataset)


def make_backend(engine: dict[str, Any], *, model_path: str, generation: dict[str, Any], stream: bool, sut):
    from ..backends import diffusers_video

    if engine.get("launch", "in_process") == "shared":
        return diffusers_video.SharedVideoBackend(
            model_path=model_path, generation=generation, engine=engine, on_complete=sut.complete
        )
    return diffusers_video.DiffusersVideoBackend(
        model_path=model_path,
        generation=generation,
        engine_args=engine.get("engine_args", {}),
        on_complete=sut.complete,
    )


def score_vbench(
    entries: list, dataset_file: str, tokenizer: Any, accuracy_rules: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    from ..accuracy.vbench import evaluate_vbench, format_vbench_accuracy_txt

    result = evaluate_vbench(entries, read_dataset(dataset_file).prompts, accuracy_rules)
    return result, format_vbench_accuracy_txt(result)


def write_videos(entries: list, dataset_file: str, accuracy_rules: dict[str, Any], out_dir) -> dict[str, Any]:
    from ..accuracy.videos import write_named_videos

    stems = [str(s) for s in (accuracy_rules.get("extra_files") or {}).get("videos", [])]
    return write_named_videos(entries, read_dataset(dataset_file).prompts, stems, out_dir)


def reference_outputs(
    model_dir: str, dataset, *, generation: dict[str, Any], engine: dict[str, Any], out_dir, reporter
):
    """The unquantized pipeline renders every accuracy prompt in this process, in batches of the
    system's ``engine_args.batch_size`` on its torch ``threads`` (the runs' settings; nothing is
    timed), each video as the SUT answers it (mp4 bytes) and written to ``out_dir/<qsl_idx>.mp4``."""
    import numpy as np

    from ..video.renderer import VideoRenderer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    renderer = VideoRenderer(model_path=model_dir, generation=generation, engine_args=engine.get("engine_args") or {})
    entries = []
    try:
        reporter.phase("loading the pipeline", waiting_for="diffusers to load the unquantized pipeline")
        renderer.load()
        reporter.phase(None)
        batch = renderer.options["batch_size"]
        for start in range(0, len(dataset.prompts), batch):
            for offset, frames in enumerate(renderer.render(dataset.prompts[start : start + batch])):
                data = renderer.mp4_bytes(frames)
                (out / f"{start + offset}.mp4").write_bytes(data)
                entries.append((start + offset, np.frombuffer(data, dtype=np.uint8)))
            reporter.update(len(entries))
    finally:
        renderer.close()
    return entries, None


def score_open(
    entries: list, metrics: list[str], reference_dir, accuracy_rules: dict[str, Any], extras_dir=None
) -> dict[str, Any]:
    """The weight-free metrics (accuracy.video_quality) of an accuracy log's videos, the fidelity
    ones against the unquantized pipeline's videos in ``reference_dir`` (the reference run's),
    with the values of the samples the package carries (the round's named videos); with
    ``extras_dir``, those samples' unquantized videos are copied beside them for the checker."""
    from ..accuracy.open_accuracy import UNQUANTIZED_VIDEOS
    from ..accuracy.video_quality import OPEN_METRICS, read_reference_videos, score_videos, videos_by_sample

    videos = videos_by_sample(entries, "the accuracy log's video of")
    compares = any(OPEN_METRICS[m].needs_reference_videos for m in metrics)
    if compares and reference_dir is None:
        raise UserError(
            f"{', '.join(m for m in metrics if OPEN_METRICS[m].needs_reference_videos)} compare with the unquantized "
            "pipeline's videos, and no reference run's outputs were given (accuracy_target: measured makes them)"
        )
    reference = read_reference_videos(reference_dir, videos) if compares else None
    result = score_videos(videos, metrics, reference)
    per_sample = result.pop("per_sample")
    stems = [str(s) for s in (accuracy_rules.get("extra_files") or {}).get("videos", [])]
    result["samples"] = {stem: per_sample[int(stem)] for stem in stems if int(stem) in per_sample}
    if extras_dir is not None and compares:
        folder = Path(extras_dir) / UNQUANTIZED_VIDEOS
        folder.mkdir(parents=True, exist_ok=True)
        for stem in result["samples"]:
            shutil.copyfile(Path(reference_dir) / f"{stem}.mp4", folder / f"{stem}.mp4")
    return result


TEXT_TO_VIDEO = register_task(
    Task(
        name="text-to-video",
        read_dataset=read_dataset,
        make_sut=make_sut,
        make_backend=make_backend,
        backends=("diffusers",),
        evaluators=(Evaluator("vbench", score_vbench, None, first_per_sample=True, write_extras=write_videos),),
        accuracy_log_dtype="uint8",  # each entry is one mp4 file's bytes
        compliance=("TEST04",),
        reference_outputs=reference_outputs,
        score_open=score_open,
    )
)
