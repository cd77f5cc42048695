"""Pairs of observations that share some factors: the data of weakly-supervised disentanglement.

Locatello et al. 2020 ("Weakly-Supervised Disentanglement Without Compromises") train on pairs
``(x1, x2)`` whose ground-truth factors agree except for a few resampled ones. What is drawn here,
per pair, follows disentanglement_lib's ``simple_dynamics`` (``methods/weak/train_weak_lib.py``):

1. ``c1``: the factor classes of ``x1``, each factor uniform over its classes (so ``c1`` is
   uniform over the grid).
2. ``k_observed``: ``k`` when ``k`` is a number; for ``k = "random"`` (the reference's ``k = -1``)
   uniform over ``{1, …, K − 1}`` per pair, ``K`` the number of factors.
3. ``m``: the number of factors to resample, ``1`` or ``k_observed`` with probability ½ each (the
   reference's ``choice([1, k_observed])``: so even a fixed ``k > 1`` gives single-factor pairs
   half of the time; ``k = 1`` always resamples one factor).
4. Which factors: ``m`` distinct factors, uniformly without replacement.
5. ``c2``: ``c1`` with each chosen factor redrawn uniformly over **all** its classes, so a
   resampled factor keeps its value with probability ``1/size`` (then fewer than ``m`` factors
   differ, possibly none).
6. ``changed`` (the label of GVAE / ML-VAE): the index of the last factor chosen in step 4, as
   the reference returns it; with ``m = 1`` it is *the* resampled factor, with ``m > 1`` one of
   them, uniformly. It names a factor that was resampled, which need not have changed value.

The observations are ``x1 = observe(c1)`` and ``x2 = observe(c2)``, observed in one call for the
``2B`` images, so any per-image nuisance (Color-dSprites' colour, Noisy-dSprites' noise, the Scream
crop, SmallNORB's hidden instance) is drawn independently for each element of a pair.

Everything is vectorised and drawn from the given ``torch.Generator`` (the trainer's checkpointed
data generator), in the order of the steps above: ``B×K`` float64 uniforms for ``c1``, ``B``
integers for ``k_observed`` (only for ``k = "random"``), ``B`` integers for the coin of step 3,
``B×K`` float32 uniforms whose per-row ``argsort`` orders the factors for step 4, ``B×K`` float64
uniforms for the new classes (drawn for every factor; used where resampled), then the observation's
own draws. The same generator state therefore gives the same pairs, and a resumed run replays them.
In a multi-process run (:func:`~disentangle.data.base.sampling_shard`) all of this is drawn for
the whole global batch on every process, and a grid-indexed dataset that can renders only the
process's pairs (its nuisance drawn for all ``2B`` images, the process's rows kept).

Datasets: a :class:`~disentangle.data.GridDataset` whose storage index is the grid index
(``len(dataset) == prod(factor_sizes)``: every dataset here except SmallNORB) is observed on its
device by index. Any other dataset with the ground-truth interface (SmallNORB, whose storage also
indexes the hidden instance; your own) goes through ``sample_observations_from_factors`` with a
``numpy`` generator seeded from the torch generator (still reproducible; the factor classes make
one trip to the host).
"""
from __future__ import annotations

import functools
import math
from typing import Literal, NamedTuple

import numpy as np
import torch

from .._core.checks import integer
from ..errors import ParameterError
from .base import BatchShard, GridDataset, current_sampling_shard, factor_strides, rendering_shard

#: ``k = "random"``: the number of factors to resample is drawn per pair (the reference's ``k = -1``)
RANDOM_K = "random"
PairK = int | Literal["random"]


class PairFactors(NamedTuple):
    """The factor classes of a batch of pairs, and what was drawn to make them."""

    factors1: torch.Tensor  #: ``(B, K)`` int64 classes of ``x1``
    factors2: torch.Tensor  #: ``(B, K)`` int64 classes of ``x2``
    resampled: torch.Tensor  #: ``(B, K)`` bool, the factors drawn for resampling
    num_resampled: torch.Tensor  #: ``(B,)`` int64, ``m``: 1 or ``k_observed``
    changed: torch.Tensor  #: ``(B,)`` int64, the label: the last factor drawn for resampling


class PairBatch(NamedTuple):
    """One training batch of pairs; what a pair objective's ``sample_batch`` returns."""

    x1: torch.Tensor  #: ``(B, C, H, W)`` float in [0, 1]
    x2: torch.Tensor  #: ``(B, C, H, W)`` float in [0, 1]
    changed: torch.Tensor  #: ``(B,)`` int64, the index of the (last) resampled factor


def check_k(k: PairK, num_factors: int | None = None) -> PairK:
    """``k`` if it is a valid number of factors to resample (``"random"`` or an integer ≥ 1, at
    most ``num_factors`` when given), else a :class:`~disentangle.ConfigError` saying why."""
    if isinstance(k, str):
        if k != RANDOM_K:
            raise ParameterError(
                "k", f"k is {k!r}; give the number of factors to resample (an integer >= 1) or "
                f"'{RANDOM_K}' to draw it per pair from 1..K-1, as disentanglement_lib's k = -1."
            )
        if num_factors is not None and num_factors < 2:
            raise ParameterError(
                "k", f"k = '{RANDOM_K}' draws the number of resampled factors from 1..K-1, which "
                f"needs at least 2 factors; this dataset has {num_factors}. Use k: 1."
            )
        return k
    k = integer("k", k, minimum=1)
    if num_factors is not None and k > num_factors:
        raise ParameterError(
            "k", f"k = {k} factors cannot be resampled: the dataset has only {num_factors} factors. "
            f"Use k between 1 and {num_factors}, or k: {RANDOM_K}."
        )
    return k


