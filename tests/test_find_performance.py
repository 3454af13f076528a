"""target_qps: auto: the target arithmetic and the searches (against simulated machines, no
LoadGen), the plan and user.conf around them, bad input, the plan view's pricing, and one real
find-performance pass through Snakemake on the tiny demo model."""

from __future__ import annotations

import datetime
import json
import platform
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import E2E_REUSABLE, SCHEMA, make_workdir, model_load_per_run, run_snakemake

from mlperf_repro.config import validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.find_performance import (
    FIRST_QPS,
    PROBE_HEADROOM,
    Probe,
    SearchFailed,
    chosen_target,
    measure_rate,
    probe_from_detail,
    search_highest_valid,
    short_run_settings,
)
from mlperf_repro.plan import Plan
from mlperf_repro.stages.find_performance import find_performance_job

SYSTEM, BENCH = "cpu-2c-vllm", "tiny-llama-mxfp4"
WHERE = f"systems.{SYSTEM}.benchmarks.{BENCH}"


def scenarios(config: dict) -> dict:
    return config["systems"][SYSTEM]["benchmarks"][BENCH]


def plan_of(config: dict) -> Plan:
    return Plan(validate_config(config, SCHEMA))


# -- simulated machines -------------------------------------------------------------------
def offline_machine(rate: float, min_duration_s: float = 10.0):
    """An Offline run at ``qps`` issues 1.1 x min_duration x qps samples at ``rate``/s; it
    covers min_duration when that takes at least min_duration."""
    asked: list[float] = []

    def run(qps: float) -> Probe:
        asked.append(qps)
        seconds = 1.1 * min_duration_s * qps / rate
        return Probe(qps=qps, rate=rate, covered=seconds >= min_duration_s, valid=seconds >= min_duration_s)

    return run, asked


def server_machine(capacity: float):
    """Short Server runs are valid up to ``capacity`` queries/s."""
    asked: list[float] = []

    def run(qps: float) -> Probe:
        asked.append(qps)
        return Probe(qps=qps, rate=min(qps, capacity), covered=True, valid=qps <= capacity)

    return run, asked


# -- arithmetic -----------------------------------------------------------------------------
def test_the_margin_goes_up_for_offline_and_singlestream_and_down_for_server():
    # Offline: a target above the rate only lengthens the run; one below ends it early.
    assert chosen_target("Offline", 373.7, 0.1) == pytest.approx(411.07)
    assert chosen_target("SingleStream", 2.0, 0.1) == pytest.approx(2.2)
    # Server/Interactive: the found rate met the limits in a short run; stay below it.
    assert chosen_target("Server", 100.0, 0.1) == pytest.approx(90.0)
    assert chosen_target("Interactive", 50.0, 0.2) == pytest.approx(40.0)


def test_the_target_covers_min_duration_where_the_vendor_value_did_not():
    """The INVALID run of 2026-12-01: 373.7 samples/s against target_qps 135 issued
    1.1 x 600 x 135 = 89,100 samples, done in 238 s < 600 s. The chosen target issues enough."""
    rate, min_duration_s = 373.7, 600
    assert 1.1 * min_duration_s * 135 / rate < min_duration_s
    target = chosen_target("Offline", rate, 0.1)
    assert 1.1 * min_duration_s * target / rate >= min_duration_s


def test_short_run_settings():
    base = {"target_qps": "auto", "min_duration": 600000, "performance_sample_count_override": 256}
    offline = short_run_settings("Offline", base, 300.0, 60000, 500)
    assert offline == {
        "target_qps": 300.0,
        "min_duration": 60000,
        "min_query_count": 1,  # the length follows target x min_duration, not the round's 24,576
        # Not whole passes over the performance samples (the round's mlperf.conf value for llama2).
        "sample_concatenate_permutation": 0,
        "performance_sample_count_override": 256,
    }
    server = short_run_settings("Server", {**base, "min_query_count": 100}, 20.0, 60000, 500)
    assert server["min_query_count"] == 500 and server["target_qps"] == 20.0
    single = short_run_settings("SingleStream", {"target_qps": 3, "target_latency": 333.333}, 5.0, 1000, 500)
    assert "target_latency" not in single  # the stage writes the step's own (userconf.with_target)


