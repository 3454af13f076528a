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
  split         Not run by default. The single-process head against a split head (LoadGen's
                process + --workers dispatch worker processes) at --qps, same run: LoadGen
                process CPU per query, the workers' CPU per query, TTFT added p50/p99. Then kill
                runs with the most workers (Server at --kill-qps, and Offline): worker 0
                SIGKILLed half way, endpoint 1 dying half way; queries lost and answered twice.
                --placement pins the head and the endpoints apart (a machine with 16 cores).
  router        Not run by default (needs vllm-router, from PyPI, in its own venv: --router-bin).
                Our head driving 3 endpoints itself against our head driving one vllm-router
                in front of them, per --router-policy: Server load (q/s, TTFT added p50/p99),
                the 1:2:3 capacity mix (throughput, each endpoint's share of the answers)
                and an endpoint killed half way (queries lost, resent, LoadGen validity).
                The router runs at the simulated endpoints' niceness: another machine.

    .venv/bin/python bench/dispatch.py [--qps 3600] [--seconds 20] [--repeat 3]
        [--only ceiling,sweep,scaling,heterogeneous,null,router] [--null-loads 5000,10000,20000] [--keep DIR]
        [--router-bin vllm-router] [--router-policy round_robin,power_of_two] [--router-qps 40]
        [--only split --workers 1,2 [--head-tick-ms 2] [--kill-qps 1000] [--placement head=0-7,endpoints=8-15]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
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
    from mlperf_repro.backends.split_head import SplitEndpointBackend
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
    killed: list[dict] = []
    answered: list[int] = []  # every id the backend passed to the SUT, repeats included

    def factory(sut):
        cpu_at_start.append(process_cpu_seconds())

        def on_first(firsts: list[tuple[int, int]]) -> None:
            now = time.monotonic()
            first.extend((qid, now) for qid, _ in firsts)
            sut.first_tokens(firsts)

        def on_completions(answers) -> None:
            answered.extend([qid for qid, _ in answers])
            sut.completions(answers)

        workers = cfg.get("workers", 0)
        head = dict(
            endpoints=[
                EndpointSpec(
                    f"ep{i}", "127.0.0.1", e["port"], capacity=e.get("capacity"), max_concurrency=e["max_concurrency"]
                )
                for i, e in enumerate(cfg["endpoints"])
            ],
            # Connections for the expected concurrency (queries/s x ~1.2 s per query), opened
            # before the run, as a submitter sets warm_connections.
            dispatch=DispatchSettings(
                model="sim",
                policy=cfg["policy"],
                warm_connections=int(1.3 * cfg["qps"] / len(cfg["endpoints"])) + 16,
                max_prompts_per_request=cfg.get("max_prompts_per_request", 16),
                head_workers=workers,
                head_tick_ms=cfg.get("head_tick_ms", 1.0),
            ),
            generation=GenerationSettings(max_new_tokens=MAX_NEW_TOKENS),
            stream=scenario == "Server",
            on_first_tokens=on_first,
            on_completions=on_completions,
        )
        backend = SplitEndpointBackend(workers=workers, **head) if workers else EndpointBackend(**head)
        submit = backend.submit
        kill_at = cfg.get("kill_worker_at_s")

        def kill_worker() -> None:
            worker = backend.workers[0]
            killed.append({"pid": worker.proc.pid, "at_s": round(time.monotonic() - issued[0][1], 2)})
            worker.proc.kill()

        def timed_submit(requests) -> None:
            now = time.monotonic()
            if kill_at and not issued:
                threading.Timer(kill_at, kill_worker).start()
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
        "issued": len(issued),
        "first_issue_at": issued[0][1] if issued else None,
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
        "down_events": sum(v["down_events"] for v in record["backend_stats"]["endpoints"].values()),
        # All threads of LoadGen's process (LoadGen's included, a split head's workers not),
        # from backend creation to the end.
        "head_cpu_s": round(head_cpu_s, 2),
        "head_cpu_us_per_query": round(1e6 * head_cpu_s / max(record["completed_samples"], 1), 1),
    }
    split = record["backend_stats"].get("head") or {}
    if split.get("workers"):  # the single head reports {"mode": "single", "workers": 0}
        workers_cpu = sum(w["cpu_s"] for w in split["per_worker"])
        result["workers"] = split["workers"]
        result["per_worker_cpu_us_per_query"] = [
            round(1e6 * w["cpu_s"] / max(w["answered"], 1), 1) for w in split["per_worker"]
        ]
        result["workers_cpu_us_per_query"] = round(1e6 * workers_cpu / max(record["completed_samples"], 1), 1)
        result["worker_restarts"] = split["worker_restarts"]
        result["resent_after_worker_loss"] = split["queries_resent_after_worker_loss"]
    if killed:
        result["worker_killed"] = killed[0]
    # Each query answered once: LoadGen counted every issued query, the head passed none twice.
    result["lost"] = len(issued) - record["completed_samples"]
    result["answered_twice"] = len(answered) - len(set(answered))
    result["loadgen_errors"] = len(record["loadgen_errors"])
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
    router: dict | None = None,
    allow_failure: bool = False,
    max_prompts_per_request: int = 16,
    workers: int = 0,
    kill_worker_at_s: float | None = None,
    placement: dict | None = None,
    head_tick_ms: float = 1.0,
) -> dict:
    """One LoadGen run against simulated endpoints; with ``router`` (bin, policy, args) the
    head sees one endpoint, a vllm-router in front of them, with their summed concurrency.
    ``workers``: a split head with that many dispatch workers (0: the single-process head);
    ``kill_worker_at_s``: SIGKILL its worker 0 that long after the first issue. ``placement``
    (a machine with cores to spare): ``{"head": [cpus], "endpoints": [cpus]}``, the head (LoadGen's
    process and its workers) and the simulators pinned apart, one simulator process per endpoint."""
    from sim_endpoints import SimProcess, free_ports
    from simulated_endpoint import SimulatedEndpointSpec

    from mlperf_repro.loadgen_logs import read_detail

    ports = free_ports(len(sims))
    stamps = workdir / f"{name}.sim_timestamps.json"
    sim_stats = workdir / f"{name}.sim_stats.json"
    specs = [SimulatedEndpointSpec(port=p, **s) for p, s in zip(ports, sims)]
    groups = [[spec] for spec in specs] if placement else [specs]
    procs = [
        SimProcess(group, str(stamps.with_suffix(f".{i}.json")), str(sim_stats.with_suffix(f".{i}.json")))
        for i, group in enumerate(groups)
    ]
    for i, proc in enumerate(procs):
        if placement:
            cpus = placement["endpoints"]
            os.sched_setaffinity(proc.proc.pid, {cpus[i % len(cpus)]})
        else:
            # The simulated endpoints stand in for other machines: on this shared CPU they yield
            # to the head (nice), as remote servers would not compete with it at all.
            os.setpriority(os.PRIO_PROCESS, proc.proc.pid, endpoint_nice())
    if router:
        router_proc, router_port = start_router(workdir / f"{name}.router.log", ports, **router)
        head_endpoints = [{"port": router_port, "max_concurrency": sum(max_concurrency), "capacity": None}]
    else:
        router_proc = None
        head_endpoints = [
            {"port": p, "max_concurrency": m, "capacity": (capacities or [None] * len(ports))[i]}
            for i, (p, m) in enumerate(zip(ports, max_concurrency))
        ]
    cfg = {
        "out": str(workdir / name),
        "scenario": scenario,
        "qps": qps,
        "seconds": seconds,
        "policy": policy,
        "endpoints": head_endpoints,
        "max_prompts_per_request": max_prompts_per_request,
        "workers": workers,
        "kill_worker_at_s": kill_worker_at_s,
        "head_tick_ms": head_tick_ms,
    }
    cfg_path = workdir / f"{name}.json"
    cfg_path.write_text(json.dumps(cfg))
    head_cpus = set(placement["head"]) if placement else None
    try:
        sim_cpu_before = sum(process_cpu_seconds(p.proc.pid) for p in procs)
        router_cpu_before = process_cpu_seconds(router_proc.pid) if router_proc else 0.0
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(cfg_path)],
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=(lambda: os.sched_setaffinity(0, head_cpus)) if head_cpus else None,
        )
        sim_cpu_s = sum(process_cpu_seconds(p.proc.pid) for p in procs) - sim_cpu_before
        router_cpu_s = process_cpu_seconds(router_proc.pid) - router_cpu_before if router_proc else None
    finally:
        if router_proc:
            stop_router(router_proc)
        for p in procs:
            p.stop()
    per_port: dict = {}
    server: dict = {}
    for i in range(len(procs)):
        if sim_stats.with_suffix(f".{i}.json").exists():
            per_port.update(json.loads(sim_stats.with_suffix(f".{i}.json").read_text()))
        if stamps.with_suffix(f".{i}.json").exists():
            server.update(json.loads(stamps.with_suffix(f".{i}.json").read_text()))
    backends = [per_port.get(str(p), {}) for p in ports]
    if proc.returncode != 0:
        if not allow_failure:
            raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
        return {"failed": proc.stderr.strip()[-1500:], "backends": backends}
    result = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[7:])
    result["simulated_endpoints_cpu_us_per_query"] = round(1e6 * sim_cpu_s / max(result["completed"], 1), 1)
    # What each simulated endpoint answered, counted on its side (behind a router the head
    # sees one endpoint). Choices answered beyond the head's completions = work done twice,
    # plus the head's probes (one per endpoint it sees before the run, one per probe back in).
    result["backends"] = backends
    result["backend_answers_beyond_completed"] = sum(b.get("completed", 0) for b in backends) - result["completed"]
    if router_cpu_s is not None:
        result["router_cpu_us_per_query"] = round(1e6 * router_cpu_s / max(result["completed"], 1), 1)
    if scenario == "Server":
        head = json.loads((workdir / name / "head_timestamps.json").read_text())
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


