"""VBench scoring (wan-2.2-t2v-a14b's vbench_score): the checkpoint table, the refusals, the
not-computed result and its accuracy.txt, the mode choice, and real VBench runs of the model-free
dimension temporal_flickering on tiny mp4 videos in VBench's own environment (.venv-vbench).

The checkpoints of MLPerf's six dimensions are not on this machine: their files are synthetic
here, and no test scores them. The real runs skip only when .venv-vbench is not built
(./install.sh --vbench).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mlperf_repro.accuracy import vbench
from mlperf_repro.accuracy.vbench import (
    CLIP_VIT_B32_SHA256,
    checkpoint_paths,
    choose_mode,
    evaluate_vbench,
    format_vbench_accuracy_txt,
    missing_checkpoints,
    run_vbench,
)
from mlperf_repro.benchmarks import load_round
from mlperf_repro.errors import UserError
from mlperf_repro.hashing import sha256_bytes

WAN = load_round("v6.0").benchmark("wan-2.2-t2v-a14b")
#: The round's six (rules table accuracy.vbench_dimensions).
MLPERF_DIMENSIONS = tuple(WAN.accuracy["vbench_dimensions"])
HAS_ENV = vbench.vbench_python(None) is not None
needs_env = pytest.mark.skipif(not HAS_ENV, reason=".venv-vbench is not built: build it with ./install.sh --vbench")


def roots(tmp_path: Path) -> dict[str, str]:
    return {name: str(tmp_path / name) for name in ("cache_dir", "torch_home", "hf_home")}


BERT_COMMIT = "86b5e0934494bd15c9632b12f734a8a67f723594"


def write_all_checkpoints(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """Synthetic files at every path the six dimensions read; the published CLIP hash is made
    the synthetic file's (the real file is not here)."""
    setup = roots(tmp_path)
    bert = tmp_path / "hf_home" / "hub" / "models--bert-base-uncased"
    (bert / "refs").mkdir(parents=True)
    (bert / "refs" / "main").write_text(BERT_COMMIT)
    for dimension in MLPERF_DIMENSIONS:
        for path in checkpoint_paths(dimension, **setup):
            if not path.exists():  # bert's refs/main, written above, names the snapshot
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(f"synthetic {path.name}".encode())
    clip = Path(setup["cache_dir"]) / "clip_model" / "ViT-B-32.pt"
    monkeypatch.setitem(vbench.PUBLISHED_SHA256, "clip_model/ViT-B-32.pt", sha256_bytes(clip.read_bytes()))
    return setup


def test_checkpoint_table(tmp_path):
    setup = roots(tmp_path)
    cache, torch_home, hf_home = (Path(setup[k]) for k in ("cache_dir", "torch_home", "hf_home"))
    assert checkpoint_paths("temporal_flickering", **setup) == []
    assert checkpoint_paths("dynamic_degree", **setup) == [cache / "raft_model/models/raft-things.pth"]
    assert checkpoint_paths("motion_smoothness", **setup) == [cache / "amt_model/amt-s.pth"]
    assert checkpoint_paths("appearance_style", **setup) == [cache / "clip_model/ViT-B-32.pt"]
    assert checkpoint_paths("background_consistency", **setup) == [cache / "clip_model/ViT-B-32.pt"]
    dino = checkpoint_paths("subject_consistency", **setup)
    assert cache / "dino_model/dino_vitbase16_pretrain.pth" in dino
    assert cache / "dino_model/facebookresearch_dino_main/hubconf.py" in dino
    assert torch_home / "hub/checkpoints/dino_vitbase16_pretrain.pth" in dino  # what hubconf really loads
    # scene: Tag2Text, and bert-base-uncased from the Hugging Face cache (its snapshot via refs/main)
    refs = hf_home / "hub/models--bert-base-uncased/refs/main"
    assert checkpoint_paths("scene", **setup) == [cache / "caption_model/tag2text_swin_14m.pth", refs]
    refs.parent.mkdir(parents=True)
    refs.write_text(BERT_COMMIT + "\n")
    snapshot = hf_home / "hub/models--bert-base-uncased/snapshots" / BERT_COMMIT
    assert checkpoint_paths("scene", **setup)[2:] == [
        snapshot / n for n in ("config.json", "vocab.txt", "model.safetensors")
    ]
    snapshot.mkdir(parents=True)
    (snapshot / "pytorch_model.bin").write_bytes(b"x")  # the older weights file serves as well
    assert checkpoint_paths("scene", **setup)[-1] == snapshot / "pytorch_model.bin"
    with pytest.raises(UserError, match="'imaging_quality' is not one this workflow can check offline"):
        checkpoint_paths("imaging_quality", **setup)