# -- the searches ---------------------------------------------------------------------------
def test_offline_with_a_start_near_the_rate_takes_one_short_run():
    run, asked = offline_machine(rate=250.0)
    rate, probes = measure_rate(run, start_qps=200.0, max_steps=6)
    assert rate == 250.0 and asked == [200.0 * PROBE_HEADROOM] and len(probes) == 1


def test_offline_without_a_start_climbs_until_a_run_lasts_min_duration():
    run, asked = offline_machine(rate=373.7)
    rate, probes = measure_rate(run, start_qps=None, max_steps=6)
    assert rate == 373.7
    assert asked[0] == FIRST_QPS * PROBE_HEADROOM
    assert asked == sorted(asked) and len(asked) <= 6
    assert [p.covered for p in probes] == [False] * (len(probes) - 1) + [True]


def test_offline_without_a_start_needs_two_runs_where_the_first_measures_the_rate():
    run, asked = offline_machine(rate=1e6)
    rate, _ = measure_rate(run, start_qps=None, max_steps=2)
    assert rate == 1e6 and asked == [FIRST_QPS * PROBE_HEADROOM, 2e6]


def test_offline_that_never_covers_min_duration_names_the_fix():
    run, _ = offline_machine(rate=1e6)
    with pytest.raises(SearchFailed, match="start_qps"):
        measure_rate(run, start_qps=None, max_steps=1)


@pytest.mark.parametrize("start", [5.0, 40.0, 99.0, 100.0, 250.0, 2000.0])
def test_server_search_finds_the_highest_valid_rate(start):
    capacity, margin = 100.0, 0.1
    run, asked = server_machine(capacity)
    found, probes = search_highest_valid(run, start_qps=start, max_steps=8, resolution=margin)
    assert found <= capacity
    assert len(probes) <= 8 and asked[0] == start
    # Within the search's resolution of the machine's capacity (or all steps were spent bracketing).
    invalid = [p.qps for p in probes if not p.valid]
    if invalid and len(probes) < 8:
        assert min(invalid) - found <= margin * found


def test_server_search_stops_within_the_resolution():
    run, asked = server_machine(100.0)
    found, _ = search_highest_valid(run, start_qps=95.0, max_steps=20, resolution=0.1)
    # 95 valid, 142.5 invalid, then bisection until within 10%.
    assert asked[:2] == [95.0, 142.5] and len(asked) < 20
    assert 90.9 < found <= 100.0


def test_server_search_without_a_valid_rate_fails_clearly():
    run, _ = server_machine(0.0)  # e.g. a latency limit no rate meets
    with pytest.raises(SearchFailed, match="no short run was valid"):
        search_highest_valid(run, start_qps=10.0, max_steps=3, resolution=0.1)


def test_verdict_from_the_detail_log():
    detail = {
        "result_validity": "VALID",
        "result_min_duration_met": True,
        "result_completed_samples_per_sec": 19.5,
        "result_first_token_99.00_percentile_latency_ns": 2.5e9,  # over the 2000 ms TTFT limit
        "result_time_per_output_token_99.00_percentile_ns": 5e7,
    }
    limits = {"ttft": 2000, "tpot": 200}
    probe = probe_from_detail("Server", 20.0, detail, limits)
    assert not probe.valid and probe.facts["ttft_p99_ms"] == 2500.0
    detail["result_first_token_99.00_percentile_latency_ns"] = 1.5e9
    assert probe_from_detail("Server", 20.0, detail, limits).valid
    assert not probe_from_detail("Server", 20.0, {**detail, "result_validity": "INVALID"}, limits).valid
    offline = probe_from_detail(
        "Offline",
        300.0,
        {"result_validity": "INVALID", "result_min_duration_met": False, "result_samples_per_second": 373.7},
        {},
    )
    assert offline.rate == 373.7 and not offline.covered
    single = probe_from_detail(
        "SingleStream", 3.0, {"result_mean_latency_ns": 2.5e8, "result_min_duration_met": True}, {}
    )
    assert single.rate == pytest.approx(4.0) and single.covered


