"""Groups of images of one class: the data of the class/content objectives.

The class/content methods (Mathieu et al. 2016, DrNet, LORD, the F-statistic loss) learn from a
grouping of the images, not from the factors themselves: which images belong to the same *class*
(an identity, an object, a video). Here a class is the combination of values of one or more
``class_factors``:

* on a factor grid (:class:`~disentangle.data.GridDataset`), factors of the grid, e.g. ``[shape]``
  on dSprites (3 classes) or ``[shape, scale]`` (18 classes, DrNet's "content" of a video: what stays
  fixed while the object moves);
* on a labelled sample (:class:`~disentangle.data.SampleDataset`: own images with labels, CelebA's
  attributes), label columns; the classes are the combinations that occur.

A batch is ``G`` groups of ``N`` images of one class, **group-major** (rows ``[g·N, (g + 1)·N)`` are
group ``g``), as :mod:`disentangle.data.groups` lays out groups sharing a factor. What is drawn, from
the given generator (the trainer's checkpointed data generator), in this order:

* on a grid: the classes of every factor of every member, uniform (``G·N × K`` float64 uniforms,
  as :func:`~disentangle.data.groups.sample_group_factors`); then every member takes the first
  member's values of the class factors. The class is uniform over the grid's classes and every other
  factor is independent and uniform (so two members may coincide by chance). The observations are
  made as a group batch's (per-image nuisance drawn per member).
* on a labelled sample: ``G`` anchor images uniform over the sample (so a class is drawn in
  proportion to its images), then ``N − 1`` members per group uniform over the images of the
  anchor's class, with replacement (a class of one image gives groups of that image).

A batch also carries each image's class (an integer ``0 .. num_classes − 1``: the mixed-radix index
of its class-factor values on a grid, the rank of its label combination on a sample) and its index in
the dataset (the grid index ``factors · strides`` on a grid; LORD keeps a code per index).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ..errors import ParameterError
from .base import factor_strides
from .groups import GroupFactors, _check_shard, observe_groups
from .pairs import _grid_tensors, _shard_to_render, _uniform_classes

__all__ = [
    "ClassBatch",
    "ClassIndex",
    "class_index",
    "num_classes",
    "resolve_class_factors",
    "sample_class_groups",
]

#: what ``class_factors`` may be: one factor (index or name) or a list of them
ClassFactors = int | str | Sequence[int | str]


class ClassBatch(NamedTuple):
    """One training batch of a class/content objective: ``G`` groups of ``N`` images of one class,
    group-major."""

    x: torch.Tensor  #: ``(G·N, C, H, W)`` float in [0, 1]
    labels: torch.Tensor  #: ``(G·N,)`` int64, the class of each image (a group shares one)
    indices: torch.Tensor  #: ``(G·N,)`` int64, each image's index in the dataset (grid index on a grid)


def _is_sample(dataset) -> bool:
    return getattr(dataset, "is_grid", True) is False


def check_class_factors(class_factors) -> tuple[int | str, ...] | None:
    """``class_factors`` as a tuple of factor indices or names (``None`` stays ``None``: the
    objective has no class yet), else a :class:`~disentangle.errors.ParameterError`. Checked against a
    dataset by :func:`resolve_class_factors`."""
    if class_factors is None:
        return None
    values = (class_factors,) if isinstance(class_factors, (int, str)) else class_factors
    if isinstance(values, (bytes, dict)) or not isinstance(values, Sequence) or not values or not all(
        isinstance(v, str) or (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0) for v in values
    ):
        raise ParameterError(
            "class_factors", f"class_factors must be a factor (its name or index) or a non-empty list of them, "
            f"e.g. class_factors: [shape]; got {class_factors!r}."
        )
    if len(set(values)) != len(values):
        raise ParameterError("class_factors", f"class_factors lists a factor twice: {list(values)}.")
    return tuple(v if isinstance(v, str) else int(v) for v in values)


def resolve_class_factors(class_factors, dataset, *, who: str = "this objective") -> tuple[int, ...]:
    """The factor (or label column) indices of ``class_factors`` in ``dataset``; one paragraph naming
    the dataset's factors when one is unknown, missing, or the dataset has no labels."""
    names = tuple(getattr(dataset, "factor_names", ()) or ())
    data_name = getattr(dataset, "name", type(dataset).__name__)
    if _is_sample(dataset) and not getattr(dataset, "labelled", False):
        raise ParameterError(
            "class_factors", f"{who} learns from classes of images (which images share an identity), and "
            f"{data_name} has no labels to say which do. Give the images labels (from_arrays(images, labels), "
            "a torch dataset of (image, labels) items, celeba's attributes) and name the label columns "
            "that make a class with objective.class_factors."
        )
    listing = ", ".join(f"{i}: {n}" for i, n in enumerate(names)) or "none"
    values = check_class_factors(class_factors)
    if values is None:
        raise ParameterError(
            "class_factors", f"{who} needs objective.class_factors: the factors whose values make an image's "
            f"class (e.g. [shape] on dSprites). This dataset's factors are {listing}."
        )
    out = []
    for value in values:
        if isinstance(value, str):
            if value not in names:
                from .._core.registry import did_you_mean

                raise ParameterError(
                    "class_factors", f"class_factors names factor {value!r}, which this dataset lacks. Its "
                    f"factors are {listing}.{did_you_mean(value, names)}"
                )
            out.append(names.index(value))
        else:
            if value >= len(names):
                raise ParameterError(
                    "class_factors", f"class_factors names factor {value}, but this dataset has {len(names)} "
                    f"factors ({listing})."
                )
            out.append(value)
    if len(set(out)) != len(out):
        raise ParameterError("class_factors", f"class_factors names one factor twice: {list(values)}.")
    if not _is_sample(dataset) and len(out) == len(names):
        raise ParameterError(
            "class_factors", f"class_factors {list(values)} names every factor of the dataset, so a class is a "
            "single image and nothing is left for the content code. Leave at least one factor out."
        )
    return tuple(out)


