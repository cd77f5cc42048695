"""Ground-truth datasets: the interface metrics rely on, and the registry ``DATASETS``.

Every module in this package is imported on ``import disentangle.data`` so that its
``@DATASETS.register(...)`` entries exist. A dataset builder is called with the ``data`` section of
the config (minus ``name``) and, if it accepts one, a ``device`` keyword chosen by the trainer.
"""
from __future__ import annotations

from typing import Any

import torch

from .._core.registry import Registry
from ..errors import ConfigError
from .base import (
    GridDataset,
    GroundTruthDataset,
    IndexedImageDataset,
    check_factors,
    factor_strides,
    sample_uniform_factors,
    sample_with_fixed_factor,
    torch_generator_from_numpy,
)

DATASETS: Registry = Registry("dataset")
"""The dataset registry: ``data.name`` names to builders; their keyword parameters are the other
keys of the ``data`` section (see :func:`build_dataset`)."""


def build_dataset(data: Any, device: str | torch.device = "cpu"):
    """Build a registered dataset from a config's ``data`` section.

    ``data`` is a :class:`~disentangle.config.DataConfig` or a dict ``{"name": ..., **params}``.
    The ``device`` is passed to the builder if it accepts one; otherwise the dataset is moved
    there with ``.to(device)`` when it has that method. ``data.subgrid`` wraps the dataset in a
    :class:`~disentangle.data.subgrid.SubGrid` (some classes of some factors). ``data.labels`` (the few labelled
    observations, :mod:`disentangle.data.labels`) is not a dataset parameter and is ignored here.
    """
    if isinstance(data, dict):
        params = dict(data)
        name = params.pop("name")
        params.pop("labels", None)  # the labelled subset (data.labels) is drawn from the dataset, not a parameter of it
        subgrid = params.pop("subgrid", None)
    else:
        name, params, subgrid = data.name, dict(data.params), data.subgrid
    accepts_device = "device" in DATASETS.parameters(name)
    if accepts_device:
        params["device"] = str(device)
    dataset = DATASETS.build(name, **params)
    if not accepts_device and hasattr(dataset, "to"):
        dataset = dataset.to(device) or dataset
    if subgrid is not None:
        dataset = _subgrid(dataset, name, subgrid)
    return dataset


def _subgrid(dataset: Any, name: str, spec: Any):
    from .subgrid import SubGrid

    if not isinstance(dataset, GridDataset):
        raise ConfigError(
            f"data.subgrid keeps some classes of a factor grid's factors, and dataset {name!r} is not a factor "
            "grid (a folder of images, CelebA or another labelled sample). Leave data.subgrid out for it."
        )
    return SubGrid(dataset, spec)

__all__ = [
    "DATASETS",
    "build_dataset",
    "GridDataset",
    "GroundTruthDataset",
    "IndexedImageDataset",
    "check_factors",
    "factor_strides",
    "sample_uniform_factors",
    "sample_with_fixed_factor",
    "torch_generator_from_numpy",
    "TorchDataset",
    "SampleDataset",
    "from_arrays",
    "from_torch",
]

from .._core.discovery import import_submodules  # noqa: E402

import_submodules(__name__, __path__, skip=("base",))

from .custom import from_arrays  # noqa: E402
from .samples import SampleDataset, from_torch  # noqa: E402
from .torch_view import TorchDataset  # noqa: E402
