"""Byte-reproducible tarball of the submission tree."""

from mlperf_repro.package.tarball import write_tarball
from mlperf_repro.stage import run


def main(smk):
    write_tarball(f"{smk.input.package}/submission", smk.output[0])


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