# -- the stage with a simulated short run -------------------------------------------------
def test_the_stage_writes_the_result_and_the_user_conf_reads_it(tmp_path, default_config):
    scenarios(default_config)["Offline"] = {"target_qps": "auto", "start_qps": 200}
    plan = plan_of(default_config)
    search = plan.find_performance_request(SYSTEM, BENCH, "Offline")
    # The default config's find_performance.min_duration_ms: 5 s (never longer than the test
    # scale's 10-s runs).
    assert search["min_duration_ms"] == 5000
    asked = []

    def fake_short_run(run, user_conf, out_dir):
        """A machine doing 250 samples/s: writes what LoadGen and the harness would."""
        conf = dict(line.split(" = ") for line in user_conf.read_text().splitlines() if not line.startswith("#"))
        qps = float(conf["llama2-70b.Offline.target_qps"])
        asked.append((qps, conf["llama2-70b.Offline.min_duration"], conf["llama2-70b.Offline.min_query_count"]))
        assert conf["llama2-70b.Offline.sample_concatenate_permutation"] == "0"  # a short run only
        out_dir.mkdir(parents=True)
        seconds = float(conf["llama2-70b.Offline.min_duration"]) / 1000
        covered = 1.1 * seconds * qps / 250 >= seconds
        lines = [
            {"key": "result_validity", "value": "VALID" if covered else "INVALID"},
            {"key": "result_min_duration_met", "value": covered},
            {"key": "result_samples_per_second", "value": 250.0},
        ]
        (out_dir / "mlperf_log_detail.txt").write_text("".join(f":::MLLOG {json.dumps(x)}\n" for x in lines))
        (out_dir / "run_record.json").write_text(json.dumps({"test_seconds": 13.2, "completed_samples": 3300}))

    out = tmp_path / "Offline.json"
    result = find_performance_job(
        run={}, search=search, out_json=str(out), runs_dir=str(tmp_path / "Offline"), run_short=fake_short_run
    )
    assert asked == [(300.0, "5000", "1")]
    saved = json.loads(out.read_text())
    assert saved == result
    assert saved["measured_qps"] == 250.0 and saved["target_qps"] == pytest.approx(275.0) and saved["margin"] == 0.1
    assert saved["host"]["hostname"] == platform.node() and saved["host"]["cpu_model"]
    assert datetime.datetime.fromisoformat(saved["date_utc"]).utcoffset() == datetime.timedelta(0)
    assert [r["step"] for r in saved["runs"]] == [1] and saved["runs"][0]["min_duration_met"] is True
    text = plan.user_conf_text(SYSTEM, BENCH, "Offline", str(out))
    assert "llama2-70b.Offline.target_qps = 275\n" in text
    assert "target_qps auto: 275.0 chosen by the find-performance pass" in text
    assert "sample_concatenate_permutation" not in text  # the packaged run keeps the round's (mlperf.conf)
    with pytest.raises(ValueError, match="no find-performance result"):
        plan.user_conf_text(SYSTEM, BENCH, "Offline")


def test_singlestream_auto_writes_the_target_latency(tmp_path, demo_config):
    bench = demo_config["systems"]["cpu-2c-diffusers"]["benchmarks"]["tiny-wan-t2v"]
    bench["SingleStream"] = {"target_qps": "auto"}
    plan = plan_of(demo_config)
    found = tmp_path / "SingleStream.json"
    found.write_text(
        json.dumps(
            {
                "target_qps": 3.3,
                "measured_qps": 3.0,
                "measured_what": "1 / mean latency",
                "margin": 0.1,
                "date_utc": "2026-12-02T00:00:00+00:00",
                "host": {"hostname": "h", "cpu_model": "c"},
            }
        )
    )
    text = plan.user_conf_text("cpu-2c-diffusers", "tiny-wan-t2v", "SingleStream", str(found))
    assert "wan-2.2-t2v-a14b.SingleStream.target_latency = 303.03\n" in text
    assert "target_qps =" not in text


