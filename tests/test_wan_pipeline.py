"""The text-to-video foundation: the tiny Wan 2.2 stand-in (``demo.wan_model``) builds and loads
back as a Diffusers ``WanPipeline``; ``video`` generates from a fixed latent, writes
byte-identical H.264 mp4s and refuses settings the pipeline would silently round."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlperf_repro.benchmarks import load_round
from mlperf_repro.errors import UserError
from mlperf_repro.video import VideoSettings, fixed_latent, read_mp4, write_mp4
from mlperf_repro.video.mp4 import mp4_info
from mlperf_repro.video.renderer import split_generation

#: 9 frames of 64x64 in 3 steps: under a second a video on 2 cores.
SETTINGS = VideoSettings(
    height=64,
    width=64,
    num_frames=9,
    num_inference_steps=3,
    guidance_scale=4.0,
    guidance_scale_2=3.0,
    boundary_ratio=0.875,
    negative_prompt="blurry, static",
    seed=42,
    fps=16,
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread for the module (2 threads on a busy 2-core machine: ~15x slower),
    restored afterwards (building and these tests set it process-wide)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_wan(tmp_path_factory):
    from mlperf_repro.demo.wan_model import build_tiny_wan

    out = tmp_path_factory.mktemp("wan") / "wan-tiny"
    return out, build_tiny_wan(out)


@pytest.fixture(scope="module")
def pipe(tiny_wan):
    from mlperf_repro.video import load_pipeline

    return load_pipeline(tiny_wan[0])


def prompts():
    from mlperf_repro.demo.wan_model import SENTENCES

    return list(SENTENCES[:3])


def test_the_tiny_pipeline_builds_deterministically_and_loads_back(tiny_wan, pipe, tmp_path):
    from mlperf_repro.demo.wan_model import build_tiny_wan

    folder, report = tiny_wan
    index = json.loads((folder / "model_index.json").read_text())
    assert index["_class_name"] == "WanPipeline" and index["boundary_ratio"] == 0.875
    assert index["transformer"] == index["transformer_2"] == ["diffusers", "WanTransformer3DModel"]
    assert set(report["parameters"]) == {"text_encoder", "transformer", "transformer_2", "vae"}
    assert report["parameters"]["transformer"] == report["parameters"]["transformer_2"]
    assert 0 < report["parameters_total"] < 2_000_000
    assert build_tiny_wan(tmp_path / "again")["digest"] == report["digest"]

    assert type(pipe).__name__ == "WanPipeline" and pipe.transformer_2 is not None
    assert pipe.config.boundary_ratio == 0.875
    assert (pipe.vae.config.z_dim, pipe.vae_scale_factor_temporal, pipe.vae_scale_factor_spatial) == (16, 4, 8)
    scheduler = pipe.scheduler.config
    assert type(pipe.scheduler).__name__ == "UniPCMultistepScheduler"
    assert (scheduler.prediction_type, scheduler.use_flow_sigmas, scheduler.flow_shift) == (
        "flow_prediction",
        True,
        3.0,
    )
    ids = pipe.tokenizer("a cat on the beach").input_ids
    assert ids[-1] == pipe.tokenizer.eos_token_id == 1 and pipe.tokenizer.unk_token_id not in ids


# The round's settings, as the run stage reads them from the rules table.
ROUND_SETTINGS, ROUND_LOAD = split_generation(load_round("v6.0").benchmark("wan-2.2-t2v-a14b").facts["generation"])


def test_the_rules_table_holds_the_references_settings():
    assert ROUND_LOAD == {"dtype": "bfloat16", "vae_dtype": "float32"}
    assert (ROUND_SETTINGS.height, ROUND_SETTINGS.width, ROUND_SETTINGS.num_frames, ROUND_SETTINGS.fps) == (
        720,
        1280,
        81,
        16,
    )
    assert (ROUND_SETTINGS.num_inference_steps, ROUND_SETTINGS.seed, ROUND_SETTINGS.boundary_ratio) == (20, 42, 0.875)
    assert (ROUND_SETTINGS.guidance_scale, ROUND_SETTINGS.guidance_scale_2) == (4.0, 3.0)
    assert (
        ROUND_SETTINGS.negative_prompt.startswith("vivid colors, overexposed")
        and "\n" in ROUND_SETTINGS.negative_prompt
    )


def test_the_fixed_latent_is_seeded_and_shaped_like_the_references():
    latent = fixed_latent(SETTINGS)
    assert tuple(latent.shape) == (1, 16, 3, 8, 8) == SETTINGS.latent_shape()
    assert str(latent.dtype) == "torch.float32" and latent.device.type == "cpu"
    assert latent.equal(fixed_latent(SETTINGS, 42)) and not latent.equal(fixed_latent(SETTINGS, 43))
    assert ROUND_SETTINGS.latent_shape() == (1, 16, 21, 90, 160)


def test_the_same_prompt_and_seed_give_byte_identical_mp4s(pipe, tmp_path):
    from mlperf_repro.video import generate_video

    prompt = prompts()[0]
    first = generate_video(pipe, prompt, settings=SETTINGS)
    second = generate_video(pipe, prompt, settings=SETTINGS)
    assert first.dtype == np.uint8 and first.shape == (9, 64, 64, 3)
    assert np.array_equal(first, second)
    a = write_mp4(first, tmp_path / "a.mp4", SETTINGS.fps).read_bytes()
    b = write_mp4(second, tmp_path / "sub" / "b.mp4", SETTINGS.fps).read_bytes()
    assert a == b
    assert b"Lavf" not in a  # +bitexact: no ffmpeg version in the container
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["a.mp4", "b.mp4"]  # no temporaries left


def test_different_prompts_give_different_videos(pipe, tmp_path):
    from mlperf_repro.video import generate_video

    one, two = (generate_video(pipe, p, settings=SETTINGS) for p in prompts()[:2])
    assert not np.array_equal(one, two)
    assert write_mp4(one, tmp_path / "1.mp4", 16).read_bytes() != write_mp4(two, tmp_path / "2.mp4", 16).read_bytes()


def test_the_mp4_decodes_to_the_frame_count_and_size(pipe, tmp_path):
    from mlperf_repro.video import generate_video

    frames = generate_video(pipe, prompts()[0], settings=SETTINGS)
    path = write_mp4(frames, tmp_path / "v.mp4", SETTINGS.fps)
    back = read_mp4(path)
    assert back.shape == frames.shape and back.dtype == np.uint8
    info = mp4_info(path)
    assert info["codec"] == "h264" and info["pix_fmt"].startswith("yuv420p")
    assert tuple(info["size"]) == (64, 64) and info["fps"] == 16.0
    # Lossy (CRF 25, 4:2:0 chroma), but a smooth frame survives closely.
    smooth = np.broadcast_to(np.linspace(0, 255, 64, dtype=np.uint8)[None, None, :, None], (9, 64, 64, 3)).copy()
    assert np.abs(read_mp4(write_mp4(smooth, tmp_path / "s.mp4", 16)).astype(int) - smooth).mean() < 2


def test_batched_videos_match_single_ones_within_one_level(pipe):
    """Offline batching gives each prompt the same latent as alone, but CPU kernels block by
    batch size: on this machine (torch 2.13 CPU, 1 or 2 threads) the transformer's and the
    VAE's outputs move by ~2e-6, and 1-10 of a video's 110,592 values by one uint8 level.
    Not bit-identical."""
    from mlperf_repro.video import generate_video, generate_videos

    batch = generate_videos(pipe, prompts(), settings=SETTINGS)
    singles = [generate_video(pipe, p, settings=SETTINGS) for p in prompts()]
    assert len(batch) == 3 and all(v.shape == (9, 64, 64, 3) for v in batch)
    assert max(int(np.abs(b.astype(int) - s).max()) for b, s in zip(batch, singles)) <= 1
    assert all(np.count_nonzero(b != s) < 0.001 * b.size for b, s in zip(batch, singles))


def test_a_latent_of_the_wrong_shape_is_refused(pipe):
    from mlperf_repro.video import generate_video

    wrong = fixed_latent(VideoSettings(height=64, width=64, num_frames=13, num_inference_steps=1))
    with pytest.raises(UserError, match=r"\[1, 16, 3, 8, 8\]"):
        generate_video(pipe, "x", settings=SETTINGS, latent=wrong)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_frames": 10}, r"num_frames=10 must be 4k\+1.*use 9 or 13"),
        ({"num_frames": 0}, "num_frames=0 must be at least 1"),
        ({"height": 72}, "height=72 must be a multiple of 16"),
        ({"width": 64.0}, "width=64.0 must be an integer"),
        ({"num_inference_steps": True}, "num_inference_steps=True must be an integer"),
        ({"boundary_ratio": 1.0}, "boundary_ratio=1.0 must lie strictly between 0 and 1"),
        ({"boundary_ratio": None}, "guidance_scale_2 needs boundary_ratio"),
        ({"guidance_scale": float("nan")}, "guidance_scale=nan must be a finite number"),
        ({"seed": -1}, "seed=-1 must be at least 0"),
    ],
)
def test_bad_settings_are_user_errors_naming_the_key(change, message):
    values = {f: getattr(SETTINGS, f) for f in SETTINGS.__dataclass_fields__} | change
    with pytest.raises(UserError, match=message):
        VideoSettings(**values)


def test_settings_read_the_reference_config_keys():
    reference = {
        "height": 720,
        "width": 1280,
        "num_frames": 81,
        "fps": 16,
        "sample_steps": 20,
        "seed": 42,
        "guidance_scale": 4.0,
        "guidance_scale_2": 3.0,
        "boundary_ratio": 0.875,
        "negative_prompt": ROUND_SETTINGS.negative_prompt + "\n",
    }
    assert VideoSettings.from_mapping(reference) == ROUND_SETTINGS
    with pytest.raises(UserError, match="unknown key 'steps'"):
        VideoSettings.from_mapping(reference | {"steps": 4}, where="benchmarks.wan")
    with pytest.raises(UserError, match="missing num_frames"):
        VideoSettings.from_mapping({k: v for k, v in reference.items() if k != "num_frames"})


def test_write_mp4_refuses_frames_it_would_have_to_convert(tmp_path):
    with pytest.raises(ValueError, match="uint8 frames"):
        write_mp4(np.zeros((9, 64, 64, 3), np.float32), tmp_path / "f.mp4", 16)
    with pytest.raises(ValueError, match="multiples of 16"):
        write_mp4(np.zeros((9, 60, 64, 3), np.uint8), tmp_path / "f.mp4", 16)
    assert not list(tmp_path.iterdir())


def backend_for(tiny_wan, on_complete, batch_size):
    from dataclasses import asdict

    from mlperf_repro.backends.diffusers_video import DiffusersVideoBackend

    backend = DiffusersVideoBackend(
        model_path=str(tiny_wan[0]),
        generation=asdict(SETTINGS),
        engine_args={"batch_size": batch_size, "threads": 1},
        on_complete=on_complete,
    )
    backend.start()
    return backend


def serve(backend, requests, *, loadgen_finishes: bool):
    """The harness's loop: LoadGen's thread queues the requests; ``done`` is set once LoadGen
    has every answer (here at once, or never: a run whose answers never all arrive)."""
    import threading

    done = threading.Event()
    backend.submit(requests)
    if loadgen_finishes:
        done.set()
    try:
        backend.serve_until(done)
    finally:
        backend.stop()


def test_the_backend_answers_each_request_once_with_its_batchs_mp4(tiny_wan, pipe, tmp_path):
    """Encoding runs on a thread of its own beside the next batch's rendering: every request
    is answered once, in order, with the mp4 of its video as rendered in its batch."""
    from mlperf_repro.harness.video_sut import VideoRequest
    from mlperf_repro.video import generate_videos

    answers = []
    backend = backend_for(tiny_wan, lambda rid, video: answers.append((rid, video)), batch_size=2)
    texts = prompts()
    serve(backend, [VideoRequest(100 + i, i, p) for i, p in enumerate(texts)], loadgen_finishes=True)
    assert [rid for rid, _ in answers] == [100, 101, 102]
    expected = generate_videos(pipe, texts[:2], settings=SETTINGS) + generate_videos(pipe, texts[2:], settings=SETTINGS)
    for i, ((_, video), frames) in enumerate(zip(answers, expected)):
        assert video == write_mp4(frames, tmp_path / f"{i}.mp4", SETTINGS.fps).read_bytes()
    assert backend.stats["videos"] == 3 and backend.stats["batches"] == 2


def test_a_failed_answer_stops_the_backend_with_the_reason(tiny_wan):
    from mlperf_repro.harness.video_sut import VideoRequest

    def refuse(rid, video):
        raise OSError("disk full")

    backend = backend_for(tiny_wan, refuse, batch_size=1)
    # LoadGen would wait forever for the unanswered sample: serve_until stops and says why.
    with pytest.raises(RuntimeError, match="answering a video failed: disk full"):
        serve(backend, [VideoRequest(1, 0, prompts()[0])], loadgen_finishes=False)


def test_the_negative_prompt_is_encoded_once_as_the_pipeline_encodes_it(pipe):
    import torch

    from mlperf_repro.video.generate import MAX_SEQUENCE_LENGTH, negative_prompt_embeds

    calls = []
    encode = pipe.text_encoder.forward
    pipe.text_encoder.forward = lambda *a, **k: calls.append(1) or encode(*a, **k)
    try:
        first = negative_prompt_embeds(pipe, "blurry, static, a test's own words", 3)
        again = negative_prompt_embeds(pipe, "blurry, static, a test's own words", 1)
    finally:
        del pipe.text_encoder.forward
    assert len(calls) == 1 and first.shape[0] == 3 and torch.equal(first[2:], again)
    _, own = pipe.encode_prompt(
        prompt=["a fox"] * 3,
        negative_prompt="blurry, static, a test's own words",
        max_sequence_length=MAX_SEQUENCE_LENGTH,
        device=pipe._execution_device,
    )
    assert torch.equal(first, own)
