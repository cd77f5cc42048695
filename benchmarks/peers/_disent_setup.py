"""What both disent workers need before importing disent.

PyPI has only CUDA builds of torchvision; with the CPU build of torch their C++ operators do not
load, and ``import torchvision`` then fails in ``torchvision/_meta_registrations.py`` ("operator
torchvision::nms does not exist": it registers a fake kernel for an operator that was never
defined). disent imports torchvision for image transforms only (``torchvision.transforms.functional``,
pure Python), never for its operators, so :func:`import_torchvision` defines the schemas of the two
detection operators it trips on (nms, qnms), without kernels, and imports it again. Nothing that is
benchmarked calls them. With a torchvision whose operators load, nothing is changed.
"""
from __future__ import annotations

import sys

_LIBRARIES = []  # a torch.library.Library must stay alive for its definitions to stay


def import_torchvision() -> bool:
    """Import torchvision; returns whether the workaround above was needed."""
    try:
        import torchvision  # noqa: F401
        return False
    except RuntimeError as err:
        if "torchvision::nms" not in str(err):
            raise
    import torch

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]  # the half-imported package
    library = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIBRARIES.append(library)
    import torchvision  # noqa: F401

    return True