def endpoint_nice() -> int:
    """ENDPOINT_NICE, or the bench's own niceness where that is lower in priority: the
    endpoints (and a router standing in for another machine) never outrank the head."""
    return max(ENDPOINT_NICE, os.getpriority(os.PRIO_PROCESS, 0))


def start_router(log: Path, ports: list[int], bin: str, policy: str, args: list[str]) -> tuple[subprocess.Popen, int]:
    """vllm-router in front of the simulated endpoints, at their niceness; returns once its
    /health answers. Its Prometheus exporter gets a free port too (the default, 29000, is
    fixed: a second router on the machine would panic at start)."""
    import urllib.request

    from sim_endpoints import free_ports

    port, metrics_port = free_ports(2)
    command = [
        bin,
        *("--host", "127.0.0.1", "--port", str(port), "--prometheus-port", str(metrics_port)),
        *("--policy", policy, "--log-level", "warning"),
        "--worker-urls",
        *(f"http://127.0.0.1:{p}" for p in ports),
        *args,
    ]
    nice = endpoint_nice()
    with open(log, "w") as handle:
        handle.write(" ".join(command) + "\n")
        handle.flush()
        proc = subprocess.Popen(
            command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, nice),
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"vllm-router exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"vllm-router did not answer /health within 60 s:\n{log.read_text()[-3000:]}")


