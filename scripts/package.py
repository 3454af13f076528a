"""Assemble the submission tree results/package/submission/."""

from mlperf_repro.package.tree import build_submission
from mlperf_repro.plan import Plan
from mlperf_repro.stage import run


def main(smk):
    # params.config: the sections that shape the tree (Plan.submission_config), so that
    # Snakemake reruns this job exactly when one of them changes.
    build_submission(Plan(smk.params.config), f"{smk.output.package}/submission", smk.params.code_root)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
