"""Assemble the submission tree results/package/submission/."""

from mlperf_repro.package.tree import build_submission
from mlperf_repro.plan import Plan
from mlperf_repro.stage import run


def main(smk):
    build_submission(Plan(smk.config), f"{smk.output.package}/submission", smk.params.code_root)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
