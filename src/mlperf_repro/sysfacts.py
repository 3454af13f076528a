"""What the run host can tell about itself: CPUs, memory, accelerators, OS, drivers.

These facts fill the system description's ``auto`` fields (:mod:`mlperf_repro.package.systems`)
and are part of every run's provenance. Each reader takes the text a source gives (a
``/proc`` file, a tool's JSON or CSV) so the parsers are tested on recorded samples; the
``detect_*`` functions read the live sources and never fail: what cannot be read is
``None`` with the reason in ``unknown``.

MLCommons' ``mlperf-sysinfo`` (PyPI, a 1.0 pre-release) was considered: it drives the
mlc-scripts automation through its own config file and CLI and pins a pre-release of
mlc-scripts, which is more machinery than filling a few fields from the run's own host needs.

Run ``python -m mlperf_repro.sysfacts`` to print this host's facts as one JSON line (the SLURM
launcher runs it on every node of the allocation).
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

TOOL_TIMEOUT_S = 20

# System-description fields "auto" can fill from these facts (config/README.md, systems.<name>.description).
AUTO_FIELDS = (
    "number_of_nodes",
    "host_processor_model_name",
    "host_processors_per_node",
    "host_processor_core_count",
    "host_processor_vcpu_count",
    "host_memory_capacity",
    "host_memory_configuration",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_memory_capacity",
    "accelerator_memory_configuration",
    "framework",
    "operating_system",
    "other_software_stack",
)


# --- CPU ---------------------------------------------------------------------------------


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model, sockets, physical cores per socket and logical CPUs per socket from /proc/cpuinfo."""
    processors = []
    current: dict[str, str] = {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if current:
                processors.append(current)
            current = {}
            continue
        key, _, value = line.partition(":")
        current[key.strip()] = value.strip()
    if not processors:
        return {}
    sockets = {p.get("physical id", "0") for p in processors}
    first = processors[0]
    logical = len(processors)
    per_socket = logical // max(1, len(sockets))
    cores = first.get("cpu cores")
    return {
        "cpu_model": first.get("model name") or first.get("Model") or first.get("cpu model"),
        "sockets": max(1, len(sockets)),
        "cores_per_socket": int(cores) if cores and cores.isdigit() else per_socket,
        "vcpus_per_socket": int(first["siblings"]) if first.get("siblings", "").isdigit() else per_socket,
        "logical_cpus": logical,
    }


# --- memory --------------------------------------------------------------------------------


def parse_meminfo(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def online_memory_bytes(sys_memory: Path = Path("/sys/devices/system/memory")) -> int | None:
    """Installed memory the kernel brought online (memory blocks x block size): closer to the
    DIMMs' sum than MemTotal, which leaves out what the kernel reserves."""
    try:
        block = int((sys_memory / "block_size_bytes").read_text().strip(), 16)
        online = sum(
            1
            for d in sys_memory.glob("memory[0-9]*")
            if not (d / "online").is_file() or (d / "online").read_text().strip() == "1"
        )
    except (OSError, ValueError):
        return None
    return block * online or None


def parse_dmidecode_memory(text: str) -> dict[str, Any]:
    """``dmidecode -t 17`` (Memory Device): the populated DIMMs as a configuration string,
    e.g. "24x 64 GB DDR5 4800 MT/s", and their total in bytes."""
    devices = []
    for block in re.split(r"\n(?=Handle )", text):
        if "Memory Device" not in block:
            continue
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.strip().partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        size = fields.get("Size", "")
        match = re.match(r"(\d+)\s*(kB|KB|MB|GB|TB)", size)
        if not match:  # "No Module Installed"
            continue
        scale = {"kB": 2**10, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}[match.group(2)]
        speed = fields.get("Configured Memory Speed") or fields.get("Speed") or ""
        devices.append(
            {
                "bytes": int(match.group(1)) * scale,
                "size": f"{match.group(1)} {match.group(2)}",
                "type": fields.get("Type", ""),
                "speed": "" if speed.lower() in ("unknown", "") else speed,
            }
        )
    if not devices:
        return {}
    kinds: dict[str, int] = {}
    for d in devices:
        label = " ".join(p for p in (d["size"], d["type"] if d["type"] != "Unknown" else "", d["speed"]) if p)
        kinds[label] = kinds.get(label, 0) + 1
    return {
        "configuration": " + ".join(f"{n}x {label}" for label, n in sorted(kinds.items(), key=lambda kv: -kv[1])),
        "total_bytes": sum(d["bytes"] for d in devices),
        "dimms": len(devices),
    }


# --- accelerators -------------------------------------------------------------------------


def parse_nvidia_smi_csv(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits``
    (memory in MiB)."""
    gpus = []
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 3 or not row[0].strip():
            continue
        name, memory, driver = (c.strip() for c in row[:3])
        gpus.append(
            {
                "model": name,
                "memory_bytes": int(float(memory)) * 2**20 if re.fullmatch(r"[\d.]+", memory) else None,
                "driver": f"NVIDIA driver {driver}",
            }
        )
    return gpus


def _amd_size_bytes(value: Any) -> int | None:
    """amd-smi's vram size: {"value": 196592, "unit": "MB"} (ROCm 6.1+), "196592 MB" or a bare MB count."""
    if isinstance(value, dict):
        number, unit = value.get("value"), str(value.get("unit", "MB"))
    elif isinstance(value, str):
        match = re.match(r"([\d.]+)\s*([KMGT]i?B)?", value.strip())
        if not match:
            return None
        number, unit = match.group(1), match.group(2) or "MB"
    elif isinstance(value, int | float):
        number, unit = value, "MB"
    else:
        return None
    try:
        scale = {"KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}[unit.upper().replace("I", "")]
        return int(float(number) * scale)
    except (KeyError, TypeError, ValueError):
        return None


def parse_amd_smi_static(text: str) -> list[dict[str, Any]]:
    """``amd-smi static --asic --vram --driver --json``: a list of GPUs (ROCm 6.x) or
    {"gpu_data": [...]} (ROCm 6.4+)."""
    data = json.loads(text)
    if isinstance(data, dict):
        data = data.get("gpu_data", [])
    gpus = []
    for gpu in data if isinstance(data, list) else []:
        asic = gpu.get("asic") or {}
        vram = gpu.get("vram") or {}
        driver = gpu.get("driver") or {}
        version = driver.get("version") if isinstance(driver, dict) else None
        gpus.append(
            {
                "model": asic.get("market_name") or asic.get("product_name") or "unknown AMD GPU",
                "memory_bytes": _amd_size_bytes(vram.get("size")),
                "memory_type": vram.get("type") if vram.get("type") not in (None, "N/A") else None,
                "driver": f"{driver.get('name', 'amdgpu')} {version}" if version else None,
            }
        )
    return gpus


def parse_rocm_smi_json(text: str) -> list[dict[str, Any]]:
    """``rocm-smi --showproductname --showmeminfo vram --showdriverversion --json``: one object
    per card ("card0": {"Card series": ..., "VRAM Total Memory (B)": ...}) and "system"."""
    data = json.loads(text)
    driver = (data.get("system") or {}).get("Driver version")
    gpus = []
    for key in sorted((k for k in data if k.startswith("card")), key=lambda k: int(re.sub(r"\D", "", k) or 0)):
        card = data[key]
        total = card.get("VRAM Total Memory (B)")
        gpus.append(
            {
                "model": card.get("Card series") or card.get("Card model") or "unknown AMD GPU",
                "memory_bytes": int(total) if str(total or "").isdigit() else None,
                "driver": f"amdgpu {driver}" if driver else None,
            }
        )
    return gpus


# (tool, arguments, parser): the first tool on PATH that answers is used.
ACCELERATOR_TOOLS = (
    ("amd-smi", ["static", "--asic", "--vram", "--driver", "--json"], parse_amd_smi_static),
    (
        "rocm-smi",
        ["--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json"],
        parse_rocm_smi_json,
    ),
    (
        "nvidia-smi",
        ["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
        parse_nvidia_smi_csv,
    ),
)


def _run(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why not)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{argv[0]}: {exc}"
    if done.returncode != 0:
        return None, f"{argv[0]} exited {done.returncode}: {(done.stderr or done.stdout).strip()[:160]}"
    return done.stdout, None


def detect_accelerators(which=shutil.which, run=_run) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """(GPUs, the tool that listed them, why none were listed)."""
    reasons = []
    for tool, args, parse in ACCELERATOR_TOOLS:
        path = which(tool)
        if not path:
            continue
        out, why = run([path, *args])
        if out is None:
            reasons.append(why)
            continue
        try:
            gpus = parse(out)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reasons.append(f"{tool}: unreadable output ({exc})")
            continue
        if gpus:
            return gpus, tool, None
        reasons.append(f"{tool} lists no GPU")
    return [], None, "; ".join(reasons) or "none of amd-smi, rocm-smi, nvidia-smi is on PATH"


def summarize_accelerators(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """Description-ready values: count, model (several listed), memory per accelerator, driver."""
    if not gpus:
        return {"count": 0}
    models = sorted({g["model"] for g in gpus})
    memories = sorted({g["memory_bytes"] for g in gpus if g.get("memory_bytes")})
    types = sorted({g["memory_type"] for g in gpus if g.get("memory_type")})
    drivers = sorted({g["driver"] for g in gpus if g.get("driver")})
    return {
        "count": len(gpus),
        "model": models[0] if len(models) == 1 else "Mixed: " + ", ".join(models),
        "memory": " / ".join(gib(m) for m in memories) if memories else None,
        "memory_type": types[0] if len(types) == 1 else None,
        "driver": ", ".join(drivers) or None,
    }


def gib(value: int) -> str:
    return f"{value / 2**30:.0f} GiB"


# --- software -----------------------------------------------------------------------------


def os_name(os_release: str | None, kernel: str) -> str:
    for line in (os_release or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"') + f" (kernel {kernel})"
    return f"{platform.system()} {kernel}"


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def driver_versions() -> dict[str, str]:
    """Kernel-module and platform versions that the accelerator tools may not print."""
    out = {}
    amdgpu = _read("/sys/module/amdgpu/version")
    if amdgpu and amdgpu.strip():
        out["amdgpu"] = amdgpu.strip()
    nvidia = _read("/proc/driver/nvidia/version")
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", nvidia or "")
    if match:
        out["nvidia"] = match.group(1)
    rocm = _read("/opt/rocm/.info/version")
    if rocm and rocm.strip():
        out["rocm"] = rocm.strip()
    return out


# --- all together -------------------------------------------------------------------------


def detect_memory_configuration(which=shutil.which, run=_run) -> tuple[dict[str, Any], str | None]:
    """(dmidecode's DIMM summary, why there is none)."""
    path = which("dmidecode")
    if not path:
        return {}, "dmidecode is not installed"
    out, why = run([path, "-t", "17"])
    if out is None:
        return {}, f"dmidecode could not read the DMI tables ({why}; it needs root)"
    parsed = parse_dmidecode_memory(out)
    return parsed, None if parsed else "dmidecode lists no memory device (a VM often has none)"


def hostname() -> str:
    """The node's name; inside a Kubernetes pod the pod's name is random per start, so the
    node the pod ran on (the downward API's NODE_NAME, when the pod spec passes it) or a placeholder."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return os.environ.get("NODE_NAME") or "(kubernetes pod)"
    return platform.node()


def detect() -> dict[str, Any]:
    """This host's facts. Stable from run to run on one machine: no PIDs, times, temp paths."""
    cpu = parse_cpuinfo(_read("/proc/cpuinfo") or "")
    logical = os.cpu_count() or 1
    sockets = cpu.get("sockets", 1)
    memory_total = parse_meminfo(_read("/proc/meminfo") or "")
    dimms, dimm_why = detect_memory_configuration()
    gpus, tool, gpu_why = detect_accelerators()
    kernel = platform.release()
    unknown = {}
    if dimm_why:
        unknown["memory_configuration"] = dimm_why
    if gpu_why:
        unknown["accelerators"] = gpu_why
    return {
        "hostname": hostname(),
        "cpu_model": cpu.get("cpu_model") or platform.processor() or platform.machine(),
        "sockets": sockets,
        "cores_per_socket": cpu.get("cores_per_socket") or max(1, logical // sockets),
        "vcpus_per_socket": cpu.get("vcpus_per_socket") or max(1, logical // sockets),
        "logical_cpus": cpu.get("logical_cpus") or logical,
        "memory_bytes": memory_total,
        "memory_installed_bytes": dimms.get("total_bytes") or online_memory_bytes(),
        "memory_configuration": dimms.get("configuration"),
        "accelerators": gpus,
        "accelerator_tool": tool,
        "drivers": driver_versions(),
        "os": os_name(_read("/etc/os-release"), kernel),
        "kernel": kernel,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "unknown": unknown,
    }


if __name__ == "__main__":
    print(json.dumps(detect(), sort_keys=True))
