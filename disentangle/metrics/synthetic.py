"""A tiny ground-truth dataset whose observations are the factors themselves.

Useful to check a metric against a representation with a known structure (and to keep tests fast):
a representation is then just a function of the factor vector, e.g. the identity (a perfect code),
a rotation of it, or noise.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


class FactorObservationDataset:
    """Factors uniform over a grid; the observation of a factor vector is that vector (float).

    ``sample_observations_from_factors(factors, rng)`` returns ``factors / (size - 1)`` scaled to
    [0, 1] per factor (a float tensor ``(n, K)``) if ``normalise`` (default) else the class indices
    as floats, plus Gaussian observation noise of standard deviation ``noise`` drawn from ``rng``
    (none by default). ``len(dataset)`` is the number of grid points.
    """

    def __init__(
        self,
        factor_sizes: Sequence[int],
        factor_names: Sequence[str] | None = None,
        *,
        normalise: bool = True,
        noise: float = 0.0,
    ) -> None:
        self.factor_sizes = tuple(int(s) for s in factor_sizes)
        if not self.factor_sizes or min(self.factor_sizes) < 1:
            raise ValueError(f"factor_sizes must be positive integers, got {factor_sizes!r}.")
        if factor_names is None:
            factor_names = [f"factor_{i}" for i in range(len(self.factor_sizes))]
        if len(factor_names) != len(self.factor_sizes):
            raise ValueError("factor_names and factor_sizes must have the same length.")
        self.factor_names = tuple(factor_names)
        self.normalise = normalise
        if not noise >= 0:
            raise ValueError(f"noise must be >= 0, got {noise!r}.")
        self.noise = float(noise)

    def __len__(self) -> int:
        return int(np.prod(self.factor_sizes))

    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        sizes = np.asarray(self.factor_sizes, dtype=np.int64)
        return (rng.random((n, len(sizes))) * sizes).astype(np.int64)

    def sample_observations_from_factors(self, factors: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        values = np.asarray(factors, dtype=np.float64)
        if self.normalise:
            values = values / np.maximum(np.asarray(self.factor_sizes, dtype=np.float64) - 1.0, 1.0)
        if self.noise > 0:
            values = values + self.noise * rng.standard_normal(values.shape)
        return torch.as_tensor(values)
