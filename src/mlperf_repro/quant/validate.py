"""Validate any quantized checkpoint folder against its own config, with the project's codecs.

Reads ``config.json``'s ``quantization_config`` (``quant_method`` ``quark``,
``compressed-tensors``, ``modelopt`` - ModelOpt's ``hf_quant_config.json`` too - or gpt-oss's
``mxfp4``, MoE experts as ``_blocks``/``_scales``) and the
tensor inventory from the safetensors headers (names, dtypes, shapes; no tensor is loaded
for that), and checks that they agree: every quantized Linear stores its weight in the
format's layout (an MXFP4 ``[out, in]`` weight is ``uint8[out, in/2]`` with a
``uint8[out, in/32]`` scale), has its scale(s), and no module the config excludes is
quantized. With a reference (the unquantized checkpoint) it decodes each quantized weight
with OUR codec, one tensor pair at a time, and measures the relative Frobenius error
``||W_q - W||_F / ||W||_F`` and the max-abs error per layer; layers above the bound are
findings, named worst first.

Adding a format is a :class:`WeightFormat` entry in :data:`WEIGHT_FORMATS` (stored dtype,
packing, scale group and dtype, the codec call) plus the tools' names for it in
:func:`_detect_format`; a tool's tensor naming is a :class:`Layout` in :data:`LAYOUTS`.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import math
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .declared_scales import check_declared

__all__ = [
    "LAYOUTS",
    "WEIGHT_FORMATS",
    "Finding",
    "LayerError",
    "Layout",
    "PipelineReport",
    "ValidationReport",
    "WeightFormat",
    "dequantized_shards",
    "inspect_checkpoint",
    "read_inventory",
    "validate_checkpoint",
    "validate_pipeline",
]


# --------------------------------------------------------------------------- formats


class CodecMissing(Exception):
    """The format's codec module is not (yet) in the project: structure checked, values not decoded."""


def _codec(module: str, function: str) -> Callable[..., Any]:
    try:
        mod = importlib.import_module(f"{__package__}.{module}")
        return getattr(mod, function)
    except (ImportError, AttributeError):
        raise CodecMissing(f"no codec mlperf_repro.quant.{module}.{function}") from None


def _decode_mxfp4(weight: Any, scale: Any, global_scale: Any, divide: bool) -> Any:
    return _codec("mxfp4", "dequantize_mxfp4")(weight, scale)


def _decode_nvfp4(weight: Any, scale: Any, global_scale: Any, divide: bool) -> Any:
    # ModelOpt and Quark store weight_scale_2 = amax/2688 (multiply); compressed-tensors
    # stores weight_global_scale = 2688/amax (divide): the codec takes either convention.
    import torch

    mode = "weight_global_scale" if divide else "weight_scale_2"
    dequantize = _codec("nvfp4", "dequantize_nvfp4")
    return dequantize(weight, scale, torch.float32, global_scale.reshape(()), scale_mode=mode)


def _decode_fp8(weight: Any, scale: Any, global_scale: Any, divide: bool) -> Any:
    if scale.dim() == 1 and scale.numel() == weight.shape[0] and weight.shape[0] != 1:
        scale = scale.unsqueeze(-1)  # per-channel scales stored as [out]
    return _codec("fp8", "dequantize_fp8")(weight, scale.float())


def _decode_mx(element: str) -> Callable[[Any, Any, Any, bool], Any]:
    def decode(weight: Any, scale: Any, global_scale: Any, divide: bool) -> Any:
        return _codec("mx", "dequantize_mx")(weight, scale, element=element)

    return decode


@dataclass(frozen=True)
class WeightFormat:
    """One weight format as stored in a checkpoint.

    ``weight_dtype``: safetensors dtype of the stored weight; ``pack``: elements per stored
    element along in-features (2 for FP4 nibbles, 4/3 for packed FP6); ``group``: elements per scale along
    in-features (``None``: per-tensor or per-channel scale); ``scale_dtypes``: accepted
    scale dtypes; ``global_scale``: a second, per-tensor fp32 scale is required;
    ``decode(weight, scale, global_scale, divide)`` -> float32 weight (our codec);
    ``max_error``: default bound on the relative weight error; ``codec``: the codec module
    under mlperf_repro.quant (its CODEC_VERSION goes into manifests).
    """

    name: str
    weight_dtype: str
    pack: float
    group: int | None
    scale_dtypes: tuple[str, ...]
    global_scale: bool
    decode: Callable[[Any, Any, Any, bool], Any]
    max_error: float
    codec: str

    def codec_version(self) -> str | None:
        try:
            return str(importlib.import_module(f"{__package__}.{self.codec}").CODEC_VERSION)
        except (ImportError, AttributeError):
            return None


