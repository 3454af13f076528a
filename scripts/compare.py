"""Compare the configured reference and partners; write results/compare/*.{md,csv,html}."""

from mlperf_repro.compare.cli import compare_job
from mlperf_repro.stage import run


def main(smk):
    compare_job(smk.params.reference, smk.params.partners, smk.params.settings, "results/compare")


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
