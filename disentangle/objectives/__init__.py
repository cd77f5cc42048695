"""Training objectives and the registry ``OBJECTIVES``.

Every module in this package is imported on ``import disentangle.objectives`` so that its
``@OBJECTIVES.register(...)`` entries exist. See :mod:`disentangle.objectives.base` for the
interface.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .._core.registry import Registry
from .base import Objective

OBJECTIVES: Registry = Registry("objective")

__all__ = ["OBJECTIVES", "Objective", "published_objective_state"]


def published_objective_state(config: Mapping[str, Any], state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The entries of an objective's ``state`` (a checkpoint's ``"objective"`` section) that the
    model of a run of ``config`` is used with: those its class names in
    :attr:`~disentangle.objectives.base.Objective.published_state` (QLAE's ``codebook``), detached;
    ``{}`` for every other objective, or an objective not registered here (a plugin's that was not
    imported: a warning says what may be missing when its checkpoint holds state)."""
    name = (config.get("objective") or {}).get("name")
    if name not in OBJECTIVES:
        if state:
            import logging

            logging.getLogger(__name__).warning(
                "the run's objective '%s' is not registered in this process (a plugin's: import its module, or "
                "pass --import MODULE), so any of its state the model uses (a codebook, as QLAE's) is left out; "
                "encode and decode use the networks alone.", name)
        return {}
    keys = getattr(OBJECTIVES.get(name), "published_state", ())
    return {key: state[key].detach() for key in keys if key in state}

from .._core.discovery import import_submodules  # noqa: E402

import_submodules(__name__, __path__, skip=("base", "losses"))
