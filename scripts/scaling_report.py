"""Write the scaling study's table and plot (results/scaling/<system>/<benchmark>/scaling.*)."""

from mlperf_repro.report.scaling import scaling_report_job
from mlperf_repro.stage import run


def main(smk):
    scaling_report_job(smk.params.points, smk.params.title, smk.output.csv, smk.output.md, smk.output.svg)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
