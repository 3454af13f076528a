"""Quantize one model with one recipe (tool native, prequantized or quark): checkpoint, emulated copy, quant_manifest.json."""

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
        mem_mb=smk.resources.mem_mb,  # the job's memory: picks the accuracy evaluation that fits
        # tool quark: the benchmark's dataset file its calibration rows come from
        **({"calibration_file": smk.params.calibration_file} if smk.params.calibration_file else {}),
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
