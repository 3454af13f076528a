"""Quantize one model with one recipe (tool native or prequantized): checkpoint, emulated copy, quant_manifest.json."""

from mlperf_repro.quant.tools import quantize_recipe
from mlperf_repro.stage import run


def main(smk):
    quantize_recipe(
        smk.input.model,
        smk.output.quantized,
        smk.output.emulated,
        smk.params.recipe,
        container_image=smk.params.container_image,
        checkpoint=smk.input.prequantized,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
