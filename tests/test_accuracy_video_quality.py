"""The weight-free text-to-video metrics of an open-division stand-in (accuracy.video_quality) and
their declaration in accuracy.txt (accuracy.open_accuracy): VBench's temporal_flickering by its
definition and against VBench itself in .venv-vbench on the same mp4s, SSIM and PSNR against an
independent direct computation, and the video reader on odd shapes, constant videos and bytes
that are no video (hypothesis)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import SCHEMA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mlperf_repro.accuracy import vbench
from mlperf_repro.accuracy.open_accuracy import format_open_accuracy, read_open_accuracy
from mlperf_repro.accuracy.video_quality import (
    OPEN_METRICS,
    decode_video,
    psnr_db,
    read_video,
    score_videos,
    squared_error,
    ssim,
    temporal_flickering,
)
from mlperf_repro.errors import UserError
from mlperf_repro.video import read_mp4

HAS_VBENCH = vbench.vbench_python(None) is not None
needs_vbench = pytest.mark.skipif(not HAS_VBENCH, reason=".venv-vbench is not built: ./install.sh --vbench")


def videos(max_frames: int = 5, max_side: int = 12):
    """uint8 videos [frames, H, W, 3] of any small shape, odd ones included."""
    shapes = st.tuples(st.integers(1, max_frames), st.integers(1, max_side), st.integers(1, max_side), st.just(3))
    return shapes.flatmap(lambda shape: arrays(np.uint8, shape))


def mp4_bytes(frames: np.ndarray, path: Path) -> bytes:
    """An H.264 yuv420p mp4 of frames whose sides are even (not necessarily multiples of 16)."""
    import imageio.v2 as imageio

    with imageio.get_writer(
        path, format="FFMPEG", fps=8, codec="libx264", pixelformat="yuv420p", quality=5, macro_block_size=2
    ) as writer:
        for frame in frames:
            writer.append_data(frame)
    return path.read_bytes()


# --------------------------------------------------------------------------- the definitions


def flickering_by_definition(frames: np.ndarray) -> float:
    """VBench's temporal_flickering.cal_score spelled out: per consecutive pair the mean absolute
    difference of float32 frames, their mean, (255 - mean) / 255."""
    pairs = [
        np.mean(np.abs(frames[i].astype(np.float32) - frames[i + 1].astype(np.float32))) for i in range(len(frames) - 1)
    ]
    return (255.0 - float(np.mean(pairs))) / 255.0


def ssim_directly(x: np.ndarray, y: np.ndarray) -> float:
    """SSIM by its definition, one pixel at a time: the 11-tap Gaussian window (sigma 1.5) over
    the image reflected at its borders, per channel and frame, the map averaged."""
    r = 5
    g = np.exp(-(np.arange(-r, r + 1) ** 2) / (2 * 1.5**2))
    w = np.outer(g, g) / np.outer(g, g).sum()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    values = []
    for f in range(x.shape[0]):
        for c in range(3):
            a = np.pad(x[f, :, :, c].astype(float), r, mode="symmetric")
            b = np.pad(y[f, :, :, c].astype(float), r, mode="symmetric")
            for i in range(x.shape[1]):
                for j in range(x.shape[2]):
                    pa, pb = a[i : i + 2 * r + 1, j : j + 2 * r + 1], b[i : i + 2 * r + 1, j : j + 2 * r + 1]
                    ma, mb = (w * pa).sum(), (w * pb).sum()
                    va, vb = (w * pa * pa).sum() - ma * ma, (w * pb * pb).sum() - mb * mb
                    cov = (w * pa * pb).sum() - ma * mb
                    values.append(((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma * ma + mb * mb + c1) * (va + vb + c2)))
    return float(np.mean(values))


@settings(max_examples=60, deadline=None)
@given(videos())
def test_temporal_flickering_is_vbenchs_definition(frames):
    value = temporal_flickering(frames)
    if len(frames) == 1:
        assert value is None  # no pair of frames: not scored (VBench's own would be NaN)
        return
    assert value == pytest.approx(flickering_by_definition(frames), abs=1e-6)
    assert 0.0 <= value <= 1.0 and not math.isnan(value)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(1, 9), st.integers(1, 9), st.integers(0, 255))
def test_a_still_video_does_not_flicker(frames, height, width, level):
    assert temporal_flickering(np.full((frames, height, width, 3), level, np.uint8)) == 1.0


@settings(max_examples=25, deadline=None)
@given(videos(max_frames=2, max_side=7).flatmap(lambda v: st.tuples(st.just(v), arrays(np.uint8, v.shape))))
def test_ssim_is_its_definition(pair):
    x, y = pair
    assert ssim(x, y) == pytest.approx(ssim_directly(x, y), abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(videos().flatmap(lambda v: st.tuples(st.just(v), arrays(np.uint8, v.shape))))
def test_ssim_and_psnr_properties(pair):
    x, y = pair
    assert ssim(x, x) == 1.0 and ssim(y, y) == 1.0  # exactly: the unquantized pipeline scores 1.0
    value = ssim(x, y)
    assert -1.0 <= value <= 1.0 and not math.isnan(value)
    assert value == pytest.approx(ssim(y, x), abs=1e-12)
    total, count = squared_error(x, y)
    assert count == x.size
    psnr = psnr_db(total, count)
    assert (psnr is None) == np.array_equal(x, y)
    if psnr is not None:
        assert psnr == pytest.approx(10 * math.log10(255**2 / np.mean((x.astype(float) - y) ** 2)))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.integers(1, 9), st.integers(0, 255), st.integers(0, 255))
def test_constant_videos_give_finite_numbers(frames, height, width, a, b):
    x = np.full((frames, height, width, 3), a, np.uint8)
    y = np.full((frames, height, width, 3), b, np.uint8)
    result = score_videos({0: y}, list(OPEN_METRICS), {0: x})
    assert all(v is None or math.isfinite(v) for v in (result[m] for m in OPEN_METRICS))
    assert result["video_ssim"] == (1.0 if a == b else pytest.approx(ssim(x, y)))
    assert (result["video_psnr"] is None) == (a == b)


def test_score_videos_per_sample_and_counts():
    rng = np.random.default_rng(0)
    ref = {i: rng.integers(0, 256, (3, 8, 8, 3), dtype=np.uint8) for i in range(3)}
    run = {i: np.clip(v.astype(int) + rng.integers(-2, 3, v.shape), 0, 255).astype(np.uint8) for i, v in ref.items()}
    result = score_videos(run, ["temporal_flickering", "video_ssim", "video_psnr"], ref)
    assert result["videos_scored"] == {"temporal_flickering": 3, "video_ssim": 3, "video_psnr": 3}
    assert result["temporal_flickering"] == pytest.approx(np.mean([temporal_flickering(v) for v in run.values()]))
    assert result["video_ssim"] == pytest.approx(np.mean([ssim(ref[i], run[i]) for i in ref]))
    total = sum(squared_error(ref[i], run[i])[0] for i in ref)
    assert result["video_psnr"] == pytest.approx(psnr_db(total, 3 * ref[0].size))  # over all pixels together
    assert set(result["per_sample"]) == {0, 1, 2} and result["per_sample"][1]["video_ssim"] < 1.0
    one_frame = score_videos({0: run[0][:1]}, ["temporal_flickering"])
    assert one_frame["temporal_flickering"] is None and one_frame["videos_scored"] == {"temporal_flickering": 0}
    with pytest.raises(UserError, match="compare with the unquantized pipeline's videos"):
        score_videos(run, ["video_ssim"])
    with pytest.raises(UserError, match=r"same video settings"):
        score_videos({0: run[0]}, ["video_ssim"], {0: ref[0][:2]})
    with pytest.raises(UserError, match="unknown metric.*known: temporal_flickering, video_ssim, video_psnr"):
        score_videos(run, ["aesthetic_quality"])


# --------------------------------------------------------------------------- reading videos


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.integers(1, 5),
    st.integers(1, 12).map(lambda n: 2 * n),
    st.integers(1, 12).map(lambda n: 2 * n),
    st.sampled_from(["noise", "constant", "ramp"]),
)
def test_mp4s_of_odd_shapes_read_as_the_projects_reader_reads_them(tmp_path, frames, height, width, kind):
    rng = np.random.default_rng(frames * 1000 + height * 10 + width)
    if kind == "noise":
        video = rng.integers(0, 256, (frames, height, width, 3), dtype=np.uint8)
    elif kind == "constant":
        video = np.full((frames, height, width, 3), int(rng.integers(0, 256)), np.uint8)
    else:
        video = np.stack([np.full((height, width, 3), 40 * t, np.uint8) for t in range(frames)])
    data = mp4_bytes(video, tmp_path / f"{kind}-{frames}-{height}x{width}.mp4")
    decoded = decode_video(data, "a video")
    assert decoded.dtype == np.uint8 and decoded.shape == (frames, height, width, 3)
    np.testing.assert_array_equal(decoded, read_mp4(tmp_path / f"{kind}-{frames}-{height}x{width}.mp4"))
    value = temporal_flickering(decoded)
    assert value is None if frames == 1 else 0.0 <= value <= 1.0
    if kind == "constant" and frames > 1:
        assert value == 1.0


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=2048))
def test_bytes_that_are_no_video_are_a_clear_error(data):
    with pytest.raises(UserError, match="sample 7 is not a readable video"):
        decode_video(data, "sample 7")


def test_a_truncated_mp4_is_refused_or_read_whole_frames(tmp_path):
    video = np.random.default_rng(1).integers(0, 256, (5, 16, 16, 3), dtype=np.uint8)
    data = mp4_bytes(video, tmp_path / "v.mp4")
    for cut in (len(data) // 3, len(data) // 2, len(data) - 10):
        try:
            frames = decode_video(data[:cut], "cut")
        except UserError as exc:
            assert "cut is not a readable video" in str(exc)
        else:
            assert frames.dtype == np.uint8 and frames.shape[1:] == (16, 16, 3) and 1 <= len(frames) <= 5
    assert read_video(tmp_path / "v.mp4").shape == (5, 16, 16, 3)


# --------------------------------------------------------------------------- VBench itself


@pytest.mark.slow
@needs_vbench
def test_temporal_flickering_equals_vbenchs_own_on_the_same_mp4s(tmp_path):
    """VBench 0.1.5's temporal_flickering (custom_input: one file per prompt), in .venv-vbench, on
    mp4s of several kinds and shapes: per video and averaged, the same number as ours."""
    from mlperf_repro.accuracy.videos import vbench_folder

    rng = np.random.default_rng(3)
    clips = {
        "noise": rng.integers(0, 256, (9, 32, 32, 3), dtype=np.uint8),
        "still gray": np.full((5, 16, 48, 3), 90, np.uint8),
        "a box moving right": np.stack(
            [np.pad(np.full((8, 8, 3), 255, np.uint8), ((12, 12), (2 * t, 30 - 2 * t), (0, 0))) for t in range(9)]
        ),
        "a slow fade": np.stack([np.full((24, 20, 3), 10 + 25 * t, np.uint8) for t in range(6)]),
        "smoothed noise": np.repeat(rng.integers(0, 256, (5, 8, 8, 3), dtype=np.uint8), 4, axis=1).repeat(4, axis=2),
    }
    prompts = list(clips)
    entries = [(i, np.frombuffer(mp4_bytes(clips[p], tmp_path / f"{i}.mp4"), np.uint8)) for i, p in enumerate(prompts)]
    folder = vbench_folder(entries, prompts, tmp_path / "videos")
    result = vbench.run_vbench(folder, ["temporal_flickering"], {}, mode="custom_input", work_dir=tmp_path / "w")
    per_video = json.loads(Path(result["runner"]["results_file"]).read_text())["temporal_flickering"][1]
    theirs = {Path(v["video_path"]).name: v["video_results"] for v in per_video}
    ours = score_videos({i: decode_video(data) for i, data in entries}, ["temporal_flickering"])
    for i, prompt in enumerate(prompts):
        assert ours["per_sample"][i]["temporal_flickering"] == pytest.approx(theirs[f"{prompt}-0.mp4"], abs=1e-6)
    assert ours["temporal_flickering"] == pytest.approx(result["temporal_flickering"], abs=1e-6)
    assert theirs["still gray-0.mp4"] == 1.0


# --------------------------------------------------------------------------- the declaration


def test_the_declaration_reads_back_as_written():
    result = {
        "metrics": ["temporal_flickering", "video_ssim", "video_psnr"],
        "temporal_flickering": 0.872515,
        "video_ssim": 0.925633,
        "video_psnr": 32.934988,
        "videos_scored": {"temporal_flickering": 64, "video_ssim": 64, "video_psnr": 64},
        "samples": {"12": {"temporal_flickering": 0.87, "video_ssim": 0.9, "video_psnr": None}},
    }
    targets = {
        "temporal_flickering": {"minimum": 0.863799, "fraction": 0.99, "unquantized": 0.872524},
        "video_ssim": {"minimum": 0.85},
    }
    text = format_open_accuracy(result, targets, ["vbench_score"])
    assert text.splitlines()[1] == (
        "open_accuracy temporal_flickering = 0.872515 over 64 videos; target >= 0.863799 "
        "(0.99 x 0.872524, the unquantized pipeline's)"
    )
    assert "open_accuracy video_psnr = 32.934988 over 64 videos; reported" in text
    declared = read_open_accuracy("vbench_score: not computed here: why\n" + text + "hash=00\n")
    assert declared.problems == [] and declared.metrics == result["metrics"]
    assert declared.values == {m: result[m] for m in result["metrics"]}
    assert declared.targets == targets and declared.videos["video_ssim"] == 64
    assert declared.samples == {12: {"temporal_flickering": 0.87, "video_ssim": 0.9, "video_psnr": None}}
    assert read_open_accuracy("vbench_score: not computed here: why\n") is None
    from mlperf_repro.benchmarks import load_round

    assert load_round("v6.0").benchmark("wan-2.2-t2v-a14b").accuracy_readings(text) == {}  # not a vbench_score


def test_the_schema_names_the_metrics_there_are():
    schema = yaml.safe_load(SCHEMA.read_text())
    entry = schema["properties"]["benchmarks"]["additionalProperties"]["properties"]["open_accuracy"]
    assert entry["properties"]["metrics"]["items"]["enum"] == list(OPEN_METRICS)
    floors = {f"{name}_minimum" for name, m in OPEN_METRICS.items() if m.target == "minimum"}
    assert floors == {key for key in entry["properties"] if key.endswith("_minimum")}


def test_the_verdict_takes_a_fraction_of_the_unquantized_value_and_the_floor():
    from mlperf_repro.stages.accuracy import judge

    targets = {
        "kind": "measured",
        "fraction": 0.99,
        "metrics": ["temporal_flickering"],
        "minimums": {"video_ssim": 0.85},
        "open_metrics": ["temporal_flickering", "video_ssim", "video_psnr"],
    }
    reference = {"metrics": {"temporal_flickering": 0.8, "video_ssim": 1.0, "video_psnr": None}}
    run = {"vbench_score": None, "temporal_flickering": 0.793, "video_ssim": 0.9, "video_psnr": 31.0}
    verdict = judge(run, targets, reference)
    assert verdict["passed"] and [(c["metric"], c["minimum"]) for c in verdict["checks"]] == [
        ("temporal_flickering", 0.792),
        ("video_ssim", 0.85),
    ]  # vbench_score and video_psnr are not judged
    assert not judge({**run, "temporal_flickering": 0.7919}, targets, reference)["passed"]
    assert not judge({**run, "video_ssim": 0.84}, targets, reference)["passed"]
    assert not judge({**run, "video_ssim": None}, targets, reference)["passed"]
    with pytest.raises(UserError, match="reference accuracy run has no temporal_flickering"):
        judge(run, targets, {"metrics": {"vbench_score": None}})
