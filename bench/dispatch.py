"""The LoadGen head's own ceiling, against SIMULATED endpoints on loopback.

Real servers on this 2-core machine would saturate long before the head does, so the
endpoints here are simulated (tests/simulated_endpoint.py: vLLM's wire
format and continuous batching at a fixed token rate, no model). The head is the real
thing: LoadGen (one test per child process), our SUT and the dispatcher. The simulated
endpoints run at nice 10: they stand in for other machines, which would not take CPU
from the head at all.

Experiments (each for the capacity policy and for plain round robin):
  ceiling       Server at --qps across 8 endpoints with spare capacity: achieved queries/s
                and streamed tokens/s, and the TTFT the head adds (p50/p99/p99.9) =
                head-side time from LoadGen's issue to the first-token report minus the
                endpoint's own time from reading the request to sending the first token
                (so time the request or answer waits in the simulator's socket counts
                against the head). Also LoadGen's own TTFT percentiles, whose clock starts
                before the issue callback gets the GIL, next to the endpoints' own TTFT.
                Run --repeat times; the median run (by p99 added) is the figure.
  sweep         The same at lower loads (--sweep, capacity policy only).
  scaling       Offline throughput with 1, 2, 4, 8 equal endpoints; efficiency =
                throughput(N) / (N x throughput(1)), the baseline measured in the same run.
  heterogeneous Offline throughput with endpoints of capacity 1:2:3, as a ratio to
                6 x the capacity-1 endpoint's throughput measured alone in this run.
  null          LoadGen's own ceiling: Server at --null-loads with a NULL system under test
                that answers each query at once from the issue callback, in Python (first
                token and completion, one token each), same LoadGen settings as the
                ceiling runs: completed queries/s, validity, CPU per query and LoadGen's
                TTFT p99. The head's ceiling is reported as a fraction of the highest
                VALID null load (no endpoints, no dispatcher: what Python + LoadGen cost).

    .venv/bin/python bench/dispatch.py [--qps 3600] [--seconds 20] [--repeat 3]
        [--only ceiling,sweep,scaling,heterogeneous,null] [--null-loads 5000,10000,20000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

MAX_NEW_TOKENS = 1024
PROMPTS = 1024
SLOT_TOKENS_PER_S = 250.0  # per simulated sequence; output ~288 tokens -> ~1.15 s per query
ENDPOINT_NICE = 10


def process_cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_prompts(n: int) -> list[list[int]]:
    rng = random.Random(0)
    # Prompt lengths like processed OpenOrca (tens to ~1500 tokens, mean ~600).
    return [[rng.randrange(1, 32000) for _ in range(int(rng.triangular(20, 1500, 300)))] for _ in range(n)]


# -- the child: one LoadGen test through the endpoint backend ---------------------------
def child(cfg_path: str) -> None:
    from mlperf_repro.backends import GenerationSettings
    from mlperf_repro.backends.dispatcher import DispatchSettings, EndpointSpec
    from mlperf_repro.backends.endpoints import EndpointBackend
    from mlperf_repro.harness.dataset import TokenDataset
    from mlperf_repro.harness.run import LoadgenTest, run_loadgen_test
    from mlperf_repro.loadgen_logs import read_detail

    cfg = json.loads(Path(cfg_path).read_text())
    out = Path(cfg["out"])
    prompts = make_prompts(PROMPTS)
    dataset = TokenDataset(prompts=prompts, references=[""] * len(prompts))
    scenario = cfg["scenario"]
    conf = out.parent / f"{out.name}.user.conf"
    conf.write_text(
        f"llama2-70b.{scenario}.target_qps = {cfg['qps']}\n"
        f"llama2-70b.{scenario}.min_duration = {int(cfg['seconds'] * 1000)}\n"
        f"llama2-70b.{scenario}.min_query_count = 100\n"
        f"llama2-70b.{scenario}.performance_sample_count_override = {PROMPTS}\n"
    )
    # Appended to lists, turned into dicts after the run: a dict of ~90,000 queries takes
    # 3-4 ms to resize, a stall of the measurement's own that would count against the head.
    issued: list[tuple[int, float]] = []
    first: list[tuple[int, float]] = []
    cpu_at_start: list[float] = []

    def factory(sut):
        cpu_at_start.append(process_cpu_seconds())

        def on_first(qid: int, token: int) -> None:
            first.append((qid, time.monotonic()))
            sut.first_token(qid, token)

        backend = EndpointBackend(
            endpoints=[
                EndpointSpec(
                    f"ep{i}", "127.0.0.1", e["port"], capacity=e.get("capacity"), max_concurrency=e["max_concurrency"]
                )
                for i, e in enumerate(cfg["endpoints"])
            ],
            # Connections for the expected concurrency (queries/s x ~1.2 s per query), opened
            # before the run, as a submitter sets warm_connections.
            dispatch=DispatchSettings(
                model="sim", policy=cfg["policy"], warm_connections=int(1.3 * cfg["qps"] / len(cfg["endpoints"])) + 16
            ),
            generation=GenerationSettings(max_new_tokens=MAX_NEW_TOKENS),
            stream=scenario == "Server",
            on_first_token=on_first,
            on_complete=sut.complete,
        )
        submit = backend.submit

        def timed_submit(requests) -> None:
            now = time.monotonic()
            for r in requests:
                issued.append((r.request_id, now))
            submit(requests)

        backend.submit = timed_submit
        return backend

    test = LoadgenTest(
        user_conf=conf,
        loadgen_model="llama2-70b",
        loadgen_scenario=scenario,
        mode="performance",
        out_dir=out,
        performance_sample_count=PROMPTS,
    )
    record = run_loadgen_test(test, dataset, factory)
    head_cpu_s = process_cpu_seconds() - cpu_at_start[0]
    detail = read_detail(out / "mlperf_log_detail.txt")
    issued_at = dict(issued)
    (out / "head_timestamps.json").write_text(json.dumps({str(k): [issued_at[k], t] for k, t in first}))
    result = {
        "valid": detail.get("result_validity"),
        "completed_per_s": detail.get("result_completed_samples_per_sec") or detail.get("result_samples_per_second"),
        "tokens_per_s": detail.get("result_completed_tokens_per_second") or detail.get("result_tokens_per_second"),
        "completed": record["completed_samples"],
        "generated_tokens": record["generated_tokens"],
        "test_seconds": record["test_seconds"],
        "endpoints": {
            k: {
                "completed": v["completed"],
                "tokens_per_second_busy": v["tokens_per_second_busy"],
                "connections_opened": v["connections_opened"],
            }
            for k, v in record["backend_stats"]["endpoints"].items()
        },
        "resent": record["backend_stats"]["resent_queries"],
        "failures": {k: v["failures"][:3] for k, v in record["backend_stats"]["endpoints"].items() if v["failures"]},
        # All threads of the head (LoadGen's included), from backend creation to the end.
        "head_cpu_s": round(head_cpu_s, 2),
        "head_cpu_us_per_query": round(1e6 * head_cpu_s / max(record["completed_samples"], 1), 1),
    }
    print("RESULT " + json.dumps(result), flush=True)


def null_child(cfg_path: str) -> None:
    """LoadGen at ``qps`` against a system under test that answers every query inside the
    issue callback: the ceiling of LoadGen and Python alone on this machine."""
    import array

    import mlperf_loadgen as lg

    from mlperf_repro.loadgen_logs import read_detail

    cfg = json.loads(Path(cfg_path).read_text())
    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)
    conf = out.parent / f"{out.name}.user.conf"
    conf.write_text(
        f"llama2-70b.Server.target_qps = {cfg['qps']}\n"
        f"llama2-70b.Server.min_duration = {int(cfg['seconds'] * 1000)}\n"
        f"llama2-70b.Server.min_query_count = 100\n"
        f"llama2-70b.Server.performance_sample_count_override = {PROMPTS}\n"
    )
    from mlperf_repro.harness.run import LoadgenTest, build_settings

    # The ceiling runs' settings: LoadGen's embedded mlperf.conf, then this user.conf.
    settings = build_settings(
        LoadgenTest(
            user_conf=conf,
            loadgen_model="llama2-70b",
            loadgen_scenario="Server",
            mode="performance",
            out_dir=out,
            performance_sample_count=PROMPTS,
        )
    )
    token = array.array("i", [1])
    pointer = token.buffer_info()[0]
    completed = [0]

    def issue(queries) -> None:
        responses = [lg.QuerySampleResponse(q.id, pointer, 4, 1) for q in queries]
        lg.FirstTokenComplete(responses)
        lg.QuerySamplesComplete(responses)
        completed[0] += len(responses)

    log_output = lg.LogOutputSettings()
    log_output.outdir = str(out)
    log_output.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = log_output
    log_settings.enable_trace = False
    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(PROMPTS, PROMPTS, lambda _: None, lambda _: None)
    cpu_before, started = process_cpu_seconds(), time.monotonic()
    lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
    cpu_s, wall_s = process_cpu_seconds() - cpu_before, time.monotonic() - started
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    detail = read_detail(out / "mlperf_log_detail.txt")
    result = {
        "valid": detail.get("result_validity"),
        "completed_per_s": detail.get("result_completed_samples_per_sec"),
        "scheduled_per_s": detail.get("result_scheduled_samples_per_sec"),
        "completed": completed[0],
        "cpu_us_per_query": round(1e6 * cpu_s / max(completed[0], 1), 1),
        "cpu_cores_busy": round(cpu_s / wall_s, 2),
        "loadgen_ttft_p99_ms": round(detail["result_first_token_99.00_percentile_latency_ns"] / 1e6, 3),
    }
    print("RESULT " + json.dumps(result), flush=True)


def null_ceiling(workdir: Path, loads: list[float], seconds: float) -> dict:
    runs = {}
    for qps in loads:
        cfg_path = workdir / f"null-{qps:g}.json"
        cfg_path.write_text(json.dumps({"out": str(workdir / f"null-{qps:g}"), "qps": qps, "seconds": seconds}))
        proc = subprocess.run(
            [sys.executable, __file__, "--null-child", str(cfg_path)], capture_output=True, text=True, timeout=900
        )
        if proc.returncode != 0:
            raise SystemExit(f"null SUT at {qps:g} q/s failed:\n{proc.stderr[-3000:]}")
        runs[f"{qps:g}"] = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[7:])
        print("null", qps, json.dumps(runs[f"{qps:g}"]), flush=True)
    valid = [float(q) for q, r in runs.items() if r["valid"] == "VALID"]
    return {"runs": runs, "highest_valid_qps": max(valid) if valid else None}


# -- the parent: simulated endpoints + one child per measurement -------------------------
def measure(
    workdir: Path,
    name: str,
    scenario: str,
    qps: float,
    seconds: float,
    policy: str,
    sims: list[dict],
    max_concurrency: list[int],
    capacities: list[float | None] | None = None,
) -> dict:
    from sim_endpoints import SimProcess, free_ports
    from simulated_endpoint import SimulatedEndpointSpec

    from mlperf_repro.loadgen_logs import read_detail

    ports = free_ports(len(sims))
    stamps = workdir / f"{name}.sim_timestamps.json"
    sim = SimProcess([SimulatedEndpointSpec(port=p, **s) for p, s in zip(ports, sims)], str(stamps))
    # The simulated endpoints stand in for other machines: on this shared CPU they yield
    # to the head (nice), as remote servers would not compete with it at all.
    os.setpriority(os.PRIO_PROCESS, sim.proc.pid, ENDPOINT_NICE)
    cfg = {
        "out": str(workdir / name),
        "scenario": scenario,
        "qps": qps,
        "seconds": seconds,
        "policy": policy,
        "endpoints": [
            {"port": p, "max_concurrency": m, "capacity": (capacities or [None] * len(ports))[i]}
            for i, (p, m) in enumerate(zip(ports, max_concurrency))
        ],
    }
    cfg_path = workdir / f"{name}.json"
    cfg_path.write_text(json.dumps(cfg))
    try:
        sim_cpu_before = process_cpu_seconds(sim.proc.pid)
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(cfg_path)], capture_output=True, text=True, timeout=600
        )
        sim_cpu_s = process_cpu_seconds(sim.proc.pid) - sim_cpu_before
    finally:
        sim.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[7:])
    result["simulated_endpoints_cpu_us_per_query"] = round(1e6 * sim_cpu_s / max(result["completed"], 1), 1)
    if scenario == "Server":
        head = json.loads((workdir / name / "head_timestamps.json").read_text())
        server = json.loads(stamps.read_text())
        added = sorted((h[1] - h[0]) - (server[k][1] - server[k][0]) for k, h in head.items() if k in server)
        result["ttft_added_ms"] = {
            "p50": round(1000 * added[len(added) // 2], 3),
            "p99": round(1000 * added[int(len(added) * 0.99)], 3),
            "p99.9": round(1000 * added[int(len(added) * 0.999)], 3),
            "n": len(added),
        }
        # LoadGen's own view (its clock starts before our issue callback has the GIL):
        # its TTFT percentiles next to the endpoints' own time to first token.
        detail = read_detail(workdir / name / "mlperf_log_detail.txt")
        own = sorted(v[1] - v[0] for v in server.values())
        result["loadgen_ttft_ms"] = {
            p: round(detail[f"result_first_token_{p}_percentile_latency_ns"] / 1e6, 3)
            for p in ("50.00", "99.00", "99.90")
        }
        result["endpoint_ttft_ms"] = {
            "50.00": round(1000 * own[len(own) // 2], 3),
            "99.00": round(1000 * own[int(len(own) * 0.99)], 3),
        }
    return result


def ceiling(workdir: Path, qps: float, seconds: float, policy: str, repeat: int = 1) -> dict:
    """Server at ``qps``, ``repeat`` times (this VM's speed varies from run to run by up to
    a third; the median run is the figure, every run is listed)."""
    # ~1.2 s per query: 3,600 q/s keep ~4,300 in flight, ~540 per endpoint; allow 1,024 each.
    sims = [dict(slots=1024, tokens_per_s=SLOT_TOKENS_PER_S, ttft_s=0.02) for _ in range(8)]
    runs = [
        measure(workdir, f"ceiling-{policy}-{qps:g}-{i}", "Server", qps, seconds, policy, sims, [1024] * 8)
        for i in range(repeat)
    ]
    runs.sort(key=lambda r: r["ttft_added_ms"]["p99"])
    median = dict(runs[len(runs) // 2])
    if repeat > 1:
        median["runs"] = [
            {
                k: r[k]
                for k in (
                    "valid",
                    "completed_per_s",
                    "tokens_per_s",
                    "head_cpu_us_per_query",
                    "ttft_added_ms",
                    "loadgen_ttft_ms",
                    "endpoint_ttft_ms",
                )
            }
            for r in runs
        ]
    return median


def offline(
    workdir: Path, name: str, policy: str, slots: list[int], seconds: float, per_slot_qps: float, capacities=None
) -> dict:
    sims = [dict(slots=s, tokens_per_s=SLOT_TOKENS_PER_S, ttft_s=0.02) for s in slots]
    qps = per_slot_qps * sum(slots)
    return measure(workdir, name, "Offline", qps, seconds, policy, sims, [2 * s for s in slots], capacities)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child")
    parser.add_argument("--null-child")
    parser.add_argument("--null-loads", default="5000,10000,20000,40000", help="Server loads (q/s) for the null SUT")
    parser.add_argument("--qps", type=float, default=3600)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--only", default="ceiling,sweep,scaling,heterogeneous,null")
    parser.add_argument("--repeat", type=int, default=3, help="ceiling runs per load (the median is reported)")
    parser.add_argument(
        "--sweep",
        default="1000,2000,3000",
        help="lower Server loads (q/s) for the TTFT the head adds, capacity policy only",
    )
    parser.add_argument("--policies", default="capacity,round_robin")
    parser.add_argument("--keep", help="keep every run's logs and timestamps in this folder")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.null_child:
        null_child(args.null_child)
        return
    only = set(args.only.split(","))
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-dispatch-") as tmp:
        workdir = Path(args.keep or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        per_slot_qps = SLOT_TOKENS_PER_S / 288  # queries/s one simulated slot sustains
        for policy in args.policies.split(","):
            rep = report[policy] = {}
            if "ceiling" in only:
                rep["ceiling"] = ceiling(workdir, args.qps, args.seconds, policy, args.repeat)
                print(policy, "ceiling", json.dumps(rep["ceiling"]), flush=True)
            if "sweep" in only and policy == "capacity":
                rep["sweep"] = {}
                for qps in [float(q) for q in args.sweep.split(",") if q]:
                    run = ceiling(workdir, qps, args.seconds, policy, args.repeat)
                    rep["sweep"][f"{qps:g}"] = {
                        k: run[k]
                        for k in (
                            "valid",
                            "completed_per_s",
                            "head_cpu_us_per_query",
                            "ttft_added_ms",
                            "loadgen_ttft_ms",
                            "endpoint_ttft_ms",
                        )
                    }
                    print(policy, "sweep", qps, json.dumps(rep["sweep"][f"{qps:g}"]), flush=True)
            if "scaling" in only:
                runs = {
                    n: offline(workdir, f"scaling-{policy}-{n}", policy, [100] * n, args.seconds, per_slot_qps)
                    for n in (1, 2, 4, 8)
                }
                base = runs[1]["tokens_per_s"]
                rep["scaling"] = {
                    n: {"tokens_per_s": r["tokens_per_s"], "efficiency": round(r["tokens_per_s"] / (n * base), 4)}
                    for n, r in runs.items()
                }
                print(policy, "scaling", json.dumps(rep["scaling"]), flush=True)
            if "heterogeneous" in only:
                single = offline(workdir, f"single-{policy}", policy, [100], args.seconds, per_slot_qps)
                mixed = offline(
                    workdir,
                    f"mixed-{policy}",
                    policy,
                    [100, 200, 300],
                    args.seconds,
                    per_slot_qps,
                    capacities=[1, 2, 3],
                )
                rep["heterogeneous"] = {
                    "capacity_1_tokens_per_s": single["tokens_per_s"],
                    "mixed_tokens_per_s": mixed["tokens_per_s"],
                    "ratio_to_sum_of_capacities": round(mixed["tokens_per_s"] / (6 * single["tokens_per_s"]), 4),
                    "per_endpoint": mixed["endpoints"],
                }
                print(policy, "heterogeneous", json.dumps(rep["heterogeneous"]), flush=True)
        if "null" in only:
            null = report["null_sut"] = null_ceiling(
                workdir, [float(q) for q in args.null_loads.split(",") if q], args.seconds
            )
            head = (report.get("capacity") or {}).get("ceiling")
            if head and null["highest_valid_qps"]:
                null["head_ceiling_fraction"] = round(head["completed_per_s"] / null["highest_valid_qps"], 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
