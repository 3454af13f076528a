"""GPU screening: a quick check of a host's GPUs before hour-long runs.

Each visible device is enumerated through torch (CUDA and ROCm both appear as
``torch.cuda``), its total and free memory read, and a fixed-size bf16 matmul timed (the
median of a few repetitions, in TFLOP/s). Each device is then judged against the host's
median and the expected count and memory: missing, erroring, short of memory or slow GPUs
are unhealthy. A run either refuses to start (policy ``refuse``) or runs on the healthy
GPUs only (policy ``exclude``: CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES) and records
which it used. The vendor's 11-node result ran on 87 of 88 GPUs this way.

The measurement always runs in a child process with a hard timeout: a hung GPU must fail
the screen rather than the workflow, and the parent must not initialise the GPUs before
it restricts which ones its engine may see.

Standalone: ``python -m mlperf_repro.cluster.screen --json`` measures and judges this host.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import UserError

GIB = 1024**3
# Variables that restrict the devices a process sees, by backend.
VISIBLE_DEVICES_VARS = {"cuda": ("CUDA_VISIBLE_DEVICES",), "rocm": ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")}
DEFAULTS = {
    "policy": "refuse",
    "min_relative_speed": 0.9,
    "min_memory_fraction": 0.95,
    "matmul_size": 8192,
    "repeats": 10,
}


# -- measuring (in the child process) ---------------------------------------------------------
def measure_devices(matmul_size: int = 8192, repeats: int = 10) -> dict[str, Any]:
    """Enumerate and time every visible GPU of this host; a device that fails records its error."""
    import torch

    backend = "rocm" if getattr(torch.version, "hip", None) else ("cuda" if torch.version.cuda else "none")
    record: dict[str, Any] = {
        "host": socket.gethostname(),
        "backend": backend if torch.cuda.is_available() else "none",
        "torch": torch.__version__,
        "runtime": torch.version.hip or torch.version.cuda,
        "visible_devices_env": current_visible_env(),
        "matmul_size": matmul_size,
        "repeats": repeats,
        "devices": [],
    }
    if not torch.cuda.is_available():
        return record
    for index in range(torch.cuda.device_count()):
        device: dict[str, Any] = {"index": index}
        try:
            props = torch.cuda.get_device_properties(index)
            device["name"] = props.name
            free, total = torch.cuda.mem_get_info(index)
            device.update(memory_total_bytes=int(total), memory_free_bytes=int(free))
            device["tflops"] = _matmul_tflops(torch, index, matmul_size, repeats)
        except Exception as exc:  # noqa: BLE001 - any failure of a device is its verdict
            device["error"] = f"{type(exc).__name__}: {exc}"
        record["devices"].append(device)
    return record


def _matmul_tflops(torch, index: int, n: int, repeats: int) -> float:
    device = torch.device("cuda", index)
    generator = torch.Generator(device=device).manual_seed(index)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=generator)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=generator)
    for _ in range(2):  # kernel selection and clocks ramping up
        torch.matmul(a, b)
    torch.cuda.synchronize(device)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - start)
    del a, b
    torch.cuda.empty_cache()
    return round(2 * n**3 / statistics.median(seconds) / 1e12, 2)


def measure_in_child(matmul_size: int, repeats: int, timeout_s: float) -> dict[str, Any]:
    """:func:`measure_devices` in a fresh Python process, killed after ``timeout_s``."""
    command = [
        sys.executable,
        "-m",
        "mlperf_repro.cluster.screen",
        "--measure-only",
        "--matmul-size",
        str(matmul_size),
        "--repeats",
        str(repeats),
    ]
    host = socket.gethostname()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {
            "host": host,
            "backend": "unknown",
            "devices": [],
            "error": f"the device check did not finish within {timeout_s:.0f} s (a hung GPU or driver)",
        }
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {
            "host": host,
            "backend": "unknown",
            "devices": [],
            "error": f"the device check failed (exit {done.returncode}): " + " | ".join(tail),
        }
    return json.loads(done.stdout)


# -- judging (pure: dicts in, dicts out) ------------------------------------------------------
def judge(
    measured: dict[str, Any],
    *,
    expected_count: int,
    expected_memory_gib: float | None = None,
    min_relative_speed: float = 0.9,
    min_memory_fraction: float = 0.95,
) -> dict[str, Any]:
    """Each measured device with a verdict (healthy/unhealthy) and its reasons, plus the
    devices missing against ``expected_count``."""
    devices = [dict(d) for d in measured.get("devices", [])]
    working = [d for d in devices if not d.get("error")]
    speeds = [d["tflops"] for d in working if d.get("tflops")]
    median_speed = statistics.median(speeds) if speeds else None
    totals = [d["memory_total_bytes"] for d in working if d.get("memory_total_bytes")]
    expected_memory = (
        expected_memory_gib * GIB if expected_memory_gib else (statistics.median(totals) if totals else None)
    )
    memory_from = "expected" if expected_memory_gib else "the host's median"
    for device in devices:
        reasons = []
        if device.get("error"):
            reasons.append(device["error"])
        else:
            total, free = device.get("memory_total_bytes", 0), device.get("memory_free_bytes", 0)
            if expected_memory and total < min_memory_fraction * expected_memory:
                reasons.append(
                    f"memory {total / GIB:.1f} GiB < {min_memory_fraction} x {expected_memory / GIB:.1f} GiB "
                    f"({memory_from})"
                )
            if total and free < min_memory_fraction * total:
                reasons.append(f"only {free / GIB:.1f} of {total / GIB:.1f} GiB free (another process holds the rest)")
            if median_speed and device.get("tflops", 0) < min_relative_speed * median_speed:
                reasons.append(
                    f"matmul {device.get('tflops', 0):.1f} TFLOP/s < {min_relative_speed} x the host's "
                    f"median {median_speed:.1f}"
                )
        device["verdict"] = "unhealthy" if reasons else "healthy"
        device["reason"] = "; ".join(reasons) if reasons else "ok"
    if measured.get("error"):
        reason = measured["error"]
    else:
        reason = f"{len(devices)} of {expected_count} expected devices visible"
    missing = [
        {"index": None, "verdict": "missing", "reason": reason} for _ in range(max(0, expected_count - len(devices)))
    ]
    return {
        "host": measured.get("host"),
        "backend": measured.get("backend"),
        "expected_devices": expected_count,
        "median_tflops": median_speed,
        "devices": devices + missing,
        "healthy": [d["index"] for d in devices if d["verdict"] == "healthy"],
        "unhealthy": [d["index"] for d in devices if d["verdict"] == "unhealthy"],
        "missing": len(missing),
        "measured": {k: v for k, v in measured.items() if k != "devices"},
    }


def describe(device: dict[str, Any]) -> str:
    if device["index"] is None:
        return f"a missing device ({device['reason']})"
    return f"GPU {device['index']} ({device.get('name', 'unknown')}): {device['reason']}"


def decide(
    judged: dict[str, Any],
    *,
    policy: str,
    min_devices: int | None = None,
    system: str = "<system>",
) -> dict[str, Any]:
    """Which devices a run uses, or a UserError naming the unhealthy ones."""
    bad = [d for d in judged["devices"] if d["verdict"] != "healthy"]
    healthy = judged["healthy"]
    expected = judged["expected_devices"]
    where = f"GPU screening of {system} on {judged.get('host')}"
    if expected == 0 and not judged["devices"]:
        return {"use": [], "used": 0, "expected": 0, "note": "no accelerators expected or visible: nothing to screen"}
    if bad and policy == "refuse":
        raise UserError(
            f"{where} (policy refuse): "
            + "; ".join(describe(d) for d in bad)
            + f". Fix or replace the GPU(s), or set systems.{system}.gpu_screening.policy: exclude "
            f"to run on the healthy ones."
        )
    if min_devices is None:
        min_devices = max(1, expected - 1)
    if len(healthy) < min_devices:
        raise UserError(
            f"{where}: only {len(healthy)} healthy GPU(s), fewer than the {min_devices} "
            f"(systems.{system}.gpu_screening.min_devices) a run needs: " + "; ".join(describe(d) for d in bad)
        )
    note = (
        (f"ran on {len(healthy)} of {expected} GPUs; excluded: " + "; ".join(describe(d) for d in bad))
        if bad
        else f"all {len(healthy)} GPUs healthy"
    )
    return {"use": healthy, "used": len(healthy), "expected": expected, "note": note}


def screen_host(screening: dict[str, Any], expected_count: int, timeout_s: float = 600) -> dict[str, Any]:
    """Measure this host (in a child process) and judge it with the system's settings."""
    settings = {**DEFAULTS, **screening}
    measured = measure_in_child(int(settings["matmul_size"]), int(settings["repeats"]), timeout_s)
    result = judge(
        measured,
        expected_count=expected_count,
        expected_memory_gib=settings.get("expected_memory_gib"),
        min_relative_speed=float(settings["min_relative_speed"]),
        min_memory_fraction=float(settings["min_memory_fraction"]),
    )
    result["settings"] = settings
    return result


