"""System facts (mlperf_repro.sysfacts) and the system description's "auto" fields.

The tool outputs below are written for these tests in the formats the tools document
(amd-smi static --json, rocm-smi --json, nvidia-smi --query-gpu CSV, dmidecode -t 17); no
machine here has the tools or the GPUs.
"""

from __future__ import annotations

import json

import pytest
from tree_factory import DESCRIPTION

from mlperf_repro import sysfacts
from mlperf_repro.benchmarks import load_round
from mlperf_repro.errors import UserError
from mlperf_repro.launch.slurm import parse_node_facts
from mlperf_repro.package.systems import system_description

RULES = load_round("v6.0")

CPUINFO_2S = "\n\n".join(
    f"processor\t: {i}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9575F 64-Core Processor\n"
    f"physical id\t: {i // 128}\nsiblings\t: 128\ncore id\t: {i % 64}\ncpu cores\t: 64\n"
    for i in range(256)
)

AMD_SMI_STATIC = json.dumps(
    [
        {
            "gpu": i,
            "asic": {"market_name": "AMD Instinct MI355X", "vendor_id": "0x1002", "device_id": "0x75a3"},
            "vram": {"type": "HBM", "vendor": "SAMSUNG", "size": {"value": 294896, "unit": "MB"}},
            "driver": {"name": "amdgpu", "version": "6.12.12"},
        }
        for i in range(8)
    ]
)
AMD_SMI_STATIC_NEW = json.dumps({"gpu_data": json.loads(AMD_SMI_STATIC)[:2]})
ROCM_SMI = json.dumps(
    {
        "card0": {
            "Card series": "AMD Instinct MI300X OAM",
            "Card model": "0x74a1",
            "Card vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
            "VRAM Total Memory (B)": "206141652992",
            "VRAM Total Used Memory (B)": "296083456",
        },
        "card1": {"Card series": "AMD Instinct MI300X OAM", "VRAM Total Memory (B)": "206141652992"},
        "system": {"Driver version": "6.8.5"},
    }
)
NVIDIA_SMI = "NVIDIA H200, 143771, 570.124.06\nNVIDIA H200, 143771, 570.124.06\n"
DMIDECODE = """# dmidecode 3.4
Getting SMBIOS data from sysfs.
SMBIOS 3.5.0 present.

Handle 0x0030, DMI type 17, 92 bytes
Memory Device
\tArray Handle: 0x002F
\tSize: 64 GB
\tForm Factor: DIMM
\tLocator: P0 CHANNEL A
\tType: DDR5
\tSpeed: 6400 MT/s
\tConfigured Memory Speed: 6000 MT/s

Handle 0x0031, DMI type 17, 92 bytes
Memory Device
\tSize: No Module Installed
\tType: Unknown
\tSpeed: Unknown

Handle 0x0032, DMI type 17, 92 bytes
Memory Device
\tSize: 64 GB
\tType: DDR5
\tSpeed: 6400 MT/s
\tConfigured Memory Speed: 6000 MT/s
"""


def test_cpuinfo_gives_sockets_cores_and_vcpus_per_socket():
    cpu = sysfacts.parse_cpuinfo(CPUINFO_2S)
    assert cpu == {
        "cpu_model": "AMD EPYC 9575F 64-Core Processor",
        "sockets": 2,
        "cores_per_socket": 64,
        "vcpus_per_socket": 128,
        "logical_cpus": 256,
    }


def test_accelerator_tools_outputs_are_read():
    mi355 = sysfacts.parse_amd_smi_static(AMD_SMI_STATIC)
    assert len(mi355) == 8 and mi355[0]["model"] == "AMD Instinct MI355X"
    assert mi355[0]["memory_bytes"] == 294896 * 2**20 and mi355[0]["driver"] == "amdgpu 6.12.12"
    assert len(sysfacts.parse_amd_smi_static(AMD_SMI_STATIC_NEW)) == 2
    mi300 = sysfacts.parse_rocm_smi_json(ROCM_SMI)
    assert [g["model"] for g in mi300] == ["AMD Instinct MI300X OAM"] * 2
    assert sysfacts.summarize_accelerators(mi300)["memory"] == "192 GiB"
    h200 = sysfacts.parse_nvidia_smi_csv(NVIDIA_SMI)
    summary = sysfacts.summarize_accelerators(h200)
    assert summary == {
        "count": 2,
        "model": "NVIDIA H200",
        "memory": "140 GiB",
        "memory_type": None,
        "driver": "NVIDIA driver 570.124.06",
    }


