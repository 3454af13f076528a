"""A scenario's performance run and the compliance test judged against it, as one pair."""

from mlperf_repro.paths import PATHS
from mlperf_repro.stage import run
from mlperf_repro.stages.pair import measurement_pair_job


def main(smk):
    measurement_pair_job(
        run={
            "model_dir": smk.input.model,
            "dataset_dir": smk.input.dataset,
            "user_conf": smk.input.user_conf,
            "loadgen_model": smk.params.loadgen_model,
            "loadgen_scenario": smk.params.loadgen_scenario,
            "performance_sample_count": smk.params.performance_sample_count,
            "generation": smk.params.generation,
            "engine": smk.params.engine,
            "container_image": smk.params.container_image,
            "gpu_screening": smk.params.gpu_screening,
            "task": smk.params.task,
            # What the lock check at the workflow's start accepted (provenance).
            "lock_check": PATHS["lock_check"],
        },
        performance=smk.params.performance,
        audited=smk.params.audited,
        test=smk.wildcards.test,
        scenario=smk.wildcards.scenario,
        rules_test=smk.params.rules_test,
        attempts=smk.params.attempts,
        performance_out=smk.output.performance,
        audited_out=smk.output.audited,
        attempts_out=smk.output.attempts,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
