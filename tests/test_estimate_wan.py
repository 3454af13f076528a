"""config/examples/mi355x-wan-2.2-t2v.yaml, wan-2.2-t2v-a14b on one 8x MI355X node at the
vendor's rates: it validates and the plan view prices it in GPU-hours (checked by hand)."""

from __future__ import annotations

import pytest
from conftest import REPO, SCHEMA

from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.estimate import estimate_file, estimate_plan
from mlperf_repro.plan import Plan

EXAMPLE = REPO / "config" / "examples" / "mi355x-wan-2.2-t2v.yaml"


def test_the_example_runs_the_rounds_settings_at_the_vendors_rates():
    plan = Plan(validate_config(load_yaml(EXAMPLE), SCHEMA))
    params = plan.generation_params("wan-2.2-t2v-a14b")
    assert (params["height"], params["width"], params["num_frames"], params["num_inference_steps"]) == (
        720,
        1280,
        81,
        20,
    )
    conf = plan.user_conf_text("mi355x-8x-wan", "wan-2.2-t2v-a14b", "SingleStream")
    assert "wan-2.2-t2v-a14b.SingleStream.target_latency = 30959.752" in conf  # the vendor's 31,000 ms


def row(est, stage):
    return next(r for r in est.rows if r.stage == stage)


def test_plan_prices_every_run_in_gpu_hours():
    # By hand with the pipeline loaded in each LoadGen process (launch in_process, the vendor's
    # harness); the example's video server (launch shared) loads it once: the last test.
    example = load_yaml(EXAMPLE)
    del example["systems"]["mi355x-8x-wan"]["engine"]["launch"]
    est = estimate_plan(validate_config(example, SCHEMA))
    # Offline: LoadGen's mlperf.conf asks all 248 prompts (more than 1.1 x 600 s x 0.03/s = 19.8),
    # at 0.03/s = 8,266.7 s, + 120 s overhead, on 8 GPUs.
    assert row(est, "run: Offline performance").gpu_hours == pytest.approx((248 / 0.03 + 120) * 8 / 3600)
    # SingleStream: max(600 s, LoadGen's 100 queries x 31 s) = 3,096 s, + 120 s.
    assert row(est, "run: SingleStream performance").gpu_hours == pytest.approx((100 / 0.0323 + 120) * 8 / 3600)
    # Accuracy runs render all 248 prompts; their logs hold every mp4 as hex (~6 MB each).
    accuracy = row(est, "run: Offline accuracy")
    assert accuracy.details[0]["queries"] == 248
    assert accuracy.disk_bytes == pytest.approx(100_000 + 248 * (100 + 2 * 3_000_000))
    assert 60 < est.total["gpu_hours"] < 70


def test_the_video_server_loads_the_pipeline_once():
    """Six LoadGen processes (4 runs, 2 TEST04): one load (run_overhead_s 120), five attaches
    (attach_overhead_s 5), on 8 GPUs."""
    shared = estimate_file(str(EXAMPLE), str(SCHEMA))
    example = load_yaml(EXAMPLE)
    del example["systems"]["mi355x-8x-wan"]["engine"]["launch"]
    per_run = estimate_plan(validate_config(example, SCHEMA))
    assert per_run.total["gpu_hours"] - shared.total["gpu_hours"] == pytest.approx(5 * (120 - 5) * 8 / 3600)
    assert any("mi355x-8x-wan: 1 for its 6 LoadGen processes (launch: shared)" in n for n in shared.notes)