@pytest.mark.parametrize("dimension", MLPERF_DIMENSIONS)
def test_each_missing_file_is_named_with_its_dimension(tmp_path, monkeypatch, dimension):
    setup = write_all_checkpoints(tmp_path, monkeypatch)
    assert missing_checkpoints(MLPERF_DIMENSIONS, setup) == []
    for path in checkpoint_paths(dimension, **setup):
        saved = path.read_bytes()
        path.unlink()
        missing = missing_checkpoints(MLPERF_DIMENSIONS, setup)
        assert len(missing) == 1 and missing[0].startswith(f"{path} (") and dimension in missing[0], missing
        assert missing_checkpoints(["temporal_flickering"], setup) == []  # needs no file
        path.write_bytes(saved)


def test_clip_published_sha256_is_checked(tmp_path):
    setup = roots(tmp_path)
    clip = Path(setup["cache_dir"]) / "clip_model" / "ViT-B-32.pt"
    clip.parent.mkdir(parents=True)
    clip.write_bytes(b"not the CLIP checkpoint")
    missing = missing_checkpoints(["appearance_style", "background_consistency"], setup)
    assert len(missing) == 1  # one file, shared by the two dimensions, named once
    assert "(appearance_style, background_consistency)" in missing[0]
    assert f"expected {CLIP_VIT_B32_SHA256}" in missing[0] and sha256_bytes(clip.read_bytes()) in missing[0]


def test_configured_sha256_is_checked(tmp_path, monkeypatch):
    setup = write_all_checkpoints(tmp_path, monkeypatch)
    raft = Path(setup["cache_dir"]) / "raft_model/models/raft-things.pth"
    good = sha256_bytes(raft.read_bytes())
    assert (
        missing_checkpoints(["dynamic_degree"], {**setup, "sha256": {"raft_model/models/raft-things.pth": good}}) == []
    )
    wrong = {**setup, "sha256": {"raft_model/models/raft-things.pth": "0" * 64}}
    (problem,) = missing_checkpoints(["dynamic_degree"], wrong)
    assert f"sha256 {good}, expected {'0' * 64}" in problem
    # keys relative to torch_home / hf_home, and absolute paths, are checked too
    dino = "hub/checkpoints/dino_vitbase16_pretrain.pth"
    assert missing_checkpoints(["subject_consistency"], {**setup, "sha256": {dino: "1" * 64}})
    vocab = f"hub/models--bert-base-uncased/snapshots/{BERT_COMMIT}/vocab.txt"
    assert missing_checkpoints(["scene"], {**setup, "sha256": {vocab: "2" * 64}})
    assert missing_checkpoints(["dynamic_degree"], {**setup, "sha256": {str(raft): "3" * 64}})
    with pytest.raises(UserError, match="sha256 names 'raft-things.pth', which is no checkpoint VBench reads"):
        missing_checkpoints(["dynamic_degree"], {**setup, "sha256": {"raft-things.pth": good}})
    with pytest.raises(UserError, match="is not a 64-digit hex sha256"):
        missing_checkpoints(["dynamic_degree"], {**setup, "sha256": {"raft_model/models/raft-things.pth": "abc"}})
    with pytest.raises(UserError, match=r"unknown key\(s\) \['cache'\]"):
        missing_checkpoints(["dynamic_degree"], {"cache": "x"})


