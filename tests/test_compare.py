"""compare: partners' submissions against a reference, from real LoadGen logs."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tree_factory import BENCH, PROVENANCE, SUBMITTER, SYSTEM, build_tree, make_runs, patch_detail

from mlperf_repro.compare.render import to_csv, to_html, to_markdown
from mlperf_repro.compare.report import compare_paths

RESULTS = f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCH}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs-a"))


@pytest.fixture(scope="module")
def other_runs(tmp_path_factory):
    """A second, independent set of runs of the same setup (only timing differs)."""
    return make_runs(tmp_path_factory.mktemp("runs-b"))


@pytest.fixture
def reference(runs, tmp_path):
    return build_tree(tmp_path / "vendor", runs)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlperf_repro", "compare", *args], capture_output=True, text=True, timeout=120
    )


def test_two_runs_of_the_same_setup_differ_only_in_timing(reference, other_runs, tmp_path):
    partner = build_tree(tmp_path / "partner", other_runs)
    (comparison,) = compare_paths(str(reference), [str(partner)])
    assert len(comparison.rows) == 3
    for row in comparison.rows:
        assert row.causes == [] and row.identical_settings > 50
        assert row.ratio is not None
    assert "**same except timings**: no setting, system, software or code differs" in to_markdown(comparison)


def test_changed_target_qps_and_engine_setting_rank_first(reference, runs, tmp_path):
    provenance = copy.deepcopy(PROVENANCE)
    provenance["performance"]["engine"]["engine_args"]["max_num_seqs"] = 128
    partner = build_tree(tmp_path / "partner", runs, provenance=provenance)
    server = partner / RESULTS / "Server"
    # What a partner's hand edit of user.conf leaves in the files: the conf and LoadGen's log.
    conf = server / "user.conf"
    conf.write_text(
        re.sub(r"(Server\.target_qps = )([\d.]+)", lambda m: f"{m[1]}{float(m[2]) * 0.9:g}", conf.read_text())
    )
    patch_detail(server / "performance/run_1/mlperf_log_detail.txt", {"effective_target_qps": 900})
    (partner / f"closed/{SUBMITTER}/src/README.md").write_text("our fork\n")
    (comparison,) = compare_paths(str(reference), [str(partner)])
    rows = {row.partner.scenario: row for row in comparison.rows}
    server_causes = [c.name for c in rows["Server"].causes]
    assert server_causes == ["target_qps", "serving.engine.max_num_seqs", "code"]
    target = rows["Server"].causes[0]
    assert {k for k, _, _ in target.evidence} == {"user.conf.llama2-70b.Server.target_qps", "loadgen.target_qps"}
    assert [c.name for c in rows["Offline"].causes] == ["serving.engine.max_num_seqs", "code"]
    markdown = to_markdown(comparison)
    assert "1. **target_qps** (configuration: LoadGen rate)" in markdown
    assert "`serving.engine.max_num_seqs`: 256 -> 128" in markdown


def test_results_side_by_side_and_tolerance(reference, runs, tmp_path):
    partner = build_tree(tmp_path / "partner", runs)
    detail = partner / RESULTS / "Interactive/performance/run_1/mlperf_log_detail.txt"
    from mlperf_repro.loadgen_logs import read_detail

    value = read_detail(detail)["result_completed_tokens_per_second"]
    patch_detail(detail, {"result_completed_tokens_per_second": value * 0.9})
    systems = partner / f"closed/{SUBMITTER}/systems/{SYSTEM}.json"
    desc = json.loads(systems.read_text())
    desc["accelerators_per_node"] = 4  # half the GPUs: per-accelerator result is 1.8x
    systems.write_text(json.dumps(desc))
    (comparison,) = compare_paths(str(reference), [str(partner)])
    row = next(r for r in comparison.rows if r.partner.scenario == "Interactive")
    assert row.ratio == pytest.approx(0.9, rel=1e-3) and not row.within_tolerance
    assert row.per_accelerator_ratio == pytest.approx(1.8, rel=1e-3)
    assert row.causes[0].name == "system.accelerators_per_node"
    assert not comparison.ok
    assert "OUTSIDE" in to_markdown(comparison)
    lines = to_csv(comparison).splitlines()
    assert len(lines) == 4 and lines[0].startswith("reference,partner,mlperf_benchmark,scenario")
    page = to_html(comparison)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "<script" not in page


def test_repeat_runs_report_mean_spread_and_interval(reference, runs, other_runs, tmp_path):
    again = build_tree(tmp_path / "vendor-2", other_runs)
    p1, p2 = build_tree(tmp_path / "p1", runs), build_tree(tmp_path / "p2", other_runs)
    (comparison,) = compare_paths(f"{reference},{again}", [f"{p1},{p2}"])
    assert comparison.reference.label == "vendor (2 runs)"
    row = comparison.rows[0]
    assert row.reference_metric.n == 2 and row.partner_metric.n == 2
    assert row.reference_metric.low <= row.reference_metric.mean <= row.reference_metric.high
    assert "95% CI" in to_markdown(comparison)


def to_v5_layout(tree: Path) -> None:
    """Rewrite a v6.0 tree in the v5.x layout: measurements/ and compliance/ beside results/, code/."""
    base = tree / "closed" / SUBMITTER
    (base / "src").rename(base / "code")
    for scenario_dir in sorted((base / "results").glob("*/*/*")):
        rel = scenario_dir.relative_to(base / "results")
        measure = base / "measurements" / rel
        measure.mkdir(parents=True)
        for name in ("user.conf", "README.md"):
            (scenario_dir / name).rename(measure / name)
        (scenario_dir / "measurements.json").rename(measure / f"{'_'.join(rel.parts)}.json")
        (scenario_dir / "provenance.json").unlink()
        compliance = base / "compliance" / rel
        compliance.mkdir(parents=True)
        (scenario_dir / "TEST06").rename(compliance / "TEST06")


def test_v5_layout_reads_like_v6(reference, runs, tmp_path):
    old = build_tree(tmp_path / "v51", runs)
    to_v5_layout(old)
    (comparison,) = compare_paths(str(old), [str(reference)])
    assert len(comparison.rows) == 3
    names = {c.name for row in comparison.rows for c in row.causes}
    # Only what v5.x trees cannot carry (provenance) differs; user.conf, measurements, compliance read the same.
    # The v5.x tree states no serving setup, so the provenance's is one cause, not one per key.
    assert names <= {
        "serving setup",
        "software.vllm",
        "software.mlcommons-loadgen",
        "inputs.model",
        "inputs.dataset",
    }, names
    assert all(not n.startswith(("user.conf", "measurements", "compliance")) for n in names)


def test_published_repository_with_many_submitters(reference, runs, tmp_path):
    repo = tmp_path / "inference_results_v6.0"
    (repo / "closed").mkdir(parents=True)
    for org in ("AMD", "Dell"):
        tree = build_tree(tmp_path / org, runs)
        (tree / "closed" / SUBMITTER).rename(repo / "closed" / org)
    (comparison,) = compare_paths(str(repo), [str(reference)], submitter="AMD")
    assert {row.reference.submitter for row in comparison.rows} == {"AMD"} and len(comparison.rows) == 3


def test_cli_exit_status_and_outputs(reference, runs, tmp_path):
    from mlperf_repro.package.tarball import write_tarball

    write_tarball(reference, tmp_path / "vendor.tar.gz")
    same = cli(str(reference), str(tmp_path / "vendor.tar.gz"), "--out", str(tmp_path / "out"), "--quiet")
    assert same.returncode == 0, same.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "vendor_vs_vendor.csv",
        "vendor_vs_vendor.html",
        "vendor_vs_vendor.md",
    ]
    worse = build_tree(tmp_path / "worse", runs)
    detail = worse / RESULTS / "Offline/performance/run_1/mlperf_log_detail.txt"
    patch_detail(detail, {"result_tokens_per_second": 1.0})
    assert cli(str(reference), str(worse), "--out", str(tmp_path / "out2")).returncode == 1
    missing = cli(str(reference), str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