def test_a_scaling_study_scales_the_found_target(tmp_path):
    from test_scaling import BENCH as SCALING_BENCH
    from test_scaling import SYSTEM as HEAD
    from test_scaling import scaling_config

    config = scaling_config([1, 2])
    config["systems"][HEAD]["benchmarks"][SCALING_BENCH]["Offline"] = {"target_qps": "auto", "start_qps": 50}
    plan = plan_of(config)
    found = tmp_path / "Offline.json"
    found.write_text(
        json.dumps(
            {
                "target_qps": 66.0,
                "measured_qps": 60.0,
                "measured_what": "samples/s",
                "margin": 0.1,
                "date_utc": "2026-12-02T00:00:00+00:00",
                "host": {"hostname": "h", "cpu_model": "c"},
            }
        )
    )
    assert "llama2-70b.Offline.target_qps = 33\n" in plan.scaling_user_conf_text(
        HEAD, SCALING_BENCH, "Offline", 1, str(found)
    )
    assert "llama2-70b.Offline.target_qps = 66\n" in plan.scaling_user_conf_text(
        HEAD, SCALING_BENCH, "Offline", 2, str(found)
    )
    # The plan view prices it at start_qps, scaled alike: 1 of 2 endpoints run at 25/s, target 27.5.
    est = estimate_plan(config)
    point = next(
        d
        for r in est.rows
        for d in r.details
        if d["rule"] == "scaling_run" and d["scenario"] == "Offline" and d["endpoints"] == 1
    )
    # Test scale of the end-to-end config: min_duration 3 s, Offline min_query_count 64:
    # max(64, int(1.1 x 3 x 27.5) = 90) samples, padded to whole passes over its 64 performance
    # samples (llama2's sample_concatenate_permutation) = 128.
    assert point["queries"] == 128
    assert point["test_seconds"] == pytest.approx(128 / 25)


# -- a real short run ---------------------------------------------------------------------------
@pytest.mark.slow
def test_a_real_short_run_lasts_what_its_settings_say_whatever_the_sample_count(tmp_path, monkeypatch):
    """One short run of a full-scale llama2 Interactive search, as the stage makes it: real LoadGen
    in its own process with the round's mlperf.conf, which loads 24,576 performance samples and
    asks sample_concatenate_permutation. Served by a SIMULATED endpoint (the run's length is under
    test, not a server). LoadGen generates what min_duration x target_qps and min_query_count ask,
    not a whole pass over the 24,576 samples (issue 33: 24,576 queries, 8 minutes at 50/s)."""
    import pandas as pd
    from sim_endpoints import free_ports, simulated_endpoints
    from simulated_endpoint import SimulatedEndpointSpec
    from test_scaling import BENCH as SCALING_BENCH
    from test_scaling import SYSTEM as HEAD
    from test_scaling import scaling_config

    from mlperf_repro.fetch import record_built
    from mlperf_repro.loadgen_logs import read_detail

    (port,) = free_ports(1)
    config = scaling_config([port])
    del config["scaling_study"]
    config["test_scale"]["enabled"] = False  # the round's own sample counts
    (dataset_name,) = config["datasets"]
    config["datasets"][dataset_name]["builtin"]["samples"] = 24576
    config["systems"][HEAD]["benchmarks"][SCALING_BENCH] = {
        "Offline": {"target_qps": 250},
        "Interactive": {"target_qps": "auto", "start_qps": 250},
    }
    min_duration_s, qps, min_queries = 2, 250, 500
    config["find_performance"] = {"min_duration_ms": min_duration_s * 1000, "max_steps": 1, "min_query_count": 500}
    plan = plan_of(config)
    search = plan.find_performance_request(HEAD, SCALING_BENCH, "Interactive")
    assert plan.performance_sample_count(SCALING_BENCH) == 24576
    assert "performance_sample_count_override" not in search["settings"]  # mlperf.conf's 24,576 applies

    monkeypatch.chdir(tmp_path)  # the plan's paths are relative to the workflow's directory
    dataset_file = Path(plan.dataset_file(SCALING_BENCH, "performance"))
    dataset_file.parent.mkdir(parents=True)
    prompts = [[1 + i % 997, 2 + i % 991, 3 + i % 983] for i in range(24576)]
    pd.DataFrame({"tok_input": prompts, "output": [""] * len(prompts)}).to_pickle(dataset_file)
    record_built(dataset_file.parent, "test: 24,576 token prompts", {})
    run = {
        "model_dir": str(tmp_path / "model"),  # external endpoints: the servers hold the model
        "dataset_dir": str(dataset_file.parent),
        "dataset_file": str(dataset_file),
        "prompt_check": plan.prompt_check(SCALING_BENCH, "performance"),
        "loadgen_model": plan.loadgen_model(SCALING_BENCH, "Interactive"),
        "loadgen_scenario": plan.loadgen_scenario("Interactive"),
        "performance_sample_count": plan.performance_sample_count(SCALING_BENCH),
        "generation": plan.generation_params(SCALING_BENCH, "performance"),
        "engine": plan.engine(HEAD),
        "task": plan.task(SCALING_BENCH),
    }
    runs_dir = tmp_path / "search"
    sim = SimulatedEndpointSpec(port=port, slots=256, tokens_per_s=2000, ttft_s=0.005, output_tokens=4)
    with simulated_endpoints([sim]):
        try:
            find_performance_job(
                run=run, search=search, out_json=str(tmp_path / "Interactive.json"), runs_dir=str(runs_dir)
            )
        except UserError as exc:
            # Whether the run met the latency limits depends on this machine's load; its length does not.
            assert "no short run was valid down to target_qps 250" in str(exc)
    assert (
        "llama2-70b-interactive.Server.sample_concatenate_permutation = 0\n"
        in (runs_dir / "step1.user.conf").read_text()
    )
    detail = read_detail(runs_dir / "step1" / "mlperf_log_detail.txt")
    assert detail["effective_performance_sample_count"] == 24576
    assert detail["effective_sample_concatenate_permutation"] is False
    # Poisson arrivals: about min_duration x target_qps = 500 (the same as min_query_count here);
    # with the round's concatenation it would be 24,576.
    assert min_queries <= detail["generated_query_count"] <= 1.2 * max(min_queries, min_duration_s * qps)


