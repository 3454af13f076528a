"""Screen this host's GPUs for one system (results/screen/<system>.json)."""

from mlperf_repro.cluster.screen import screen_job
from mlperf_repro.stage import apply_env, run


def main(smk):
    apply_env(smk.params.env)
    screen_job(
        out_path=smk.output[0],
        screening=smk.params.screening,
        expected_count=smk.params.expected,
        system=smk.wildcards.system,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
