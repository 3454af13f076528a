"""Make PyPI's CUDA-built torchvision importable next to a CPU-only torch (VBench's environment).

PyPI has no CPU torchvision wheel: ``torchvision==0.28.0``, torch 2.13.0's pair, is a CUDA build
whose ``_C.so`` needs ``libc10_cuda.so`` / ``libtorch_cuda.so``. Next to ``torch 2.13.0+cpu`` the
extension fails to load, torchvision goes on to register fake (meta) kernels for
``torchvision::nms`` and ``torchvision::qnms`` anyway, and ``import torchvision`` dies with
``RuntimeError: operator torchvision::nms does not exist`` (torchvision/_meta_registrations.py);
``vbench.utils`` imports ``torchvision.transforms``, so ``import vbench`` dies with it.

:func:`install` defines those two operator schemas before torchvision is imported: the import
then succeeds and ``torchvision.transforms`` (all VBench uses) works. The ``torchvision.ops``
kernels stay unavailable (calling ``nms`` raises); none of VBench's dimensions calls them. Where
the real extension loads (a CUDA torch), the operators exist and :func:`install` does nothing.

Imported by :mod:`.vbench_runner` in VBench's environment: the standard library and torch only.
"""

from __future__ import annotations

from typing import Any

_LIBRARY: Any = None  # the torch.library.Library must stay referenced, or its definitions go


def install() -> bool:
    """Define ``torchvision::nms``/``qnms`` if torch lacks them; True when it did. Call before
    ``import torchvision`` (or anything that imports it, such as ``import vbench``)."""
    global _LIBRARY
    import torch

    try:
        torch.ops.torchvision.nms  # noqa: B018 - present: the real extension is loaded
        return False
    except (AttributeError, RuntimeError):
        pass
    if _LIBRARY is None:
        _LIBRARY = torch.library.Library("torchvision", "DEF")
        _LIBRARY.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _LIBRARY.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    return True
