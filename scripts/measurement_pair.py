"""A scenario's performance run and the compliance test judged against it, as one pair."""

from mlperf_repro.paths import PATHS
from mlperf_repro.stage import run
from mlperf_repro.stages.pair import measurement_pair_job
from mlperf_repro.stages.runs import run_arguments


def main(smk):
    measurement_pair_job(
        run={
            **run_arguments(smk),
            "user_conf": smk.input.user_conf,
            # What the lock check at the workflow's start accepted (provenance).
            "lock_check": PATHS["lock_check"],
        },
        performance=smk.params.performance,
        audited=smk.params.audited,
        test=smk.wildcards.test,
        scenario=smk.wildcards.scenario,
        rules_test=smk.params.rules_test,
        attempts=smk.params.attempts,
        noise_ceiling=smk.params.noise_ceiling,
        performance_out=smk.output.performance,
        audited_out=smk.output.audited,
        attempts_out=smk.output.attempts,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