class ClassIndex(NamedTuple):
    """The classes of a labelled sample, for drawing groups on its device (built once, cached)."""

    labels: torch.Tensor  #: ``(N,)`` int64, the class of every image
    order: torch.Tensor  #: ``(N,)`` int64, the images sorted by class (stable)
    offsets: torch.Tensor  #: ``(M,)`` int64, where class ``m`` starts in ``order``
    counts: torch.Tensor  #: ``(M,)`` int64, its number of images
    values: np.ndarray  #: ``(M, F)`` the label values of each class


def class_index(dataset, factors: tuple[int, ...]) -> ClassIndex:
    """The :class:`ClassIndex` of a labelled sample for the label columns ``factors`` (cached on the
    dataset, rebuilt when it has moved to another device)."""
    cache = dataset.__dict__.setdefault("_class_index_cache", {})
    key = (factors, str(dataset.device))
    if key not in cache:
        values, labels = np.unique(np.asarray(dataset.labels)[:, list(factors)], axis=0, return_inverse=True)
        labels = labels.reshape(-1).astype(np.int64)
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=len(values))
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        device = dataset.device
        cache[key] = ClassIndex(*(torch.as_tensor(a, dtype=torch.int64, device=device) for a in (labels, order, offsets, counts)), values)
    return cache[key]


def num_classes(dataset, factors: tuple[int, ...]) -> int:
    """The number of classes of ``dataset`` for the resolved ``factors``: the product of their sizes on
    a grid, the number of label combinations that occur on a sample."""
    if _is_sample(dataset):
        return int(len(class_index(dataset, factors).values))
    return math.prod(int(dataset.factor_sizes[f]) for f in factors)


