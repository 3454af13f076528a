"""Verify one compliance run and write its TEST0x folder (verify file + accuracy log)."""

from mlperf_repro.stage import run
from mlperf_repro.stages.compliance import verify_job


def main(smk):
    verify_job(
        smk.wildcards.test,
        smk.input.run,
        smk.wildcards.scenario,
        smk.input.model,
        smk.params.rules_test,
        smk.output.verdict,
        dataset_file=smk.params.dataset_file,
        tokenizer_dir=smk.input.tokenizer,
        evaluator=smk.params.evaluator,
        accuracy_rules=smk.params.accuracy_rules,
        performance_run=smk.input.performance[0] if smk.input.performance else None,
    )


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
