"""Write the plan view (results/plan/plan.{txt,json}) computed when the DAG was built."""

from pathlib import Path

from mlperf_repro.stage import run


def main(smk):
    Path(smk.output.txt).write_text(smk.params.text)
    Path(smk.output.json).write_text(smk.params.json)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
