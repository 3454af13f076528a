"""A generated user.conf: the scenario's settings, with a target_qps: auto filled in from its find-performance pass."""

from pathlib import Path

from mlperf_repro.stage import optional_input, run
from mlperf_repro.userconf import user_conf_from_request


def main(smk):
    text = user_conf_from_request(smk.params.request, optional_input(smk, "find_performance"))
    Path(smk.output[0]).parent.mkdir(parents=True, exist_ok=True)
    Path(smk.output[0]).write_text(text)


if __name__ == "__main__":
    run(snakemake, main)  # noqa: F821 - injected by Snakemake
