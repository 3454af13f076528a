"""The find-performance pass of one target_qps: auto scenario (short LoadGen runs, each in its own process)."""

from mlperf_repro.stage import optional_input, run
from mlperf_repro.stages.find_performance import find_performance_job


def main(smk):
    find_performance_job(
        run={
            "model_dir": smk.input.model,
            "dataset_dir": smk.input.dataset,
            "dataset_file": smk.params.dataset_file,
            "prompt_check": smk.params.get("prompt_check"),
            "loadgen_model": smk.params.loadgen_model,
            "loadgen_scenario": smk.params.loadgen_scenario,
            "performance_sample_count": smk.params.performance_sample_count,
            "generation": smk.params.generation,
            "engine": smk.params.engine,
            "container_image": smk.params.container_image,
            "gpu_screening": smk.params.gpu_screening,
            "task": smk.params.task,
        },
        search=smk.params.search,
        offline_result=optional_input(smk, "offline"),
        out_json=smk.output.result,
        runs_dir=smk.params.runs_dir,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
