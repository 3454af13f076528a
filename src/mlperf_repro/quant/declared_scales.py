"""The activation and KV-cache quantization a checkpoint's config declares, checked against its tensors.

A quantized checkpoint is more than its weights: a config may declare static activation scales
(FP8 W8A8, Quark's ``mxfp4_fp8``, NVFP4's input tensor scale), one scale per quantized Linear,
and an FP8 KV cache, a k and a v scale per attention layer. A loader reads those tensors by name
and fails, or worse, serves with a default scale of 1, where one is missing. This module reads
what the config declares, per tool:

- Quark: ``global_quant_config.input_tensors`` (a spec or a list of specs; a static one,
  ``is_dynamic: false``, is stored) and the ``output_tensors`` of the ``layer_quant_config``
  (or ``kv_cache_quant_config``) entries for ``*k_proj`` / ``*v_proj`` with
  ``export.kv_cache_group`` (the KV cache);
- compressed-tensors: each config group's ``input_activations`` (``dynamic: false`` or
  ``"local"``: a stored tensor scale) and ``kv_cache_scheme``;
- ModelOpt: ``quant_algo`` FP8 / NVFP4 (static input scales) and ``kv_cache_quant_algo``;

and checks that each declared scale is stored, per tensor (one value), in a float dtype, finite
and positive. Dynamic activations store nothing and are only recorded. The names accepted are
the ones vLLM's loaders read (``input_scale``; Quark's NVFP4 ``input_scale_2``; compressed-tensors'
``input_global_scale``; KV: ``k_proj.output_scale``, ``k_proj.k_scale`` or ``k_scale`` under the
attention module).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Declared", "check_declared", "declared_parts"]

#: Names a per-Linear activation scale may have, by layout.
INPUT_SCALE_NAMES: dict[str, tuple[str, ...]] = {
    "quark": ("input_scale", "input_scale_2"),
    "compressed-tensors": ("input_scale", "input_global_scale"),
    "modelopt": ("input_scale",),
}
#: Names of an attention module's k and v scales (relative to the attention module).
KV_SCALE_NAMES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "quark": (("k_proj.output_scale", "k_scale", "attn.k_scale"), ("v_proj.output_scale", "v_scale", "attn.v_scale")),
    "compressed-tensors": (("k_scale", "attn.k_scale"), ("v_scale", "attn.v_scale")),
    "modelopt": (("k_proj.k_scale", "k_scale", "attn.k_scale"), ("v_proj.v_scale", "v_scale", "attn.v_scale")),
}
SCALE_DTYPES = ("F32", "BF16", "F16")


@dataclass(frozen=True)
class Declared:
    """One quantized part besides the weights: ``part`` ``activations`` or ``kv_cache``;
    ``dtype`` as the config names it; ``static``: a scale is stored (else computed at run
    time); ``key``: where the config says so."""

    part: str
    dtype: str
    static: bool
    key: str

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "static": self.static, "config_key": self.key}


def _specs(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    return [s for s in items if isinstance(s, dict)]


def _quark_spec(specs: list[dict[str, Any]], part: str, key: str) -> Declared | None:
    if not specs:
        return None
    dtype = str(specs[0].get("dtype"))
    return Declared(part, dtype, any(s.get("is_dynamic") is False for s in specs), key)


def _quark(qc: Mapping[str, Any]) -> list[Declared]:
    out: list[Declared] = []
    glob = qc.get("global_quant_config") if isinstance(qc.get("global_quant_config"), dict) else {}
    act = _quark_spec(_specs(glob.get("input_tensors")), "activations", "global_quant_config.input_tensors")
    if act is not None:
        out.append(act)
    export = qc.get("export") if isinstance(qc.get("export"), dict) else {}
    group = export.get("kv_cache_group") or qc.get("kv_cache_group") or []
    layers = {
        **(qc.get("layer_quant_config") if isinstance(qc.get("layer_quant_config"), dict) else {}),
        **(qc.get("kv_cache_quant_config") if isinstance(qc.get("kv_cache_quant_config"), dict) else {}),
    }
    if isinstance(group, list) and group:
        for pattern, config in sorted(layers.items()):
            if isinstance(config, dict) and fnmatch.fnmatchcase("model.layers.0.self_attn.k_proj", str(pattern)):
                kv = _quark_spec(
                    _specs(config.get("output_tensors")), "kv_cache", f"layer_quant_config.{pattern}.output_tensors"
                )
                if kv is not None:
                    out.append(kv)
                    break
        else:
            kv = _quark_spec(_specs(glob.get("output_tensors")), "kv_cache", "global_quant_config.output_tensors")
            if kv is not None:
                out.append(kv)
    return out


def _ct_static(args: Mapping[str, Any]) -> bool:
    return args.get("dynamic") in (False, "local")  # "local": NVFP4's block scales at run time, its tensor scale stored


def _compressed_tensors(qc: Mapping[str, Any]) -> list[Declared]:
    out: list[Declared] = []
    groups = qc.get("config_groups") if isinstance(qc.get("config_groups"), dict) else {}
    for name, group in sorted(groups.items()):
        args = group.get("input_activations") if isinstance(group, dict) else None
        if isinstance(args, dict):
            dtype = f"{args.get('type')}{args.get('num_bits')}"
            out.append(Declared("activations", dtype, _ct_static(args), f"config_groups.{name}.input_activations"))
            break
    kv = qc.get("kv_cache_scheme")
    if isinstance(kv, dict):
        out.append(Declared("kv_cache", f"{kv.get('type')}{kv.get('num_bits')}", _ct_static(kv), "kv_cache_scheme"))
    return out


def _modelopt(qc: Mapping[str, Any]) -> list[Declared]:
    out: list[Declared] = []
    algo = str(qc.get("quant_algo") or "").upper()
    if algo in ("FP8", "NVFP4"):  # both calibrate a per-tensor input scale (ModelOpt's export)
        out.append(Declared("activations", algo.lower(), True, "quant_algo"))
    kv = qc.get("kv_cache_quant_algo")
    if kv:
        out.append(Declared("kv_cache", str(kv).lower(), True, "kv_cache_quant_algo"))
    return out


_READERS: dict[str, Callable[[Mapping[str, Any]], list[Declared]]] = {
    "quark": _quark,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
}


def declared_parts(method: str, qc: Mapping[str, Any]) -> dict[str, Declared]:
    """``{"activations": ..., "kv_cache": ...}``, the parts ``qc`` (a normalised quantization
    config of ``method``) declares; a weights-only config declares none."""
    reader = _READERS.get(method)
    return {d.part: d for d in (reader(qc) if reader else [])}


def _attention_modules(inventory: Mapping[str, Any]) -> list[str]:
    """Modules holding a ``k_proj`` (the attention layers), from the tensor names."""
    found = set()
    for name in inventory:
        head, sep, _ = name.partition(".k_proj.")
        if sep and head:
            found.add(head)
    return sorted(found)


def check_declared(
    method: str,
    qc: Mapping[str, Any],
    inventory: Mapping[str, Any],
    quantized: Sequence[str],
    load_scalar: Callable[[str], float] | None,
    add: Callable[[str, str, str], None],
) -> dict[str, Any]:
    """Check the declared parts against ``inventory`` (name -> an object with ``dtype`` and
    ``shape``); ``quantized``: the modules stored quantized (each needs its activation scale when
    they are static); ``load_scalar(name)``: the value of a one-element tensor; ``add(tensor,
    rule, message)``: a finding; ``load_scalar`` None: names, dtypes and shapes only. Returns the report's record of each part."""
    parts = declared_parts(method, qc)
    record: dict[str, Any] = {}
    act = parts.get("activations")
    if act is not None:
        record["activations"] = act.to_dict()
        if act.static:
            names = INPUT_SCALE_NAMES.get(method, ("input_scale",))
            record["activations"]["scales"] = sum(
                _check_one(module, names, inventory, load_scalar, add, act, "activation")
                for module in sorted(quantized)
            )
    kv = parts.get("kv_cache")
    if kv is not None:
        record["kv_cache"] = kv.to_dict()
        if kv.static:
            k_names, v_names = KV_SCALE_NAMES.get(method, KV_SCALE_NAMES["quark"])
            attention = _attention_modules(inventory)
            if not attention:
                add(
                    "kv_cache", "kv-scale-missing", f"{kv.key} declares a {kv.dtype} KV cache but no tensor is a k_proj"
                )
            count = 0
            for module in attention:
                for names in (k_names, v_names):
                    count += _check_one(module, names, inventory, load_scalar, add, kv, "KV-cache")
            record["kv_cache"]["scales"] = count
    return record


