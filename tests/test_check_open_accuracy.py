"""Our checker and a text-to-video result whose vbench_score was not computed here (VBench's
checkpoints absent): an open-division stand-in that declares weight-free metrics in its place
(accuracy.open_accuracy), consistently and meeting their targets, passes with a warning; the
same result in the closed division, or without the declaration, or with a declaration that the
tree contradicts, fails. The trees are written by hand with real mp4s; the values in their
accuracy.txt come from the workflow's own scorer and writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mlperf_repro.accuracy.open_accuracy import UNQUANTIZED_VIDEOS, format_open_accuracy
from mlperf_repro.accuracy.vbench import format_vbench_accuracy_txt
from mlperf_repro.accuracy.video_quality import read_video, score_videos
from mlperf_repro.benchmarks import load_round
from mlperf_repro.check.tree import check_tree
from mlperf_repro.package.truncate import hash_line
from mlperf_repro.video import write_mp4

ROUND = load_round("v6.0")
WAN = ROUND.benchmark("wan-2.2-t2v-a14b")
STEMS = [str(s) for s in WAN.accuracy["extra_files"]["videos"]]
SAMPLES = 248  # the accuracy run's, as its detail log says: every prompt
METRICS = ["temporal_flickering", "video_ssim", "video_psnr"]
NOT_COMPUTED = {
    "vbench_score": None,
    "not_computed": "checkpoint file(s) missing or not matching: /cache/vbench/amt_model/amt-s.pth (motion_smoothness)",
    "videos": SAMPLES,
}


def targets(unquantized_flicker: float, ssim_minimum: float = 0.5) -> dict:
    unquantized = round(unquantized_flicker, 6)
    return {
        "temporal_flickering": {"minimum": round(0.99 * unquantized, 6), "fraction": 0.99, "unquantized": unquantized},
        "video_ssim": {"minimum": ssim_minimum},
    }


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> Path:
    """The ten packaged samples: the unquantized pipeline's video (smooth noise that moves) and the
    run's (the same, a level or two off here and there, then re-encoded)."""
    folder = tmp_path_factory.mktemp("videos")
    rng = np.random.default_rng(0)
    for stem in STEMS:
        base = rng.integers(0, 256, (9, 4, 4, 3)).repeat(8, axis=1).repeat(8, axis=2)
        drift = np.stack([np.roll(base[t], t, axis=1) for t in range(5)]).astype(np.int16)
        noise = rng.integers(-2, 3, drift.shape) * (rng.random(drift.shape) < 0.2)
        write_mp4(drift.astype(np.uint8), folder / UNQUANTIZED_VIDEOS / f"{stem}.mp4", 16)
        write_mp4(np.clip(drift + noise, 0, 255).astype(np.uint8), folder / "videos" / f"{stem}.mp4", 16)
    return folder


def accuracy_txt(videos: Path, *, declared: bool = True, tweak=None) -> str:
    """accuracy.txt as the accuracy stage writes it for the stand-in (the hash line added)."""
    run = {int(s): read_video(videos / "videos" / f"{s}.mp4") for s in STEMS}
    unquantized = {int(s): read_video(videos / UNQUANTIZED_VIDEOS / f"{s}.mp4") for s in STEMS}
    scored = score_videos(run, METRICS, unquantized)
    per_sample = scored.pop("per_sample")
    result = {
        **{m: round(scored[m], 6) for m in METRICS},
        "metrics": METRICS,
        "videos_scored": dict.fromkeys(METRICS, SAMPLES),
        "samples": {s: per_sample[int(s)] for s in STEMS},
    }
    goals = targets(scored["temporal_flickering"] + 0.001)
    if tweak:
        tweak(result, goals)
    text = format_vbench_accuracy_txt(NOT_COMPUTED)
    if declared:
        text += format_open_accuracy(result, goals, ["vbench_score"])
    return text + hash_line("0" * 64)


def write_result(root: Path, videos: Path, *, division: str, folder: str, text: str, mapping: dict | None) -> Path:
    base = root / division / "TestOrg"
    acc = base / "results" / "sys1" / folder / "Offline" / "accuracy"
    acc.mkdir(parents=True)
    shutil.copytree(videos / "videos", acc / "videos")
    shutil.copytree(videos / UNQUANTIZED_VIDEOS, acc / UNQUANTIZED_VIDEOS)
    (acc / "accuracy.txt").write_text(text)
    record = {"key": "qsl_reported_total_count", "value": SAMPLES, "metadata": {}}
    (acc / "mlperf_log_detail.txt").write_text(f":::MLLOG {json.dumps(record)}\n")
    if mapping is not None:
        (base / "model_mapping.json").write_text(json.dumps(mapping))
    return acc


def stand_in(tmp_path: Path, videos: Path, **kwargs) -> Path:
    text = kwargs.pop("text", None) or accuracy_txt(videos, **kwargs)
    write_result(
        tmp_path / "tree",
        videos,
        division="open",
        folder="tiny-wan-t2v",
        text=text,
        mapping={"tiny-wan-t2v": "wan-2.2-t2v-a14b"},
    )
    return tmp_path / "tree"


