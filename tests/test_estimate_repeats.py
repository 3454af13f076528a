"""repeats: N (issue 19): the plan's repeat runs, the config checks, the plan view's count and
time, and the summary's spread arithmetic (mean, min-max, relative std, Student-t 95% interval)
checked by hand on fake LoadGen logs."""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import statistics

import pytest
from conftest import SCHEMA

from mlperf_repro.config import validate_config
from mlperf_repro.errors import UserError
from mlperf_repro.estimate import estimate_plan
from mlperf_repro.plan import Job, Plan
from mlperf_repro.report.summary import COLUMNS, repeat_spread, spread_lines, summary_json, summary_rows, to_csv
from mlperf_repro.stats import summarize

SYSTEM, BENCH = "cpu-2c-vllm", "tiny-llama-mxfp4"
RUNS = "results/runs/cpu-2c-vllm/tiny-llama-mxfp4"


def scenarios(config: dict) -> dict:
    return config["systems"][SYSTEM]["benchmarks"][BENCH]


@pytest.fixture
def repeated(default_config) -> dict:
    """The default config's llama2 part with Server repeated 3 times, Offline twice (run 2 packaged)."""
    scenarios(default_config)["Server"]["repeats"] = 3
    scenarios(default_config)["Offline"].update(repeats=2, packaged_repeat=2)
    return validate_config(default_config, SCHEMA)


def test_plan_lists_the_repeats(repeated):
    plan = Plan(repeated)
    assert plan.repeats(SYSTEM, BENCH, "Server") == 3
    assert plan.repeats(SYSTEM, BENCH, "Interactive") == 1  # the default
    assert plan.performance_run_dirs(SYSTEM, BENCH, "Server") == [
        f"{RUNS}/Server/performance",
        f"{RUNS}/Server/performance_run_2",
        f"{RUNS}/Server/performance_run_3",
    ]
    assert plan.repeat_outputs() == [
        f"{RUNS}/Offline/performance_run_2",
        f"{RUNS}/Server/performance_run_2",
        f"{RUNS}/Server/performance_run_3",
    ]
    # run 1 is packaged unless packaged_repeat names another
    assert plan.packaged_run_dir(SYSTEM, BENCH, "Server") == f"{RUNS}/Server/performance"
    assert plan.packaged_run_dir(SYSTEM, BENCH, "Offline") == f"{RUNS}/Offline/performance_run_2"
    assert plan.packaged_repeat_outputs() == [f"{RUNS}/Offline/performance_run_2"]
    # repeats live outside user.conf: they never rerun a scenario's user.conf (nor its runs)
    assert "repeats" not in plan.user_conf_settings(SYSTEM, BENCH, "Server")


def test_default_config_has_no_repeats(default_config):
    plan = Plan(validate_config(default_config, SCHEMA))
    assert plan.repeat_outputs() == [] and plan.packaged_repeat_outputs() == []
    assert "repeats" not in scenarios(default_config)["Server"]  # no schema default filled in


@pytest.mark.parametrize(
    "settings, fragment",
    [
        ({"repeats": 2, "packaged_repeat": 3}, "packaged_repeat: 3 is not one of the scenario's repeats (repeats: 2)"),
        ({"packaged_repeat": 2}, "packaged_repeat: 2 is not one of the scenario's repeats (repeats: 1)"),
        ({"repeats": 0}, "repeats"),
    ],
)
def test_bad_repeats_are_refused(default_config, settings, fragment):
    scenarios(default_config)["Server"].update(settings)
    with pytest.raises(UserError, match="Server") as error:
        validate_config(default_config, SCHEMA)
    assert fragment in str(error.value)


