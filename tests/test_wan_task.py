"""The text-to-video task (wan-2.2-t2v-a14b) with the tiny Wan pipeline: prompt files, the
videos the accuracy folder must carry, the plan's settings and user.conf, real LoadGen runs
whose accuracy logs hold real mp4 files, and TEST04 on a fair and a caching system."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SCHEMA

from mlperf_repro.accuracy.loadgen_log import read_accuracy_log
from mlperf_repro.accuracy.videos import vbench_folder, vbench_name, write_named_videos
from mlperf_repro.benchmarks import load_round
from mlperf_repro.compliance import audit_config_text
from mlperf_repro.config import load_yaml, validate_config
from mlperf_repro.demo.video_prompts import write_prompt_file
from mlperf_repro.demo.wan_model import TinyWanSpec, build_tiny_wan
from mlperf_repro.errors import UserError
from mlperf_repro.fetch import record_built
from mlperf_repro.harness.dataset import load_prompt_dataset
from mlperf_repro.loadgen_logs import read_detail
from mlperf_repro.plan import Plan
from mlperf_repro.stages.compliance import verify_job
from mlperf_repro.video import read_mp4

CHILD = Path(__file__).with_name("video_child.py")
FACTS = load_round("v6.0").benchmark("wan-2.2-t2v-a14b")
TEST04 = load_round("v6.0").compliance_test("TEST04", "wan-2.2-t2v-a14b")
VIDEO = {"height": 32, "width": 32, "num_frames": 5, "num_inference_steps": 2, "dtype": "float32"}


def test_prompt_files_are_read_as_the_reference_reads_them(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_text("  a fox in the snow \n\nA boat, cinematic\n", encoding="utf-8")
    assert load_prompt_dataset(path).prompts == ["a fox in the snow", "A boat, cinematic"]
    with pytest.raises(UserError, match="does not exist"):
        load_prompt_dataset(tmp_path / "missing.txt")
    path.write_bytes(b"\xff\xfe broken")
    with pytest.raises(UserError, match="not UTF-8"):
        load_prompt_dataset(path)
    path.write_text("\n \n")
    with pytest.raises(UserError, match="holds no prompt"):
        load_prompt_dataset(path)
    # The stand-in's file: the round's 248 prompts, the same on every machine.
    write_prompt_file(tmp_path / "a.txt")
    write_prompt_file(tmp_path / "b.txt")
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert len(load_prompt_dataset(tmp_path / "a.txt")) == 248


def test_the_named_videos_and_their_captions(tmp_path):
    prompts = [f"prompt {i}" for i in range(300)]
    entries = [(i, np.frombuffer(f"video {i}".encode(), np.uint8)) for i in range(300)]
    stems = FACTS.accuracy["extra_files"]["videos"]
    write_named_videos(entries, prompts, stems, tmp_path)
    folder = tmp_path / "videos"
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{s}.mp4" for s in stems] + ["captions.txt"])
    assert (folder / "233.mp4").read_bytes() == b"video 233"
    assert (folder / "captions.txt").read_text().splitlines()[0] == f"{stems[0]}  prompt {stems[0]}"
    with pytest.raises(UserError, match="no video for sample\\(s\\) 233, 130"):
        write_named_videos([e for e in entries if e[0] not in (130, 233)], prompts, ["233", "130"], tmp_path)
    # VBench reads the prompt back from the file name.
    assert vbench_name("a/b c") == "a b c-0.mp4"
    assert sorted(p.name for p in vbench_folder(entries[:2], prompts, tmp_path / "vb").iterdir()) == [
        "prompt 0-0.mp4",
        "prompt 1-0.mp4",
    ]


@pytest.fixture(scope="module")
def demo_plan():
    return Plan(validate_config(load_yaml(REPO / "config" / "config.yaml"), SCHEMA))


def test_plan_lays_the_stand_ins_video_over_the_rounds_settings(demo_plan, tmp_path):
    params = demo_plan.generation_params("tiny-wan-t2v", "performance")
    assert (params["height"], params["width"], params["num_frames"], params["num_inference_steps"]) == (32, 32, 5, 4)
    assert (params["guidance_scale"], params["guidance_scale_2"], params["boundary_ratio"], params["seed"]) == (
        4.0,
        3.0,
        0.875,
        42,
    )
    assert params["negative_prompt"] == FACTS.facts["generation"]["negative_prompt"]
    # SingleStream's target (target_qps: auto in the default: 10/s measured) as LoadGen's latency.
    measured = {
        "target_qps": 10.0,
        "date_utc": "2026-12-04",
        "host": {"hostname": "h", "cpu_model": "c"},
        "measured_qps": 9.1,
        "measured_what": "1 / mean latency",
        "margin": 0.1,
    }
    found = tmp_path / "SingleStream.json"
    found.write_text(json.dumps(measured))
    conf = demo_plan.user_conf_text("cpu-2c-diffusers", "tiny-wan-t2v", "SingleStream", str(found))
    settings = [line for line in conf.splitlines() if not line.startswith("#")]
    assert "wan-2.2-t2v-a14b.SingleStream.target_latency = 100" in settings
    assert not any("target_qps" in line for line in settings)
    # TEST04's SingleStream run needs 64 queries for its p90 early-stopping estimate.
    assert "*.*.min_query_count = 64" in demo_plan.audit_config("TEST04", "tiny-wan-t2v", "SingleStream")
    assert "*.*.min_query_count = 20" in demo_plan.audit_config("TEST04", "tiny-wan-t2v", "Offline")
    rules = demo_plan.accuracy_rules("tiny-wan-t2v")
    assert rules["dimensions"] == FACTS.accuracy["vbench_dimensions"] and rules["vbench"] == {}


@pytest.fixture(scope="module")
def tiny_wan(tmp_path_factory):
    root = tmp_path_factory.mktemp("wan")
    build_tiny_wan(root / "model", TinyWanSpec())
    for name, text in (
        # Samples 0 and 2 share a prompt: their videos must be the same file.
        ("data", "a red fox in the snow\na boat on a lake\na red fox in the snow\na lighthouse at night\n"),
        # 64 distinct prompts: a performance run renders (almost) every sample afresh.
        ("data64", None),
    ):
        (root / name).mkdir()
        if text is None:
            write_prompt_file(root / name / "vbench_prompts.txt", 64, seed=3)
        else:
            (root / name / "vbench_prompts.txt").write_text(text)
        record_built(root / name, "builtin:test-prompts", {})
    return root


def loadgen_run(
    tiny_wan: Path,
    tmp: Path,
    name: str,
    scenario: str,
    mode: str,
    user_conf: str,
    audit=None,
    cache=False,
    data="data",
    engine=None,
) -> Path:
    """Run one LoadGen test in a child process (cwd ``tmp``, its output in ``tmp/name``, its
    stdout in ``tmp/name.stdout``); the engine is the in-process pipeline unless given."""
    out = tmp / name
    (tmp / f"{name}.user.conf").write_text(user_conf)
    samples = len(load_prompt_dataset(tiny_wan / data / "vbench_prompts.txt"))
    args = dict(
        model_dir=str(tiny_wan / "model"),
        dataset_dir=str(tiny_wan / data),
        dataset_file=str(tiny_wan / data / "vbench_prompts.txt"),
        user_conf=str(tmp / f"{name}.user.conf"),
        out_dir=str(out),
        loadgen_model="wan-2.2-t2v-a14b",
        loadgen_scenario=scenario,
        mode=mode,
        performance_sample_count=samples,
        generation={**FACTS.facts["generation"], **VIDEO},
        engine=engine or {"backend": "diffusers", "engine_args": {"batch_size": 2, "threads": 1}, "env": {}},
        audit_config=audit,
        task="text-to-video",
    )
    (tmp / f"{name}.json").write_text(json.dumps(args))
    command = [sys.executable, str(CHILD), str(tmp / f"{name}.json")] + (["--cache-results"] if cache else [])
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp, timeout=600)
    (tmp / f"{name}.stdout").write_text(result.stdout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return out


@pytest.mark.slow
def test_an_accuracy_run_logs_every_video_as_a_real_mp4(tiny_wan, tmp_path):
    conf = "wan-2.2-t2v-a14b.Offline.target_qps = 10\n"
    run = loadgen_run(tiny_wan, tmp_path, "acc", "Offline", "accuracy", conf)
    record = json.loads((run / "run_record.json").read_text())
    assert record["completed_samples"] == 4 and record["backend_stats"]["videos"] == 4
    assert record["backend_stats"]["batches"] == 2  # Offline: 4 prompts, 2 per pipeline call
    videos = dict(read_accuracy_log(run / "mlperf_log_accuracy.json", "uint8"))
    assert sorted(videos) == [0, 1, 2, 3]
    for index, data in videos.items():
        path = tmp_path / f"{index}.mp4"
        path.write_bytes(data.tobytes())
        frames = read_mp4(path)
        assert frames.shape == (VIDEO["num_frames"], VIDEO["height"], VIDEO["width"], 3)
    # The fixed latent: the same prompt renders the same video, byte for byte; another differs.
    assert videos[0].tobytes() == videos[2].tobytes() and videos[0].tobytes() != videos[1].tobytes()


@pytest.mark.slow
def test_the_reference_renders_the_runs_videos_for_the_open_metrics(tiny_wan, tmp_path):
    """accuracy_target measured with open_accuracy: the reference job renders every accuracy
    prompt with the unquantized pipeline in its own process and scores itself (SSIM 1.0 against
    its own videos); the accuracy job then judges a run of that same pipeline against it, writes
    the open_accuracy lines and copies the packaged samples' unquantized videos beside them."""
    import shutil

    from mlperf_repro.accuracy.open_accuracy import UNQUANTIZED_VIDEOS, read_open_accuracy
    from mlperf_repro.stages.accuracy import accuracy_job
    from mlperf_repro.stages.runs import reference_accuracy_job

    model = tmp_path / "model"
    shutil.copytree(tiny_wan / "model", model)
    record_built(model, "builtin:tiny-wan", {})
    generation = {**FACTS.facts["generation"], **VIDEO}
    engine = {"backend": "diffusers", "engine_args": {"batch_size": 2, "threads": 1}, "env": {}}
    metrics = ["temporal_flickering", "video_ssim", "video_psnr"]
    # Samples 0 and 2 are the packaged ones here (the round's list names samples up to 233).
    rules = {**FACTS.accuracy, "extra_files": {"videos": ["0", "2"]}}
    reference = reference_accuracy_job(
        model_dir=str(model),
        dataset_dir=str(tiny_wan / "data"),
        dataset_file=str(tiny_wan / "data" / "vbench_prompts.txt"),
        out_path=str(tmp_path / "reference" / "accuracy.json"),
        outputs_dir=str(tmp_path / "reference" / "outputs"),
        generation=generation,
        engine=engine,
        evaluator="vbench",
        open_metrics=metrics,
        accuracy_rules=rules,
    )
    assert sorted(p.name for p in (tmp_path / "reference" / "outputs").iterdir()) == [f"{i}.mp4" for i in range(4)]
    assert reference["samples"] == 4 and reference["metrics"]["video_ssim"] == 1.0
    assert reference["metrics"]["video_psnr"] is None and 0 < reference["metrics"]["temporal_flickering"] < 1

    run = loadgen_run(tiny_wan, tmp_path, "acc", "Offline", "accuracy", "wan-2.2-t2v-a14b.Offline.target_qps = 10\n")
    targets = {
        "kind": "measured",
        "fraction": 0.99,
        "metrics": ["temporal_flickering"],
        "minimums": {"video_ssim": 0.85},
        "open_metrics": metrics,
        "replaces": ["vbench_score"],
    }
    record = accuracy_job(
        run_dir=str(run),
        dataset_file=str(tiny_wan / "data" / "vbench_prompts.txt"),
        tokenizer_dir=str(model),
        evaluator="vbench",
        accuracy_rules={**rules, "dimensions": FACTS.accuracy["vbench_dimensions"], "vbench": {}},
        targets=targets,
        reference_path=str(tmp_path / "reference" / "accuracy.json"),
        reference_outputs=str(tmp_path / "reference" / "outputs"),
        out_txt=str(tmp_path / "eval" / "accuracy.txt"),
        out_json=str(tmp_path / "eval" / "accuracy.json"),
        extras_dir=str(tmp_path / "eval" / "extras"),
    )
    assert record["metrics"]["vbench_score"] is None  # the round's score stays not computed
    assert record["verdict"]["passed"] and [c["metric"] for c in record["verdict"]["checks"]] == [
        "temporal_flickering",
        "video_ssim",
    ]
    videos = dict(read_accuracy_log(run / "mlperf_log_accuracy.json", "uint8"))
    for sample in (0, 2):
        same = videos[sample].tobytes() == (tmp_path / "reference" / "outputs" / f"{sample}.mp4").read_bytes()
        assert (record["open_accuracy"]["samples"][str(sample)]["video_ssim"] == 1.0) == same
        assert (tmp_path / "eval" / "extras" / UNQUANTIZED_VIDEOS / f"{sample}.mp4").is_file()
    text = (tmp_path / "eval" / "accuracy.txt").read_text()
    assert text.startswith("vbench_score: not computed here: ")
    declared = read_open_accuracy(text)
    assert declared.problems == [] and declared.metrics == metrics and set(declared.samples) == {0, 2}
    assert declared.targets["temporal_flickering"]["unquantized"] == reference["metrics"]["temporal_flickering"]
    assert declared.videos == dict.fromkeys(metrics, 4)


