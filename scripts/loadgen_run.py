"""One LoadGen test (performance or accuracy) in this process."""

from mlperf_repro.paths import PATHS
from mlperf_repro.stage import run
from mlperf_repro.stages.runs import loadgen_job


def main(smk):
    loadgen_job(
        model_dir=smk.input.model,
        dataset_dir=smk.input.dataset,
        dataset_file=smk.params.dataset_file,
        prompt_check=smk.params.get("prompt_check"),
        user_conf=smk.input.user_conf,
        out_dir=smk.output.run,
        loadgen_model=smk.params.loadgen_model,
        loadgen_scenario=smk.params.loadgen_scenario,
        # Compliance runs (a {test} wildcard) are performance runs under an audit.config.
        mode=smk.wildcards.get("mode", "performance"),
        performance_sample_count=smk.params.performance_sample_count,
        generation=smk.params.generation,
        engine=smk.params.engine,
        container_image=smk.params.container_image,
        audit_config=smk.params.get("audit_config"),
        gpu_screening=smk.params.gpu_screening,
        task=smk.params.task,
        # What the lock check at the workflow's start accepted (provenance).
        lock_check=PATHS["lock_check"],
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