def test_plan_view_counts_and_times_the_repeats(repeated):
    once = copy.deepcopy(repeated)
    for settings in scenarios(once).values():
        settings.pop("repeats", None), settings.pop("packaged_repeat", None)
    plain = estimate_plan(once)
    est = estimate_plan(repeated)
    assert est.rule_counts()["loadgen_repeat"] == 3  # Offline run 2, Server runs 2 and 3
    assert est.rule_counts()["loadgen_run"] == plain.rule_counts()["loadgen_run"]
    for scenario, extra in (("Server", 2), ("Offline", 1)):
        row = next(r for r in est.rows if r.stage == f"run: {scenario} performance")
        before = next(r for r in plain.rows if r.stage == f"run: {scenario} performance")
        assert row.jobs == {"loadgen_run": 1, "loadgen_repeat": extra}
        # each repeat is as long as the performance run (its test and the process overhead)
        assert row.wall_s == pytest.approx(before.wall_s * (1 + extra))
        assert row.disk_bytes == pytest.approx(before.disk_bytes * (1 + extra))
        assert [d["repeat"] for d in row.details if d["rule"] == "loadgen_repeat"] == list(range(2, extra + 2))
    assert est.total["wall_s"] == pytest.approx(
        plain.total["wall_s"]
        + 2 * next(r for r in plain.rows if r.stage == "run: Server performance").wall_s
        + next(r for r in plain.rows if r.stage == "run: Offline performance").wall_s
    )
    assert any("3 extra performance run(s)" in note for note in est.notes)


def test_student_t_interval_by_hand():
    values = [100.0, 104.0, 96.0]
    s = summarize(values)
    # mean 100, sample std 4, t(0.975, 2 dof) = 4.303: half-width 4.303 x 4 / sqrt(3) = 9.937
    assert s.mean == 100.0 and s.stdev == pytest.approx(4.0)
    assert s.high - s.mean == pytest.approx(4.303 * 4 / math.sqrt(3))
    assert (s.minimum, s.maximum, s.relative_spread) == (96.0, 104.0, pytest.approx(0.08))
    two = summarize([10.0, 12.0])  # 1 dof: t = 12.706, std sqrt(2)
    assert two.high - two.mean == pytest.approx(12.706 * math.sqrt(2) / math.sqrt(2))


def _detail(path, values: dict) -> None:
    path.mkdir(parents=True)
    lines = [f":::MLLOG {json.dumps({'key': k, 'value': v})}" for k, v in values.items()]
    (path / "mlperf_log_detail.txt").write_text("\n".join(lines) + "\n")


def _fake_runs(tmp_path, monkeypatch, results: dict[str, list[float]], validity: dict[str, list[str]] | None = None):
    monkeypatch.chdir(tmp_path)
    for scenario, values in results.items():
        dirs = [f"{RUNS}/{scenario}/performance"] + [
            f"{RUNS}/{scenario}/performance_run_{k}" for k in range(2, len(values) + 1)
        ]
        for i, (folder, value) in enumerate(zip(dirs, values, strict=True)):
            _detail(
                tmp_path / folder,
                {
                    "result_completed_tokens_per_second": value,
                    "result_tokens_per_second": value,
                    "result_validity": (validity or {}).get(scenario, ["VALID"] * len(values))[i],
                    "result_first_token_99.00_percentile_latency_ns": 1.5e9 + i * 1e8,
                    "result_time_per_output_token_99.00_percentile_ns": 1.0e8,
                },
            )
        accuracy = tmp_path / f"results/accuracy/{SYSTEM}/{BENCH}/{scenario}/accuracy.json"
        accuracy.parent.mkdir(parents=True)
        accuracy.write_text(json.dumps({"verdict": {"checks": [], "passed": True, "kind": "measured"}}))


