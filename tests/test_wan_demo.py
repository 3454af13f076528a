"""wan-2.2-t2v-a14b end to end on the CPU: the text-to-video part of config/config.yaml (the
tiny Wan pipeline, the 248-prompt file, Offline and SingleStream on the diffusers system),
through the real workflow: build, its transformers quantized to FP8 (the emulated copy served),
LoadGen runs whose responses are mp4 files, the accuracy
folder's named videos and captions, VBench (not computable here: its checkpoints are absent),
the unquantized pipeline's reference videos and the open-division metrics judged against them in
vbench_score's place (docs/wan.md), TEST04, packaging and our check. The videos are made smaller than the demo's (32x32, 5 frames,
2 steps) and Offline issues 64 samples, so it takes a few minutes on 2 cores."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run_config

from mlperf_repro.benchmarks import load_round
from mlperf_repro.loadgen_logs import read_detail
from mlperf_repro.video import read_mp4

# exclusive: TEST04 compares two runs' performance.
pytestmark = [pytest.mark.slow, pytest.mark.exclusive]
SYSTEM, BENCH, MODEL, DATASET = "cpu-2c-diffusers", "tiny-wan-t2v", "tiny-wan", "vbench-prompts-synthetic"
FACTS = load_round("v6.0").benchmark("wan-2.2-t2v-a14b")
VIDEO = {"height": 32, "width": 32, "num_frames": 5, "num_inference_steps": 2}
#: The stand-in dataset's prompts: the accuracy run's samples.
PROMPTS = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["datasets"][DATASET]["builtin"]["samples"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    reuse = os.environ.get("MLPERF_REPRO_WAN_WORKDIR")  # a finished run, for iterating on assertions
    if reuse:
        return Path(reuse)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    # Only the text-to-video benchmark of the demo config, and its own system.
    config["models"] = {MODEL: config["models"][MODEL]}
    config["datasets"] = {DATASET: config["datasets"][DATASET]}
    config["benchmarks"] = {BENCH: config["benchmarks"][BENCH]}
    config["systems"] = {SYSTEM: config["systems"][SYSTEM]}
    recipe = config["benchmarks"][BENCH]["quantization"]
    config["quantization"] = {recipe: config["quantization"][recipe]}
    config["benchmarks"][BENCH]["video"].update(VIDEO)
    # Smaller videos render in ~0.1-0.15 s: a 3 s minimum duration, and Offline and TEST04 at
    # 99 samples (1.1 x 3 s x 30/s), so neither ends before it even on a machine 3x faster.
    config["test_scale"]["min_duration_ms"] = 3000
    # (A fixed Offline target in place of the default's target_qps: auto and its short run.)
    config["systems"][SYSTEM]["benchmarks"][BENCH]["Offline"] = {"target_qps": 30, "min_query_count": 64}
    # SingleStream's TEST04 score is the early-stopping p90 estimate, which over 64 queries is the
    # slowest one: one hiccup in the reference run reads as a speed-up of the audited run. 128
    # reference queries put the estimate near p95; the audited run keeps the round's 64.
    config["systems"][SYSTEM]["benchmarks"][BENCH]["SingleStream"].update(min_query_count=128)
    return run_config(tmp_path_factory.mktemp("wan"), "wan", config)


def scenario_dir(work: Path, scenario: str) -> Path:
    return work / "results" / "package" / "submission" / "open" / "MLPerfRepro" / "results" / SYSTEM / BENCH / scenario


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream"])
def test_both_scenarios_run_valid_and_are_packaged(workdir, scenario):
    folder = scenario_dir(workdir, scenario)
    detail = read_detail(folder / "performance" / "run_1" / "mlperf_log_detail.txt")
    assert detail["result_validity"] == "VALID" and detail["effective_scenario"] == scenario
    if scenario == "SingleStream":
        assert detail["early_stopping_latency_ss"] > 0
    summary = (folder / "performance" / "run_1" / "mlperf_log_summary.txt").read_text()
    assert "Result is : VALID" in summary
    ratio, limit, verdict = audit_outcome(folder)
    assert verdict == (
        "TEST PASS" if ratio < limit else f"TEST FAIL: the test run is {ratio:.4f}x the reference (limit {limit:g})"
    )
    assert ratio < NOISE_BOUND, f"TEST04 {ratio}x: far beyond this machine's run-to-run spread"
    # The packaged performance run and TEST04 are the measurement pair's last attempt; a failed
    # verdict only after every attempt failed with both runs VALID (the machine's noise).
    record = pair_record(workdir, scenario)
    assert record["packaged_attempt"] == len(record["attempts"]) and record["passed"] == (verdict == "TEST PASS")
    assert all(
        not a["passed"] and a["validity"] == {"performance": "VALID", "TEST04": "VALID"}
        for a in record["attempts"][:-1]
    )
    if verdict != "TEST PASS":
        assert len(record["attempts"]) == record["max_attempts"]
    packaged = read_detail(
        workdir / "results/runs" / SYSTEM / BENCH / scenario / "TEST04_pair/performance/mlperf_log_detail.txt"
    )
    assert packaged == detail


def pair_record(work: Path, scenario: str) -> dict:
    return json.loads(
        (work / "results/runs" / SYSTEM / BENCH / scenario / "TEST04_pair/attempts/attempts.json").read_text()
    )


#: Two runs of the same tiny pipeline on this 2-core VM differ by up to ~25% in speed (observed
#: TEST04 ratios of a fair pipeline: 0.83-1.27; the whole process runs slower or faster, model and
#: mp4 encoding alike), more than the round's 10%/20% limits; the measurement pair measures such
#: a pair again (compliance.measurement_attempts), so a failed verdict needs every attempt to
#: have failed. What the tests hold it to: the verdict follows from the measured ratio, and a fair
#: pipeline stays far below what a cache gives (the cached sample answers in microseconds, and
#: tests/test_wan_task.py shows that run failing outright).
NOISE_BOUND = 1.5


def audit_outcome(folder: Path) -> tuple[float, float, str]:
    lines = (folder / "TEST04" / "verify_performance.txt").read_text().splitlines()
    ratio = next(float(line.split("=")[1].split()[0]) for line in lines if line.startswith("ratio = "))
    limit = float(
        re.search(r"must be below ([\d.]+)", next(line for line in lines if line.startswith("ratio = "))).group(1)
    )
    return ratio, limit, lines[-1]


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream"])
def test_the_accuracy_folder_carries_the_rounds_videos_as_real_mp4s(workdir, scenario):
    videos = scenario_dir(workdir, scenario) / "accuracy" / "videos"
    stems = FACTS.accuracy["extra_files"]["videos"]
    assert sorted(p.name for p in videos.iterdir()) == sorted([f"{s}.mp4" for s in stems] + ["captions.txt"])
    frames = read_mp4(videos / "233.mp4")
    assert frames.shape == (VIDEO["num_frames"], VIDEO["height"], VIDEO["width"], 3)
    prompts = (workdir / "resources" / "datasets" / DATASET / "data" / "vbench_prompts.txt").read_text().splitlines()
    assert f"233  {prompts[233]}" in (videos / "captions.txt").read_text().splitlines()


def test_vbench_is_reported_as_not_computed_never_invented(workdir):
    text = (scenario_dir(workdir, "Offline") / "accuracy" / "accuracy.txt").read_text()
    assert not re.search(FACTS.accuracy["regex"]["vbench_score"], text)
    assert text.startswith("vbench_score: not computed here: ") and "checkpoint file(s) missing" in text
    verdict = json.loads((workdir / "results/accuracy" / SYSTEM / BENCH / "Offline" / "accuracy.json").read_text())
    assert verdict["metrics"]["vbench_score"] is None and verdict["metrics"]["submittable"] is False


def test_our_check_passes_the_stand_in_on_its_open_division_metrics(workdir):
    """vbench_score cannot be computed here; the open-division stand-in is judged instead by the
    weight-free metrics it declares (docs/wan.md): a warning per result, no error."""
    report = json.loads((workdir / "results" / "check" / "report.json").read_text())
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    for finding in errors:
        assert finding["message"].startswith("TEST04 failed"), finding  # only the machine's spread (NOISE_BOUND)
        scenario = finding["path"].split("/")[-2]
        assert audit_outcome(scenario_dir(workdir, scenario))[0] < NOISE_BOUND, finding
        record = pair_record(workdir, scenario)  # ... after every attempt of the pair
        assert len(record["attempts"]) == record["max_attempts"] and not record["passed"], finding
    judged = [f for f in report["findings"] if "judged instead by the open-division metrics" in f["message"]]
    assert sorted(f["path"].split("/")[-3] for f in judged) == ["Offline", "SingleStream"]
    assert all(f["severity"] == "warning" and "10 packaged samples recomputed" in f["message"] for f in judged)
    if not errors:
        assert report["status"] == "PASS"


def test_the_open_division_metrics_are_declared_in_the_tree(workdir):
    from mlperf_repro.accuracy.open_accuracy import UNQUANTIZED_VIDEOS, read_open_accuracy

    reference = json.loads((workdir / "results/reference" / SYSTEM / BENCH / "accuracy.json").read_text())
    assert reference["metrics"]["video_ssim"] == 1.0 and reference["samples"] == PROMPTS
    assert len(list((workdir / "results/reference" / SYSTEM / BENCH / "outputs").glob("*.mp4"))) == PROMPTS
    base = workdir / "results" / "package" / "submission" / "open" / "MLPerfRepro"
    assert json.loads((base / "model_mapping.json").read_text()) == {BENCH: "wan-2.2-t2v-a14b"}
    summary = (workdir / "results" / "report" / "summary.md").read_text()
    assert "Open-division accuracy: tiny-wan-t2v stands in for wan-2.2-t2v-a14b" in summary
    for scenario in ("Offline", "SingleStream"):
        folder = scenario_dir(workdir, scenario)
        declared = read_open_accuracy((folder / "accuracy" / "accuracy.txt").read_text())
        assert declared.problems == [] and declared.metrics == ["temporal_flickering", "video_ssim", "video_psnr"]
        assert declared.values["video_ssim"] >= 0.85 and declared.values["temporal_flickering"] >= (
            0.99 * reference["metrics"]["temporal_flickering"] - 1e-6
        )
        assert declared.videos["video_ssim"] == PROMPTS
        stems = FACTS.accuracy["extra_files"]["videos"]
        assert sorted(p.stem for p in (folder / "accuracy" / UNQUANTIZED_VIDEOS).iterdir()) == sorted(stems)
        assert set(declared.samples) == {int(s) for s in stems}
        readme = (folder / "README.md").read_text()
        assert "Accuracy metric (open division): temporal_flickering, video_ssim, video_psnr" in readme
        row = next(line for line in summary.splitlines() if f"| {BENCH} | {scenario} |" in line)
        assert "temporal_flickering=" in row and "video_ssim>=0.85 (measured)" in row and "| yes |" in row


def test_the_runs_serve_the_fp8_quantized_pipeline(workdir):
    manifest = json.loads((workdir / "results/models/tiny-wan-fp8-dit/quant_manifest.json").read_text())
    assert manifest["scheme"] == "fp8_dynamic" and manifest["model_kind"] == "diffusers-pipeline"
    assert manifest["video_error"] and manifest["weight_error"]
    provenance = json.loads((scenario_dir(workdir, "Offline") / "provenance.json").read_text())
    assert "tiny-wan-fp8-dit-emulated" in json.dumps(provenance)
