"""Quantization formats as one registry: everything the workflow knows about a format.

A :class:`QuantFormat` holds, for one weight format, the config schemes it serves
(``quantization.<recipe>.scheme``), its codec, its checkpoint writer, its size per
parameter (the plan view and the preflight disk check) and the texts that describe it in
``measurements.json`` and ``documentation/calibration.md``. Config validation, the plan
view, the preflight check, the quantize stage and the packager all read this registry.

Adding a format: put a module in this package (``src/mlperf_repro/quant/formats/<name>.py``)
that builds a :class:`QuantFormat` and calls :func:`register_format`; every module here is
imported when the package is, so nothing else needs an edit (see mxfp4.py, and
tests/test_extending_quant_format.py for a toy int8 format plugged in this way).

Keep the modules free of heavy imports at import time (torch): config validation and the
plan view import this package; import the codec inside the functions.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import UserError

__all__ = ["FORMATS", "QuantFormat", "discover", "format_for", "register_format", "schemes"]


@dataclass(frozen=True)
class QuantFormat:
    """One weight quantization format.

    ``quantize(weight, scale_mode) -> (stored, scale)`` and ``dequantize(stored, scale,
    dtype) -> weight`` are the codec (torch tensors). ``writer(src_dir, quantized_dir,
    emulated_dir, *, scheme, scale_mode, exclude, manifest_path) -> manifest`` turns an
    unquantized checkpoint into the served one plus a dequantized copy and returns the
    manifest (see :func:`mlperf_repro.quant.checkpoint.quantize_checkpoint`).
    ``pipeline_writer`` (optional, same call): the same for a Diffusers pipeline folder
    (:func:`mlperf_repro.quant.pipeline.quantize_pipeline`).
    ``bytes_per_param``: stored bytes per quantized parameter, scales included.
    ``size_note``: that figure in words, for the plan view's notes. ``weight_data_types``,
    ``transformations(recipe)`` and ``calibration(recipe)``: the measurements.json values
    and the calibration.md bullet lines for a config recipe (``quantization.<name>``, with
    its defaults filled).
    """

    name: str
    schemes: tuple[str, ...]
    quantize: Callable[..., tuple[Any, Any]]
    dequantize: Callable[..., Any]
    writer: Callable[..., dict[str, Any]]
    bytes_per_param: float
    size_note: str
    weight_data_types: str
    transformations: Callable[[Mapping[str, Any]], str]
    calibration: Callable[[Mapping[str, Any]], list[str]]
    #: The writer of a Diffusers pipeline folder (``model_index.json``: Wan 2.2's two
    #: transformers), same call as ``writer``; None: the format quantizes LLM checkpoints only.
    pipeline_writer: Callable[..., dict[str, Any]] | None = None

    def quantize_tensors(
        self, tensors: Mapping[str, Any], names: Sequence[str] | None = None, scale_mode: str = "even"
    ) -> dict[str, Any]:
        """Quantize ``names`` (default: all) of a tensor dict the way the checkpoint stores
        them: ``<name>`` holds the stored weight and ``<name>_scale`` its scales; the other
        tensors are returned unchanged."""
        chosen = set(tensors if names is None else names)
        unknown = sorted(chosen - set(tensors))
        if unknown:
            raise UserError(f"{self.name}: no tensor named {', '.join(map(repr, unknown))} to quantize")
        out: dict[str, Any] = {}
        for key in sorted(tensors):
            if key in chosen:
                out[key], out[key + "_scale"] = self.quantize(tensors[key], scale_mode)
            else:
                out[key] = tensors[key]
        return out

    def dequantize_tensors(self, stored: Mapping[str, Any], dtype: Any = None) -> dict[str, Any]:
        """The inverse of :meth:`quantize_tensors`: every ``<name>`` with a ``<name>_scale``
        decoded (to ``dtype`` when given), the scale entries dropped."""
        out: dict[str, Any] = {}
        for key in sorted(stored):
            if key.endswith("_scale") and key[: -len("_scale")] in stored:
                continue
            scale = stored.get(key + "_scale")
            if scale is None:
                out[key] = stored[key]
            elif dtype is None:
                out[key] = self.dequantize(stored[key], scale)
            else:
                out[key] = self.dequantize(stored[key], scale, dtype)
        return out


#: Registered formats by name, in registration order.
FORMATS: dict[str, QuantFormat] = {}


def schemes() -> tuple[str, ...]:
    """Every scheme a config may name, in registration order."""
    return tuple(s for fmt in FORMATS.values() for s in fmt.schemes)


def _known() -> str:
    return ", ".join(f"{s} (format {fmt.name})" for fmt in FORMATS.values() for s in fmt.schemes) or "none"


def register_format(fmt: QuantFormat) -> QuantFormat:
    """Add ``fmt`` to the registry and return it; a name or a scheme may be registered once."""
    if not isinstance(fmt, QuantFormat):
        raise TypeError(f"register_format expects a QuantFormat, got {type(fmt).__name__}")
    if not fmt.name:
        raise ValueError("a quantization format needs a name")
    if fmt.name in FORMATS:
        raise ValueError(f"quantization format {fmt.name!r} is already registered")
    if not fmt.schemes or isinstance(fmt.schemes, str):
        raise ValueError(f"quantization format {fmt.name!r}: schemes must be a non-empty tuple of names")
    taken = {s: other.name for other in FORMATS.values() for s in other.schemes}
    for scheme in fmt.schemes:
        if scheme in taken:
            raise ValueError(
                f"quantization format {fmt.name!r}: scheme {scheme!r} is already served by format {taken[scheme]!r}"
            )
    if len(set(fmt.schemes)) != len(fmt.schemes):
        raise ValueError(f"quantization format {fmt.name!r}: schemes {list(fmt.schemes)} repeat a name")
    if not fmt.bytes_per_param > 0:
        raise ValueError(f"quantization format {fmt.name!r}: bytes_per_param must be > 0, got {fmt.bytes_per_param}")
    FORMATS[fmt.name] = fmt
    return fmt


def format_for(scheme: str) -> QuantFormat:
    """The format that serves ``scheme``; a UserError naming the known schemes otherwise."""
    for fmt in FORMATS.values():
        if scheme in fmt.schemes:
            return fmt
    raise UserError(
        f"unknown quantization scheme {scheme!r}; known schemes: {_known()} "
        "(a new format is a module in src/mlperf_repro/quant/formats/ that calls register_format)"
    )


def discover() -> None:
    """Import every module of this package (each registers its formats); idempotent."""
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if not module.startswith("_"):
            importlib.import_module(f"{__name__}.{module}")


discover()
