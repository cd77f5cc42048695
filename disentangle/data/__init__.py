"""Ground-truth datasets: the interface metrics rely on, and the registry ``DATASETS``.

Every module in this package is imported on ``import disentangle.data`` so that its
``@DATASETS.register(...)`` entries exist. A dataset builder is called with the ``data`` section of
the config (minus ``name``) and, if it accepts one, a ``device`` keyword chosen by the trainer.
"""
from __future__ import annotations

from typing import Any

import torch

from .._core.devices import check_device
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


#: data keys that say how and where the images are kept, not which images they are: rendered once or
#: per batch, on the device or streamed, the folder of a downloaded file or of a decoded cache, and
#: whether a missing file may be fetched. Two data sections that differ only in them hold the same data.
STORAGE_KEYS = ("materialize", "placement", "cache_dir", "cache", "download")


def data_identity(data: Any) -> dict[str, Any]:
    """Which images a ``data`` section (a :class:`~disentangle.config.DataConfig` or its dict) gives:
    its name and parameters, the dataset's defaults filled in, without :data:`STORAGE_KEYS`,
    ``labels`` (a subset drawn from the data, not the data) and ``device``; ``subgrid`` when set.
    Values as JSON reads them back (tuples as lists), so two spellings of one section compare equal."""
    import json

    if not isinstance(data, dict):
        data = {"name": data.name, **dict(data.params), "subgrid": data.subgrid}
    filled: dict[str, Any] = {}
    if data.get("name") in DATASETS:
        filled = {key: p.default for key, p in DATASETS.parameters(data["name"]).items() if p.default is not p.empty}
    filled.update(data)
    kept = {k: v for k, v in filled.items()
            if k not in STORAGE_KEYS and k not in ("labels", "device") and not (k == "subgrid" and v is None)}
    return json.loads(json.dumps(kept, sort_keys=True, default=str))


def build_dataset(data: Any, device: str | torch.device = "cpu"):
    """Build a registered dataset from a config's ``data`` section.

    ``data`` is a :class:`~disentangle.config.DataConfig` or a dict ``{"name": ..., **params}``.
    The ``device`` is passed to the builder if it accepts one; otherwise the dataset is moved
    there with ``.to(device)`` when it has that method. ``data.subgrid`` wraps the dataset in a
    :class:`~disentangle.data.subgrid.SubGrid` (some classes of some factors). ``data.labels`` (the few labelled
    observations, :mod:`disentangle.data.labels`) is not a dataset parameter and is ignored here.
    A ``device`` that is not a device of this machine (``"cuda"`` without CUDA, ``"gpu"``) is a
    :class:`~disentangle.ConfigError` naming the devices there are, before anything is built
    (:func:`disentangle._core.devices.check_device`).
    """
    device = check_device(device, "device")
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
    try:  # which data section built it: a trainer given this dataset tells it from a user's own
        dataset.built_from = data_identity(data)
    except AttributeError:  # a class with __slots__: it counts as a dataset of the user's
        pass
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
    "STORAGE_KEYS",
    "build_dataset",
    "data_identity",
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
    "content_identity",
]

from .._core.discovery import import_submodules  # noqa: E402

import_submodules(__name__, __path__, skip=("base",))

from .custom import from_arrays  # noqa: E402
from .samples import SampleDataset, content_identity, from_torch  # noqa: E402
from .torch_view import TorchDataset  # noqa: E402
