"""A tiny Wan 2.2 text-to-video pipeline (the ``wan-2.2-t2v-a14b`` stand-in), built locally
with random weights from a seed and saved as a Diffusers folder that
``WanPipeline.from_pretrained`` loads like Wan-AI/Wan2.2-T2V-A14B-Diffusers.

Same architecture and components as the real model, only smaller: two
``WanTransformer3DModel`` experts (``transformer`` for high noise, ``transformer_2`` for low
noise, switching at ``boundary_ratio``), the Wan 2.1 VAE family (``AutoencoderKLWan``, 16
latent channels, 4x temporal and 8x spatial compression), a ``UMT5EncoderModel`` text encoder
and UniPC flow-matching sampling. The tokenizer is UMT5's class over a Unigram vocabulary
counted from a few built-in sentences (nothing is downloaded). Untrained: the videos are
noise-shaped, but every step of the real pipeline runs, deterministically.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

#: The tokenizer's words, and prompts the tests use.
SENTENCES = (
    "A cat walks along the beach at sunset, waves rolling in behind it.",
    "A red sports car drives through a neon-lit city street at night.",
    "Two dogs play with a ball in a green park on a sunny afternoon.",
    "Time-lapse of clouds drifting over snowy mountain peaks.",
    "A chef slices vegetables on a wooden board in a busy kitchen.",
    "An astronaut floats slowly inside a space station, Earth in the window.",
    "A hummingbird hovers near a bright flower, wings a blur.",
    "Rain falls on a quiet village road, puddles reflecting lamps.",
)
#: UMT5's special tokens and ids: pad 0, eos 1, unk 2 (the tokenizer appends eos).
SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")


@dataclass(frozen=True)
class TinyWanSpec:
    """Sizes of the tiny pipeline; the real A14B's values are in the comments."""

    seed: int = 0
    text_dim: int = 32  # umt5-xxl d_model 4096, the transformers' text_dim
    text_layers: int = 2  # 24
    text_heads: int = 4  # 64
    text_ff: int = 64  # 10240
    heads: int = 2  # 40
    head_dim: int = 16  # 128 (rope splits it over t/h/w: at least 12)
    ffn_dim: int = 64  # 13824
    layers: int = 2  # 40
    vae_base_dim: int = 8  # 96
    vae_dim_mult: tuple[int, ...] = (1, 2, 4, 4)  # the same
    vae_res_blocks: int = 1  # 2
    boundary_ratio: float = 0.875  # the same
    flow_shift: float = 3.0  # the same (UniPC, flow prediction)
    #: torch threads while building. One: at these sizes a second thread gains nothing and,
    #: when the other core is busy, OpenMP's spinning makes a video ~15x slower.
    threads: int = 1


def unigram_vocab() -> list[tuple[str, float]]:
    """A Unigram vocabulary (piece, log-probability) made by counting, not trained: UMT5's
    special tokens, the word-initial pieces of :data:`SENTENCES`' words scored by frequency,
    then every printable ASCII character (so no ASCII prompt maps to ``<unk>``) scored below
    any word. ``tokenizers``' Unigram trainer is not deterministic (its scores move in the
    last bits from run to run, even on one thread), so the folder's digest would be."""
    import math
    import re
    import string
    from collections import Counter

    words = Counter(re.findall(r"[^\W_]+|[^\w\s]", " ".join(SENTENCES)))
    total = sum(words.values())
    pieces = {f"\u2581{word}": math.log(count / total) for word, count in words.items() if len(word) > 1}
    floor = math.log(1 / total) - 1
    pieces["\u2581"] = floor
    pieces.update((char, floor - 1) for char in string.printable.strip())
    ranked = sorted(pieces.items(), key=lambda item: (-item[1], item[0]))
    return [(token, 0.0) for token in SPECIAL_TOKENS] + [(piece, round(score, 6)) for piece, score in ranked]


def build_tokenizer():
    """UMT5's tokenizer class (transformers' ``T5Tokenizer``: Unigram, Metaspace, ``</s>``
    appended, pad 0 / eos 1 / unk 2) over :func:`unigram_vocab`."""
    from transformers import T5Tokenizer

    # No sentinel <extra_id_N> tokens: UMT5's are for span corruption, which an encoder never sees.
    return T5Tokenizer(vocab=unigram_vocab(), extra_ids=0, model_max_length=512)


def build_components(spec: TinyWanSpec) -> dict:
    """The pipeline's components, each seeded on its own (``seed * 10 + k``) so changing one
    size leaves the others' weights as they were."""
    import torch
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    tokenizer = build_tokenizer()
    torch.manual_seed(spec.seed * 10 + 1)
    text_encoder = UMT5EncoderModel(
        UMT5Config(
            vocab_size=len(tokenizer),
            d_model=spec.text_dim,
            d_kv=spec.text_dim // spec.text_heads,
            d_ff=spec.text_ff,
            num_layers=spec.text_layers,
            num_heads=spec.text_heads,
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
    ).eval()

    def expert(seed: int):
        torch.manual_seed(seed)
        return WanTransformer3DModel(
            patch_size=(1, 2, 2),
            num_attention_heads=spec.heads,
            attention_head_dim=spec.head_dim,
            in_channels=16,
            out_channels=16,
            text_dim=spec.text_dim,
            freq_dim=256,
            ffn_dim=spec.ffn_dim,
            num_layers=spec.layers,
            cross_attn_norm=True,
            qk_norm="rms_norm_across_heads",
            eps=1e-6,
            rope_max_seq_len=1024,
        ).eval()

    transformer, transformer_2 = expert(spec.seed * 10 + 2), expert(spec.seed * 10 + 3)
    torch.manual_seed(spec.seed * 10 + 4)
    vae = AutoencoderKLWan(
        base_dim=spec.vae_base_dim,
        z_dim=16,
        dim_mult=list(spec.vae_dim_mult),
        num_res_blocks=spec.vae_res_blocks,
        attn_scales=[],
        temperal_downsample=[False, True, True],
    ).eval()
    scheduler = UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=spec.flow_shift
    )
    return {
        "tokenizer": tokenizer,
        "text_encoder": text_encoder,
        "transformer": transformer,
        "transformer_2": transformer_2,
        "vae": vae,
        "scheduler": scheduler,
    }


def build_tiny_wan(out_dir: str | Path, spec: TinyWanSpec = TinyWanSpec()) -> dict:
    """Build the pipeline, save it to ``out_dir`` (``save_pretrained``, safetensors, float32)
    and return a build report: parameters per component, seconds, the folder's digest."""
    import diffusers
    import torch
    from diffusers import WanPipeline

    from ..hashing import tree_digest

    torch.set_num_threads(spec.threads)
    started = time.time()
    components = build_components(spec)
    pipe = WanPipeline(**components, boundary_ratio=spec.boundary_ratio)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(out_dir, safe_serialization=True)
    parameters = {
        name: sum(p.numel() for p in module.parameters())
        for name, module in components.items()
        if isinstance(module, torch.nn.Module)
    }
    return {
        "spec": asdict(spec),
        "parameters": parameters,
        "parameters_total": sum(parameters.values()),
        "vocab_size": len(components["tokenizer"]),
        "diffusers": diffusers.__version__,
        "digest": tree_digest(out_dir),
        "build_seconds": round(time.time() - started, 2),
    }