def stop_router(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


CEILING_SIMS = [dict(slots=1024, tokens_per_s=SLOT_TOKENS_PER_S, ttft_s=0.02) for _ in range(8)]


def ceiling(
    workdir: Path, qps: float, seconds: float, policy: str, repeat: int = 1, label: str = "ceiling", **options
) -> dict:
    """Server at ``qps``, ``repeat`` times (this VM's speed varies from run to run by up to
    a third; the median run is the figure, every run is listed). ``options`` go to
    :func:`measure` (a split head's workers, ...); with ``allow_failure`` a failed run is left
    out of the median (the first run is returned, failed, when every run failed)."""
    # ~1.2 s per query: 3,600 q/s keep ~4,300 in flight, ~540 per endpoint; allow 1,024 each.
    runs = [
        measure(
            workdir,
            f"{label}-{policy}-{qps:g}-{i}",
            "Server",
            qps,
            seconds,
            policy,
            CEILING_SIMS,
            [1024] * 8,
            **options,
        )
        for i in range(repeat)
    ]
    good = sorted((r for r in runs if "failed" not in r), key=lambda r: r["ttft_added_ms"]["p99"])
    median = dict(good[len(good) // 2] if good else runs[0])
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
            for r in good
        ]
    return median


def offline(
    workdir: Path, name: str, policy: str, slots: list[int], seconds: float, per_slot_qps: float, capacities=None
) -> dict:
    sims = [dict(slots=s, tokens_per_s=SLOT_TOKENS_PER_S, ttft_s=0.02) for s in slots]
    qps = per_slot_qps * sum(slots)
    return measure(workdir, name, "Offline", qps, seconds, policy, sims, [2 * s for s in slots], capacities)


ROUTER_SLOTS = 30  # per equal endpoint in the router experiment: 3 x 30 slots ~ 78 q/s


def _router_summary(run: dict) -> dict:
    keys = (
        "failed",
        "valid",
        "completed_per_s",
        "tokens_per_s",
        "issued",
        "completed",
        "resent",
        "down_events",
        "failures",
        "ttft_added_ms",
        "loadgen_ttft_ms",
        "endpoint_ttft_ms",
        "head_cpu_us_per_query",
        "router_cpu_us_per_query",
        "backends",
        "backend_answers_beyond_completed",
    )
    out = {k: run[k] for k in keys if k in run}
    if "issued" in run:
        out["lost"] = run["issued"] - run["completed"]
    return out


def router_experiment(
    workdir: Path,
    seconds: float,
    qps: float,
    router_bin: str,
    router_policies: list[str],
    router_args: list[str],
    max_prompts_per_request: int,
) -> dict:
    """Our head driving the endpoints itself (capacity policy) against our head driving ONE
    vllm-router in front of the same endpoints (the head then sees one endpoint with their
    summed max_concurrency; the router's time counts as head-added TTFT, since the endpoints
    stamp a request when it reaches them). Three measurements per path:

      load   Server at ``qps`` across 3 equal endpoints (3 x 30 slots, ~78 q/s capacity).
      mixed  Offline on endpoints of capacity 1:2:3 (10, 20, 30 slots): tokens/s as a
             fraction of the simulators' nominal capacity, and each endpoint's share of the
             answers (its own count) against its share of the capacity.
      fault  ``load`` with endpoint 1 killed (port closed, connections aborted) 3 s +
             --seconds/2 after the endpoints start (the report says how far into the run):
             queries lost, resent by the head, answered twice, LoadGen's validity.
    """
    per_slot_qps = SLOT_TOKENS_PER_S / 288
    equal = [dict(slots=ROUTER_SLOTS, tokens_per_s=SLOT_TOKENS_PER_S, ttft_s=0.02) for _ in range(3)]
    mixed_slots = [10, 20, 30]
    paths: list[tuple[str, dict | None]] = [("direct", None)]
    paths += [(f"router-{p}", {"bin": router_bin, "policy": p, "args": router_args}) for p in router_policies]
    report: dict = {}
    for label, router in paths:
        rep = report[label] = {}
        common = dict(router=router, allow_failure=True, max_prompts_per_request=max_prompts_per_request)
        run = measure(
            workdir, f"router-load-{label}", "Server", qps, seconds, "capacity", equal, [2 * ROUTER_SLOTS] * 3, **common
        )
        rep["load"] = _router_summary(run)
        print(label, "load", json.dumps(rep["load"]), flush=True)

        sims = [dict(slots=n, tokens_per_s=SLOT_TOKENS_PER_S, ttft_s=0.02) for n in mixed_slots]
        run = measure(
            workdir,
            f"router-mixed-{label}",
            "Offline",
            per_slot_qps * sum(mixed_slots),
            seconds,
            "capacity",
            sims,
            [2 * n for n in mixed_slots],
            capacities=[1, 2, 3],
            **common,
        )
        mixed = rep["mixed"] = _router_summary(run)
        if "tokens_per_s" in run:
            mixed["fraction_of_nominal_capacity"] = round(
                run["tokens_per_s"] / (sum(mixed_slots) * SLOT_TOKENS_PER_S), 4
            )
            answered = sum(b.get("completed", 0) for b in run["backends"]) or 1
            mixed["answer_share"] = [round(b.get("completed", 0) / answered, 3) for b in run["backends"]]
            mixed["capacity_share"] = [round(n / sum(mixed_slots), 3) for n in mixed_slots]
        print(label, "mixed", json.dumps(mixed), flush=True)

        # The simulators' clock starts before the router and the child: about 3 s of start-up.
        die_at = 3 + seconds / 2
        faulty = [dict(e) for e in equal]
        faulty[1].update(fault="die", fault_after_s=die_at)
        run = measure(
            workdir,
            f"router-fault-{label}",
            "Server",
            qps,
            seconds,
            "capacity",
            faulty,
            [2 * ROUTER_SLOTS] * 3,
            **common,
        )
        rep["fault"] = _router_summary(run)
        died_at = run["backends"][1].get("died_at") if run.get("backends") else None
        if died_at and run.get("first_issue_at"):
            rep["fault"]["endpoint_1_died_s_into_run"] = round(died_at - run["first_issue_at"], 2)
        print(label, "fault", json.dumps(rep["fault"]), flush=True)
    return report


SPLIT_KEYS = (
    "valid",
    "completed_per_s",
    "tokens_per_s",
    "head_cpu_us_per_query",
    "workers_cpu_us_per_query",
    "per_worker_cpu_us_per_query",
    "simulated_endpoints_cpu_us_per_query",
    "ttft_added_ms",
    "loadgen_ttft_ms",
    "lost",
    "answered_twice",
)
KILL_KEYS = (
    "failed",
    "valid",
    "completed",
    "issued",
    "lost",
    "answered_twice",
    "loadgen_errors",
    "worker_killed",
    "worker_restarts",
    "resent_after_worker_loss",
    "resent",
    "down_events",
)


def parse_placement(text: str | None) -> dict | None:
    """``head=0-7,endpoints=8-15`` -> {"head": [0..7], "endpoints": [8..15]}."""
    if not text:
        return None
    placement = {}
    for part in text.split(","):
        role, cpus = part.split("=")
        first, _, last = cpus.partition("-")
        placement[role] = list(range(int(first), int(last or first) + 1))
    return placement


def split_experiment(
    workdir: Path,
    qps: float,
    seconds: float,
    workers: list[int],
    repeat: int,
    kill_qps: float,
    placement: dict | None,
    head_ticks_ms: list[float] | None = None,
) -> dict:
    """The single-process head (0 workers) against the split head with each of ``workers``, in
    the same run: Server at ``qps`` across 8 simulated endpoints (as ``ceiling``), the median of
    ``repeat`` runs by p99 TTFT added. Then (unless ``kill_qps`` is 0), with the most workers,
    under Server at ``kill_qps`` and under Offline: dispatch worker 0 SIGKILLed half way, and
    endpoint 1 dying half way: queries lost, answered twice, LoadGen's validity and errors."""
    report: dict = {"qps": qps, "placement": placement, "load": {}, "kills": {}}
    head_ticks_ms = head_ticks_ms or [2.0]
    variants = [(0, 2.0)] + [(n, tick) for n in workers for tick in head_ticks_ms]
    for n, tick in variants:
        median = ceiling(
            workdir,
            qps,
            seconds,
            "capacity",
            repeat,
            label=f"split-{n}-{tick:g}",
            workers=n,
            placement=placement,
            allow_failure=True,
            head_tick_ms=tick,
        )
        summary = {k: median[k] for k in (*SPLIT_KEYS, "failed") if k in median}
        if repeat > 1:
            summary["p99_added_of_each_run_ms"] = [r["ttft_added_ms"]["p99"] for r in median["runs"]]
            summary["head_cpu_us_per_query_of_each_run"] = [r["head_cpu_us_per_query"] for r in median["runs"]]
        label = f"workers={n}" + (f", head_tick_ms={tick:g}" if n and len(head_ticks_ms) > 1 else "")
        report["load"][label] = summary
        print("split load", label, json.dumps(summary), flush=True)
    most = max(workers)
    if not kill_qps:
        return report
    offline_sims = [dict(slots=100, tokens_per_s=SLOT_TOKENS_PER_S, ttft_s=0.02) for _ in range(8)]
    offline_qps = SLOT_TOKENS_PER_S / 288 * 800
    for scenario, scenario_sims, load, mc in (
        ("Server", CEILING_SIMS, kill_qps, [1024] * 8),
        ("Offline", offline_sims, offline_qps, [200] * 8),
    ):
        for fault in ("worker", "endpoint"):
            faulty = [dict(e) for e in scenario_sims]
            if fault == "endpoint":
                faulty[1].update(fault="die", fault_after_s=3 + seconds / 2)  # ~3 s of start-up first
            run = measure(
                workdir,
                f"split-kill-{fault}-{scenario}",
                scenario,
                load,
                seconds,
                "capacity",
                faulty,
                mc,
                workers=most,
                placement=placement,
                allow_failure=True,
                kill_worker_at_s=seconds / 2 if fault == "worker" else None,
            )
            summary = {k: run[k] for k in KILL_KEYS if k in run}
            summary.update(workers=most, offered_qps=round(load, 1))
            if fault == "endpoint" and run.get("backends"):
                died_at = run["backends"][1].get("died_at")
                if died_at and run.get("first_issue_at"):
                    summary["endpoint_1_died_s_into_run"] = round(died_at - run["first_issue_at"], 2)
            report["kills"][f"{fault}-{scenario}"] = summary
            print("split kill", fault, scenario, json.dumps(summary), flush=True)
    return report


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
    parser.add_argument(
        "--workers", default="1,2", help="split experiment: dispatch worker counts to set against the single head"
    )
    parser.add_argument(
        "--kill-qps", type=float, default=1000, help="split experiment: Server load of the kill runs (0: no kill runs)"
    )
    parser.add_argument(
        "--head-tick-ms", default="1", help="split experiment: engine.dispatch.head_tick_ms values to measure"
    )
    parser.add_argument(
        "--placement",
        help="split experiment on a machine with cores to spare: head=0-7,endpoints=8-15 pins LoadGen's process "
        "and its workers apart from the simulated endpoints (one process per endpoint)",
    )
    parser.add_argument(
        "--router-bin", default=os.environ.get("VLLM_ROUTER", "vllm-router"), help="the vllm-router executable"
    )
    parser.add_argument(
        "--router-policy",
        default="round_robin,power_of_two",
        help="vllm-router --policy values to measure, comma-separated (random, round_robin, cache_aware, "
        "power_of_two, consistent_hash, sticky_least_loaded, ...)",
    )
    parser.add_argument("--router-qps", type=float, default=40, help="Server load of the router experiment")
    parser.add_argument("--router-args", default="", help="more vllm-router arguments, one string (shell words)")
    parser.add_argument(
        "--router-max-prompts",
        type=int,
        default=16,
        help="the head's max_prompts_per_request in the router experiment (both paths)",
    )
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
        if "split" in only:
            report["split"] = split_experiment(
                workdir,
                args.qps,
                args.seconds,
                [int(n) for n in args.workers.split(",") if n],
                args.repeat,
                args.kill_qps,
                parse_placement(args.placement),
                [float(t) for t in args.head_tick_ms.split(",") if t],
            )
        if "router" in only:
            import shlex

            report["router"] = router_experiment(
                workdir,
                args.seconds,
                args.router_qps,
                args.router_bin,
                [p for p in args.router_policy.split(",") if p],
                shlex.split(args.router_args),
                args.router_max_prompts,
            )
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
