"""Submission trees for checker tests, built from real LoadGen logs.

The LoadGen runs (a scripted engine answering instantly, see harness_child.py) are made
once per test session; each tree is then assembled from them with the package's own
helpers. A "full-scale" tree has the round's minimums written into its detail logs (a
600 s run cannot happen in a unit test), so every rule starts out satisfied and a test
can break exactly one thing.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mlperf_repro.benchmarks import load_round
from mlperf_repro.check.model import POWER_TIME
from mlperf_repro.check.rules.log_evidence import COPIED_SETTINGS, SCENARIO_PREFIX
from mlperf_repro.compliance import audit_config_text
from mlperf_repro.compliance.verify import verify_test06, write_verdict
from mlperf_repro.loadgen_logs import finite_number, summary_key
from mlperf_repro.package.systems import system_description
from mlperf_repro.package.truncate import hash_line, write_truncated_log

CHILD = Path(__file__).with_name("harness_child.py")
RULES = load_round("v6.0")
BENCH = "llama2-70b-99"
SYSTEM = "sys1"
SUBMITTER = "TestOrg"
SCENARIOS = ("Offline", "Server", "Interactive")
GOOD_ACCURACY = {
    "rouge1": 44.5,
    "rouge2": 22.1,
    "rougeL": 28.7,
    "rougeLsum": 41.2,
    "gen_len": 123456,
    # The counts of the full dataset the full-scale logs claim (a test-scale tree prints its own).
    "gen_num": 24576,
    "gen_tok_len": 7249920,
    "tokens_per_sample": 295.0,
}
DESCRIPTION = {
    "system_name": "Test system",
    "system_type": "datacenter",
    "status": "available",
    "number_of_nodes": 1,
    "host_processors_per_node": 2,
    "host_processor_model_name": "Test CPU",
    "host_processor_core_count": 64,
    "host_memory_capacity": "1 TB",
    "host_memory_configuration": "16x64GB",
    "host_storage_type": "NVMe",
    "host_storage_capacity": "8 TB",
    "host_networking": "2x 100GbE",
    "host_network_card_count": "2",
    "host_networking_topology": "star",
    "accelerators_per_node": 8,
    "accelerator_model_name": "Test GPU",
    "accelerator_memory_capacity": "288 GB",
    "accelerator_memory_configuration": "HBM3E",
    "accelerator_host_interconnect": "PCIe Gen5 x16",
    "accelerator_interconnect": "XGMI",
    "cooling": "air",
    "framework": "vLLM",
    "operating_system": "Linux",
    "other_software_stack": "ROCm",
}


def _run(out: Path, scenario: str, mode: str, model: str, audit: str | None = None, conf: str = "") -> Path:
    env = dict(os.environ, HARNESS_MODEL=model, HARNESS_CONF=conf)
    if audit:
        env["HARNESS_AUDIT"] = audit
    result = subprocess.run(
        [sys.executable, str(CHILD), str(out), scenario, mode, "6"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=out.parent,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return out


def make_runs(cache: Path) -> dict[tuple[str, str], Path]:
    """(scenario, performance|accuracy|TEST06) -> LoadGen output dir."""
    facts = RULES.benchmark(BENCH)
    runs = {}
    for scenario in SCENARIOS:
        model = facts.loadgen_model(scenario)
        lg_scenario = RULES.loadgen_scenario(scenario)
        # Enough queries for early stopping, quickly.
        # Enough Server queries for early stopping, quickly; an instant Offline run meets no
        # duration floor, so it gets none.
        conf = (
            f"{model}.{lg_scenario}.min_query_count = 600\n{model}.{lg_scenario}.target_qps = 1000\n"
            if lg_scenario == "Server"
            else f"{model}.{lg_scenario}.min_duration = 0\n"
        )
        for mode in ("performance", "accuracy"):
            runs[(scenario, mode)] = _run(cache / f"{scenario}-{mode}", lg_scenario, mode, model, conf=conf)
        runs[(scenario, "TEST06")] = _run(
            cache / f"{scenario}-TEST06",
            lg_scenario,
            "performance",
            model,
            audit=audit_config_text("TEST06", RULES.compliance_test("TEST06")["audit_config"]),
            conf=conf,
        )
    return runs


def patch_detail(path: Path, values: dict, *, logger_clock: bool = True) -> None:
    """Rewrite the value of MLLOG records by key (as if LoadGen had logged them), and the
    lines of the run's summary beside it that print them (LoadGen writes both). A setting
    LoadGen copies from the request to the run is written to both records (unless the
    request's value is given too), as LoadGen would log it. A power window moved moves the
    logger's clock (time_ms) of the records logged at its end with it, unless
    ``logger_clock`` is False (a window edited on paper)."""
    values = dict(values)
    for key in COPIED_SETTINGS:
        if f"effective_{key}" in values:
            for requested in (f"requested_{key}", *(f"requested_{p}_{key}" for p in SCENARIO_PREFIX.values())):
                values.setdefault(requested, values[f"effective_{key}"])
    if {"effective_samples_per_query", "effective_min_query_count"} & values.keys():
        # LoadGen's min_sample_count is min_query_count x samples_per_query.
        records = [
            json.loads(line[len(":::MLLOG") :]) for line in path.read_text().splitlines() if line.startswith(":::MLLOG")
        ]
        logged = {record["key"]: record["value"] for record in records}
        merged = {**logged, **values}
        if all(isinstance(merged.get(k), int) for k in ("effective_min_query_count", "effective_samples_per_query")):
            values.setdefault(
                "effective_min_sample_count",
                merged["effective_min_query_count"] * merged["effective_samples_per_query"],
            )
    # A sample rate changed alone keeps the run's tokens per sample: the token rate moves with it.
    logged = {r["key"]: r["value"] for r in _records(path)}
    for samples, tokens in (
        ("result_samples_per_second", "result_tokens_per_second"),
        ("result_completed_samples_per_sec", "result_completed_tokens_per_second"),
    ):
        rates = [finite_number(v) for v in (logged.get(tokens), values.get(samples), logged.get(samples))]
        if samples in values and tokens not in values and None not in rates and rates[2] != 0:
            values[tokens] = round(rates[0] * rates[1] / rates[2], 3)
    if "power_end" not in values and not isinstance(logged.get("result_max_latency_ns"), bool):
        values.update(_power_window_for(path, values))
    shift = _logger_clock_shift(path, values) if logger_clock else None
    lines = []
    scenario = None
    for line in path.read_text().splitlines():
        if line.startswith(":::MLLOG"):
            record = json.loads(line[len(":::MLLOG") :])
            changed = record.get("key") in values
            if changed:
                record["value"] = values[record["key"]]
            if shift and isinstance(record.get("time_ms"), int | float) and record["time_ms"] >= shift[0]:
                record["time_ms"] = record["time_ms"] + shift[1]
                changed = True
            if changed:
                line = ":::MLLOG " + json.dumps(record)
            if record.get("key") == "effective_scenario":
                scenario = record["value"]
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    summary = path.with_name("mlperf_log_summary.txt")
    if summary.is_file():
        summary.write_text(
            "".join(_summary_line(line, values, scenario) for line in summary.read_text().splitlines(True))
        )


def _logger_clock_shift(path: Path, values: dict) -> tuple[float, float] | None:
    """(from which time_ms, by how much) the logger's clock moves when the power window does:
    LoadGen logs the window when the run ends, the window's length after the schedule."""
    if not {"power_begin", "power_end"} & values.keys():
        return None
    records = _records(path)
    times = {r["key"]: r.get("time_ms") for r in reversed(records)}
    merged = {**{r["key"]: r["value"] for r in records}, **values}
    try:
        begin = datetime.datetime.strptime(merged["power_begin"], POWER_TIME)
        end = datetime.datetime.strptime(merged["power_end"], POWER_TIME)
        start, logged = float(times["generated_query_count"]), float(times["power_end"])
    except (KeyError, TypeError, ValueError):
        return None
    wanted = start + (end - begin).total_seconds() * 1000 + 5
    return (logged, wanted - logged) if abs(wanted - logged) > 1 else None


def _records(path: Path) -> list[dict]:
    return [
        json.loads(line[len(":::MLLOG") :]) for line in path.read_text().splitlines() if line.startswith(":::MLLOG")
    ]


def _power_window_for(path: Path, values: dict) -> dict:
    """power_end where the patched figures need a longer or shorter window than the run
    took, as LoadGen's clock would have shown it: an Offline run's window is its max latency;
    other runs last at least their longest sample, their serial queries and their schedule."""
    merged = {**{r["key"]: r["value"] for r in _records(path)}, **values}
    try:
        begin = datetime.datetime.strptime(merged["power_begin"], POWER_TIME)
        end = datetime.datetime.strptime(merged["power_end"], POWER_TIME)
    except (KeyError, TypeError, ValueError):
        return {}  # a test's own edit of the window: kept as it is

    def figure(key: str) -> float:
        return finite_number(merged.get(key)) or 0.0

    longest = figure("result_max_latency_ns") / 1e9
    if not longest:
        return {}
    if merged.get("effective_scenario") == "Offline":
        seconds = longest
    else:
        needed = [longest]
        if merged.get("effective_scenario") in ("SingleStream", "MultiStream"):
            needed.append(figure("result_query_count") * figure("result_mean_latency_ns") / 1e9)
        if merged.get("effective_scenario") == "Server":
            needed.append(figure("generated_query_duration") / 1e9)
        seconds = max((end - begin).total_seconds(), *needed)
    try:
        stop = begin + datetime.timedelta(seconds=round(seconds, 3))
    except OverflowError:
        return {}
    shown = stop.strftime(POWER_TIME)[:-3]
    return {} if shown == merged["power_end"] else {"power_end": shown}


def _summary_line(line: str, values: dict, scenario: str | None) -> str:
    label, colon, printed = line.partition(":")
    key = summary_key(label, scenario) if colon else None
    if key not in values:
        return line
    value = values[key]
    if isinstance(value, bool):
        shown = ("Yes" if value else "NO") if printed.strip() in ("Yes", "NO", "No") else str(int(value))
    else:
        shown = str(value)
    return f"{label}{colon} {shown}\n"


def format_accuracy(values: dict) -> str:
    from mlperf_repro.accuracy.llama2 import format_accuracy_txt

    return format_accuracy_txt(values)


PROVENANCE = {
    "performance": {
        "engine": {
            "backend": "vllm",
            "engine_args": {"dtype": "bfloat16", "max_num_seqs": 256, "tensor_parallel_size": 8},
        },
        "environment": {"VLLM_USE_AITER": "1"},
        "packages": {"vllm": "0.32.0", "mlcommons-loadgen": "6.0.15"},
        "model_manifest_sha256": "a" * 64,
        "dataset_manifest_sha256": "b" * 64,
    }
}


# How long the full-scale logs say each run took: just over the round's minimum.
FULL_SCALE_SECONDS = RULES.min_duration_ms / 1000 + 7


def full_scale_values(scenario: str, facts, queries: int = 0) -> dict:
    """The records a full-scale performance log would hold, consistent with one another as
    LoadGen writes them (the checker redoes each verdict from them): the round's minimums
    requested and in effect, and a run that lasted FULL_SCALE_SECONDS."""
    values = {
        "requested_min_duration_ms": RULES.min_duration_ms,
        "effective_min_duration_ms": RULES.min_duration_ms,
        "effective_performance_sample_count": facts.facts["performance_sample_count"],
        "requested_performance_sample_count_override": facts.facts["performance_sample_count"],
        "generated_query_duration": int(FULL_SCALE_SECONDS * 1e9),
    }
    if RULES.loadgen_scenario(scenario) == "Server" and queries:
        # The queries completed over the run's length, a little behind the schedule.
        rate = round(queries / FULL_SCALE_SECONDS, 3)
        values.update(result_completed_samples_per_sec=rate, result_scheduled_samples_per_sec=round(rate * 1.001, 3))
        # ... scheduled at the rate that gives that many queries in that time (a Poisson schedule).
        values.update(effective_target_qps=rate, requested_server_target_qps=rate)
    if RULES.loadgen_scenario(scenario) == "Offline":
        samples = facts.facts["offline_min_samples_per_query"]
        longest = int(FULL_SCALE_SECONDS * 1e9)
        # ... sized as LoadGen sizes it: the query minimum, above 1.1 x min_duration x the rate.
        rate = round(samples / (1.1 * RULES.min_duration_ms / 1000) * 0.9, 3)
        values.update(
            effective_target_qps=rate,
            requested_offline_expected_qps=rate,
            requested_min_query_count=samples,
            effective_samples_per_query=samples,
            # LoadGen's min_query_count (1 in Offline) x samples_per_query
            effective_min_sample_count=samples,
            generated_samples_per_query=samples,
            result_max_latency_ns=longest,
            result_samples_per_second=round(samples / (longest / 1e9), 4),
        )
    return values


def offline_too_short(rate: float) -> dict:
    """A full-scale Offline log's records for a run that was INVALID because its one query
    ended before min_duration, at ``rate`` samples/s (as LoadGen logs it)."""
    samples = RULES.benchmark(BENCH).facts["offline_min_samples_per_query"]
    return {
        "result_validity": "INVALID",
        "result_min_duration_met": False,
        "result_max_latency_ns": int(samples / rate * 1e9),
        "result_samples_per_second": rate,
    }


# A Server log's records for a run that was INVALID because it issued too few queries.
SERVER_TOO_FEW_QUERIES = {
    "result_validity": "INVALID",
    "result_min_queries_met": False,
    "result_query_count": 10,
    "generated_query_count": 10,
    "result_completed_samples_per_sec": 0.0164,
    "result_scheduled_samples_per_sec": 0.0165,
    "effective_target_qps": 0.0165,
    "requested_server_target_qps": 0.0165,
}


def build_tree(
    dest: Path,
    runs: dict,
    *,
    division: str = "closed",
    full_scale: bool = True,
    accuracy: dict | None = None,
    provenance: dict | None = None,
) -> Path:
    """dest/<division>/TestOrg/... ; returns the tree root (dest)."""
    base = dest / division / SUBMITTER
    (base / "src").mkdir(parents=True)
    (base / "src" / "README.md").write_text("code\n")
    (base / "systems").mkdir()
    desc = system_description(
        DESCRIPTION, rules=RULES, division=division, submitter=SUBMITTER, provenance={}, test_scale=not full_scale
    )
    (base / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc, indent=2))
    if not full_scale:
        (dest / "NOT_SUBMITTABLE.md").write_text("# NOT SUBMITTABLE\n")
    facts = RULES.benchmark(BENCH)
    for scenario in SCENARIOS:
        folder = base / "results" / SYSTEM / BENCH / scenario
        (folder / "performance" / "run_1").mkdir(parents=True)
        (folder / "accuracy").mkdir()
        perf, acc = runs[(scenario, "performance")], runs[(scenario, "accuracy")]
        for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json"):
            shutil.copyfile(perf / name, folder / "performance" / "run_1" / name)
        for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
            shutil.copyfile(acc / name, folder / "accuracy" / name)
        # A full-scale accuracy log is always truncated (its 24576 samples are not in the
        # tree); the test-scale one is short enough to stay whole.
        digest = write_truncated_log(
            acc / "mlperf_log_accuracy.json",
            folder / "accuracy" / "mlperf_log_accuracy.json",
            **({"keep": 1024} if full_scale else {}),
        )
        values = dict(accuracy or GOOD_ACCURACY)
        if {"gen_num", "gen_tok_len", "tokens_per_sample"} <= values.keys():
            # The counts as the evaluator prints them: of the full dataset the full-scale
            # detail log claims, or of the samples the (whole) test-scale log holds.
            if full_scale:
                values["gen_num"] = facts.facts["accuracy_sample_count"]
                values["gen_tok_len"] = round(values["tokens_per_sample"] * values["gen_num"])
            else:
                counts = [e["token_count"] for e in json.loads((acc / "mlperf_log_accuracy.json").read_text())]
                values.update(gen_num=len(counts), gen_tok_len=sum(counts))
                values["tokens_per_sample"] = round(sum(counts) / len(counts), 1)
        (folder / "accuracy" / "accuracy.txt").write_text(format_accuracy(values) + hash_line(digest))
        # The user.conf LoadGen read for this scenario's runs.
        shutil.copyfile(perf.parent / f"{perf.name}.user.conf", folder / "user.conf")
        (folder / "README.md").write_text("how to reproduce\n")
        (folder / "provenance.json").write_text(json.dumps(provenance or PROVENANCE))
        (folder / "measurements.json").write_text(
            json.dumps(
                {
                    "input_data_types": "int32",
                    "retraining": "No",
                    "starting_weights_filename": "llama2-70b",
                    "weight_data_types": "mxfp4",
                    "weight_transformations": "quantization",
                }
            )
        )
        verdict = verify_test06(runs[(scenario, "TEST06")] / "mlperf_log_accuracy.json", scenario, eos_token_id=2)
        write_verdict(
            verdict,
            folder / "TEST06",
            RULES.compliance_test("TEST06")["verify_file"],
            runs[(scenario, "TEST06")] / "mlperf_log_accuracy.json",
        )
        (folder / "TEST06" / "verdict.json").unlink()
        if full_scale:
            log = folder / "performance/run_1/mlperf_log_detail.txt"
            queries = next(
                json.loads(line[len(":::MLLOG") :])["value"]
                for line in log.read_text().splitlines()
                if '"key": "result_query_count"' in line
            )
            scaled = full_scale_values(scenario, facts, queries)
            # The token rate of a run whose answers are as long as the accuracy run's.
            if "tokens_per_sample" in values:
                for samples, tokens in (
                    ("result_samples_per_second", "result_tokens_per_second"),
                    ("result_completed_samples_per_sec", "result_completed_tokens_per_second"),
                ):
                    if samples in scaled:
                        scaled[tokens] = round(scaled[samples] * values["tokens_per_sample"], 3)
            patch_detail(log, scaled)
            # ... and the user.conf that asked for them.
            conf = folder / "user.conf"
            text = re.sub(r"(\.min_duration = )\d+", rf"\g<1>{RULES.min_duration_ms}", conf.read_text())
            text = re.sub(
                r"(\.performance_sample_count_override = )\d+", rf"\g<1>{facts.facts['performance_sample_count']}", text
            )
            if "effective_target_qps" in scaled:
                text = re.sub(r"(\.target_qps = )[\d.]+", rf"\g<1>{scaled['effective_target_qps']}", text)
            if "requested_min_query_count" in scaled:
                text = re.sub(r"(\.min_query_count = )\d+", rf"\g<1>{scaled['requested_min_query_count']}", text)
            conf.write_text(text)
            patch_detail(
                folder / "accuracy/mlperf_log_detail.txt",
                {
                    "effective_accuracy_sample_count": facts.facts["accuracy_sample_count"],
                    "qsl_reported_total_count": facts.facts["accuracy_sample_count"],
                },
            )
    return dest