def test_summary_spread_by_hand(repeated, tmp_path, monkeypatch):
    scenarios(repeated).pop("Interactive")
    _fake_runs(tmp_path, monkeypatch, {"Server": [100.0, 104.0, 96.0], "Offline": [50.0, 60.0]})
    plan = Plan(repeated)
    server = repeat_spread(plan, Job(SYSTEM, BENCH, "Server"))
    assert [r["result"] for r in server["runs"]] == [100.0, 104.0, 96.0]
    assert server["mean"] == 100.0 and (server["min"], server["max"]) == (96.0, 104.0)
    assert server["relative_std"] == pytest.approx(statistics.stdev([100, 104, 96]) / 100)  # 4%
    assert server["relative_spread"] == pytest.approx(0.08)
    half = 4.303 * 4 / math.sqrt(3)
    assert (server["ci95_low"], server["ci95_high"]) == (pytest.approx(100 - half), pytest.approx(100 + half))
    assert server["nearest_mean_repeat"] == 1 and server["valid_runs"] == 3
    assert server["runs"][1]["ttft_p99_ms"] == pytest.approx(1600.0)

    offline = repeat_spread(plan, Job(SYSTEM, BENCH, "Offline"))
    assert offline["mean"] == 55.0 and offline["packaged_repeat"] == 2
    # 1 dof: t 12.706 x std 7.071 / sqrt 2 = 63.53 either side
    assert offline["ci95_high"] == pytest.approx(55 + 12.706 * statistics.stdev([50, 60]) / math.sqrt(2))

    spreads = {Job(SYSTEM, BENCH, s): repeat_spread(plan, Job(SYSTEM, BENCH, s)) for s in ("Offline", "Server")}
    rows = summary_rows(plan, spreads)
    by_scenario = {r["scenario"]: r for r in rows}
    # the result column is the packaged repeat's: run 2 for Offline
    assert by_scenario["Offline"]["result"] == "60.00"
    assert by_scenario["Server"]["result"] == "100.00"
    assert {k: by_scenario["Server"][k] for k in COLUMNS if k.startswith("repeat")} == {
        "repeats": "3",
        "repeat_mean": "100.00",
        "repeat_min": "96.00",
        "repeat_max": "104.00",
        "repeat_rel_std_pct": "4.00",
        "repeat_ci95_low": f"{100 - half:.2f}",
        "repeat_ci95_high": f"{100 + half:.2f}",
    }
    parsed = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert parsed[0]["repeat_mean"] and tuple(parsed[0]) == COLUMNS

    table = "\n".join(spread_lines([s for s in spreads.values() if s]))
    assert "| cpu-2c-vllm | tiny-llama-mxfp4 | Server | Tokens/s | 100.00, 104.00, 96.00 | 100.00 |" in table
    assert "96.00-104.00 (8.00%) | 4.00% |" in table
    assert f"{100 - half:.2f}-{100 + half:.2f} | 3/3 | run 1 (nearest the mean: run 1) |" in table

    data = json.loads(json.dumps(summary_json(plan, rows, [s for s in spreads.values() if s])))
    assert [s["scenario"] for s in data["repeats"]] == ["Offline", "Server"]
    assert data["repeats"][1]["mean"] == 100.0 and len(data["repeats"][1]["runs"]) == 3


def test_summary_without_repeats_keeps_its_columns_empty(default_config, tmp_path, monkeypatch):
    config = validate_config(default_config, SCHEMA)
    _fake_runs(tmp_path, monkeypatch, {s: [10.0] for s in scenarios(config)})
    plan = Plan(config)
    rows = summary_rows(plan)
    assert all(r["repeats"] == "1" and r["repeat_mean"] == "" for r in rows)
    assert spread_lines([]) == []


def test_an_invalid_repeat_is_counted(repeated, tmp_path, monkeypatch):
    _fake_runs(tmp_path, monkeypatch, {"Server": [100.0, 80.0, 98.0]}, {"Server": ["VALID", "INVALID", "VALID"]})
    spread = repeat_spread(Plan(repeated), Job(SYSTEM, BENCH, "Server"))
    assert spread["valid_runs"] == 2 and spread["nearest_mean_repeat"] == 3
    assert "| 2/3 |" in "\n".join(spread_lines([spread]))