#: Formats by name (the names of mlperf_repro.quant.formats where both exist).
WEIGHT_FORMATS: dict[str, WeightFormat] = {
    "mxfp4": WeightFormat("mxfp4", "U8", 2, 32, ("U8",), False, _decode_mxfp4, 0.25, "mxfp4"),
    "nvfp4": WeightFormat("nvfp4", "U8", 2, 16, ("F8_E4M3",), True, _decode_nvfp4, 0.2, "nvfp4"),
    "fp8": WeightFormat("fp8", "F8_E4M3", 1, None, ("F32", "BF16", "F16"), False, _decode_fp8, 0.06, "fp8"),
    "mxfp6_e2m3": WeightFormat("mxfp6_e2m3", "U8", 4 / 3, 32, ("U8",), False, _decode_mx("e2m3"), 0.1, "mx"),
    "mxfp6_e3m2": WeightFormat("mxfp6_e3m2", "U8", 4 / 3, 32, ("U8",), False, _decode_mx("e3m2"), 0.15, "mx"),
}


@dataclass(frozen=True)
class Layout:
    """How a tool names a quantized Linear's tensors (suffixes after ``<module>.``)."""

    weight: str
    scale: str = "weight_scale"
    global_scale: str | None = None  # for formats with a per-tensor second scale
    global_divides: bool = False  # the stored global scale is the reciprocal
    ignored: tuple[str, ...] = ()  # companion tensors that are not part of the weight (activation scales)


LAYOUTS: dict[str, Layout] = {
    "quark": Layout("weight", global_scale="weight_scale_2", ignored=("input_scale", "input_scale_2", "output_scale")),
    "compressed-tensors": Layout(
        "weight_packed",
        global_scale="weight_global_scale",
        global_divides=True,
        ignored=("input_global_scale", "input_scale", "weight_zero_point", "weight_shape"),
    ),
    "modelopt": Layout("weight", global_scale="weight_scale_2", ignored=("input_scale", "k_scale", "v_scale")),
    # OpenAI's gpt-oss (transformers' Mxfp4Config): MoE expert parameters <param>_blocks
    # u8[..., out, in/32, 16] with <param>_scales u8[..., out, in/32]; see _check_blocks.
    "mxfp4": Layout("_blocks", scale="_scales"),
}


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class Finding:
    tensor: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.tensor}: {self.message} [{self.rule}]"


@dataclass(frozen=True)
class LayerError:
    module: str
    rel_error: float
    max_abs_error: float


@dataclass
class ValidationReport:
    directory: str
    quant_method: str
    weight_format: str
    exclude: list[str]
    quantized: list[str]  # module names stored quantized
    findings: list[Finding] = field(default_factory=list)
    errors: list[LayerError] = field(default_factory=list)  # with a reference only
    reference: str | None = None
    max_error: float | None = None
    decoded: bool = False
    notes: list[str] = field(default_factory=list)
    #: The activation and KV-cache quantization the config declares ({"activations": {dtype,
    #: static, config_key, scales}, "kv_cache": {...}}; absent parts: not declared).
    declared: dict[str, Any] = field(default_factory=dict)

    @property
    def activations(self) -> str | None:
        """``None`` (weights only), ``"static"`` or ``"dynamic"``, as the config declares."""
        act = self.declared.get("activations")
        return None if act is None else ("static" if act["static"] else "dynamic")

    @property
    def ok(self) -> bool:
        return not self.findings

    def worst(self, n: int = 5) -> list[LayerError]:
        return sorted(self.errors, key=lambda e: (-e.rel_error, e.module))[:n]

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "quant_method": self.quant_method,
            "weight_format": self.weight_format,
            "exclude": self.exclude,
            "quantized_layers": len(self.quantized),
            "reference": self.reference,
            "max_error": self.max_error,
            "decoded": self.decoded,
            "ok": self.ok,
            "findings": [{"tensor": f.tensor, "rule": f.rule, "message": f.message} for f in self.findings],
            "worst_layers": [_err_dict(e) for e in self.worst()],
            "layers": [_err_dict(e) for e in sorted(self.errors, key=lambda e: e.module)],
            "notes": self.notes,
            **self.declared,
        }

    def render(self) -> str:
        lines = [
            f"{self.directory}: {self.quant_method} {self.weight_format}, {len(self.quantized)} quantized layers"
            + (f", excluded {', '.join(self.exclude)}" if self.exclude else "")
        ]
        if self.errors:
            lines.append(f"weight error vs {self.reference} (bound {self.max_error:g}); worst layers:")
            lines += [f"  {e.module}: relative {e.rel_error:.4g}, max-abs {e.max_abs_error:.4g}" for e in self.worst()]
        for part, record in self.declared.items():
            scales = f", {record['scales']} scales checked" if "scales" in record else ""
            kind = "static" if record["static"] else "dynamic"
            lines.append(f"{part}: {record['dtype']} {kind} ({record['config_key']}){scales}")
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"FINDING {f}" for f in self.findings]
        lines.append(f"{len(self.findings)} finding(s)" if self.findings else "OK")
        return "\n".join(lines) + "\n"


def _err_dict(e: LayerError) -> dict[str, Any]:
    return {"module": e.module, "rel_error": _sig(e.rel_error), "max_abs_error": _sig(e.max_abs_error)}


def _sig(x: float) -> float:
    return float(f"{x:.6g}") if math.isfinite(x) else x


