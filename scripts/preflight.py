"""Check the config against the round's rules before anything runs."""
from mlperf_repro.check.stage import preflight_job
from mlperf_repro.stage import run


def main(smk):
    preflight_job(smk.params.config, smk.output[0])


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