def test_detect_accelerators_takes_the_first_tool_that_answers_and_says_why_not():
    outputs = {"amd-smi": None, "nvidia-smi": NVIDIA_SMI}

    def run(argv):
        out = outputs[argv[0]]
        return (out, None) if out else (None, f"{argv[0]} exited 1: no device")

    gpus, tool, why = sysfacts.detect_accelerators(which=lambda t: t if t in outputs else None, run=run)
    assert tool == "nvidia-smi" and len(gpus) == 2 and why is None
    gpus, tool, why = sysfacts.detect_accelerators(which=lambda t: None, run=run)
    assert gpus == [] and tool is None and "none of amd-smi, rocm-smi, nvidia-smi" in why


def test_memory_configuration_from_dmidecode_or_the_reason():
    parsed = sysfacts.parse_dmidecode_memory(DMIDECODE)
    assert parsed == {"configuration": "2x 64 GB DDR5 6000 MT/s", "total_bytes": 128 * 2**30, "dimms": 2}
    found, why = sysfacts.detect_memory_configuration(which=lambda t: None)
    assert found == {} and why == "dmidecode is not installed"
    found, why = sysfacts.detect_memory_configuration(
        which=lambda t: "/usr/sbin/dmidecode",
        run=lambda argv: (None, "dmidecode exited 1: /sys/firmware/dmi/tables/DMI: Permission denied"),
    )
    assert found == {} and "needs root" in why and "Permission denied" in why


def test_this_host_is_detected_without_failing():
    facts = sysfacts.detect()
    assert facts["cpu_model"] and facts["sockets"] >= 1 and facts["logical_cpus"] >= 1
    assert facts["kernel"] in facts["os"] and facts["memory_bytes"] > 0
    assert isinstance(facts["accelerators"], list) and isinstance(facts["unknown"], dict)


def _node(host, model, cores, gpus=8, memory_configuration="24x 64 GB DDR5 6000 MT/s"):
    return {
        "hostname": host,
        "cpu_model": model,
        "sockets": 2,
        "cores_per_socket": cores,
        "vcpus_per_socket": cores * 2,
        "memory_bytes": 1500 * 2**30,
        "memory_installed_bytes": 1536 * 2**30,
        "memory_configuration": memory_configuration,
        "accelerators": sysfacts.parse_amd_smi_static(AMD_SMI_STATIC)[:gpus],
        "drivers": {"amdgpu": "6.12.12", "rocm": "7.0.0"},
        "os": "Ubuntu 22.04.5 LTS (kernel 5.15.0-131-generic)",
        "python": "3.12.3",
        "unknown": {},
    }


