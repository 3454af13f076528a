"""Videos from a diffusers ``WanPipeline`` the way the MLPerf reference makes them: one fixed
initial latent for every prompt, so a video depends on its prompt and the settings only.

The reference loads the VAE in float32 and the rest in bfloat16, passes ``latents=`` (its
``fixed_latent.pt``) and a seeded generator, and writes ``frames * 255`` truncated to uint8
(diffusers' ``export_to_video``); :func:`generate_videos` does the same for a batch of
prompts (Offline), each with the same latent.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from .settings import LATENT_CHANNELS, VideoSettings

if TYPE_CHECKING:
    import numpy as np
    import torch

DTYPES = ("float32", "bfloat16", "float16")
#: The text encoder's sequence length: WanPipeline's default, which the reference keeps.
MAX_SEQUENCE_LENGTH = 512
#: pipeline -> {(negative prompt, its text encoder's id): the embedding [1, MAX_SEQUENCE_LENGTH, dim]}.
_NEGATIVE_EMBEDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _dtype(name: str):
    import torch

    if name not in DTYPES:
        raise UserError(f"dtype {name!r} is not one of {', '.join(DTYPES)}")
    return getattr(torch, name)


def load_pipeline(
    model_dir: str | Path,
    *,
    dtype: str = "float32",
    vae_dtype: str = "float32",
    boundary_ratio: float | None = None,
    device: str = "cpu",
):
    """A ``WanPipeline`` from a Diffusers folder: the VAE in ``vae_dtype`` (the reference:
    float32), the transformers and text encoder in ``dtype`` (the reference: bfloat16),
    ``boundary_ratio`` overriding the folder's when given, the progress bar off."""
    from diffusers import AutoencoderKLWan, WanPipeline
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    _cache_torch_version_checks()
    # Their loading progress bars would fill the job logs.
    diffusers_logging.disable_progress_bar()
    transformers_logging.disable_progress_bar()

    model_dir = Path(model_dir)
    if not (model_dir / "model_index.json").is_file():
        raise UserError(f"{model_dir} is not a Diffusers pipeline folder (no model_index.json)")
    vae = AutoencoderKLWan.from_pretrained(model_dir, subfolder="vae", torch_dtype=_dtype(vae_dtype))
    extra = {} if boundary_ratio is None else {"boundary_ratio": boundary_ratio}
    pipe = WanPipeline.from_pretrained(model_dir, vae=vae, torch_dtype=_dtype(dtype), **extra)
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


def _cache_torch_version_checks() -> None:
    """diffusers (0.35) asks whether torch is older than 2.0 for every submodule at every
    denoising step (``unwrap_module`` in its hooks' ``cache_context``), parsing both version
    strings each time: a quarter of a small video's time on the CPU. The answer cannot change
    within a process, so its check is memoised; nothing else about the pipeline changes."""
    from diffusers.utils import torch_utils

    check = torch_utils.is_torch_version
    if not hasattr(check, "cache_info"):
        torch_utils.is_torch_version = functools.lru_cache(maxsize=None)(check)


def negative_prompt_embeds(pipe, negative_prompt: str, batch: int):
    """The negative prompt's text embedding for a batch of ``batch`` videos: encoded once per
    pipeline and reused (it is the same for every video; the text encoder is a third of a
    small video's time), as the pipeline would encode it itself."""
    cache = _NEGATIVE_EMBEDS.setdefault(pipe, {})
    key = (negative_prompt, id(pipe.text_encoder))  # a pipeline given another encoder encodes again
    if key not in cache:
        embeds, _ = pipe.encode_prompt(
            prompt=[negative_prompt],
            do_classifier_free_guidance=False,
            max_sequence_length=MAX_SEQUENCE_LENGTH,
            device=pipe._execution_device,
        )
        cache[key] = embeds
    return cache[key].repeat(batch, 1, 1)


def fixed_latent(settings: VideoSettings, seed: int | None = None, *, channels: int = LATENT_CHANNELS) -> torch.Tensor:
    """The initial latent, float32 ``[1, channels, (frames-1)//4+1, height//8, width//8]``,
    drawn on the CPU from ``torch.Generator().manual_seed(seed)`` (default: the settings'
    seed), so it is the same tensor on every machine and every accelerator."""
    import torch

    seed = settings.seed if seed is None else seed
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(settings.latent_shape(1, channels), generator=generator, dtype=torch.float32)


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """Float frames in [0, 1] as uint8, truncated as diffusers' ``export_to_video`` does."""
    import numpy as np

    return (frames * 255).astype(np.uint8)


def generate_videos(
    pipe, prompts: Sequence[str], *, settings: VideoSettings, latent: torch.Tensor | None = None
) -> list[np.ndarray]:
    """One video per prompt, in one pipeline call (a batch): uint8 ``[frames, H, W, 3]`` each.

    Every prompt starts from the same ``latent`` (default :func:`fixed_latent`), repeated along
    the batch; the pipeline's ``boundary_ratio`` is set to the settings' before the call.
    """
    import torch

    prompts = list(prompts)
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise UserError("generate_videos needs a non-empty list of prompt strings")
    transformer = pipe.transformer if pipe.transformer is not None else pipe.transformer_2
    channels = transformer.config.in_channels
    if latent is None:
        latent = fixed_latent(settings, channels=channels)
    expected = settings.latent_shape(1, channels)
    if tuple(latent.shape) != expected:
        raise UserError(f"initial latent has shape {list(latent.shape)}; these settings need {list(expected)}")
    if settings.boundary_ratio is not None and pipe.transformer_2 is None:
        raise UserError("video setting boundary_ratio needs a pipeline with transformer_2 (Wan 2.2's low-noise expert)")
    if pipe.config.boundary_ratio != settings.boundary_ratio:
        pipe.register_to_config(boundary_ratio=settings.boundary_ratio)
    output = pipe(
        prompt=prompts,
        negative_prompt_embeds=negative_prompt_embeds(pipe, settings.negative_prompt, len(prompts)),
        max_sequence_length=MAX_SEQUENCE_LENGTH,
        height=settings.height,
        width=settings.width,
        num_frames=settings.num_frames,
        num_inference_steps=settings.num_inference_steps,
        guidance_scale=settings.guidance_scale,
        guidance_scale_2=settings.guidance_scale_2,
        # Unused where latents are given (the reference passes both).
        generator=torch.Generator(device="cpu").manual_seed(settings.seed),
        latents=latent.repeat(len(prompts), 1, 1, 1, 1),
        output_type="np",
    )
    return [to_uint8(video) for video in output.frames]


def generate_video(pipe, prompt: str, *, settings: VideoSettings, latent: torch.Tensor | None = None) -> np.ndarray:
    """One video, uint8 ``[frames, H, W, 3]``: :func:`generate_videos` with one prompt."""
    return generate_videos(pipe, [prompt], settings=settings, latent=latent)[0]
