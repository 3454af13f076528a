"""Quantize one model with one recipe: FP4 checkpoint + emulated copy + quant_manifest.json."""

from mlperf_repro.quant.stage import quantize_job
from mlperf_repro.stage import run


def main(smk):
    quantize_job(
        smk.input.model,
        smk.output.quantized,
        smk.output.emulated,
        smk.params.recipe,
        container_image=smk.params.container_image,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