# -- the plan -------------------------------------------------------------------------------
def test_where_each_search_starts(default_config):
    scenarios(default_config)["Offline"] = {"target_qps": "auto"}
    scenarios(default_config)["Server"] = {"target_qps": "auto"}
    scenarios(default_config)["Interactive"] = {"target_qps": "auto", "start_qps": 15}
    plan = plan_of(default_config)
    assert [j.scenario for j in plan.find_performance_jobs] == ["Offline", "Server", "Interactive"]
    assert plan.search_start(SYSTEM, BENCH, "Offline") == (None, "the default first rate", None)
    assert plan.search_start(SYSTEM, BENCH, "Server") == (
        None,
        "the Offline find-performance pass",
        plan.find_performance_path(SYSTEM, BENCH, "Offline"),
    )
    assert plan.search_start(SYSTEM, BENCH, "Interactive") == (15.0, "start_qps", None)
    # A number in Offline is the Server search's start.
    scenarios(default_config)["Offline"] = {"target_qps": 400}
    plan = plan_of(default_config)
    assert plan.search_start(SYSTEM, BENCH, "Server") == (400.0, "the Offline target_qps", None)
    assert plan.find_performance_input(SYSTEM, BENCH, "Offline") == []
    request = plan.find_performance_request(SYSTEM, BENCH, "Interactive")
    assert request["latency_limits_ms"] == {"ttft": 450, "tpot": 40}
    assert request["loadgen_model"] == "llama2-70b-interactive"


