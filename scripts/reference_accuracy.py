"""Accuracy of the unquantized model on this system (the baseline for measured targets)."""

from mlperf_repro.paths import PATHS
from mlperf_repro.stage import run
from mlperf_repro.stages.runs import reference_accuracy_job


def main(smk):
    reference_accuracy_job(
        model_dir=smk.input.model,
        dataset_dir=smk.input.dataset,
        dataset_file=smk.params.dataset_file,
        prompt_check=smk.params.get("prompt_check"),
        out_path=smk.output.record,
        outputs_dir=smk.output.outputs,
        open_metrics=smk.params.open_metrics,
        generation=smk.params.generation,
        engine=smk.params.engine,
        container_image=smk.params.container_image,
        evaluator=smk.params.evaluator,
        accuracy_rules=smk.params.accuracy_rules,
        gpu_screening=smk.params.gpu_screening,
        # What the lock check at the workflow's start accepted (provenance).
        lock_check=PATHS["lock_check"],
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