def test_mode_choice():
    known = {"alley", "a toilet, frozen in time"}
    assert choose_mode(["alley", "a toilet, frozen in time"], known) == "standard"
    assert choose_mode(["alley", "a cat on the moon"], known) == "custom_input"
    # VBench reads the prompt back from the file name, where '/' cannot stay
    assert choose_mode(["alley / street"], known | {"alley / street"}) == "custom_input"


def video_bytes(frames: list[np.ndarray], tmp_path: Path, name: str) -> np.ndarray:
    """One mp4 file's bytes as the LoadGen accuracy log holds them (a uint8 array)."""
    import imageio.v2 as imageio

    path = tmp_path / f"{name}.mp4"
    writer = imageio.get_writer(path, fps=8, codec="libx264", quality=8, macro_block_size=16, pixelformat="yuv420p")
    for frame in frames:
        writer.append_data(frame)
    writer.close()
    return np.frombuffer(path.read_bytes(), dtype=np.uint8)


@pytest.fixture(scope="module")
def tiny_videos(tmp_path_factory) -> list[np.ndarray]:
    """Three 64x64 clips: constant gray (no flicker), a moving box, random noise (strong flicker)."""
    tmp = tmp_path_factory.mktemp("mp4")
    rng = np.random.default_rng(0)
    moving = []
    for t in range(17):
        frame = np.zeros((64, 64, 3), np.uint8)
        frame[20:40, 4 + 2 * t : 20 + 2 * t] = 255
        moving.append(frame)
    return [
        video_bytes([np.full((64, 64, 3), 128, np.uint8)] * 9, tmp, "gray"),
        video_bytes(moving, tmp, "moving"),
        video_bytes([rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(9)], tmp, "noise"),
    ]


def rules(tmp_path: Path, **setup) -> dict:
    return {**WAN.accuracy, "dimensions": list(MLPERF_DIMENSIONS), "vbench": {**roots(tmp_path), **setup}}


def test_not_computed_without_the_environment(tmp_path):
    entries = [(0, np.frombuffer(b"mp4 bytes", np.uint8)), (2, np.frombuffer(b"more", np.uint8))]
    result = evaluate_vbench(entries, ["a", "b", "c"], rules(tmp_path, python=str(tmp_path / "none/bin/python")))
    assert result["vbench_score"] is None and result["submittable"] is False and result["videos"] == 2
    assert "./install.sh --vbench" in result["not_computed"]
    assert "raft-things.pth (dynamic_degree)" in result["not_computed"]  # and the missing checkpoints
    assert "./install.sh --vbench" in result["diagnostic"]["skipped"]
    text = format_vbench_accuracy_txt(result)
    assert text.startswith("vbench_score: not computed here: VBench's environment is not built")
    assert WAN.accuracy_readings(text) == {}  # the official checker's pattern reads no score


def test_computed_accuracy_txt_is_read_by_the_checker_regex():
    scores = dict(zip(MLPERF_DIMENSIONS, [0.95, 0.40, 0.98, 0.22, 0.35, 0.95]))
    result = {
        "vbench_score": round(100 * sum(scores.values()) / 6, 4),
        "submittable": True,
        "videos": 248,
        "mode": "standard",
        "vbench": "0.1.5",
        "dimensions": scores,
        "videos_scored": dict.fromkeys(MLPERF_DIMENSIONS, 72),
    }
    text = format_vbench_accuracy_txt(result)
    assert text.splitlines()[0] == "{'vbench_score': 64.1667}"
    assert WAN.accuracy_readings(text) == {"vbench_score": [64.1667]}
    assert "  scene                   : 0.350000 (72 videos)" in text