@pytest.mark.slow
@pytest.mark.exclusive  # TEST04 compares two runs' performance
@pytest.mark.parametrize("cache, passes", [(False, True), (True, False)])
def test_test04_passes_a_fair_pipeline_and_fails_a_caching_one(tiny_wan, tmp_path, cache, passes):
    conf = (
        "wan-2.2-t2v-a14b.SingleStream.min_query_count = 64\n"
        # Long enough that a cached sample, served at once, runs hundreds of queries: the
        # one it had to render then lies beyond the p90 estimate.
        "wan-2.2-t2v-a14b.SingleStream.min_duration = 5000\n"
        # 200 queries (min_duration / target_latency): a fair pipeline (~0.09 s a video since
        # the mp4s are encoded in-process) still covers min_duration on a machine twice as fast.
        "wan-2.2-t2v-a14b.SingleStream.target_latency = 25\n"
    )
    audit = audit_config_text(
        "TEST04", {**TEST04["audit_config"], **TEST04["audit_config_by_scenario"]["SingleStream"]}
    )
    # A fair pipeline's two runs differ only by the machine: this VM's speed moves by 20-30%
    # between two runs seconds apart (bench/README.md, test04_pairs.sh), which fails TEST04's
    # 1.2 now and then. So the fair pair may be run up to three times and must pass once; the
    # caching pipeline fails by construction (its audited run is INVALID), once is enough.
    speedups = []
    for attempt in range(3 if passes else 1):
        work = tmp_path / f"attempt-{attempt}"
        work.mkdir()
        performance = loadgen_run(
            tiny_wan, work, "performance", "SingleStream", "performance", conf, cache=cache, data="data64"
        )
        audited = loadgen_run(
            tiny_wan, work, "TEST04", "SingleStream", "performance", conf, audit, cache=cache, data="data64"
        )
        detail = read_detail(audited / "mlperf_log_detail.txt")
        assert detail["effective_performance_issue_same"] == 1
        out = work / "compliance" / "TEST04"
        verdict = verify_job(
            "TEST04",
            str(audited),
            "SingleStream",
            str(tiny_wan / "model"),
            TEST04,
            str(out),
            performance_run=str(performance),
        )
        speedups.append(json.loads((out / "verdict.json").read_text())["details"].get("speedup"))
        if verdict:
            break
    assert verdict is passes, speedups
    details = json.loads((out / "verdict.json").read_text())["details"]
    verdict_line = (out / TEST04["verify_file"]).read_text().splitlines()[-1]
    if passes:
        assert detail["result_validity"] == "VALID" and verdict_line == "TEST PASS"
        assert details["speedup"] < TEST04["max_speedup"]["SingleStream"]
    else:
        # The repeated sample comes from the cache in microseconds, so the queries LoadGen
        # generated for min_duration at the expected latency run out long before it: the
        # audited run is INVALID, and TEST04 fails as the official script fails it.
        assert detail["result_validity"] == "INVALID" and not detail["result_min_duration_met"]
        # (The script adds the speedup it measured when that breaks the limit too. The caching
        # pipeline's own performance run repeats samples as well: on a fast enough machine it
        # also ends before min_duration, and the verdict names the reference first.)
        assert verdict_line.startswith("TEST FAIL: ") and "Test results are INVALID" in verdict_line