# --------------------------------------------------------------------------- inventory


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    file: str


def read_inventory(directory: str | Path) -> dict[str, TensorInfo]:
    """Every tensor of the folder's ``*.safetensors`` files from their headers (nothing loaded)."""
    directory = Path(directory)
    files = sorted(p for p in directory.glob("*.safetensors") if p.is_file())
    if not files:
        raise UserError(f"{directory} is not a checkpoint: it has no *.safetensors files")
    out: dict[str, TensorInfo] = {}
    for f in files:
        try:
            with open(f, "rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                if length > 100_000_000:
                    raise ValueError("header too large")
                header = json.loads(handle.read(length))
        except (OSError, ValueError, struct.error) as exc:
            raise UserError(f"{f} is not a readable safetensors file: {exc}") from None
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            if name in out:
                raise UserError(f"tensor {name!r} appears in both {out[name].file} and {f.name}")
            out[name] = TensorInfo(str(entry["dtype"]), tuple(int(d) for d in entry["shape"]), f.name)
    return out


def _load(directory: Path, info: TensorInfo, name: str) -> Any:
    from safetensors import safe_open

    try:
        with safe_open(directory / info.file, framework="pt") as handle:
            return handle.get_tensor(name)
    except Exception as exc:  # safetensors' own error types: a truncated or damaged file
        raise UserError(f"{directory / info.file}: cannot read tensor {name}: {exc}") from None


# --------------------------------------------------------------------------- config


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object; any other content is a UserError naming it."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object")
    return data


@dataclass(frozen=True)
class QuantConfig:
    method: str
    fmt: WeightFormat
    layout: Layout
    exclude: tuple[str, ...]
    match: Callable[[str, str], bool]  # (module, pattern) -> excluded
    config: dict[str, Any] = field(default_factory=dict)  # the quantization_config as read (ModelOpt's merged)


def _match_quark(module: str, pattern: str) -> bool:  # vLLM's Quark rule; Quark also writes wildcards
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None
    return module == pattern or ("*" in pattern and fnmatch.fnmatchcase(module, pattern))


def _match_ct(module: str, pattern: str) -> bool:  # compressed-tensors: exact, re:, or a suffix
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None
    return module == pattern or module.endswith("." + pattern)


def _match_transformers(module: str, pattern: str) -> bool:  # transformers' should_convert_module
    try:
        return bool(re.match(f"{pattern}\\.", module) or re.match(pattern, module) or module.endswith(pattern))
    except re.error:
        return module == pattern or module.startswith(pattern + ".")


def _match_modelopt(module: str, pattern: str) -> bool:  # ModelOpt: fnmatch wildcards
    return fnmatch.fnmatchcase(module, pattern)


def _detect_format(method: str, qc: dict[str, Any], where: str) -> str:
    if method == "quark":
        spec = (qc.get("global_quant_config") or {}).get("weight")
        specs = spec if isinstance(spec, list) else [spec]
        first = specs[0] if specs and isinstance(specs[0], dict) else {}
        dtype, group = first.get("dtype"), first.get("group_size")
        if dtype == "fp4" and group == 32 and first.get("scale_format") == "e8m0":
            return "mxfp4"
        if dtype == "fp4" and group == 16:
            return "nvfp4"
        if dtype == "fp8_e4m3":
            return "fp8"
        if dtype in ("fp6_e2m3", "fp6_e3m2") and group == 32 and first.get("scale_format") == "e8m0":
            return "mx" + dtype
        raise UserError(f"{where}: Quark weight spec dtype={dtype!r} group_size={group!r} is not a known format")
    if method == "compressed-tensors":
        fmt = qc.get("format")
        table = {"mxfp4-pack-quantized": "mxfp4", "nvfp4-pack-quantized": "nvfp4", "float-quantized": "fp8"}
        if fmt not in table:
            raise UserError(f"{where}: compressed-tensors format {fmt!r} is not one of {sorted(table)}")
        return table[fmt]
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or "").upper()
        table = {"NVFP4": "nvfp4", "MXFP4": "mxfp4", "FP8": "fp8"}
        if algo not in table:
            raise UserError(f"{where}: ModelOpt quant_algo {algo!r} is not one of {sorted(table)}")
        return table[algo]
    if method == "mxfp4":
        return "mxfp4"
    raise UserError(f"{where}: quant_method {method!r} is not one of quark, compressed-tensors, modelopt, mxfp4")


