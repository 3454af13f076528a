"""Acquire (download and verify, or build) one dataset: resources/datasets/<dataset>/."""

from mlperf_repro.fetch.entries import acquire_dataset_entry
from mlperf_repro.stage import run


def main(smk):
    tokenizer = smk.input.tokenizer[0] if smk.input.tokenizer else None
    acquire_dataset_entry(smk.params.entry, smk.output.dataset, smk.output.record, tokenizer, smk.params.build)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
