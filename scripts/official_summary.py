"""Official-style summary CSV and final-report spreadsheet from the packaged tree."""

from mlperf_repro.report.official import official_summary_job
from mlperf_repro.stage import run


def main(smk):
    official_summary_job(f"{smk.input.package}/submission", smk.params.round, smk.output.csv, smk.output.xlsx)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
