"""What the native writer quantizes in a Diffusers pipeline folder (text-to-video: Wan 2.2), as
names only: read by the writer (:mod:`mlperf_repro.quant.pipeline`) and by the package's texts,
so no torch here."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "PIPELINE_INDEX",
    "SCOPE_WORDS",
    "TRANSFORMER_CLASSES",
    "WAN_EXCLUDE",
    "WEIGHTS_INDEX",
    "pipeline_exclude",
]

#: The file that makes a folder a Diffusers pipeline.
PIPELINE_INDEX = "model_index.json"
#: A sharded Diffusers model's index (the LLM checkpoints' is model.safetensors.index.json).
WEIGHTS_INDEX = "diffusion_pytorch_model.safetensors.index.json"

#: Transformer classes whose block Linears are quantized -> the regex (``re.match``) of a block's prefix.
TRANSFORMER_CLASSES: dict[str, str] = {"WanTransformer3DModel": r"blocks\.\d+\."}

#: The modules of a WanTransformer3DModel outside its blocks (patch embedding, condition
#: embedders, output projection): never quantized, always in the written exclude list.
WAN_EXCLUDE: tuple[str, ...] = ("patch_embedding", r"re:condition_embedder\..*", "proj_out")

#: The schema's exclude default, for LLMs; it names nothing in a diffusion transformer.
_LLM_DEFAULT_EXCLUDE = ("lm_head",)

#: What is quantized, in words (measurements.json, calibration.md).
SCOPE_WORDS = (
    "every nn.Linear inside the blocks of the pipeline's transformers (transformer/, transformer_2/: attention "
    "to_q/to_k/to_v/to_out.0, feed-forward ffn.net.0.proj/ffn.net.2); the patch embedding, condition embedders, "
    "proj_out, norms, VAE and text encoder unquantized"
)


def pipeline_exclude(exclude: Sequence[str] | None) -> list[str]:
    """The exclude list written for a pipeline: :data:`WAN_EXCLUDE` and a recipe's own entries
    (``lm_head``, the LLM default, dropped)."""
    user = [p for p in (exclude or []) if p not in _LLM_DEFAULT_EXCLUDE]
    return list(dict.fromkeys([*WAN_EXCLUDE, *user]))