def accuracy_findings(root: Path) -> list:
    return check_tree(root, ROUND, only=["accuracy-log", "accuracy-files"])


def test_an_open_stand_in_with_its_declared_metrics_passes(tmp_path, videos):
    found = accuracy_findings(stand_in(tmp_path, videos))
    assert len(found) == 1, [f.line() for f in found]
    (finding,) = found
    assert finding.severity == "warning", finding.line()
    assert finding.message.startswith("vbench_score not computed here; judged instead by the open-division metrics")
    assert "temporal_flickering" in finding.message and "video_ssim" in finding.message
    assert "10 packaged samples recomputed from the tree" in finding.message


def test_without_the_declaration_it_fails_as_before(tmp_path, videos):
    (finding,) = accuracy_findings(stand_in(tmp_path, videos, declared=False))
    assert finding.severity == "error"
    assert finding.message.startswith("vbench_score was not computed here (checkpoint file(s) missing")
    assert finding.message.endswith("the result cannot be submitted until it is")


@pytest.mark.parametrize("declared", [True, False])
def test_a_closed_text_to_video_result_without_vbench_score_fails(tmp_path, videos, declared):
    """The real model in the closed division: its score is vbench_score, whatever else accuracy.txt says."""
    root = tmp_path / "tree"
    write_result(
        root,
        videos,
        division="closed",
        folder="wan-2.2-t2v-a14b",
        text=accuracy_txt(videos, declared=declared),
        mapping=None,
    )
    (finding,) = accuracy_findings(root)
    assert finding.severity == "error" and finding.path.endswith("wan-2.2-t2v-a14b/Offline/accuracy/accuracy.txt")
    assert finding.message.startswith("vbench_score was not computed here")
    if declared:
        assert "do not replace it in the closed division" in finding.message


def test_the_real_model_in_the_open_division_keeps_vbench_score(tmp_path, videos):
    """A result folder named after the benchmark is the real model: no stand-in in model_mapping.json."""
    root = tmp_path / "tree"
    write_result(root, videos, division="open", folder="wan-2.2-t2v-a14b", text=accuracy_txt(videos), mapping={})
    (finding,) = accuracy_findings(root)
    assert finding.severity == "error"
    assert "model_mapping.json does not declare wan-2.2-t2v-a14b a stand-in" in finding.message


def _error(root: Path) -> str:
    (finding,) = accuracy_findings(root)
    assert finding.severity == "error", finding.line()
    assert "the open-division metrics declared in its place cannot stand in for it" in finding.message
    return finding.message


def test_a_declared_metric_below_its_target_fails(tmp_path, videos):
    def strict(result, goals):
        goals["video_ssim"]["minimum"] = 0.999999

    assert "video_ssim 0." in _error(stand_in(tmp_path, videos, tweak=strict))


def test_a_target_that_is_not_the_fraction_it_names_fails(tmp_path, videos):
    def lower(result, goals):
        goals["temporal_flickering"]["minimum"] = 0.5  # 0.99 x the unquantized value is far higher

    assert "temporal_flickering's target 0.5 is not 0.99 x" in _error(stand_in(tmp_path, videos, tweak=lower))


def test_a_packaged_sample_whose_declared_value_its_videos_do_not_give_fails(tmp_path, videos):
    def inflate(result, goals):
        result["samples"]["130"]["video_ssim"] = 0.999

    message = _error(stand_in(tmp_path, videos, tweak=inflate))
    assert "sample 130: video_ssim is 0." in message and "0.999 declared" in message


def test_the_unquantized_videos_must_be_there_to_recompute(tmp_path, videos):
    root = stand_in(tmp_path, videos)
    acc = root / "open/TestOrg/results/sys1/tiny-wan-t2v/Offline/accuracy"
    (acc / UNQUANTIZED_VIDEOS / "233.mp4").unlink()
    assert f"{UNQUANTIZED_VIDEOS}/233.mp4 is missing: video_ssim, video_psnr of sample 233" in _error(root)


def test_a_count_that_is_not_the_accuracy_runs_fails(tmp_path, videos):
    def fewer(result, goals):
        result["videos_scored"]["video_ssim"] = SAMPLES - 1

    assert f"video_ssim covers {SAMPLES - 1} videos; the accuracy run has {SAMPLES} samples" in _error(
        stand_in(tmp_path, videos, tweak=fewer)
    )


def test_only_reported_metrics_stand_in_for_nothing(tmp_path, videos):
    text = accuracy_txt(videos)
    kept = [
        line
        for line in text.splitlines()
        if not line.startswith(("open_accuracy temporal_flickering", "open_accuracy video_ssim"))
    ]
    kept = [line.replace("temporal_flickering, video_ssim, video_psnr (", "video_psnr (") for line in kept]
    assert "no judged metric declared" in _error(stand_in(tmp_path, videos, text="\n".join(kept) + "\n"))