def test_a_dimension_list_is_required(tmp_path):
    with pytest.raises(UserError, match="accuracy.vbench_dimensions is missing"):
        evaluate_vbench([(0, np.zeros(1, np.uint8))], ["a"], {"vbench": {}})
    with pytest.raises(UserError, match="'aesthetic_quality' is not one"):
        evaluate_vbench([(0, np.zeros(1, np.uint8))], ["a"], {"dimensions": ["aesthetic_quality"]})


def test_run_vbench_refuses_before_starting(tmp_path):
    with pytest.raises(UserError, match=r"not built .*\./install\.sh --vbench"):
        run_vbench(tmp_path, ["temporal_flickering"], {"python": str(tmp_path / "python")})
    if HAS_ENV:
        with pytest.raises(
            UserError, match=r"(?s)cannot score dynamic_degree here: .*raft-things\.pth \(dynamic_degree\)"
        ):
            run_vbench(tmp_path, ["dynamic_degree"], roots(tmp_path))
        with pytest.raises(UserError, match="custom_input mode cannot score scene"):
            run_vbench(tmp_path, ["scene"], roots(tmp_path), mode="custom_input")


@pytest.mark.slow
@needs_env
def test_temporal_flickering_for_real(tmp_path, tiny_videos):
    """VBench itself, in .venv-vbench, through run_vbench: about 4 s, nearly all `import vbench`."""
    prompts = ["a static gray square", "a white box moving right", "random noise"]
    from mlperf_repro.accuracy.videos import vbench_folder

    folder = vbench_folder(list(enumerate(tiny_videos)), prompts, tmp_path / "videos")
    result = run_vbench(folder, ["temporal_flickering"], roots(tmp_path), mode="custom_input", work_dir=tmp_path / "w")
    assert result["videos"] == {"temporal_flickering": 3}
    per_video = json.loads(Path(result["runner"]["results_file"]).read_text())["temporal_flickering"][1]
    scores = {Path(v["video_path"]).name: v["video_results"] for v in per_video}
    assert scores["a static gray square-0.mp4"] == 1.0  # no change between frames
    assert scores["random noise-0.mp4"] < 0.8 < scores["a white box moving right-0.mp4"] < 1.0
    assert result["temporal_flickering"] == pytest.approx(sum(scores.values()) / 3)  # VBench's mean over videos
    assert result["runner"]["vbench"] == "0.1.5" and result["runner"]["mode"] == "custom_input"
    assert not (tmp_path / "cache_dir").exists() or not any((tmp_path / "cache_dir").iterdir())  # nothing fetched


@pytest.mark.slow
@needs_env
def test_not_computed_result_carries_a_real_diagnostic(tmp_path, tiny_videos):
    """Prompts outside VBench_full_info.json: custom_input, which refuses scene and
    appearance_style, and the checkpoints are missing: no score, temporal_flickering scored."""
    prompts = ["a static gray square", "a white box moving right", "random noise"]
    entries = [(i, v) for i, v in enumerate(tiny_videos)]
    result = evaluate_vbench(entries, prompts, rules(tmp_path))
    assert result["vbench_score"] is None and result["submittable"] is False
    assert result["mode"] == "custom_input" and result["not_computable"] == ["appearance_style", "scene"]
    assert "cannot score appearance_style, scene" in result["not_computed"]
    assert "amt-s.pth (motion_smoothness)" in result["not_computed"]
    diagnostic = result["diagnostic"]
    assert diagnostic["part_of_vbench_score"] is False and diagnostic["videos_scored"] == 3
    assert 0.8 < diagnostic["score"] < 1.0
    text = format_vbench_accuracy_txt(result)
    assert WAN.accuracy_readings(text) == {}
    assert f"temporal_flickering = {diagnostic['score']:.6f} over 3 videos" in text.splitlines()[2]


