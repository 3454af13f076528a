"""The text-to-video task (wan-2.2-t2v-a14b): prompt text in, one mp4 video per sample out.

The dataset is a prompt file (one prompt per line, the reference's ``vbench_prompts.txt``);
the SUT answers each sample with its video's mp4 bytes (harness.video_sut), served by a
diffusers pipeline in process or in the system's shared video server (backends.diffusers_video). Accuracy is VBench's score of the
accuracy run's videos (accuracy.vbench), and the accuracy folder carries the videos the round
names with their captions (accuracy.videos). TEST04 checks that a sample issued again and
again is not served faster than the performance run (no result caching).
"""

from __future__ import annotations

from typing import Any

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
    )
)
