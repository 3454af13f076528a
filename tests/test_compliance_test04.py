"""TEST04 (no result caching) with real LoadGen runs: the scenario's performance run, then the
audit run that issues one sample again and again, verified as the workflow does.

The endpoints are SIMULATED (named as such): one answers every prompt at the same fixed
rate, the other answers a prompt it has seen before at once from a result cache, which is
exactly what TEST04 exists to catch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sim_endpoints import free_ports, simulated_endpoints
from simulated_endpoint import SimulatedEndpointSpec

from mlperf_repro.benchmarks import load_round
from mlperf_repro.compliance import audit_config_text
from mlperf_repro.loadgen_logs import read_detail
from mlperf_repro.stages.compliance import verify_job
from mlperf_repro.stages.pair import measurement_pair_job

# exclusive: TEST04 compares two runs' performance.
pytestmark = [pytest.mark.slow, pytest.mark.exclusive]
CHILD = Path(__file__).with_name("endpoint_child.py")
MODEL = "results/models/tiny-llama-mxfp4-w4a16-emulated"
DATASET_DIR = "resources/datasets/openorca-synthetic"
RULES = load_round("v6.0").compliance_test("TEST04")
SLOTS = 4
# Every answer is 32 tokens at a fixed rate and the head keeps exactly SLOTS in flight, so
# a run's samples/s depends neither on which sample is issued nor on how many.
USER_CONF = (
    "llama2-70b.Offline.min_query_count = 64\nllama2-70b.Offline.min_duration = 0\nllama2-70b.Offline.target_qps = 30\n"
)


def run_args(work: Path, tmp: Path, port: int, name: str) -> dict:
    """The run stage's keyword arguments for a LoadGen Offline performance run through the
    endpoint backend."""
    (tmp / f"{name}.user.conf").write_text(USER_CONF)
    engine = {
        "backend": "endpoints",
        "env": {},
        "endpoints": {
            "launch": "external",
            "served_model_name": "sim",
            "list": [{"name": "sim", "host": "127.0.0.1", "port": port, "max_concurrency": SLOTS}],
        },
        "dispatch": {"stall_timeout_s": 20, "down_grace_s": 20, "max_prompts_per_request": 1},
    }
    args = dict(
        model_dir=str(work / MODEL),
        dataset_dir=str(work / DATASET_DIR),
        dataset_file=str(work / DATASET_DIR / "open_orca_synthetic.pkl"),
        user_conf=str(tmp / f"{name}.user.conf"),
        loadgen_model="llama2-70b",
        loadgen_scenario="Offline",
        mode="performance",
        performance_sample_count=64,
        generation={"max_new_tokens": 32, "min_new_tokens": 1, "greedy": True},
        engine=engine,
    )
    return args


def loadgen_run(work: Path, tmp: Path, port: int, name: str, audit: bool) -> Path:
    """One LoadGen Offline performance run through the endpoint backend, in its own process."""
    out = tmp / name
    args = run_args(work, tmp, port, name)
    args.update(out_dir=str(out), audit_config=audit_config_text("TEST04", RULES["audit_config"]) if audit else None)
    (tmp / f"{name}.json").write_text(json.dumps(args))
    result = subprocess.run(
        [sys.executable, str(CHILD), str(tmp / f"{name}.json")], capture_output=True, text=True, cwd=tmp, timeout=300
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return out


@pytest.mark.parametrize("fault, passes", [("none", True), ("cache_results", False)])
def test_test04_passes_a_fair_server_and_fails_a_caching_one(e2e_workdir, tmp_path, fault, passes):
    port = free_ports(1)[0]
    spec = SimulatedEndpointSpec(port=port, slots=SLOTS, tokens_per_s=320, ttft_s=0.01, output_tokens=32, fault=fault)
    with simulated_endpoints([spec]):
        performance = loadgen_run(e2e_workdir, tmp_path, port, "performance", audit=False)
        audited = loadgen_run(e2e_workdir, tmp_path, port, "TEST04", audit=True)
    detail = read_detail(audited / "mlperf_log_detail.txt")
    assert detail["effective_performance_issue_same"] == 1 and detail["effective_performance_issue_same_index"] == 3
    assert not (audited / "audit.config").exists()  # never left behind to audit a later run

    out = tmp_path / "compliance" / "TEST04"
    assert (
        verify_job(
            "TEST04",
            str(audited),
            "Offline",
            str(e2e_workdir / MODEL),
            RULES,
            str(out),
            performance_run=str(performance),
        )
        is passes
    )
    verdict = json.loads((out / "verdict.json").read_text())["details"]
    lines = (out / RULES["verify_file"]).read_text().splitlines()
    assert ("TEST PASS" in lines) is passes
    if passes:
        assert 0.9 < verdict["speedup"] < RULES["max_speedup"]["Offline"]
    else:  # answers from the cache: far faster than generating them
        assert verdict["speedup"] > 2
    assert sorted(p.name for p in (out / "performance" / "run_1").iterdir()) == [
        "mlperf_log_detail.txt",
        "mlperf_log_summary.txt",
    ]


@pytest.mark.parametrize("fault", ["none", "cache_results"])
def test_the_measurement_pair_measures_again_only_what_noise_can_explain(e2e_workdir, tmp_path, fault):
    """The workflow's measurement pair (stages/pair.py) with its real LoadGen processes: a fair
    server passes (measured again only if the machine's speed moved between its two runs); a
    caching server fails at once: far beyond the noise ceiling, it gets no second attempt, whose
    performance run its cache (kept from the first) would serve as fast as the audited run."""
    port = free_ports(1)[0]
    spec = SimulatedEndpointSpec(port=port, slots=SLOTS, tokens_per_s=320, ttft_s=0.01, output_tokens=32, fault=fault)
    args = run_args(e2e_workdir, tmp_path, port, "pair")
    own = {"dataset_file": args.pop("dataset_file")}
    args.pop("mode")
    base = tmp_path / "TEST04_pair"
    with simulated_endpoints([spec]):
        result = measurement_pair_job(
            run=args,
            performance=own,
            audited={**own, "audit_config": audit_config_text("TEST04", RULES["audit_config"])},
            test="TEST04",
            scenario="Offline",
            rules_test=RULES,
            attempts=2,
            noise_ceiling=1.5,
            performance_out=str(base / "performance"),
            audited_out=str(base / "TEST04"),
            attempts_out=str(base / "attempts"),
        )
    attempts = result["attempts"]
    assert all(a["validity"] == {"performance": "VALID", "TEST04": "VALID"} for a in attempts)
    if fault == "none":
        assert result["passed"] and 0.9 < attempts[-1]["speedup"] < RULES["max_speedup"]["Offline"]
    else:
        assert not result["passed"] and len(attempts) == 1 and attempts[0]["speedup"] > 2
    detail = read_detail(base / "TEST04" / "mlperf_log_detail.txt")
    assert detail["effective_performance_issue_same"] == 1
    assert read_detail(base / "performance" / "mlperf_log_detail.txt").get("effective_performance_issue_same", 0) == 0