def test_the_find_performance_section_sets_the_short_runs(default_config):
    default_config["test_scale"]["enabled"] = False
    default_config["find_performance"] = {"min_duration_ms": 30000, "margin": 0.05, "max_steps": 3}
    scenarios(default_config)["Offline"] = {"target_qps": "auto", "start_qps": 300}
    request = plan_of(default_config).find_performance_request(SYSTEM, BENCH, "Offline")
    assert (request["min_duration_ms"], request["margin"], request["max_steps"], request["min_query_count"]) == (
        30000,
        0.05,
        3,
        500,
    )


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "edit, fragments",
    [
        (lambda s: s.update(Offline={"target_qps": "auto", "start_qps": -5}), [f"{WHERE}.Offline.start_qps", "> 0"]),
        (lambda s: s.update(Offline={"target_qps": "auto", "start_qps": 0}), [f"{WHERE}.Offline.start_qps", "> 0"]),
        (lambda s: s.update(Server={"target_qps": 30, "start_qps": 20}), [f"{WHERE}.Server.start_qps", "only used"]),
        (lambda s: s.update(Offline={"target_qps": "automatic"}), [f"{WHERE}.Offline.target_qps", "'auto'"]),
        (
            lambda s: (s.pop("Offline"), s.update(Server={"target_qps": "auto"})),
            [f"{WHERE}.Server.start_qps", "Offline scenario", "set start_qps"],
        ),
    ],
    ids=["negative start", "zero start", "start without auto", "misspelt auto", "server without a start"],
)
def test_bad_auto_settings_are_one_clear_line(default_config, edit, fragments):
    edit(scenarios(default_config))
    with pytest.raises(UserError) as caught:
        validate_config(default_config, SCHEMA)
    lines = str(caught.value).splitlines()[1:]
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_auto_where_the_table_has_no_latency_limits(default_config, monkeypatch):
    from mlperf_repro.benchmarks import Benchmark

    monkeypatch.setattr(Benchmark, "latency_limits_ms", lambda self, scenario: None)
    scenarios(default_config)["Server"] = {"target_qps": "auto", "start_qps": 10}
    with pytest.raises(UserError, match=r"Server\.target_qps: auto searches .* gives none for llama2-70b-99 Server"):
        validate_config(default_config, SCHEMA)


def test_bad_find_performance_section(default_config):
    default_config["find_performance"] = {"margin": 1.5, "max_steps": 0}
    with pytest.raises(UserError) as caught:
        validate_config(default_config, SCHEMA)
    assert "find_performance.margin: must be < 1" in str(caught.value)
    assert "find_performance.max_steps: must be >= 1" in str(caught.value)


# -- the plan view --------------------------------------------------------------------------
def test_plan_view_counts_the_passes_and_prices_auto_at_start_qps(default_config):
    model_load_per_run(default_config)  # every LoadGen process priced with its model load (30 s)
    scenarios(default_config)["Offline"] = {"target_qps": "auto", "start_qps": 200}
    scenarios(default_config)["Server"] = {"target_qps": "auto", "start_qps": 25}
    scenarios(default_config)["Interactive"] = {"target_qps": "auto"}
    est = estimate_plan(validate_config(default_config, SCHEMA))
    row = next(r for r in est.rows if r.stage == "find performance")
    assert row.jobs == {"find_performance": 3}
    offline, server, interactive = row.details
    # The short runs last the config's find_performance.min_duration_ms, 5 s.
    # Interactive starts from the Offline pass, priced at its start_qps: max(5 s, 500 / 200) per run.
    assert interactive["start_qps"] == 200 and interactive["start_from"] == "the Offline find-performance pass"
    assert interactive["wall_s"] == pytest.approx(6 * (5 + 30))
    # Offline: one short run asking 1.5 x 200/s for 1.1 x 5 s at 200/s = 8.25 s, + 30 s.
    assert offline["loadgen_runs"] == 1 and offline["wall_s"] == pytest.approx(1.1 * 1.5 * 5 + 30)
    # Server: at most max_steps (6) runs of max(5 s, 500 queries / 25 qps = 20 s), + 30 s each.
    assert server["loadgen_runs"] == 6 and server["wall_s"] == pytest.approx(6 * (20 + 30))
    runs = {r.stage: r for r in est.rows}
    # Offline at target 200 x 1.1 = 220: max(256, 1.1 x 10 x 220 = 2420) samples, padded to whole
    # passes over the 256 performance samples (sample_concatenate_permutation) = 2560 at 200/s.
    assert runs["run: Offline performance"].wall_s == pytest.approx(2560 / 200 + 30)
    assert runs["run: Offline accuracy"].wall_s == pytest.approx(256 / 200 + 30)
    # Server at 25 x 0.9 = 22.5 qps: max(10 x 22.5, 500) queries, padded to 2 x 256, + 30 s.
    assert runs["run: Server performance"].wall_s == pytest.approx(512 / 22.5 + 30)
    assert any("unknown until measured; priced at start_qps" in note for note in est.notes)