def test_the_references_fixed_latent_is_loaded_and_checked(tmp_path):
    import torch

    from mlperf_repro.video.renderer import load_latent

    shape = (1, 16, 3, 4, 4)
    torch.save(torch.arange(768, dtype=torch.bfloat16).reshape(shape), tmp_path / "fixed_latent.pt")
    latent = load_latent(str(tmp_path / "fixed_latent.pt"), shape)
    assert latent.dtype == torch.float32 and latent.flatten()[5] == 5
    with pytest.raises(UserError, match=r"is \[1, 16, 3, 4, 4\]; these video settings need \[1, 16, 21, 90, 160\]"):
        load_latent(str(tmp_path / "fixed_latent.pt"), (1, 16, 21, 90, 160))
    with pytest.raises(UserError, match="copy the reference's data/fixed_latent.pt"):
        load_latent(str(tmp_path / "missing.pt"), shape)
    (tmp_path / "evil.pt").write_bytes(b"not a tensor file")
    with pytest.raises(UserError, match="cannot read the fixed latent"):
        load_latent(str(tmp_path / "evil.pt"), shape)


def test_a_real_dataset_gets_the_references_latent_file(demo_plan):
    config = demo_plan.config
    config = {**config, "datasets": {**config["datasets"]}}
    config["datasets"]["vbench-prompts-synthetic"] = {"source": "file:///data/wan", "file": "data/vbench_prompts.txt"}
    params = Plan(config).generation_params("tiny-wan-t2v")
    assert params["latent_file"].endswith("resources/datasets/vbench-prompts-synthetic/data/fixed_latent.pt")
    assert "latent_file" not in demo_plan.generation_params("tiny-wan-t2v")  # the stand-in draws its own
