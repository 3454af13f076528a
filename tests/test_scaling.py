"""The scaling study: efficiency arithmetic, reports, the DAG, and a real run of the rule
(real Snakemake, real LoadGen, the real dispatcher) against SIMULATED endpoints."""

from __future__ import annotations

import copy
import csv
import io
import shutil

import pytest
import yaml
from conftest import E2E_CONFIG, make_workdir, run_snakemake
from sim_endpoints import free_ports, simulated_endpoints
from simulated_endpoint import SimulatedEndpointSpec
from test_dag import job_counts

from mlperf_repro.config import check_references
from mlperf_repro.plan import Plan
from mlperf_repro.report.scaling import ScalingPoint, to_csv, to_markdown, to_svg, with_efficiency

SYSTEM = "sim-head"
BENCH = "tiny-llama-mxfp4"


def point(scenario: str, n: int, throughput: float) -> ScalingPoint:
    return ScalingPoint(scenario, n, throughput, "Tokens/s", "VALID", {f"ep{i}": throughput / n for i in range(n)}, 0)


def test_efficiency_is_relative_to_the_smallest_count():
    points = with_efficiency(
        [
            point("Offline", 4, 380.0),
            point("Offline", 1, 100.0),
            point("Offline", 2, 196.0),
            point("Server", 2, 90.0),
            point("Server", 8, 342.0),
        ]
    )
    eff = {(p.scenario, p.endpoints): round(p.efficiency, 4) for p in points}
    assert eff == {
        ("Offline", 1): 1.0,
        ("Offline", 2): 0.98,
        ("Offline", 4): 0.95,
        ("Server", 2): 1.0,
        ("Server", 8): 0.95,
    }
    rows = list(csv.DictReader(io.StringIO(to_csv(points))))
    assert rows[2]["scaling_efficiency"] == "0.9500" and rows[2]["per_endpoint_tokens_per_s"].startswith("ep0=95.0")
    assert "| Offline | 4 | 380.00 Tokens/s | 95.0% |" in to_markdown(points, "t")
    svg = to_svg(points, "t")
    assert svg.startswith("<svg") and svg.count("<polyline") == 4 and "Server n=8: 342.0 Tokens/s (95%)" in svg
    assert ">95.0%</text>" in svg  # efficiency printed on the plot itself


def scaling_config(ports: list[int]) -> dict:
    """The end-to-end config plus a head system that drives two (simulated) endpoints."""
    config = yaml.safe_load(E2E_CONFIG.read_text())
    base = next(iter(config["systems"].values()))
    head = copy.deepcopy(base)
    head["description"].update(
        number_of_nodes="auto",
        accelerators_per_node="auto",
        accelerator_model_name="auto",
        system_name="LoadGen head with simulated endpoints",
    )
    head["engine"] = {
        "backend": "endpoints",
        "endpoints": {
            "launch": "external",
            "served_model_name": "sim",
            "list": [
                {
                    "name": f"sim{i}",
                    "host": "127.0.0.1",
                    "port": p,
                    "node": f"node{i}",
                    "accelerator": "simulated",
                    "max_concurrency": 16,
                }
                for i, p in enumerate(ports)
            ],
        },
        "dispatch": {"stall_timeout_s": 10, "down_grace_s": 10},
    }
    head["benchmarks"] = {BENCH: {"Offline": {"target_qps": 60}, "Server": {"target_qps": 40}}}
    config["systems"] = {SYSTEM: head}
    config["scaling_study"] = {"system": SYSTEM, "benchmark": BENCH}
    return config


def test_plan_and_config_rules_of_the_study():
    config = scaling_config([1, 2])
    plan = Plan(config)
    assert plan.scaling_jobs() == [("Offline", 1), ("Offline", 2), ("Server", 1), ("Server", 2)]
    assert "llama2-70b.Server.target_qps = 20\n" in plan.scaling_user_conf_text(SYSTEM, BENCH, "Server", 1)
    assert [e["name"] for e in plan.scaling_engine(SYSTEM, 1)["endpoints"]["list"]] == ["sim0"]
    assert plan.accelerators(SYSTEM) == 0  # the head holds no accelerator; the servers do
    bad = copy.deepcopy(config)
    bad["scaling_study"].update(endpoint_counts=[1, 3], scenarios=["Interactive"])
    problems = check_references(bad)
    assert any("scaling_study.endpoint_counts: [3] exceed the 2 endpoint(s)" in p for p in problems)
    assert any("scaling_study.scenarios: Interactive is not configured" in p for p in problems)


@pytest.mark.slow
def test_dry_run_plans_one_run_per_scenario_and_count(tmp_path):
    work = make_workdir(tmp_path)
    (work / "scaling.yaml").write_text(yaml.safe_dump(scaling_config([8001, 8002])))
    result = run_snakemake(
        work,
        f"results/scaling/{SYSTEM}/{BENCH}/scaling.md",
        "-n",
        "--cores",
        "2",
        "--configfile",
        "scaling.yaml",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    counts = job_counts(result.stdout)
    assert counts["scaling_run"] == 4 and counts["scaling_user_conf"] == 4 and counts["scaling_report"] == 1


@pytest.mark.slow
@pytest.mark.exclusive  # judged on the measured scaling efficiency
def test_the_study_runs_through_the_workflow(e2e_workdir, tmp_path):
    """Model and dataset come from the end-to-end run; the endpoints are simulated (the
    head's behaviour is under test here; real servers are tested in test_endpoints_vllm)."""
    work = make_workdir(tmp_path)
    for shared in ("resources", "results/models", "results/acquire"):
        src, dst = e2e_workdir / shared, work / shared
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    ports = free_ports(2)
    # Short fixed-length answers and fewer Server queries: validity is not under test here,
    # so each run needs only LoadGen's min_duration.
    config = scaling_config(ports)
    config["test_scale"]["min_query_count"]["Server"] = 120
    (work / "scaling.yaml").write_text(yaml.safe_dump(config))
    sims = [SimulatedEndpointSpec(port=p, slots=8, tokens_per_s=1000, ttft_s=0.01, output_tokens=32) for p in ports]
    target = f"results/scaling/{SYSTEM}/{BENCH}/scaling.csv"
    with simulated_endpoints(sims):
        result = run_snakemake(
            work, target, "--cores", "2", "--rerun-triggers", "mtime", "--configfile", "scaling.yaml", timeout=900
        )
    assert result.returncode == 0, result.stderr[-5000:]
    rows = list(csv.DictReader((work / target).open()))
    assert [(r["scenario"], r["endpoints"]) for r in rows] == [
        ("Offline", "1"),
        ("Offline", "2"),
        ("Server", "1"),
        ("Server", "2"),
    ]
    for row in rows:
        assert float(row["throughput"]) > 0 and row["unit"] == "Tokens/s" and row["resent_queries"] == "0"
        assert len(row["per_endpoint_tokens_per_s"].split()) == int(row["endpoints"])
    assert rows[0]["scaling_efficiency"] == "1.0000" and float(rows[1]["scaling_efficiency"]) > 0.5
    assert (work / f"results/scaling/{SYSTEM}/{BENCH}/scaling.svg").read_text().startswith("<svg")
