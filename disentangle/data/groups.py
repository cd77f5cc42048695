"""Groups of observations that share one factor: the data of the group VAEs (ML-VAE, GVAE).

The multi-level VAE (Bouchacourt, Tomioka & Nowozin, AAAI 2018) and the group-based VAE (Hosoya,
IJCAI 2019) train on *groups* of ``N`` observations that share a content (grouped) factor value.
What is drawn here, per group, for a dataset with ``K`` factors:

1. the classes of every member, each factor uniform over its classes (as ``x1`` of
   :mod:`disentangle.data.pairs`);
2. ``shared``: which factor the group shares, uniform over ``shared_factors`` (default: all
   ``K`` factors);
3. the shared factor of every member is set to the first member's class, so its value is uniform
   over its classes and common to the group; every other factor of every member stays as drawn in
   step 1 (independent and uniform, so it may coincide by chance).

Layout: **group-major**. A batch of ``G`` groups of ``N`` holds ``G·N`` images; rows
``[g·N, (g + 1)·N)`` are group ``g``, and ``shared[g]`` is its shared factor. A contiguous slice of
whole groups is therefore a batch of groups too, which is what a multi-process run needs:
:func:`disentangle._core.distributed.shard_batch` gives each rank equal contiguous rows of every
tensor of the batch, i.e. ``G/W`` whole groups of ``x`` and their ``shared`` (``G`` must be a
multiple of the number of processes ``W``). A training batch is counted in **images**
(``train.batch_size = G·N``), so that the trainer's check of the rows of a batch against
``train.batch_size`` holds.

Everything is vectorised and drawn from the given ``torch.Generator`` (the trainer's checkpointed
data generator), in the order of the steps above: ``G·N × K`` float64 uniforms for the classes,
``G`` integers for the shared factor, then the observation's own draws. The factors of a draw
depend only on the generator and the factor sizes (never on the images); the same generator state
gives the same groups, and a resumed run replays them. As for pairs, the observations are made in
one call for the ``G·N`` images, so any per-image nuisance (Color-dSprites' colour, SmallNORB's
hidden instance) is drawn independently for each member of a group.

Datasets: a grid-indexed :class:`~disentangle.data.GridDataset` (``len(dataset) ==
prod(factor_sizes)``) is observed on its device by index; within
:func:`~disentangle.data.base.sampling_shard` one that can (``shard_rendering``) renders only the
shard's whole groups (its nuisance drawn for all ``G·N`` images, the shard's rows kept). Any other
dataset goes through ``sample_observations_from_factors`` with a ``numpy`` generator seeded from
the torch generator (one more integer drawn from it), as :mod:`disentangle.data.pairs` does.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from .._core.checks import integer
from ..errors import ConfigError, ParameterError
from .base import current_sampling_shard, rendering_shard
from .pairs import _grid_tensors, _indexed_by_grid, _shard_to_render, _uniform_classes


class GroupFactors(NamedTuple):
    """The factor classes of a batch of groups (group-major), and the shared factor of each group."""

    factors: torch.Tensor  #: ``(G·N, K)`` int64 classes; rows ``[g·N, (g + 1)·N)`` are group ``g``
    shared: torch.Tensor  #: ``(G,)`` int64, the index of the factor group ``g`` shares


class GroupBatch(NamedTuple):
    """One training batch of groups; what a group objective's ``sample_batch`` returns.

    Group-major: rows ``[g·N, (g + 1)·N)`` of ``x`` are the ``N`` members of group ``g``.
    """

    x: torch.Tensor  #: ``(G·N, C, H, W)`` float in [0, 1]
    shared: torch.Tensor  #: ``(G,)`` int64, the index of the factor each group shares


def check_shared_factors(shared_factors: Sequence[int] | None, num_factors: int | None = None) -> tuple[int, ...] | None:
    """``shared_factors`` as a tuple of distinct factor indices (``None``: every factor), else a
    :class:`~disentangle.ConfigError` saying why; checked against ``num_factors`` when given."""
    if shared_factors is None:
        return None
    if isinstance(shared_factors, (str, bytes)) or not isinstance(shared_factors, Sequence) or not shared_factors:
        raise ParameterError(
            "shared_factors", f"shared_factors must be a non-empty list of factor indices (or null for every "
            f"factor), got {shared_factors!r}."
        )
    values = tuple(integer("shared_factors", v, minimum=0) for v in shared_factors)
    if len(set(values)) != len(values):
        raise ParameterError("shared_factors", f"shared_factors lists a factor twice: {list(values)}.")
    if num_factors is not None and max(values) >= num_factors:
        raise ParameterError(
            "shared_factors", f"shared_factors {list(values)} names factor {max(values)}, but the dataset has "
            f"{num_factors} factors (indices 0..{num_factors - 1})."
        )
    return values


@functools.lru_cache(maxsize=32)
def _choices_tensor(choices: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """The int64 factor indices a group may share, on ``device``, built once (not copied from the
    host at every step). Read-only."""
    with torch.inference_mode(False), torch.no_grad():
        return torch.as_tensor(choices, dtype=torch.int64, device=device)


def sample_group_factors(
    factor_sizes: Sequence[int],
    num_groups: int,
    group_size: int,
    generator: torch.Generator,
    shared_factors: Sequence[int] | None = None,
) -> GroupFactors:
    """Draw the factor classes of ``num_groups`` groups of ``group_size`` on the generator's device
    (module docstring: exactly what is drawn, and in which order)."""
    sizes, _ = _grid_tensors(tuple(int(s) for s in factor_sizes), generator.device)
    num_factors = sizes.numel()
    choices = check_shared_factors(shared_factors, num_factors)
    num_groups = integer("num_groups", num_groups, minimum=1)
    group_size = integer("group_size", group_size, minimum=1)
    device = generator.device
    factors = _uniform_classes(sizes, num_groups * group_size, generator).view(num_groups, group_size, num_factors)
    if choices is None:
        shared = torch.randint(0, num_factors, (num_groups,), generator=generator, device=device)
    else:
        drawn = torch.randint(0, len(choices), (num_groups,), generator=generator, device=device)
        shared = _choices_tensor(choices, device)[drawn]
    # every member takes the first member's class of the shared factor
    is_shared = (torch.arange(num_factors, device=device) == shared[:, None])[:, None, :]  # (G, 1, K)
    first = factors[:, :1, :]  # (G, 1, K)
    factors = torch.where(is_shared, first, factors)
    return GroupFactors(factors.reshape(num_groups * group_size, num_factors), shared)


def _check_shard(num_groups: int) -> None:
    shard = current_sampling_shard()
    if shard is not None and num_groups % shard.count:
        raise ConfigError(
            f"a batch of {num_groups} groups cannot be split into whole groups over {shard.count} processes: "
            f"train.batch_size / group_size must be a multiple of the number of processes."
        )


def observe_groups(dataset, factors: GroupFactors, generator: torch.Generator) -> torch.Tensor:
    """The observations ``(G·N, C, H, W)`` of a batch of group factors, nuisance drawn per image.

    Within :func:`~disentangle.data.base.sampling_shard` a dataset that can render a shard alone
    renders only the shard's rows (whole groups; the generator moved on the same way)."""
    rows = factors.factors
    if _indexed_by_grid(dataset):
        _, strides = _grid_tensors(tuple(int(s) for s in dataset.factor_sizes), rows.device)
        indices = (rows * strides).sum(1).to(dataset.device)
        shard = _shard_to_render(dataset)
        if shard is None:
            return dataset.observe(indices, generator)
        with rendering_shard(shard):
            return dataset.observe(shard.rows(indices), generator)
    seed = int(torch.randint(0, 2**63 - 1, (1,), generator=generator, device=generator.device))
    images = dataset.sample_observations_from_factors(rows.cpu().numpy(), np.random.default_rng(seed))
    return torch.as_tensor(images, device=rows.device)


def sample_groups(
    dataset,
    num_groups: int,
    group_size: int,
    generator: torch.Generator,
    shared_factors: Sequence[int] | None = None,
) -> GroupBatch:
    """A batch of ``num_groups`` groups of ``group_size`` observations of ``dataset`` sharing one
    factor each (module docstring: what is drawn; group-major layout).

    Within :func:`~disentangle.data.base.sampling_shard` (and a dataset that can) only the shard's
    groups are rendered and returned; the factors are drawn for the whole batch.
    """
    _check_shard(num_groups)
    factors = sample_group_factors(dataset.factor_sizes, num_groups, group_size, generator, shared_factors)
    shard = _shard_to_render(dataset)
    x = observe_groups(dataset, factors, generator)
    shared = factors.shared if shard is None else shard.rows(factors.shared)
    return GroupBatch(x, shared)


__all__ = [
    "GroupBatch",
    "GroupFactors",
    "check_shared_factors",
    "observe_groups",
    "sample_group_factors",
    "sample_groups",
]
