"""Score one accuracy run: accuracy.txt (checker format) and accuracy.json (verdict)."""

from mlperf_repro.stage import optional_input, run
from mlperf_repro.stages.accuracy import accuracy_job


def main(smk):
    accuracy_job(
        run_dir=smk.input.run,
        dataset_file=smk.params.dataset_file,
        tokenizer_dir=smk.input.tokenizer,
        evaluator=smk.params.evaluator,
        accuracy_rules=smk.params.accuracy_rules,
        targets=smk.params.targets,
        reference_path=optional_input(smk, "reference"),
        reference_outputs=optional_input(smk, "reference_outputs"),
        out_txt=smk.output.txt,
        out_json=smk.output.json,
        extras_dir=smk.output.extras,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
