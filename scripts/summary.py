"""Write the summary table (results/report/summary.{csv,md,json})."""

from mlperf_repro.plan import Plan
from mlperf_repro.report.summary import summary_job
from mlperf_repro.stage import run


def main(smk):
    summary_job(Plan(smk.params.config), smk.input.check, smk.output.csv, smk.output.md, smk.output.json)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
