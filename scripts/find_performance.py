"""The find-performance pass of one target_qps: auto scenario (short LoadGen runs, each in its own process)."""

from mlperf_repro.stage import optional_input, run
from mlperf_repro.stages.find_performance import find_performance_job
from mlperf_repro.stages.runs import run_arguments


def main(smk):
    find_performance_job(
        run={
            **run_arguments(smk),
            "dataset_file": smk.params.dataset_file,
            "prompt_check": smk.params.get("prompt_check"),
        },
        search=smk.params.search,
        offline_result=optional_input(smk, "offline"),
        out_json=smk.output.result,
        runs_dir=smk.params.runs_dir,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
