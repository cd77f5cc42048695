"""Training objectives and the registry ``OBJECTIVES``.

Every module in this package is imported on ``import disentangle.objectives`` so that its
``@OBJECTIVES.register(...)`` entries exist. See :mod:`disentangle.objectives.base` for the
interface.
"""
from __future__ import annotations

from .._core.registry import Registry
from .base import Objective

OBJECTIVES: Registry = Registry("objective")

__all__ = ["OBJECTIVES", "Objective"]

from .._core.discovery import import_submodules  # noqa: E402

import_submodules(__name__, __path__, skip=("base", "losses"))