def test_plan_view_prices_each_short_run_at_min_duration_whatever_the_sample_count():
    """The conformance example (24,576 performance samples, 30 s short runs, 4 steps, 30 s per
    LoadGen process): each short run lasts its min_duration, as the runs do now that they do not
    concatenate (issue 33: each ran 24,576 queries, 8 to 12 minutes, against 30 s priced)."""
    from conftest import REPO

    config = yaml.safe_load((REPO / "config/examples/conformance-cpu.yaml").read_text())
    est = estimate_plan(validate_config(config, SCHEMA))
    offline, server, interactive = next(r for r in est.rows if r.stage == "find performance").details
    # Offline: one run asking 1.5 x 320/s, 1.1 x 30 s x 480 = 15,840 samples at 320/s = 49.5 s.
    assert (offline["loadgen_runs"], offline["short_run_seconds"]) == (1, pytest.approx(49.5))
    assert offline["wall_s"] == pytest.approx(49.5 + 30)
    # Server and Interactive: at most 4 runs of max(30 s, 500 queries / start_qps) = 30 s each.
    for search in (server, interactive):
        assert (search["loadgen_runs"], search["short_run_seconds"]) == (4, 30)
        assert search["wall_s"] == pytest.approx(4 * (30 + 30))
    # Where min_query_count outlasts min_duration: 500 queries at 10/s = 50 s.
    config["systems"]["cpu-2c-vllm"]["benchmarks"]["tiny-llama-mxfp4"]["Interactive"]["start_qps"] = 10
    est = estimate_plan(validate_config(config, SCHEMA))
    interactive = next(r for r in est.rows if r.stage == "find performance").details[2]
    assert interactive["wall_s"] == pytest.approx(4 * (50 + 30))


def test_plan_view_prices_a_singlestream_short_run_at_min_duration(demo_config):
    """SingleStream runs back to back and ends once min_duration is met: the target 1.5 x start_qps
    asked only sets how many queries LoadGen generates."""
    demo_config["systems"]["cpu-2c-diffusers"]["benchmarks"]["tiny-wan-t2v"]["SingleStream"] = {
        "target_qps": "auto",
        "start_qps": 0.5,
    }
    est = estimate_plan(validate_config(demo_config, SCHEMA))
    search = next(
        d for r in est.rows if r.stage == "find performance" for d in r.details if d["scenario"] == "SingleStream"
    )
    short_s = (
        plan_of(demo_config).find_performance_request("cpu-2c-diffusers", "tiny-wan-t2v", "SingleStream")[
            "min_duration_ms"
        ]
        / 1000
    )
    assert search["loadgen_runs"] == 1 and search["short_run_seconds"] == pytest.approx(short_s)


def test_plan_view_says_plainly_what_it_cannot_price(default_config):
    model_load_per_run(default_config)
    scenarios(default_config)["Offline"] = {"target_qps": "auto"}
    est = estimate_plan(validate_config(default_config, SCHEMA))
    row = next(r for r in est.rows if r.stage == "find performance")
    assert row.details[0]["loadgen_runs"] == 6 and row.details[0]["loadgen_runs_are"] == "at most"
    runs = {r.stage: r for r in est.rows}
    # The length min_duration alone fixes: 1.1 x (1 + 0.1) x 10 s; the accuracy run only its overhead.
    assert runs["run: Offline performance"].wall_s == pytest.approx(1.1 * 1.1 * 10 + 30)
    assert runs["run: Offline performance"].details[0]["queries"] is None
    assert runs["run: Offline accuracy"].wall_s == pytest.approx(30)
    note = next(n for n in est.notes if "without start_qps" in n)
    assert f"{WHERE}.Offline" in note and "not counted" in note
    assert "find performance" in est.render()


