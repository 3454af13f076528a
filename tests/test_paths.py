"""One place per path (issue 13): the rules and the Plan's path helpers both read
mlperf_repro.paths.PATHS, so no output path is spelled out anywhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlperf_repro.paths import PATHS, path
from mlperf_repro.plan import Plan

REPO = Path(__file__).resolve().parents[1]


def test_path_fills_only_the_given_wildcards():
    assert path("run", system="s", benchmark="b", scenario="Offline", mode="accuracy") == (
        "results/runs/s/b/Offline/accuracy"
    )
    assert path("acquire_record", kind="models", name="{model}") == "results/acquire/models/{model}.json"
    assert path("scaling_run", system="s", benchmark="b", scenario="Server", n_endpoints=4).endswith("/Server/n4")
    with pytest.raises(KeyError):
        path("no-such-path")


def test_plan_helpers_format_the_table():
    wc = {"system": "s", "benchmark": "b", "scenario": "Offline"}
    assert Plan.run_dir("s", "b", "Offline", "performance") == PATHS["run"].format(**wc, mode="performance")
    assert Plan.user_conf_path("s", "b", "Offline") == PATHS["user_conf"].format(**wc)
    assert Plan.compliance_dir("s", "b", "Offline", "TEST06") == PATHS["compliance"].format(**wc, test="TEST06")
    assert Plan.accuracy_dir("s", "b", "Offline") + "/accuracy.json" == PATHS["accuracy_json"].format(**wc)
    assert Plan.quantized_dir("m", "r") == PATHS["quantized"].format(model="m", recipe="r")
    assert Plan.screen_path("s") == PATHS["screen"].format(system="s")
    assert Plan.scaling_run_dir("s", "b", "Offline", 2) == PATHS["scaling_run"].format(**wc, n_endpoints=2)


def test_rules_spell_out_no_output_path():
    """Inputs and outputs of the rules come from PATHS (logs/ and the compare reports aside)."""
    files = [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]
    literal = re.compile(r"[\"'](results|resources)/")
    offenders = [
        f"{f.name}:{n}: {line.strip()}"
        for f in files
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert not offenders, "\n".join(offenders)
