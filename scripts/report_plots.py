"""Write the HTML report's plots and pages (results/report/html/; snakemake --report)."""

from mlperf_repro.plan import Plan
from mlperf_repro.report.build import report_job
from mlperf_repro.stage import run


def main(smk):
    report_job(Plan(smk.params.config), [str(p) for p in smk.output])


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