def read_quant_config(directory: str | Path) -> QuantConfig:
    """The folder's quantization config, normalised; UserError if the folder is not a quantized checkpoint."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory} is not a checkpoint folder (no such directory)")
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise UserError(f"{directory} is not a checkpoint: config.json is missing")
    qc = read_json_object(cfg_path).get("quantization_config")
    hf_quant = directory / "hf_quant_config.json"
    if not qc and hf_quant.is_file():  # ModelOpt writes its own file
        q = read_json_object(hf_quant).get("quantization") or {}
        qc = {"quant_method": "modelopt", **q}
    if not isinstance(qc, dict) or not qc:
        raise UserError(f"{cfg_path} has no quantization_config: this is not a quantized checkpoint")
    method = str(qc.get("quant_method"))
    fmt = WEIGHT_FORMATS[_detect_format(method, qc, str(cfg_path))]
    if method == "quark":
        exclude, match = qc.get("exclude") or [], _match_quark
    elif method == "compressed-tensors":
        exclude, match = qc.get("ignore") or [], _match_ct
    elif method == "mxfp4":
        exclude, match = qc.get("modules_to_not_convert") or [], _match_transformers
    else:
        if hf_quant.is_file():  # the authoritative copy
            qc = {**qc, **(read_json_object(hf_quant).get("quantization") or {})}
        exclude, match = qc.get("exclude_modules") or qc.get("ignore") or [], _match_modelopt
    return QuantConfig(method, fmt, LAYOUTS[method], tuple(str(e) for e in exclude), match, qc)


# --------------------------------------------------------------------------- structure

_EMBEDDING = re.compile(r"(^|\.)(embed_tokens|embed|wte|wpe|embeddings?|word_embeddings)$")


def _modules(inv: dict[str, TensorInfo], layout: Layout) -> dict[str, str]:
    """Candidate Linear modules -> the name of their (possibly quantized) weight tensor."""
    out: dict[str, str] = {}
    for name, info in inv.items():
        for suffix in dict.fromkeys((layout.weight, "weight")):
            if name.endswith("." + suffix):
                module = name[: -len(suffix) - 1]
                if len(info.shape) != 2:
                    continue
                if module not in out or suffix == layout.weight:
                    out[module] = name
    return out


def _check_structure(qcfg: QuantConfig, inv: dict[str, TensorInfo], report: ValidationReport) -> dict[str, dict]:
    """Findings for layout problems; returns the quantized modules with their tensor names."""
    if qcfg.method == "mxfp4":
        return _check_blocks(qcfg, inv, report)
    fmt, lay = qcfg.fmt, qcfg.layout
    add = report.findings.append
    quantized: dict[str, dict] = {}
    stored_float: list[tuple[str, str]] = []
    quantized_kinds: set[str] = set()
    for module, wname in sorted(_modules(inv, lay).items()):
        info = inv[wname]
        excluded = any(qcfg.match(module, p) for p in qcfg.exclude)
        sname = f"{module}.{lay.scale}"
        is_quantized = (
            (wname.endswith("." + lay.weight) and lay.weight != "weight")
            or info.dtype in {fmt.weight_dtype, "U8", "I8", "F8_E4M3", "F8_E5M2"}
            or sname in inv
        )
        if not is_quantized:
            if not excluded and not _EMBEDDING.search(module):
                stored_float.append((module, wname))
            continue
        quantized_kinds.add(module.rpartition(".")[2])
        if excluded:
            add(
                Finding(
                    wname, "excluded-but-quantized", f"stored quantized ({info.dtype}) but the config excludes {module}"
                )
            )
            continue
        if info.dtype != fmt.weight_dtype:
            add(Finding(wname, "weight-dtype", f"dtype {info.dtype}, expected {fmt.weight_dtype} for {fmt.name}"))
            continue
        out_f, stored_in = info.shape
        in_f = round(stored_in * fmt.pack)
        if in_f / fmt.pack != stored_in:
            add(Finding(wname, "weight-shape", f"{stored_in} stored columns do not hold whole {fmt.name} elements"))
            continue
        if sname not in inv:
            add(Finding(sname, "missing-scale", f"quantized weight {wname} has no scale tensor {sname}"))
            continue
        sinfo = inv[sname]
        entry = {
            "weight": wname,
            "scale": sname,
            "global": None,
            "in": in_f,
            "out": out_f,
            "shape": (out_f, in_f),
            "ref": f"{module}.weight",
            "blocks": False,
        }
        if sinfo.dtype not in fmt.scale_dtypes:
            add(Finding(sname, "scale-dtype", f"dtype {sinfo.dtype}, expected {' or '.join(fmt.scale_dtypes)}"))
            continue
        if fmt.group is not None:
            want = (out_f, in_f // fmt.group)
            if in_f % fmt.group or sinfo.shape != want:
                add(
                    Finding(
                        sname,
                        "scale-shape",
                        f"shape {list(sinfo.shape)}, expected {list(want)} for weight {wname} "
                        f"{list(info.shape)} ({fmt.name}: in-features {in_f}, one scale per {fmt.group})",
                    )
                )
                continue
        elif sinfo.shape not in ((), (1,), (out_f,), (out_f, 1)):
            add(Finding(sname, "scale-shape", f"shape {list(sinfo.shape)}: not per-tensor or per-channel for {wname}"))
            continue
        if _EMBEDDING.search(module):
            # llm-compressor 0.14's model_free_ptq does this (measured); loaders read embeddings
            # as plain tensors, and the configs' targets are Linear layers.
            add(
                Finding(
                    wname,
                    "quantized-embedding",
                    f"the embedding {module} is stored quantized; the config's quantized layers are "
                    "Linear layers and a loader reads the embedding unquantized",
                )
            )
        if fmt.global_scale:
            gname = f"{module}.{lay.global_scale}"
            if gname not in inv:
                add(Finding(gname, "missing-scale", f"{fmt.name} weight {wname} has no global scale {gname}"))
                continue
            if inv[gname].dtype != "F32" or math.prod(inv[gname].shape) != 1:
                add(
                    Finding(
                        gname,
                        "scale-shape",
                        f"global scale {inv[gname].dtype}{list(inv[gname].shape)}, expected one F32",
                    )
                )
                continue
            entry["global"] = gname
        quantized[module] = entry
    # A layer of a kind the checkpoint quantizes elsewhere (q_proj, down_proj, ...), stored in
    # high precision although the config does not exclude it: a loader expects it quantized.
    for module, wname in stored_float:
        if module.rpartition(".")[2] in quantized_kinds:
            add(
                Finding(
                    wname,
                    "not-quantized",
                    f"stored {inv[wname].dtype} although the config quantizes {module} (not excluded) "
                    "and the other layers of its kind are quantized",
                )
            )
    # Scales whose weight is not a quantized weight.
    for name in sorted(inv):
        if name.endswith("." + lay.scale):
            module = name[: -len(lay.scale) - 1]
            if module not in quantized and not any(f.tensor.startswith(module + ".") for f in report.findings):
                add(Finding(name, "orphan-scale", f"scale without a quantized weight {module}.{lay.weight}"))
    return quantized


def _check_blocks(qcfg: QuantConfig, inv: dict[str, TensorInfo], report: ValidationReport) -> dict[str, dict]:
    """gpt-oss layout: ``<param>_blocks`` u8[..., out, in/32, 16] + ``<param>_scales`` u8[..., out, in/32]
    (E8M0), low nibble first (transformers' convert_moe_packed_tensors); the unquantized
    parameter ``<param>`` is [..., in, out] (GptOssExperts), which the emulated copy writes."""
    add = report.findings.append
    quantized: dict[str, dict] = {}
    for name in sorted(inv):
        if not name.endswith("_blocks"):
            continue
        base, info = name[: -len("_blocks")], inv[name]
        sname = base + "_scales"
        module = base.rpartition(".")[0]
        if any(qcfg.match(module, p) or qcfg.match(base, p) for p in qcfg.exclude):
            add(Finding(name, "excluded-but-quantized", f"stored quantized but modules_to_not_convert covers {module}"))
            continue
        if info.dtype != "U8" or len(info.shape) < 3 or info.shape[-1] != 16:
            add(Finding(name, "weight-shape", f"{info.dtype}{list(info.shape)}, expected U8[..., out, in/32, 16]"))
            continue
        if sname not in inv:
            add(Finding(sname, "missing-scale", f"quantized weight {name} has no scale tensor {sname}"))
            continue
        if inv[sname].dtype != "U8":
            add(Finding(sname, "scale-dtype", f"dtype {inv[sname].dtype}, expected U8"))
            continue
        if inv[sname].shape != info.shape[:-1]:
            add(Finding(sname, "scale-shape", f"shape {list(inv[sname].shape)}, expected {list(info.shape[:-1])}"))
            continue
        shape = (*info.shape[:-2], info.shape[-2] * 32)
        quantized[base] = {
            "weight": name,
            "scale": sname,
            "global": None,
            "out": shape[-2],
            "in": shape[-1],
            "shape": shape,
            "ref": base,
            "blocks": True,
        }
    for name in sorted(inv):
        if name.endswith("_scales") and name[: -len("_scales")] + "_blocks" not in inv:
            add(Finding(name, "orphan-scale", f"scale without a quantized weight {name[: -len('_scales')]}_blocks"))
    return quantized


def _swapped(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (*shape[:-2], shape[-1], shape[-2])


# --------------------------------------------------------------------------- validation


def validate_checkpoint(
    directory: str | Path,
    reference: str | Path | None = None,
    *,
    max_error: float | None = None,
    decode: bool = True,
) -> ValidationReport | PipelineReport:
    """Check ``directory`` (see the module doc); compare with ``reference`` when given.

    ``max_error``: bound on each layer's relative weight error (default: the format's).
    ``decode=False``: structure only (no tensor is loaded). Raises UserError for a folder
    that is not a quantized checkpoint; everything else is a finding in the report. A
    Diffusers pipeline folder (``model_index.json``, no ``config.json``) is checked component
    by component (:func:`validate_pipeline`).
    """
    directory = Path(directory)
    if (directory / PIPELINE_INDEX).is_file() and not (directory / "config.json").is_file():
        return validate_pipeline(directory, reference, max_error=max_error, decode=decode)
    qcfg = read_quant_config(directory)
    inv = read_inventory(directory)
    report = ValidationReport(
        directory=str(directory),
        quant_method=qcfg.method,
        weight_format=qcfg.fmt.name,
        exclude=list(qcfg.exclude),
        quantized=[],
        reference=str(reference) if reference is not None else None,
        max_error=qcfg.fmt.max_error if max_error is None else float(max_error),
    )
    quantized = _check_structure(qcfg, inv, report)
    report.quantized = sorted(quantized)
    report.declared = check_declared(
        qcfg.method,
        qcfg.config,
        inv,
        report.quantized,
        (lambda name: float(_load(directory, inv[name], name).float().reshape(-1)[0])) if decode else None,
        lambda tensor, rule, message: report.findings.append(Finding(tensor, rule, message)),
    )
    if not quantized and not report.findings:
        report.findings.append(Finding(str(directory), "no-quantized-layers", "no tensor is stored quantized"))
    ref_inv = read_inventory(reference) if reference is not None else None
    if ref_inv is not None:
        _check_against_reference(qcfg, inv, ref_inv, quantized, report)
    if not decode:
        return report
    try:
        for module, weight in _decoded(directory, qcfg, inv, quantized):
            _check_decoded(module, weight, report)
            ref_name = quantized[module]["ref"]
            if ref_inv is not None and ref_name in ref_inv:
                ref_shape = tuple(ref_inv[ref_name].shape)
                if quantized[module]["blocks"]:
                    weight = weight.transpose(-1, -2)  # gpt-oss: the unquantized parameter is [..., in, out]
                if ref_shape == tuple(weight.shape):
                    _measure(module, weight, _load(Path(reference), ref_inv[ref_name], ref_name), report)
        report.decoded = True
    except CodecMissing as exc:
        report.notes.append(f"{qcfg.fmt.name} values not decoded ({exc}); layout checked only")
    bad = [e for e in report.worst(len(report.errors)) if not e.rel_error <= report.max_error]
    for e in bad:
        report.findings.append(
            Finding(
                quantized[e.module]["weight"],
                "weight-error",
                f"relative weight error {e.rel_error:.4g} above the bound {report.max_error:g} "
                f"(max-abs {e.max_abs_error:.4g})",
            )
        )
    return report


def _check_against_reference(qcfg, inv, ref_inv, quantized, report) -> None:
    add = report.findings.append
    for entry in quantized.values():
        ref_name = entry["ref"]
        shape = _swapped(entry["shape"]) if entry["blocks"] else tuple(entry["shape"])  # gpt-oss: [..., in, out]
        if ref_name not in ref_inv:
            add(Finding(entry["weight"], "reference", f"the reference has no tensor {ref_name}"))
        elif ref_inv[ref_name].shape != shape:
            add(
                Finding(
                    entry["weight"],
                    "reference-shape",
                    f"decodes to {list(shape)} but the reference {ref_name} is {list(ref_inv[ref_name].shape)}",
                )
            )
    for module in sorted(set(_modules(ref_inv, Layout("weight"))) - set(quantized)):
        name = f"{module}.weight"
        if name in inv and inv[name].shape != ref_inv[name].shape:
            add(
                Finding(
                    name, "reference-shape", f"shape {list(inv[name].shape)}, reference {list(ref_inv[name].shape)}"
                )
            )


def _decoded(directory: Path, qcfg: QuantConfig, inv, quantized) -> Iterator[tuple[str, Any]]:
    """(module, float32 weight) for each quantized module, one at a time."""
    fmt, lay = qcfg.fmt, qcfg.layout
    for module, entry in sorted(quantized.items()):
        weight = _load(directory, inv[entry["weight"]], entry["weight"])
        if entry["blocks"]:
            weight = weight.reshape(*weight.shape[:-2], -1)
        scale = _load(directory, inv[entry["scale"]], entry["scale"])
        glob = _load(directory, inv[entry["global"]], entry["global"]) if entry["global"] else None
        try:
            yield module, fmt.decode(weight, scale, glob, lay.global_divides)
        except ValueError as exc:
            raise UserError(f"{entry['weight']}: cannot decode as {fmt.name}: {exc}") from None


def _check_decoded(module: str, weight: Any, report: ValidationReport) -> None:
    import torch

    if not bool(torch.isfinite(weight).all()):
        report.findings.append(Finding(module, "non-finite", "decodes to NaN or inf values (a 0xFF E8M0 scale?)"))


def _measure(module: str, decoded: Any, ref: Any, report: ValidationReport) -> None:
    import torch

    # Row chunks in float64: bounded memory for the largest layers (one tensor pair at a time).
    rows = decoded.reshape(decoded.shape[0], -1)
    ref_rows = ref.reshape(ref.shape[0], -1)
    step = max(1, (1 << 22) // max(1, rows.shape[1]))
    diff_sq = ref_sq = max_abs = 0.0
    for start in range(0, rows.shape[0], step):
        r = ref_rows[start : start + step].to(torch.float64)
        d = rows[start : start + step].to(torch.float64) - r
        diff_sq += float((d * d).sum())
        ref_sq += float((r * r).sum())
        if d.numel():
            max_abs = max(max_abs, float(d.abs().max()))
    rel = math.sqrt(diff_sq / ref_sq) if ref_sq > 0 else (0.0 if diff_sq == 0 else math.inf)
    report.errors.append(LayerError(module, rel, max_abs))


# --------------------------------------------------------------------------- Diffusers pipelines

#: The file that makes a folder a Diffusers pipeline (its components are subfolders).
PIPELINE_INDEX = "model_index.json"


@dataclass
class PipelineReport:
    """The validation of a Diffusers pipeline folder: one :class:`ValidationReport` per
    quantized component (a subfolder whose ``config.json`` has a ``quantization_config``),
    plus the pipeline's own findings (a missing component; with a reference, a component or
    a config that differs from it beyond the quantization)."""

    directory: str
    components: dict[str, ValidationReport]
    unquantized: list[str]
    reference: str | None = None
    pipeline_findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return self.pipeline_findings + [
            Finding(f"{name}/{f.tensor}", f.rule, f.message) for name, r in self.components.items() for f in r.findings
        ]

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def quantized(self) -> list[str]:
        return [f"{name}/{m}" for name, r in self.components.items() for m in r.quantized]

    @property
    def errors(self) -> list[LayerError]:
        return [
            LayerError(f"{name}/{e.module}", e.rel_error, e.max_abs_error)
            for name, r in self.components.items()
            for e in r.errors
        ]

    @property
    def decoded(self) -> bool:
        return all(r.decoded for r in self.components.values())

    def worst(self, n: int = 5) -> list[LayerError]:
        return sorted(self.errors, key=lambda e: (-e.rel_error, e.module))[:n]

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "kind": "diffusers-pipeline",
            "reference": self.reference,
            "quantized_layers": len(self.quantized),
            "decoded": self.decoded,
            "ok": self.ok,
            "findings": [{"tensor": f.tensor, "rule": f.rule, "message": f.message} for f in self.findings],
            "worst_layers": [_err_dict(e) for e in self.worst()],
            "components": {name: r.to_dict() for name, r in self.components.items()},
            "unquantized_components": self.unquantized,
            "notes": self.notes,
        }

    def render(self) -> str:
        lines = [
            f"{self.directory}: Diffusers pipeline, quantized components {', '.join(self.components)}"
            + (f"; unchanged: {', '.join(self.unquantized)}" if self.unquantized else "")
        ]
        for name, r in self.components.items():
            lines.append(
                f"[{name}] {r.quant_method} {r.weight_format}, {len(r.quantized)} quantized layers"
                + (f", excluded {', '.join(r.exclude)}" if r.exclude else "")
            )
            if r.errors:
                lines.append(f"  weight error vs {r.reference} (bound {r.max_error:g}); worst layers:")
                lines += [
                    f"    {e.module}: relative {e.rel_error:.4g}, max-abs {e.max_abs_error:.4g}" for e in r.worst()
                ]
            lines += [f"  note: {n}" for n in r.notes]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"FINDING {f}" for f in self.findings]
        lines.append(f"{len(self.findings)} finding(s)" if self.findings else "OK")
        return "\n".join(lines) + "\n"


def _pipeline_components(directory: Path) -> list[str]:
    """The components ``model_index.json`` lists (set ones: ``[library, class]``)."""
    index = read_json_object(directory / PIPELINE_INDEX)
    return [
        name
        for name, value in index.items()
        if not name.startswith("_") and isinstance(value, list) and len(value) == 2 and value[1] is not None
    ]


def _is_quantized_component(folder: Path) -> bool:
    config = folder / "config.json"
    if (folder / "hf_quant_config.json").is_file():
        return True
    return config.is_file() and bool(read_json_object(config).get("quantization_config"))


def _files(folder: Path) -> dict[str, int]:
    return {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def validate_pipeline(
    directory: str | Path,
    reference: str | Path | None = None,
    *,
    max_error: float | None = None,
    decode: bool = True,
) -> PipelineReport:
    """Check a Diffusers pipeline folder: each component with a ``quantization_config`` like
    an LLM checkpoint (:func:`validate_checkpoint`: layout, scales, exclusions, and with a
    ``reference`` pipeline each layer's relative weight error against ``reference/<component>``),
    every component ``model_index.json`` lists present, and with a reference the unquantized
    components holding the same files (names and sizes), ``model_index.json`` the same and
    the quantized components' ``config.json`` the same but for ``quantization_config``.
    A UserError when no component is quantized (not a quantized pipeline)."""
    directory = Path(directory)
    ref = Path(reference) if reference is not None else None
    if ref is not None and not (ref / PIPELINE_INDEX).is_file():
        raise UserError(f"reference {ref} is not a Diffusers pipeline folder (no {PIPELINE_INDEX})")
    names = _pipeline_components(directory)
    report = PipelineReport(str(directory), {}, [], reference=str(ref) if ref is not None else None)
    add = report.pipeline_findings.append
    if ref is not None and read_json_object(directory / PIPELINE_INDEX) != read_json_object(ref / PIPELINE_INDEX):
        add(Finding(PIPELINE_INDEX, "model-index", f"differs from the reference's {ref / PIPELINE_INDEX}"))
    for name in names:
        folder = directory / name
        if not folder.is_dir():
            add(Finding(name, "missing-component", f"{PIPELINE_INDEX} lists {name} but the folder is missing"))
            continue
        if not _is_quantized_component(folder):
            report.unquantized.append(name)
            if ref is not None and (ref / name).is_dir() and _files(folder) != _files(ref / name):
                add(
                    Finding(
                        name,
                        "component-changed",
                        f"not quantized, but its files (names, sizes) differ from the reference's {ref / name}",
                    )
                )
            continue
        try:
            sub = validate_checkpoint(
                folder, ref / name if ref is not None else None, max_error=max_error, decode=decode
            )
        except UserError as exc:
            add(Finding(name, "component", str(exc)))
            continue
        report.components[name] = sub  # type: ignore[assignment]
        if ref is not None and (ref / name / "config.json").is_file():
            config = {k: v for k, v in read_json_object(folder / "config.json").items() if k != "quantization_config"}
            if config != read_json_object(ref / name / "config.json"):
                add(
                    Finding(
                        f"{name}/config.json",
                        "config-changed",
                        "differs from the reference's beyond quantization_config",
                    )
                )
    if not report.components and not any(f.rule == "component" for f in report.pipeline_findings):
        raise UserError(
            f"{directory}: no component of this Diffusers pipeline has a quantization_config: not a quantized pipeline"
        )
    return report


# --------------------------------------------------------------------------- emulated copy


#: Findings that leave every tensor decodable (the emulated copy can still be written).
_DECODABLE = frozenset({"quantized-embedding", "not-quantized"})


_DTYPE_BYTES = {
    "BF16": 2,
    "F16": 2,
    "F32": 4,
    "F64": 8,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I32": 4,
    "I64": 8,
}


def dequantized_shards(
    directory: str | Path, dtype: Any = None, *, max_shard_bytes: int = 2_000_000_000
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file name, tensors) of a plain HF checkpoint equal to ``directory`` with every
    quantized weight decoded by our codec (default bfloat16) under the name ``<module>.weight``;
    scales and activation-scale companions dropped. Memory stays bounded: a source shard whose
    decoded tensors exceed ``max_shard_bytes`` is written as several files
    (``<stem>-part<k>.safetensors``), so write the index from the names yielded."""
    import torch
    from safetensors import safe_open

    directory = Path(directory)
    qcfg = read_quant_config(directory)
    inv = read_inventory(directory)
    probe = ValidationReport(str(directory), qcfg.method, qcfg.fmt.name, [], [])
    quantized = _check_structure(qcfg, inv, probe)
    blocking = [f for f in probe.findings if f.rule not in _DECODABLE]
    if blocking:
        raise UserError(f"{directory}: cannot decode: {blocking[0]}")
    dtype = torch.bfloat16 if dtype is None else dtype
    out_bytes = torch.empty((), dtype=dtype).element_size()
    drop: set[str] = set()
    owner: dict[str, str] = {}
    for module, entry in quantized.items():
        owner[entry["weight"]] = module
        drop |= {entry["scale"]} | ({entry["global"]} if entry["global"] else set())
        drop |= {f"{module}.{s}" for s in qcfg.layout.ignored}

    def size(name: str) -> int:
        if name in owner:
            entry = quantized[owner[name]]
            return math.prod(entry["shape"]) * out_bytes
        return math.prod(inv[name].shape) * _DTYPE_BYTES.get(inv[name].dtype, 4)

    for shard in sorted({info.file for info in inv.values()}):
        names = sorted(n for n, info in inv.items() if info.file == shard and n not in drop)
        groups: list[list[str]] = [[]]
        total = 0
        for name in names:
            if groups[-1] and total + size(name) > max_shard_bytes:
                groups.append([])
                total = 0
            groups[-1].append(name)
            total += size(name)
        stem = shard[: -len(".safetensors")]
        for k, group in enumerate(groups, 1):
            out: dict[str, Any] = {}
            with safe_open(directory / shard, framework="pt") as handle:
                for name in group:
                    if name in owner:
                        entry = quantized[owner[name]]
                        glob = _load(directory, inv[entry["global"]], entry["global"]) if entry["global"] else None
                        scale = _load(directory, inv[entry["scale"]], entry["scale"])
                        stored = handle.get_tensor(name)
                        if entry["blocks"]:  # gpt-oss: decoded [..., out, in], stored unquantized as [..., in, out]
                            stored = stored.reshape(*stored.shape[:-2], -1)
                        w = qcfg.fmt.decode(stored, scale, glob, qcfg.layout.global_divides)
                        if entry["blocks"]:
                            w = w.transpose(-1, -2).contiguous()
                        out[entry["ref"]] = w.to(dtype)
                    else:
                        out[name] = handle.get_tensor(name)
            yield (shard if len(groups) == 1 else f"{stem}-part{k}.safetensors"), out
            del out


def inspect_checkpoint(directory: str | Path) -> dict[str, Any]:
    """Short description (method, format, counts) without decoding: for manifests and messages."""
    report = validate_checkpoint(directory, decode=False)
    return {"quant_method": report.quant_method, "weight_format": report.weight_format, "layers": len(report.quantized)}


def format_names() -> Sequence[str]:
    return tuple(WEIGHT_FORMATS)