@functools.lru_cache(maxsize=32)
def _grid_tensors(factor_sizes: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The int64 ``(sizes, strides)`` of a factor grid on ``device``, built once per (grid, device):
    made anew at every step they would be copied from the host every step. Read-only."""
    with torch.inference_mode(False), torch.no_grad():  # usable in any later graph
        sizes = torch.as_tensor(factor_sizes, dtype=torch.int64, device=device)
        strides = torch.as_tensor(factor_strides(factor_sizes), dtype=torch.int64, device=device)
    return sizes, strides


def _uniform_classes(sizes: torch.Tensor, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    # float64 uniforms: (1 - 2^-53) * size stays below size for any realistic factor size
    u = torch.rand((batch_size, sizes.numel()), generator=generator, device=sizes.device, dtype=torch.float64)
    return torch.minimum((u * sizes).long(), sizes - 1)


def sample_pair_factors(
    factor_sizes, batch_size: int, generator: torch.Generator, k: PairK = 1
) -> PairFactors:
    """Draw the factor classes of ``batch_size`` pairs on the generator's device (module docstring:
    exactly what is drawn, and in which order)."""
    sizes, _ = _grid_tensors(tuple(int(s) for s in factor_sizes), generator.device)
    num_factors = sizes.numel()
    k = check_k(k, num_factors)
    batch_size = integer("batch_size", batch_size, minimum=1)
    device = generator.device
    factors1 = _uniform_classes(sizes, batch_size, generator)
    if k == RANDOM_K:
        k_observed = torch.randint(1, num_factors, (batch_size,), generator=generator, device=device)
    else:
        k_observed = torch.full((batch_size,), int(k), dtype=torch.int64, device=device)
    single = torch.randint(0, 2, (batch_size,), generator=generator, device=device) == 0
    num_resampled = torch.where(single, torch.ones_like(k_observed), k_observed)
    # a uniform random order of the factors per pair; the first m are resampled
    order = torch.rand((batch_size, num_factors), generator=generator, device=device).argsort(dim=1)
    rank = order.argsort(dim=1)
    resampled = rank < num_resampled[:, None]
    changed = order.gather(1, (num_resampled - 1)[:, None]).squeeze(1)
    factors2 = torch.where(resampled, _uniform_classes(sizes, batch_size, generator), factors1)
    return PairFactors(factors1, factors2, resampled, num_resampled, changed)


def _indexed_by_grid(dataset) -> bool:
    """Whether the dataset's storage index is the grid index ``factors @ strides``."""
    return isinstance(dataset, GridDataset) and len(dataset) == math.prod(dataset.factor_sizes)


def _shard_to_render(dataset) -> BatchShard | None:
    """The shard of the batch to render alone (:func:`~disentangle.data.base.sampling_shard`), if
    the dataset can (a grid-indexed dataset with ``shard_rendering``); else ``None``: all of it."""
    shard = current_sampling_shard()
    if shard is None or not (_indexed_by_grid(dataset) and getattr(dataset, "shard_rendering", False)):
        return None
    return shard


def observe_pairs(dataset, factors: PairFactors, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The observations ``(x1, x2)`` of a batch of pair factors, nuisance drawn per image.

    Within :func:`~disentangle.data.base.sampling_shard` a dataset that can render a shard alone
    renders only the shard's pairs (the same images, the generator moved on the same way).
    """
    both = torch.cat([factors.factors1, factors.factors2])
    if _indexed_by_grid(dataset):
        _, strides = _grid_tensors(tuple(int(s) for s in dataset.factor_sizes), both.device)
        indices = (both * strides).sum(1).to(dataset.device)
        shard = _shard_to_render(dataset)
        if shard is None:
            images = dataset.observe(indices, generator)
        else:  # the shard's rows of the x1 block, then of the x2 block
            with rendering_shard(shard, groups=2):
                images = dataset.observe(shard.rows(indices, groups=2), generator)
    else:
        seed = int(torch.randint(0, 2**63 - 1, (1,), generator=generator, device=generator.device))
        images = dataset.sample_observations_from_factors(both.cpu().numpy(), np.random.default_rng(seed))
        images = torch.as_tensor(images, device=both.device)
    half = images.shape[0] // 2
    return images[:half], images[half:]


def sample_pairs(dataset, batch_size: int, generator: torch.Generator, k: PairK = 1) -> PairBatch:
    """A batch of ``batch_size`` pairs from ``dataset`` (module docstring: what is drawn).

    Within :func:`~disentangle.data.base.sampling_shard` (and a dataset that can) only the shard's
    pairs are rendered and returned; the factors are drawn for the whole batch.
    """
    factors = sample_pair_factors(dataset.factor_sizes, batch_size, generator, k)
    shard = _shard_to_render(dataset)
    x1, x2 = observe_pairs(dataset, factors, generator)
    changed = factors.changed if shard is None else shard.rows(factors.changed)
    return PairBatch(x1, x2, changed)


__all__ = [
    "RANDOM_K",
    "PairBatch",
    "PairFactors",
    "PairK",
    "check_k",
    "observe_pairs",
    "sample_pair_factors",
    "sample_pairs",
]
