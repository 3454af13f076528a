"""Write a generated text file (user.conf) whose content is the rule's `text` param."""

from pathlib import Path

from mlperf_repro.stage import run


def main(smk):
    Path(smk.output[0]).write_text(smk.params.text)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