# -- every node of an allocation ----------------------------------------------------------------
def screen_allocation(
    screening: dict[str, Any], expected_per_node: int, *, timeout_s: float = 600, srun: tuple[str, ...] = ("srun",)
) -> list[dict[str, Any]]:
    """Measure every node of the current SLURM allocation (one srun task per node, each
    printing one JSON line) and judge each; a node that prints nothing is missing all its GPUs.

    ``srun`` is the launcher and its options (e.g. ``("srun", "--nodes=2")`` outside an
    allocation)."""
    settings = {**DEFAULTS, **screening}
    command = [
        *srun,
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",
        sys.executable,
        "-m",
        "mlperf_repro.cluster.screen",
        "--measure-only",
        "--matmul-size",
        str(settings["matmul_size"]),
        "--repeats",
        str(settings["repeats"]),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise UserError(
            f"GPU screening: `{' '.join(srun)}` on the allocation's nodes did not finish within "
            f"{timeout_s:.0f} s (a hung GPU, driver or node)"
        ) from None
    except FileNotFoundError:
        raise UserError(f"GPU screening: {srun[0]} not found; screening every node needs a SLURM allocation") from None
    measured = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not measured:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise UserError(f"GPU screening: no node reported (exit {done.returncode}): {tail}")
    return [
        judge(
            m,
            expected_count=expected_per_node,
            expected_memory_gib=settings.get("expected_memory_gib"),
            min_relative_speed=float(settings["min_relative_speed"]),
            min_memory_fraction=float(settings["min_memory_fraction"]),
        )
        for m in sorted(measured, key=lambda m: m.get("host", ""))
    ]


def decide_allocation(
    nodes: list[dict[str, Any]], *, policy: str, min_devices: int | None = None, system: str = "<system>"
) -> dict[str, Any]:
    """Per host the devices its servers use (:func:`decide` on each node: refuse stops at the
    first unhealthy GPU of any node), and the count over the allocation."""
    per_host = {n["host"]: decide(n, policy=policy, min_devices=min_devices, system=system) for n in nodes}
    used = sum(d["used"] for d in per_host.values())
    expected = sum(d["expected"] for d in per_host.values())
    notes = [f"{host}: {d['note']}" for host, d in per_host.items() if d["used"] < d["expected"]]
    return {
        "hosts": {h: d["use"] for h, d in per_host.items()},
        "used": used,
        "expected": expected,
        "note": f"ran on {used} of {expected} GPUs" + (f" ({'; '.join(notes)})" if notes else ""),
    }


# -- applying it to a run ---------------------------------------------------------------------
def visible_devices_env(use: list[int], measured: dict[str, Any]) -> dict[str, str]:
    """The variables that restrict a process to the devices ``use`` (indices as the screen saw
    them, mapped through any restriction the screen itself ran under, e.g. SLURM's)."""
    backend = measured.get("backend")
    inherited = measured.get("visible_devices_env", {})
    base = inherited.get("HIP_VISIBLE_DEVICES" if backend == "rocm" else "CUDA_VISIBLE_DEVICES") or inherited.get(
        "CUDA_VISIBLE_DEVICES"
    )
    ids = base.split(",") if base else None
    value = ",".join(ids[i] if ids and i < len(ids) else str(i) for i in use)
    return {var: value for var in VISIBLE_DEVICES_VARS.get(backend, ())}


def current_visible_env() -> dict[str, str]:
    return {
        k: os.environ[k]
        for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
        if k in os.environ
    }


def prepare_run(
    screen_file: str | Path | None,
    screening: dict[str, Any] | None,
    *,
    system: str,
    expected_count: int,
    engine: dict[str, Any] | None = None,
    timeout_s: float = 600,
) -> dict[str, Any]:
    """Before a run: decide on the screen's result (screening again when this host is not the
    one screened), restrict the visible devices, and return what to record in provenance."""
    if not screening:
        return {
            "enabled": False,
            "used": None,
            "note": "GPU screening not enabled for this system (or its run host has no accelerators)",
        }
    result = json.loads(Path(screen_file).read_text())
    if result.get("host") != socket.gethostname():
        result = screen_host(screening, expected_count, timeout_s)
        result["rescreened"] = "the run's host is not the host the screen_gpus job ran on"
    elif result.get("measured", {}).get("visible_devices_env", {}) != current_visible_env():
        # Same node, other GPUs (a scheduler gave this job a different set): screen those.
        result = screen_host(screening, expected_count, timeout_s)
        result["rescreened"] = "the run was given other GPUs than the screen_gpus job"
    decision = decide(
        result, policy=screening.get("policy", "refuse"), min_devices=screening.get("min_devices"), system=system
    )
    env = visible_devices_env(decision["use"], result["measured"]) if result["devices"] else {}
    needed = _parallel_size(engine or {})
    if decision["used"] and needed > decision["used"]:
        raise UserError(
            f"GPU screening of {system}: {decision['used']} healthy GPU(s) but the engine needs "
            f"{needed} (tensor_parallel_size x pipeline_parallel_size); {decision['note']}"
        )
    os.environ.update(env)
    return {
        "enabled": True,
        "host": result.get("host"),
        "policy": screening.get("policy", "refuse"),
        "expected": decision["expected"],
        "used": decision["used"],
        "devices": decision["use"],
        "visible_devices_env": env,
        "note": decision["note"],
        "rescreened": result.get("rescreened"),
        "screen": [{k: d.get(k) for k in ("index", "name", "tflops", "verdict", "reason")} for d in result["devices"]],
    }


def apply_to_run(gpu_screening: dict[str, Any] | None, engine: dict[str, Any]) -> dict[str, Any]:
    """:func:`prepare_run` for a job's ``gpu_screening`` (from :meth:`mlperf_repro.plan.Plan.job_screening`)."""
    if not gpu_screening:
        return prepare_run(None, None, system="", expected_count=0)
    return prepare_run(
        gpu_screening["file"],
        gpu_screening["settings"],
        system=gpu_screening["system"],
        expected_count=gpu_screening["expected"],
        engine=engine,
    )


def _parallel_size(engine: dict[str, Any]) -> int:
    args = engine.get("engine_args", {})
    return int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))


