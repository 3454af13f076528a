"""The open-division metrics of the tiny Wan stand-in (docs/wan.md) for several pipelines, and what
the unquantized reference render costs: the measurements behind ``open_accuracy``'s targets.

Builds the default config's ``tiny-wan`` and quantizes it with each recipe given (the emulated
copy the diffusers backend serves), renders the first ``--prompts`` prompts of a synthetic
prompt file with the benchmark's generation settings from config/config.yaml (fixed latent,
batches of ``engine_args.batch_size`` on its torch threads, mp4s as the SUT answers them), and
scores each pipeline's mp4s against the unquantized pipeline's: temporal_flickering, SSIM (mean
and the lowest video), PSNR. Rows besides the recipes: the unquantized pipeline itself (SSIM 1.0
by construction), and the unquantized pipeline from another initial latent (seed + 1: what a
video that is not the reference's scores). The unquantized render is timed as the reference
job does it (pipeline load with its warm-up video, then the renders).

    PYTHONPATH=src .venv/bin/python bench/wan_fidelity.py [--prompts 64] [--recipes fp8-dit mxfp4-w4a16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BENCH = "tiny-wan-t2v"


def render(model_dir: Path, prompts: list[str], generation: dict, engine_args: dict) -> tuple[dict, float, float]:
    """{index: decoded frames of the mp4}, load seconds, render seconds."""
    from mlperf_repro.accuracy.video_quality import decode_video
    from mlperf_repro.video.renderer import VideoRenderer

    started = time.perf_counter()
    renderer = VideoRenderer(model_path=str(model_dir), generation=generation, engine_args=engine_args)
    renderer.load()
    loaded = time.perf_counter()
    videos = {}
    batch = renderer.options["batch_size"]
    for start in range(0, len(prompts), batch):
        for offset, frames in enumerate(renderer.render(prompts[start : start + batch])):
            videos[start + offset] = decode_video(renderer.mp4_bytes(frames))
    done = time.perf_counter()
    renderer.close()
    return videos, loaded - started, done - loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--recipes", nargs="*", default=["fp8-dit", "mxfp4-w4a16"])
    parser.add_argument("--config", default=str(REPO / "config" / "config.yaml"))
    args = parser.parse_args(argv)

    from mlperf_repro.accuracy.video_quality import OPEN_METRICS, score_videos
    from mlperf_repro.config import validate_config
    from mlperf_repro.demo.video_prompts import write_prompt_file
    from mlperf_repro.demo.wan_model import TinyWanSpec, build_tiny_wan
    from mlperf_repro.plan import Plan
    from mlperf_repro.quant.pipeline import quantize_pipeline

    config = validate_config(
        yaml.safe_load(Path(args.config).read_text()), REPO / "workflow/schemas/config.schema.yaml"
    )
    plan = Plan(config)
    bench = config["benchmarks"][BENCH]
    generation = plan.generation_params(BENCH, "accuracy")
    system = next(name for name, entry in config["systems"].items() if BENCH in entry["benchmarks"])
    engine_args = config["systems"][system]["engine"].get("engine_args") or {}
    dataset = config["datasets"][bench["dataset"]]["builtin"]
    metrics = list(OPEN_METRICS)
    with tempfile.TemporaryDirectory(prefix="wan-fidelity-") as scratch:
        root = Path(scratch)
        build_tiny_wan(root / "tiny-wan", TinyWanSpec(**(config["models"][bench["model"]].get("builtin") or {})))
        write_prompt_file(root / "prompts.txt", max(args.prompts, 1), seed=dataset.get("seed", 7))
        prompts = (root / "prompts.txt").read_text().splitlines()[: args.prompts]
        reference, load_s, render_s = render(root / "tiny-wan", prompts, generation, engine_args)
        print(
            f"unquantized render ({len(prompts)} prompts, {generation['num_frames']} x {generation['height']}x"
            f"{generation['width']}, {generation['num_inference_steps']} steps, engine_args {engine_args}): "
            f"load + warm-up {load_s:.1f} s, render {render_s:.1f} s ({len(prompts) / render_s:.1f} videos/s)",
            flush=True,
        )
        rows = {"unquantized (itself)": reference}
        for name in args.recipes:
            recipe = config["quantization"][name]
            quantize_pipeline(
                root / "tiny-wan",
                root / f"q-{name}",
                root / f"e-{name}",
                scheme=recipe["scheme"],
                scale_mode=recipe.get("scale_mode", "even"),
                evaluate=False,
            )
            rows[f"{name} ({recipe['scheme']}, served emulated)"] = render(
                root / f"e-{name}", prompts, generation, engine_args
            )[0]
        other = {**generation, "seed": generation["seed"] + 1}
        rows[f"unquantized, another initial latent (seed {other['seed']})"] = render(
            root / "tiny-wan", prompts, other, engine_args
        )[0]
        print("\n| pipeline | temporal_flickering | video_ssim mean | lowest video | video_psnr dB |")
        print("|---|---|---|---|---|")
        for name, videos in rows.items():
            scored = score_videos(videos, metrics, reference)
            lowest = min(v["video_ssim"] for v in scored["per_sample"].values())
            psnr = "identical" if scored["video_psnr"] is None else f"{scored['video_psnr']:.2f}"
            print(
                f"| {name} | {scored['temporal_flickering']:.6f} | {scored['video_ssim']:.4f} | {lowest:.4f} | {psnr} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
