"""The find-performance pass of a ``target_qps: auto`` scenario: short real LoadGen runs on the
real backend, each in its own process (LoadGen keeps global state: one test per process), and
the target chosen from them (:mod:`mlperf_repro.find_performance` holds the arithmetic and the
search).
"""

from __future__ import annotations

import datetime
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import provenance
from ..errors import UserError
from ..find_performance import (
    THROUGHPUT_SCENARIOS,
    Probe,
    SearchFailed,
    chosen_target,
    measure_rate,
    probe_from_detail,
    search_highest_valid,
    short_run_settings,
)
from ..loadgen_logs import read_detail
from ..userconf import render_user_conf, with_target

# What the measured rate is, per scenario (recorded in the JSON and the user.conf header).
MEASURED_WHAT = {
    "Offline": "Offline samples/s of a short run that lasted min_duration",
    "SingleStream": "1 / mean latency of a short SingleStream run that lasted min_duration",
    "Server": "the highest Server rate whose short run was VALID within the latency limits",
    "Interactive": "the highest Interactive rate whose short run was VALID within the latency limits",
}


def find_performance_job(
    *,
    run: dict[str, Any],
    search: dict[str, Any],
    out_json: str,
    runs_dir: str,
    offline_result: str | None = None,
    run_short: Callable[[dict[str, Any], Path, Path], None] | None = None,
) -> dict[str, Any]:
    """Measure, choose the target and write ``out_json``. ``run``: the keyword arguments of
    :func:`mlperf_repro.stages.runs.loadgen_job` but the user.conf, output folder and mode;
    ``search``: ``Plan.find_performance_request``; ``offline_result``: the Offline pass's JSON a
    Server or Interactive search starts from when it has no start_qps; ``run_short(run, user_conf,
    out_dir)`` makes one short run (default: a child process)."""
    run_short = run_short or run_in_child
    scenario = search["scenario"]
    runs = Path(runs_dir)
    shutil.rmtree(runs, ignore_errors=True)  # an earlier search's steps are no evidence of this one
    runs.mkdir(parents=True)
    start_qps, start_from = search["start_qps"], search["start_from"]
    if start_qps is None and offline_result:
        start_qps = float(json.loads(Path(offline_result).read_text())["measured_qps"])
        start_from = f"{start_from} ({offline_result})"
    records: list[dict[str, Any]] = []

    def short_run(qps: float) -> Probe:
        step = len(records) + 1
        out_dir = runs / f"step{step}"
        user_conf = runs / f"step{step}.user.conf"
        settings = short_run_settings(
            scenario, search["settings"], qps, search["min_duration_ms"], search["min_query_count"]
        )
        user_conf.write_text(
            render_user_conf(
                search["loadgen_model"],
                search["loadgen_scenario"],
                with_target(settings, scenario, round(qps, 4)),
                search["header"],
            )
        )
        print(f"find performance: short run {step} at target_qps {qps:.4g}", flush=True)
        run_short(run, user_conf, out_dir)
        detail = read_detail(out_dir / "mlperf_log_detail.txt")
        probe = probe_from_detail(scenario, qps, detail, search["latency_limits_ms"])
        record = json.loads((out_dir / "run_record.json").read_text())
        records.append(
            {
                "step": step,
                "target_qps": round(qps, 4),
                "run_dir": str(out_dir),
                "user_conf": str(user_conf),
                "test_seconds": record.get("test_seconds"),
                "completed_samples": record.get("completed_samples"),
                **probe.facts,
            }
        )
        print(f"find performance: short run {step}: {json.dumps(records[-1], sort_keys=True)}", flush=True)
        return probe

    try:
        if scenario in THROUGHPUT_SCENARIOS:
            found, _ = measure_rate(short_run, start_qps, search["max_steps"])
        else:
            if start_qps is None:
                raise UserError(f"{_where(search)}.start_qps: a {scenario} search needs a starting rate")
            found, _ = search_highest_valid(short_run, start_qps, search["max_steps"], search["margin"])
    except SearchFailed as exc:
        raise UserError(f"{_where(search)}.target_qps auto: {exc} (short runs: {runs})") from None
    target = chosen_target(scenario, found, search["margin"])
    result = {
        "system": search["system"],
        "benchmark": search["benchmark"],
        "scenario": scenario,
        "loadgen_model": search["loadgen_model"],
        "loadgen_scenario": search["loadgen_scenario"],
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": provenance.host_facts(),
        "measured_qps": round(found, 4),
        "measured_what": MEASURED_WHAT[scenario],
        "margin": search["margin"],
        "target_qps": target,
        "start_qps": start_qps,
        "start_from": start_from,
        "short_run": {
            "min_duration_ms": search["min_duration_ms"],
            "max_steps": search["max_steps"],
            "min_query_count": search["min_query_count"] if scenario not in THROUGHPUT_SCENARIOS else 1,
            "latency_limits_ms": search["latency_limits_ms"],
        },
        "runs": records,
    }
    if scenario == "SingleStream":
        result["target_latency_ms"] = round(1000.0 / target, 3)
    Path(out_json).parent.mkdir(parents=True, exist_ok=True)
    Path(out_json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"find performance: measured {found:.4g}/s, target_qps {target:g} (margin {search['margin']})", flush=True)
    return result


def _where(search: dict[str, Any]) -> str:
    return f"systems.{search['system']}.benchmarks.{search['benchmark']}.{search['scenario']}"


def run_in_child(run: dict[str, Any], user_conf: Path, out_dir: Path) -> None:
    """One short LoadGen performance run in a child process of this Python (its output goes to
    this job's log)."""
    from .runs import loadgen_job_in_child

    job = {**run, "user_conf": str(user_conf), "out_dir": str(out_dir), "mode": "performance"}
    loadgen_job_in_child(job, out_dir.parent / f"{out_dir.name}.request.json")