# -- the real pass ----------------------------------------------------------------------------
@pytest.mark.slow
def test_the_real_pass_through_snakemake(tmp_path, default_config, e2e_workdir):
    """Offline and Server auto on the tiny demo model: real LoadGen runs on vLLM's CPU backend,
    the JSON they leave and the user.conf files that read it. The Server verdict depends on how
    loaded this machine is (its TPOT at 25 queries/s): either outcome is checked. (25, not 10:
    the short run is LoadGen's 500-query minimum, 20 s of engine work at 25/s, 50 s at 10.) The model and
    dataset are the end-to-end run's (same config entries, same outputs)."""
    config = default_config
    scenarios(config)["Offline"] = {"target_qps": "auto", "start_qps": 200}
    scenarios(config)["Server"] = {"target_qps": "auto", "start_qps": 25}
    config["find_performance"] = {"min_duration_ms": 5000, "max_steps": 1}
    work = make_workdir(tmp_path)
    for folder in E2E_REUSABLE:
        if (e2e_workdir / folder).is_dir():
            shutil.copytree(e2e_workdir / folder, work / folder, copy_function=shutil.copy2)
    (work / "auto.yaml").write_text(yaml.safe_dump(config))
    confs = [f"results/runs/{SYSTEM}/{BENCH}/{s}/user.conf" for s in ("Offline", "Server")]
    result = run_snakemake(
        work, "--cores", "2", "--keep-going", "--configfile", "auto.yaml", "--", *confs, timeout=1500
    )
    logs = "\n".join(f"== {p}\n{p.read_text()[-3000:]}" for p in sorted((work / "logs").rglob("*.log")))
    offline_json = work / f"results/find_performance/{SYSTEM}/{BENCH}/Offline.json"
    assert offline_json.is_file(), f"{result.stderr[-5000:]}\n{logs}"
    offline = json.loads(offline_json.read_text())
    assert offline["scenario"] == "Offline" and offline["host"]["hostname"] == platform.node()
    assert offline["margin"] == 0.1 and offline["measured_qps"] > 0
    # The last short run lasted its min_duration, so it measured the machine; the target is above it.
    assert offline["runs"][-1]["min_duration_met"] is True
    assert offline["target_qps"] == pytest.approx(offline["measured_qps"] * 1.1, rel=1e-3)
    for step in offline["runs"]:
        assert (work / step["run_dir"] / "mlperf_log_detail.txt").is_file()
        assert (work / step["run_dir"] / "provenance.json").is_file()
        assert "llama2-70b.Offline.min_duration = 5000" in (work / step["user_conf"]).read_text()
    conf = (work / confs[0]).read_text()
    assert float(conf.split("llama2-70b.Offline.target_qps = ")[1].split()[0]) == offline["target_qps"]
    assert "llama2-70b.Offline.min_duration = 10000" in conf  # the test scale's own duration
    assert "chosen by the find-performance pass" in conf

    server_json = work / f"results/find_performance/{SYSTEM}/{BENCH}/Server.json"
    step_dir = work / f"results/find_performance/{SYSTEM}/{BENCH}/Server/step1"
    assert (step_dir / "mlperf_log_detail.txt").is_file()  # kept whatever the verdict
    server_log = (work / f"logs/find_performance/{SYSTEM}/{BENCH}/Server.log").read_text()
    if server_json.is_file():
        server = json.loads(server_json.read_text())
        assert server["runs"][0]["valid_for_search"] is True and server["runs"][0]["ttft_limit_ms"] == 2000
        assert server["measured_qps"] == 25.0 and server["target_qps"] == pytest.approx(22.5)
        assert "llama2-70b.Server.target_qps = 22.5\n" in (work / confs[1]).read_text()
        assert result.returncode == 0, f"{result.stderr[-5000:]}\n{logs}"
        again = run_snakemake(work, "-n", "--cores", "2", "--configfile", "auto.yaml", "--", *confs)
        assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    else:
        # Too loaded for 25 queries/s within the limits: one line naming the key and what to do.
        assert result.returncode != 0 and not (work / confs[1]).exists()
        assert f"{WHERE}.Server.target_qps auto: no short run was valid down to target_qps 25" in server_log
        assert '"valid_for_search": false' in server_log
