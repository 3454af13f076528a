"""The tiny Wan 2.2 pipeline on this machine's CPUs: seconds per video and peak RSS.

Builds the stand-in (``mlperf_repro.demo.wan_model``) once in a temporary folder, then runs
each mode in a fresh child process so its peak RSS (``ru_maxrss``) is its own:

- ``single``: ``--videos`` prompts one pipeline call each (the baseline),
- ``batch``: the same prompts in one call (Offline batching),

after one warm-up video (the first call pays for kernel selection and lazy imports). The
baseline in the same run is ``single``; the report gives batch / single per video, the
RSS after loading (before any video) and whether each batched video equals its single one.

    .venv/bin/python bench/wan_tiny.py [--videos 4] [--frames 9] [--size 64] [--steps 4]
        [--dtype float32] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(args: argparse.Namespace) -> dict:
    """One mode in this process; prints one JSON line."""
    import numpy as np
    import torch

    from mlperf_repro.demo.wan_model import SENTENCES
    from mlperf_repro.video import VideoSettings, generate_video, generate_videos, load_pipeline

    torch.set_num_threads(args.threads)
    settings = VideoSettings(
        height=args.size,
        width=args.size,
        num_frames=args.frames,
        num_inference_steps=args.steps,
        guidance_scale=4.0,
        guidance_scale_2=3.0,
        negative_prompt="blurry, static",
        seed=42,
    )
    prompts = [SENTENCES[i % len(SENTENCES)] + f" ({i})" for i in range(args.videos)]
    started = time.perf_counter()
    pipe = load_pipeline(args.model, dtype=args.dtype)
    load_s = time.perf_counter() - started
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    generate_video(pipe, "warm-up", settings=settings)
    first_s = time.perf_counter() - started
    report = {"mode": args.mode, "load_s": load_s, "first_video_s": first_s, "peak_rss_mb_after_load": rss_loaded}
    if args.mode == "single":
        times, videos = [], []
        for prompt in prompts:
            started = time.perf_counter()
            videos.append(generate_video(pipe, prompt, settings=settings))
            times.append(time.perf_counter() - started)
        report["s_per_video"] = statistics.median(times)
    else:
        started = time.perf_counter()
        videos = generate_videos(pipe, prompts, settings=settings)
        report["s_per_video"] = (time.perf_counter() - started) / len(prompts)
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    np.save(args.out, np.stack(videos))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--frames", type=int, default=9)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mode", choices=["single", "batch"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(child(args)))
        return

    import numpy as np

    from mlperf_repro.demo.wan_model import TinyWanSpec, build_tiny_wan

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "wan-tiny"
        build = build_tiny_wan(model, TinyWanSpec(threads=args.threads))
        common = [f"--{k}={getattr(args, k)}" for k in ("videos", "frames", "size", "steps", "dtype", "threads")]
        results = {}
        for mode in ("single", "batch"):
            out = Path(tmp) / f"{mode}.npy"
            done = subprocess.run(
                [sys.executable, __file__, *common, f"--mode={mode}", f"--model={model}", f"--out={out}"],
                capture_output=True,
                text=True,
                check=True,
            )
            results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            results[mode]["videos"] = np.load(out)
        single, batch = results["single"].pop("videos"), results["batch"].pop("videos")
    diff = np.abs(single.astype(int) - batch.astype(int))
    print(
        json.dumps(
            {
                "settings": vars(args) | {"mode": None, "model": None, "out": None},
                "parameters_total": build["parameters_total"],
                "build_seconds": build["build_seconds"],
                **results,
                "batch_over_single_per_video": results["batch"]["s_per_video"] / results["single"]["s_per_video"],
                "batched_equals_single": [bool(not d.any()) for d in diff],
                "batched_max_abs_diff": int(diff.max()),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
