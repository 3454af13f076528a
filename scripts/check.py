"""Check the packaged submission tree; write results/check/report.{txt,json}."""

from mlperf_repro.check.stage import check_job
from mlperf_repro.stage import run


def main(smk):
    check_job(f"{smk.input.package}/submission", smk.params.round, smk.output.txt, smk.output.json)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