def _check_one(
    module: str,
    names: Sequence[str],
    inventory: Mapping[str, Any],
    load_scalar: Callable[[str], float] | None,
    add: Callable[[str, str, str], None],
    declared: Declared,
    what: str,
) -> int:
    """1 where ``module`` stores a good scale under one of ``names``, else 0 and a finding."""
    rule = "activation-scale" if declared.part == "activations" else "kv-scale"
    present = [f"{module}.{n}" for n in names if f"{module}.{n}" in inventory]
    if not present:
        add(
            f"{module}.{names[0]}",
            f"{rule}-missing",
            f"{declared.key} declares static {declared.dtype} {what} quantization but {module} stores no "
            f"{' or '.join(names)}",
        )
        return 0
    name = present[0]
    info = inventory[name]
    if info.dtype not in SCALE_DTYPES:
        add(name, f"{rule}-dtype", f"{what} scale dtype {info.dtype}, expected {' or '.join(SCALE_DTYPES)}")
        return 0
    if math.prod(info.shape) != 1:
        add(name, f"{rule}-shape", f"{what} scale shape {list(info.shape)}: {declared.key} declares one per tensor")
        return 0
    if load_scalar is None:
        return 1
    value = load_scalar(name)
    if not (math.isfinite(value) and value > 0):
        add(name, f"{rule}-value", f"{what} scale {value!r}: a scale must be finite and positive")
        return 0
    return 1