@pytest.mark.slow
@needs_env
def test_standard_mode_with_vbench_prompts(tmp_path, tiny_videos):
    """Prompts of VBench_full_info.json: standard mode, as MLPerf runs it. With temporal_flickering
    as the only dimension the score is computed for real (not MLPerf's six: not submittable)."""
    full_info = json.loads(Path(vbench.vbench_info()["full_info"]).read_text())
    prompts = [e["prompt_en"] for e in full_info if "temporal_flickering" in e["dimension"]][:3]
    result = evaluate_vbench(
        list(enumerate(tiny_videos)), prompts, {**rules(tmp_path), "dimensions": ["temporal_flickering"]}
    )
    assert result["mode"] == "standard" and result["videos_scored"] == {"temporal_flickering": 3}
    assert result["vbench_score"] == round(100 * result["dimensions"]["temporal_flickering"], 4)
    assert result["submittable"] is False  # only MLPerf's six are
    assert WAN.accuracy_readings(format_vbench_accuracy_txt(result)) == {"vbench_score": [result["vbench_score"]]}


@pytest.mark.slow
@needs_env
def test_the_runner_itself_refuses_downloads(tmp_path, tiny_videos):
    """Without the caller's file check, VBench would wget CLIP: the runner's guard refuses the
    command (no network attempt), and a required file that is absent stops it before vbench loads."""
    from mlperf_repro.accuracy.videos import vbench_folder

    folder = vbench_folder([(0, tiny_videos[0])], ["gray"], tmp_path / "videos")
    args = {
        "videos_path": str(folder),
        "dimensions": ["background_consistency"],
        "mode": "custom_input",
        **roots(tmp_path),
        "output_dir": str(tmp_path / "out"),
    }
    python = str(vbench.vbench_python(None))
    for extra, expected in [
        ({"required_files": [str(tmp_path / "absent.pt")]}, "checkpoint file(s) missing"),
        ({}, "VBench tried to run wget https://openaipublic.azureedge.net/clip/models/"),
    ]:
        (tmp_path / "args.json").write_text(json.dumps({**args, **extra}))
        done = subprocess.run([python, str(vbench.RUNNER), str(tmp_path / "args.json")], capture_output=True, text=True)
        assert done.returncode == 3, done.stderr[-2000:]
        assert expected in done.stderr


@pytest.mark.slow
@needs_env
def test_the_six_dimensions_import_in_the_environment():
    """envs/vbench.txt carries what MLPerf's six dimensions import (their checkpoints are not here)."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('shim', {str(vbench.RUNNER.with_name('vbench_torchvision_shim.py'))!r})\n"
        "shim = importlib.util.module_from_spec(spec); spec.loader.exec_module(shim); shim.install()\n"
        f"for d in {list(MLPERF_DIMENSIONS)!r}: importlib.import_module('vbench.' + d)\n"
        "print('imported')\n"
    )
    done = subprocess.run([str(vbench.vbench_python(None)), "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr[-3000:]


@pytest.mark.slow
@needs_env
def test_unreadable_videos_give_no_score(tmp_path):
    """VBench drops a video it cannot decode; with none left its aggregate is NaN (a bare NaN in
    its json): null here, and no vbench_score."""
    full_info = json.loads(Path(vbench.vbench_info()["full_info"]).read_text())
    prompts = [e["prompt_en"] for e in full_info if "temporal_flickering" in e["dimension"]][:2]
    entries = [(0, np.frombuffer(b"not an mp4", np.uint8)), (1, np.frombuffer(b"nor this", np.uint8))]
    result = evaluate_vbench(entries, prompts, {"dimensions": ["temporal_flickering"], "vbench": roots(tmp_path)})
    assert result["vbench_score"] is None and result["dimensions"] == {"temporal_flickering": None}
    assert result["not_computed"].startswith("VBench scored no video in temporal_flickering")
    assert WAN.accuracy_readings(format_vbench_accuracy_txt(result)) == {}
