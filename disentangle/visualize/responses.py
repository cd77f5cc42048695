"""Latent responses: how each latent's mean code moves with each ground-truth factor.

For factor ``k`` and each of its values ``v``, ``num_per_value`` factor vectors are drawn uniformly
over the grid with factor ``k`` then set to ``v`` (the fixed-factor sampling of the BetaVAE and
FactorVAE scores), their observations encoded, and the mean and standard deviation of every code
``μ_j(x)`` taken over them:

    response[k][v, j] = E[μ_j(x) | f_k = v]     (other factors uniform over the grid)

A latent that encodes factor ``k`` (and only it) has a curve that moves with ``v`` in column ``k``
and is flat in every other column: the "which latent encodes which factor" picture.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._core.checks import positive_int


@dataclass(frozen=True)
class LatentResponses:
    """Per factor ``k``: its values (``(S_k,)``), the mean and std of every code (``(S_k, D)``)."""

    factor_names: tuple[str, ...]
    """The factors, in the dataset's order."""
    factor_values: tuple[np.ndarray, ...]
    """Per factor, the value of each of its ``S_k`` classes."""
    mean: tuple[np.ndarray, ...]
    """Per factor, ``(S_k, D)``: the mean code with the factor fixed at each value."""
    std: tuple[np.ndarray, ...]
    """Per factor, ``(S_k, D)``: the std of the codes over the other factors."""

    @property
    def num_latents(self) -> int:
        """The number of latents ``D``."""
        return int(self.mean[0].shape[1])


def factor_axis_values(dataset: Any) -> tuple[np.ndarray, ...]:
    """The physical value of every class of every factor: ``dataset.factor_values`` where it has
    numeric ones of the right length, else the class indices ``0 … S_k − 1``."""
    from ..metrics._settings import check_dataset

    sizes = check_dataset(dataset)
    given = getattr(dataset, "factor_values", None)
    values = []
    for k, size in enumerate(sizes):
        v = None
        if given is not None and k < len(given) and given[k] is not None:
            try:
                v = np.asarray(given[k], dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):  # e.g. names of categories
                v = None
        values.append(v if v is not None and len(v) == size else np.arange(size, dtype=np.float64))
    return tuple(values)


def latent_responses(
    dataset: Any, representation: Any, *, num_per_value: int = 64, seed: int = 0,
    representation_batch_size: int | None = None,
) -> LatentResponses:
    """Mean and std of every code against every factor's value (see the module docstring).

    ``dataset`` has the ground-truth interface (``factor_sizes``, ``sample_factors``,
    ``sample_observations_from_factors``; ``factor_names`` and ``factor_values`` when present);
    ``representation`` is a model (its posterior means) or a callable, as for the metrics. Draws
    come from ``np.random.default_rng(seed)``; ``Σ_k S_k · num_per_value`` observations are
    encoded (7,232 for dSprites at the default 64).
    """
    from ..metrics._representation import as_representation_function
    from ..metrics._sampling import codes_for_factors, sample_factors
    from ..metrics._settings import factor_names, is_sample

    num_per_value = positive_int("num_per_value", num_per_value)
    names = factor_names(dataset)
    sizes = tuple(int(s) for s in dataset.factor_sizes)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    if is_sample(dataset):
        return _sample_responses(dataset, code_fn, names, sizes, num_per_value, rng)
    means, stds = [], []
    for k, size in enumerate(sizes):
        factors = sample_factors(dataset, size * num_per_value, rng)
        factors[:, k] = np.repeat(np.arange(size), num_per_value)
        codes = codes_for_factors(dataset, code_fn, factors, rng).reshape(size, num_per_value, -1)
        means.append(codes.mean(axis=1))
        stds.append(codes.std(axis=1))
    return LatentResponses(names, factor_axis_values(dataset), tuple(means), tuple(stds))


def _sample_responses(
    dataset: Any, code_fn: Any, names: tuple[str, ...], sizes: tuple[int, ...], num_per_value: int,
    rng: np.random.Generator,
) -> LatentResponses:
    """On a labelled sample without a grid: per label value, ``num_per_value`` of the images with
    that label drawn with replacement (the other labels as they come); a value no image has is NaN."""
    import torch

    labels = dataset.labels
    means, stds = [], []
    for k, size in enumerate(sizes):
        mean = np.full((size, 0), np.nan)
        std = mean
        for value in range(size):
            rows = np.flatnonzero(labels[:, k] == value)
            if rows.size:
                chosen = torch.as_tensor(rng.choice(rows, size=num_per_value), device=dataset.device)
                codes = code_fn(dataset.observe(chosen))
                if mean.shape[1] == 0:
                    mean = np.full((size, codes.shape[1]), np.nan)
                    std = mean.copy()
                mean[value], std[value] = codes.mean(axis=0), codes.std(axis=0)
        means.append(mean)
        stds.append(std)
    return LatentResponses(names, factor_axis_values(dataset), tuple(means), tuple(stds))