AUTO = {
    key: "auto"
    for key in (
        "number_of_nodes",
        "host_processors_per_node",
        "host_processor_model_name",
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
}
PACKAGES = {"vllm": "0.11.0", "torch": "2.8.0+rocm7.0", "mlcommons-loadgen": "6.0.15"}


def describe(provenance, *, test_scale=False, **changes):
    return system_description(
        {**DESCRIPTION, **AUTO, **changes},
        rules=RULES,
        division="closed",
        submitter="Org",
        provenance=provenance,
        test_scale=test_scale,
        system="sys1",
    )


def test_auto_fills_an_in_process_gpu_system_from_its_host():
    desc = describe({"host": _node("gpu1", "AMD EPYC 9575F 64-Core Processor", 64), "packages": PACKAGES})
    assert desc["number_of_nodes"] == 1 and desc["host_processors_per_node"] == 2
    assert desc["host_processor_core_count"] == 64 and desc["host_processor_vcpu_count"] == 128
    assert desc["host_memory_capacity"] == "1536 GiB"
    assert desc["host_memory_configuration"] == "24x 64 GB DDR5 6000 MT/s"
    assert desc["accelerators_per_node"] == 8 and desc["accelerator_model_name"] == "AMD Instinct MI355X"
    assert desc["accelerator_memory_capacity"] == "288 GiB" and desc["accelerator_memory_configuration"] == "HBM"
    assert desc["framework"] == "vLLM 0.11.0, PyTorch 2.8.0+rocm7.0"
    assert "amdgpu 6.12.12" in desc["other_software_stack"] and "rocm 7.0.0" in desc["other_software_stack"]


def test_a_mixed_multi_node_system_gets_the_official_notation():
    nodes = [
        _node("n1", "AMD EPYC 9534", 64),
        _node("n2", "AMD EPYC 9534", 64),
        _node("n3", "AMD EPYC 9655", 96),
    ]
    head = _node("head", "Intel Xeon", 8, gpus=0)
    desc = describe({"host": head, "nodes": {"nodes": nodes}, "packages": PACKAGES})
    assert desc["number_of_nodes"] == 3
    assert desc["host_processor_core_count"] == "64(AMD EPYC 9534) and 96(AMD EPYC 9655)"
    assert desc["host_processor_vcpu_count"] == "128(AMD EPYC 9534) and 192(AMD EPYC 9655)"
    assert desc["host_processors_per_node"] == 2  # the same on every kind of node
    assert desc["host_processor_model_name"] == "AMD EPYC 9534, AMD EPYC 9655"
    # The checker reads a per-kind count as one count per kind of node.
    from mlperf_repro.check.tree import per_node_type_counts

    assert per_node_type_counts(desc["host_processor_core_count"]) == [64, 96]


def test_head_only_facts_of_a_remote_endpoints_system_say_so():
    provenance = {"host": _node("head", "Intel Xeon", 8, gpus=0), "packages": PACKAGES}
    endpoints = [{"host": f"n{i}", "port": 8000, "accelerator": "MI355X", "accelerator_count": 8} for i in range(2)]
    desc = system_description(
        {**DESCRIPTION, "host_processor_model_name": "auto", "number_of_nodes": "auto"},
        rules=RULES,
        division="closed",
        submitter="Org",
        provenance=provenance,
        test_scale=False,
        endpoints=endpoints,
        launch="external",
    )
    assert desc["number_of_nodes"] == 2 and desc["host_processor_model_name"] == "Intel Xeon"
    assert "detected on the LoadGen head (head), not on the servers' nodes" in desc["hw_notes"]


def test_undetectable_auto_is_unknown_at_test_scale_and_refused_for_a_submission():
    host = _node("vm", "AMD EPYC", 2, gpus=0, memory_configuration=None)
    host["unknown"] = {"memory_configuration": "dmidecode is not installed"}
    provenance = {"host": host, "packages": PACKAGES}
    desc = describe(provenance, test_scale=True)
    assert desc["host_memory_configuration"] == "unknown (dmidecode is not installed)"
    assert desc["accelerators_per_node"] == "0" and desc["accelerator_model_name"] == "N/A"
    with pytest.raises(UserError, match=r"systems\.sys1\.description\.host_memory_configuration: .*dmidecode is not"):
        describe(provenance)
    with pytest.raises(UserError, match=r"systems\.sys1\.description\.cooling: 'auto' cannot be detected"):
        describe(provenance, cooling="auto", host_memory_configuration="12x 32 GB")


def test_an_empty_meaningful_field_is_refused_by_name():
    provenance = {"host": _node("gpu1", "AMD EPYC", 64), "packages": PACKAGES}
    with pytest.raises(UserError) as err:
        describe(provenance, cooling="", host_networking="")
    message = str(err.value)
    assert message.startswith("systems.sys1.description: host_networking, cooling are empty")
    assert "give them in the config" in message


def test_node_facts_lines_from_srun_are_read_by_host():
    lines = "srun: warning\n" + "\n".join(json.dumps(_node(h, "AMD EPYC 9534", 64)) for h in ("n2", "n1")) + "\n{bad"
    assert [n["hostname"] for n in parse_node_facts(lines)] == ["n1", "n2"]
