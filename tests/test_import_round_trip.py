"""The partner kit's round trip on CPU: import a tree, run the imported config with the stand-in
models substituted, compare the run with the source; only substituted and measured differences
may appear.

Two sources: the tree the end-to-end run made (tests/configs/e2e.yaml, the session fixture), and
a synthetic tree in the vendor's published layout (tests/published_tree.py). Both are imported
with --stand-in tests/configs/e2e.yaml; the two configs are the same but for the system's name
(asserted), so one run (its Offline scenario, reusing the end-to-end run's acquired and
quantized model) serves both comparisons.
"""

from __future__ import annotations

import pytest
import yaml
from conftest import E2E_CONFIG, SCHEMA, run_reusing_e2e
from published_tree import SYSTEM, write_published

from mlperf_repro.cli import _stand_in
from mlperf_repro.compare.report import compare_paths
from mlperf_repro.config import validate_config
from mlperf_repro.importer import build_import
from mlperf_repro.importer.yaml_text import plain

OWN_SYSTEM = "cpu-2c-vllm"


def _offline_only(config: dict) -> dict:
    for system in config["systems"].values():
        for benchmark in system["benchmarks"].values():
            for scenario in [s for s in benchmark if s != "Offline"]:
                del benchmark[scenario]
    return config


def _without(config: dict, system_id: str) -> dict:
    """The config less the import's record and the submitter's name, its one system renamed."""
    out = {k: v for k, v in config.items() if k not in ("imported", "submitter")}
    out["systems"] = {"system": config["systems"][system_id]}
    return out


def explained(key: str, substituted: list[str], system_id: str) -> bool:
    """Whether a compare setting key follows from a stand-in substitution."""
    subs = [line.split(":", 1)[0] for line in substituted]

    def any_under(prefix: str) -> bool:
        return any(s == prefix or s.startswith(prefix + ".") for s in subs)

    system = f"systems.{system_id}"
    if key.startswith("serving.") or key.startswith("src/"):  # the harness, replaced by the stand-in's engine
        return any_under(f"{system}.engine")
    if key == "system.division":
        return any_under("division")
    if key.startswith("system."):
        return any_under(f"{system}.description.{key.split('.', 1)[1]}") or key in ("system.submitter",)
    if key.startswith("documentation/"):  # the submitter's notes on its recipe, replaced by the stand-in's
        return any_under("quantization")
    if key.startswith(("user.conf.", "loadgen.", "mlperf.conf.")):
        return any_under(f"{system}.benchmarks") or any_under("test_scale")
    if key.startswith(("inputs.", "quantization.", "measurements.", "model_mapping")):
        return any(any_under(s) for s in ("models", "datasets", "quantization", "benchmarks"))
    if key.startswith(("software.", "host.", "lock.")):  # the machine the stand-in ran on
        return any_under(f"{system}.description") or any_under(f"{system}.software")
    return key.startswith("compliance.")  # a verdict is measured


@pytest.mark.slow
def test_import_run_with_stand_ins_and_compare(e2e_workdir, tmp_path):
    stand_in = _stand_in(str(E2E_CONFIG))
    source_tree = e2e_workdir / "results" / "package"
    own = build_import(source_tree, "E2ETest", OWN_SYSTEM, stand_in=stand_in)
    own_config = _offline_only(plain(own.config))
    write_published(tmp_path / "pub")
    published = build_import(tmp_path / "pub", "Vendor", SYSTEM, stand_in=stand_in)
    published_config = _offline_only(plain(published.config))
    assert _without(own_config, OWN_SYSTEM) == _without(published_config, SYSTEM)
    validate_config(yaml.safe_load(yaml.safe_dump(own_config)), SCHEMA)

    # Run it, reusing the end-to-end run's acquired and quantized model (same config, same outputs).
    work = run_reusing_e2e(e2e_workdir, tmp_path / "run", "imported", own_config)
    run_tree = work / "results" / "package"

    # 1. Our own tree: the stand-in is what made it, so no setting differs, only the measured numbers.
    # The package's copy of the config (src/config_used.yaml) is the imported text, with its comments
    # and record: a file, not a setting. (Reusing an older run via MLPERF_REPRO_E2E_WORKDIR also shows
    # the workflow's own files that changed since.)
    (own_row,) = [r for c in compare_paths(str(source_tree), [str(run_tree)]) for r in c.rows]
    assert own_row.partner.scenario == "Offline"
    assert [c.describe() for c in own_row.causes if c.name != "code"] == []
    assert own_row.identical_settings > 50

    # 2. The published layout: every difference compare ranks is a substitution the import listed.
    substituted = published.config["imported"].value["stand_in"]["substituted"]
    (row,) = [r for c in compare_paths(str(tmp_path / "pub"), [str(run_tree)]) for r in c.rows]
    assert row.causes, "a CPU stand-in of an 8-GPU system differs somewhere"
    unexplained = [
        (cause.name, key)
        for cause in row.causes
        for key, _, _ in cause.evidence
        if not explained(key, substituted, SYSTEM)
    ]
    assert unexplained == []
    kinds = {cause.kind for cause in row.causes}
    assert "configuration" in kinds and "hardware" in kinds