def class_labels_of_factors(factors: torch.Tensor, factor_sizes: Sequence[int], class_factors: tuple[int, ...]) -> torch.Tensor:
    """The class ``(n,)`` of grid factor rows ``(n, K)``: the mixed-radix index of the class factors'
    values, the first class factor most significant."""
    columns, strides = _class_tensors(tuple(int(s) for s in factor_sizes), tuple(class_factors), factors.device)
    return (factors.index_select(1, columns) * strides).sum(1)


@functools.lru_cache(maxsize=32)
def _class_tensors(factor_sizes: tuple[int, ...], class_factors: tuple[int, ...], device: torch.device):
    """The int64 ``(columns, strides)`` of the class factors on ``device``, built once (made at every
    step they would be copied from the host every step). Read-only."""
    with torch.inference_mode(False), torch.no_grad():
        columns = torch.as_tensor(class_factors, dtype=torch.int64, device=device)
        strides = torch.as_tensor(factor_strides([factor_sizes[f] for f in class_factors]), dtype=torch.int64, device=device)
    return columns, strides


@functools.lru_cache(maxsize=32)
def _is_class_mask(num_factors: int, class_factors: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``(K,)`` bool, true at the class factors, on ``device``, built once. Read-only."""
    with torch.inference_mode(False), torch.no_grad():
        return torch.as_tensor([k in class_factors for k in range(num_factors)], dtype=torch.bool, device=device)


def _sample_grid(dataset, num_groups: int, group_size: int, generator: torch.Generator, factors: tuple[int, ...]) -> ClassBatch:
    sizes, strides = _grid_tensors(tuple(int(s) for s in dataset.factor_sizes), generator.device)
    rows = _uniform_classes(sizes, num_groups * group_size, generator).view(num_groups, group_size, -1)
    is_class = _is_class_mask(sizes.numel(), factors, rows.device)
    rows = torch.where(is_class, rows[:, :1, :], rows).reshape(num_groups * group_size, -1)
    shard = _shard_to_render(dataset)
    x = observe_groups(dataset, GroupFactors(rows, torch.zeros(num_groups, dtype=torch.int64, device=rows.device)), generator)
    labels = class_labels_of_factors(rows, dataset.factor_sizes, factors)
    indices = (rows * strides).sum(1)
    if shard is not None:
        labels, indices = shard.rows(labels), shard.rows(indices)
    return ClassBatch(x, labels.to(x.device), indices.to(x.device))


def _sample_labelled(dataset, num_groups: int, group_size: int, generator: torch.Generator, factors: tuple[int, ...]) -> ClassBatch:
    from .base import current_sampling_shard, rendering_shard

    index = class_index(dataset, factors)
    device = index.labels.device
    anchors = torch.randint(len(dataset), (num_groups,), generator=generator, device=device)
    cls = index.labels[anchors]
    u = torch.rand((num_groups, group_size - 1), generator=generator, device=device, dtype=torch.float64)
    within = torch.minimum((u * index.counts[cls, None]).long(), index.counts[cls, None] - 1)
    members = index.order[index.offsets[cls, None] + within]
    indices = torch.cat([anchors[:, None], members], dim=1).reshape(-1)
    labels = index.labels[indices]
    shard = current_sampling_shard()
    if shard is None:
        x = dataset.observe(indices)
    else:
        indices, labels = shard.rows(indices), shard.rows(labels)
        with rendering_shard(shard):
            x = dataset.observe(indices)
    return ClassBatch(x, labels.to(x.device), indices.to(x.device))


def sample_class_groups(
    dataset, num_groups: int, group_size: int, generator: torch.Generator, class_factors: tuple[int, ...]
) -> ClassBatch:
    """``num_groups`` groups of ``group_size`` images of one class each (module docstring: what is
    drawn). ``class_factors``: resolved indices (:func:`resolve_class_factors`). Within
    :func:`~disentangle.data.base.sampling_shard` only the shard's whole groups are returned."""
    _check_shard(num_groups)
    if _is_sample(dataset):
        return _sample_labelled(dataset, num_groups, group_size, generator, tuple(class_factors))
    return _sample_grid(dataset, num_groups, group_size, generator, tuple(class_factors))