# -- the screen_gpus job and the standalone command ----------------------------------------------
def screen_job(
    *, out_path: str, screening: dict[str, Any], expected_count: int, system: str, timeout_s: float = 600
) -> dict[str, Any]:
    """Write results/screen/<system>.json; with policy refuse an unhealthy GPU stops here."""
    result = screen_host(screening, expected_count, timeout_s)
    result["system"] = system
    # The job's log keeps the table even when the job fails (Snakemake removes its output).
    print(render(result), flush=True)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    decide(result, policy=screening.get("policy", "refuse"), min_devices=screening.get("min_devices"), system=system)
    return result


def render(result: dict[str, Any]) -> str:
    lines = [
        f"host {result.get('host')}, backend {result.get('backend')}, "
        f"{len(result['devices']) - result['missing']} device(s) visible, {result['expected_devices']} expected"
    ]
    if result["measured"].get("error"):
        lines.append(f"error: {result['measured']['error']}")
    for d in result["devices"]:
        memory = f"{d['memory_total_bytes'] / GIB:.1f} GiB" if d.get("memory_total_bytes") else "-"
        tflops = f"{d['tflops']:.1f} TFLOP/s" if d.get("tflops") else "-"
        lines.append(
            f"  {str(d['index']):>4}  {d.get('name', '-'):<32} {memory:>10} {tflops:>14}  {d['verdict']}: {d['reason']}"
        )
    if not result["devices"]:
        lines.append("  no GPUs visible: nothing to screen")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlperf_repro.cluster.screen",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the judged result as JSON")
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, help="devices this host should have (default: as many as visible)")
    parser.add_argument("--expected-memory-gib", type=float, help="memory each device should have")
    parser.add_argument("--min-relative-speed", type=float, default=DEFAULTS["min_relative_speed"])
    parser.add_argument("--min-memory-fraction", type=float, default=DEFAULTS["min_memory_fraction"])
    parser.add_argument("--matmul-size", type=int, default=DEFAULTS["matmul_size"])
    parser.add_argument("--repeats", type=int, default=DEFAULTS["repeats"])
    parser.add_argument("--timeout", type=float, default=600, help="seconds the device check may take")
    args = parser.parse_args(argv)
    if args.measure_only:
        print(json.dumps(measure_devices(args.matmul_size, args.repeats)))
        return 0
    measured = measure_in_child(args.matmul_size, args.repeats, args.timeout)
    expected = args.expected if args.expected is not None else len(measured.get("devices", []))
    result = judge(
        measured,
        expected_count=expected,
        expected_memory_gib=args.expected_memory_gib,
        min_relative_speed=args.min_relative_speed,
        min_memory_fraction=args.min_memory_fraction,
    )
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else render(result))
    return 0 if not result["unhealthy"] and not result["missing"] and not result["measured"].get("error") else 1


if __name__ == "__main__":
    sys.exit(main())
