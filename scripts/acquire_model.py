"""Acquire (download and verify, or build) one model: resources/models/<model>/."""

from mlperf_repro.fetch.entries import acquire_model_entry
from mlperf_repro.stage import run


def main(smk):
    acquire_model_entry(smk.params.entry, smk.output.model, smk.output.record)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
