"""End to end on the CPU: the real workflow (the shipped trained stand-in acquired and verified
against its manifest, real MXFP4 codec, real vLLM, real LoadGen) at test scale, then assertions
on the contents of what it produced. (Training the stand-in is tested in test_demo_checkpoints.py,
and through the workflow in test_slurm.py's reduced demo.)

One module-scoped run (a few minutes on 2 cores) feeds every test here.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, run_snakemake
from test_dag import job_counts

from mlperf_repro.benchmarks import load_round
from mlperf_repro.loadgen_logs import read_detail

# exclusive: Server/Interactive judged VALID, and tests that rerun parts of the shared end-to-end run in place.
pytestmark = [pytest.mark.slow, pytest.mark.exclusive]
CONFIG = REPO / "tests" / "configs" / "e2e.yaml"
SYSTEM, BENCH, SUBMITTER = "cpu-2c-vllm", "tiny-llama-mxfp4", "E2ETest"
SCENARIOS = ("Offline", "Server", "Interactive")
RULES = load_round("v6.0")


@pytest.fixture(scope="module")
def workdir(e2e_workdir) -> Path:
    return e2e_workdir


def tree(work: Path) -> Path:
    return work / "results" / "package" / "submission" / "open" / SUBMITTER


def scenario_dir(work: Path, scenario: str) -> Path:
    return tree(work) / "results" / SYSTEM / BENCH / scenario


def test_tree_layout_and_not_submittable_marking(workdir):
    root = workdir / "results" / "package" / "submission"
    assert sorted(p.name for p in root.iterdir()) == ["NOT_SUBMITTABLE.md", "open"]
    base = tree(workdir)
    assert sorted(p.name for p in base.iterdir()) == [
        "documentation",
        "model_mapping.json",
        "results",
        "src",
        "systems",
    ]
    assert json.loads((base / "model_mapping.json").read_text()) == {BENCH: "llama2-70b-99"}
    for scenario in SCENARIOS:
        folder = scenario_dir(workdir, scenario)
        names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        assert names == [
            "README.md",
            "TEST06/accuracy/mlperf_log_accuracy.json",
            "TEST06/verify_accuracy.txt",
            "accuracy/accuracy.txt",
            "accuracy/mlperf_log_accuracy.json",
            "accuracy/mlperf_log_detail.txt",
            "accuracy/mlperf_log_summary.txt",
            "measurements.json",
            "performance/run_1/mlperf_log_accuracy.json",
            "performance/run_1/mlperf_log_detail.txt",
            "performance/run_1/mlperf_log_summary.txt",
            "provenance.json",
            "user.conf",
        ]
        provenance = json.loads((folder / "provenance.json").read_text())
        assert provenance["performance"]["engine"]["engine_args"]["dtype"] == "float32"
        # head_workers: auto with one server (fewer than 2,048 slots): the head in one process.
        assert provenance["performance"]["head"] == {"workers": 0}
        assert provenance["quantization"]["scheme"] == "mxfp4_weight_only"
        verify = (folder / "TEST06" / "verify_accuracy.txt").read_text().splitlines()
        first = "Skipped" if scenario == "Offline" else "True"
        assert verify == [
            f"First token check pass: {first}",
            "EOS check pass: True",
            "Sample length check pass: True",
            "TEST06 verification complete",
        ]
        assert len(json.loads((folder / "TEST06/accuracy/mlperf_log_accuracy.json").read_text())) == 100
        assert "NOT SUBMITTABLE" in (folder / "README.md").read_text()
        assert json.loads((folder / "measurements.json").read_text())["weight_data_types"] == "mxfp4"
    assert (base / "src" / "src" / "mlperf_repro" / "harness" / "sut.py").is_file()
    assert yaml.safe_load((base / "src" / "config_used.yaml").read_text())["submitter"] == SUBMITTER
    assert not list(base.rglob("__pycache__")) and not [p for p in base.rglob(".*")]
    assert "MXFP4" in (base / "documentation" / "calibration.md").read_text()


def test_system_description(workdir):
    desc = json.loads((tree(workdir) / "systems" / f"{SYSTEM}.json").read_text())
    required = RULES["system_description"]["required"]
    assert set(required) <= set(desc) and len(required) == 35
    assert desc["division"] == "open" and desc["submitter"] == SUBMITTER
    assert isinstance(desc["number_of_nodes"], int) and int(desc["accelerators_per_node"]) == 0
    assert isinstance(desc["host_processor_core_count"], int) and desc["host_processor_model_name"] != "auto"
    assert desc["framework"].startswith("vLLM 0.32.0")
    assert "NOT SUBMITTABLE" in desc["sw_notes"]


def test_user_conf_is_generated_from_the_config(workdir):
    conf = (scenario_dir(workdir, "Interactive") / "user.conf").read_text()
    assert "llama2-70b-interactive.Server.target_qps = 15" in conf
    assert "llama2-70b-interactive.Server.min_query_count = 480" in conf
    assert "llama2-70b-interactive.Server.min_duration = 3000" in conf


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_performance_logs(workdir, scenario):
    detail = read_detail(scenario_dir(workdir, scenario) / "performance/run_1/mlperf_log_detail.txt")
    assert detail["result_validity"] == "VALID", detail.get("result_invalid_reason")
    assert detail["errors"] == []
    assert detail["loadgen_version"].startswith("6.0.15")
    for key, seed in RULES.seeds.items():
        assert int(detail[f"effective_{key}"]) == seed
    assert detail["requested_use_token_latencies"] is True
    assert detail["effective_min_duration_ms"] == 3000
    assert detail["effective_scenario"] == ("Offline" if scenario == "Offline" else "Server")
    if scenario != "Offline":
        limits = RULES.benchmark("llama2-70b-99").latency_limits_ms(scenario)
        assert detail["requested_server_ttft_latency"] == limits["ttft"] * 1_000_000
        assert detail["requested_server_tpot_latency"] == limits["tpot"] * 1_000_000
        assert 0 < detail["result_first_token_99.00_percentile_latency_ns"] < limits["ttft"] * 1e6
    assert detail["result_tokens_per_second" if scenario == "Offline" else "result_completed_tokens_per_second"] > 0


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_accuracy_log_tokens_and_truncation(workdir, scenario):
    original = workdir / "results" / "runs" / SYSTEM / BENCH / scenario / "accuracy" / "mlperf_log_accuracy.json"
    entries = json.loads(original.read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(64))  # every sample once
    for entry in entries:
        tokens = np.frombuffer(bytes.fromhex(entry["data"]), np.int32)
        assert len(tokens) > 1 and entry["token_count"] == len(tokens)
        if scenario != "Offline":  # first token reported via FirstTokenComplete matches the output
            assert np.frombuffer(bytes.fromhex(entry["token_data"]), np.int32)[0] == tokens[0]
    packaged = scenario_dir(workdir, scenario) / "accuracy"
    assert (packaged / "mlperf_log_accuracy.json").stat().st_size <= 10240
    text = (packaged / "accuracy.txt").read_text()
    digest = re.search(r"^hash=([\w\d]+)$", text, re.MULTILINE).group(1)
    assert digest == hashlib.sha256(original.read_bytes()).hexdigest()
    regex = RULES.benchmark("llama2-70b-99").accuracy["regex"]
    values = {m: float(re.search(p, text).group(1)) for m, p in regex.items()}
    record = json.loads((workdir / "results/accuracy" / SYSTEM / BENCH / scenario / "accuracy.json").read_text())
    assert values["rouge1"] == record["metrics"]["rouge1"] > 10
    assert values["tokens_per_sample"] == record["metrics"]["tokens_per_sample"]
    reference = json.loads((workdir / "results/reference" / SYSTEM / BENCH / "accuracy.json").read_text())
    check = {c["metric"]: c for c in record["verdict"]["checks"]}
    assert check["rouge1"]["minimum"] == round(reference["metrics"]["rouge1"] * 0.99, 4)
    assert check["rouge1"]["passed"] == (record["metrics"]["rouge1"] >= check["rouge1"]["minimum"])


def test_quantized_checkpoint_and_manifest(workdir):
    qdir = workdir / "results" / "models" / "tiny-llama-mxfp4-w4a16"
    manifest = json.loads((qdir / "quant_manifest.json").read_text())
    assert manifest["codec_version"].startswith("mxfp4-codec/")
    assert manifest["scheme"] == "mxfp4_weight_only"
    config = json.loads((qdir / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "quark"
    for name, entry in manifest["outputs"]["quark_dir"]["files"].items():
        assert hashlib.sha256((qdir / name).read_bytes()).hexdigest() == entry["sha256"]
    assert manifest["logit_error"]["cosine"] > 0.9


def test_demo_model_learned_its_task(workdir):
    """The shipped stand-in was acquired verified, and its build report (carried into the
    acquisition record) says training taught it its task."""
    record = json.loads((workdir / "results/acquire/models/tiny-llama.json").read_text())
    assert record["status"] == "verified"
    build = record["build"]
    assert build["source"] == "builtin:tiny-llama"
    assert build["rouge_trained"]["rouge1"] > build["rouge_untrained"]["rouge1"] + 20


def test_summary_and_check(workdir):
    rows = list(csv.DictReader((workdir / "results/report/summary.csv").open()))
    assert [r["scenario"] for r in rows] == list(SCENARIOS)
    for row in rows:
        assert row["loadgen_validity"] == "VALID" and float(row["result"]) > 0
        assert row["submittable"] == "NO (test scale)"
        assert row["unit"] == "Tokens/s"
    assert rows[1]["ttft_limit_ms"] == "2000" and rows[2]["tpot_limit_ms"] == "40"
    summary = (workdir / "results/report/summary.md").read_text()
    # The outcome first: the check's verdict, the counts, and why it may not be submitted.
    verdict, scale = summary.splitlines()[2:4]
    assert verdict.startswith("**Submission check: PASS** (0 error(s)")
    assert "3 of 3 results VALID, 3 of 3 meet their accuracy target" in verdict
    assert scale.startswith("**NOT SUBMITTABLE: test-scale run")
    # The quantization table: the recipe, its logit error and the accuracy as % of the unquantized run's.
    row = next(line for line in summary.splitlines() if line.startswith(f"| {BENCH} | mxfp4-w4a16 |"))
    assert "| mxfp4_weight_only | quark | logits: rel " in row and re.search(r"rouge1 [0-9.]+ \([0-9.]+% of ", row)
    assert summary.strip() in (workdir / "snakemake.out").read_text()  # printed at the end
    report = (workdir / "results/check/report.txt").read_text()
    assert "NOT SUBMITTABLE" in report and "result: PASS" in report
    assert "result: PASS" in (workdir / "results/check/preflight.txt").read_text()
    official = list(csv.DictReader((workdir / "results/report/summary_official.csv").open()))
    assert [r["Scenario"] for r in official] == ["Interactive", "Offline", "Server"]
    assert official[0]["MlperfModel"] == "llama2-70b-99" and official[0]["Model"] == BENCH
    assert official[0]["Units"] == "Tokens/s" and official[0]["Accuracy"].startswith("ROUGE1: ")
    from openpyxl import load_workbook

    assert load_workbook(workdir / "results/report/final_report.xlsx").sheetnames == ["datacenter - open"]


def test_tarball_is_reproducible(workdir, tmp_path):
    from mlperf_repro.package.tarball import write_tarball

    write_tarball(workdir / "results" / "package" / "submission", tmp_path / "again.tar.gz")
    assert (tmp_path / "again.tar.gz").read_bytes() == (workdir / "results" / "submission.tar.gz").read_bytes()


def test_an_engine_setting_change_reruns_every_run_and_nothing_upstream(workdir):
    config = yaml.safe_load((workdir / "e2e.yaml").read_text())
    next(iter(config["systems"].values()))["engine"]["engine_args"]["max_num_seqs"] = 64
    # Key order kept: Snakemake compares params as text, so a reordered config would rerun all.
    (workdir / "e2e-changed.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_snakemake(workdir, "-n", "--cores", "2", "--configfile", "e2e-changed.yaml", timeout=300)
    assert result.returncode == 0, result.stderr
    assert job_counts(result.stdout) == {
        "loadgen_run": 6,
        "compliance_run": 3,
        "reference_accuracy": 1,
        "compliance_verify": 3,
        "accuracy_eval": 3,
        "package": 1,
        "tarball": 1,
        "check_submission": 1,
        "summary": 1,
        "official_summary": 1,
        "report_plots": 1,
        "all": 1,
    }


def test_rerun_does_nothing_and_one_scenario_reruns_alone(workdir):
    result = run_snakemake(workdir, "-n", "--cores", "2", "--configfile", "e2e.yaml", timeout=300)
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr
    shutil.rmtree(workdir / "results" / "runs" / SYSTEM / BENCH / "Server")
    result = run_snakemake(workdir, "-n", "--cores", "2", "--configfile", "e2e.yaml", timeout=300)
    assert result.returncode == 0, result.stderr
    assert job_counts(result.stdout) == {
        "user_conf": 1,
        "loadgen_run": 2,
        "compliance_run": 1,
        "compliance_verify": 1,
        "accuracy_eval": 1,
        "package": 1,
        "tarball": 1,
        "check_submission": 1,
        "summary": 1,
        "official_summary": 1,
        "report_plots": 1,
        "all": 1,
    }
