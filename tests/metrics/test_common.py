"""Shared fixtures of the metrics tests: a factor-observation dataset and known representations.

Imported by the other ``test_metrics_*`` files (``from .test_common import ...``).
"""
from __future__ import annotations

import numpy as np
import torch

from disentangle.metrics.synthetic import FactorObservationDataset

SIZES = (3, 4, 5)
NAMES = ("a", "b", "c")


def dataset(noise: float = 0.0) -> FactorObservationDataset:
    return FactorObservationDataset(SIZES, NAMES, noise=noise)


def perfect(x):
    """The factors themselves (scaled to [0, 1]): one code per factor."""
    return x


def rotation(dim: int = len(SIZES)) -> np.ndarray:
    """An orthogonal matrix that mixes every factor into every code (``I - 2/d * ones``)."""
    return np.eye(dim) - 2.0 / dim * np.ones((dim, dim))


class Linear:
    """``codes = x @ matrix`` (a deterministic representation)."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = torch.as_tensor(matrix, dtype=torch.float64)

    def __call__(self, x):
        return x.to(torch.float64) @ self.matrix


class Noise:
    """Codes independent of the observation (a fresh draw every call)."""

    def __init__(self, dim: int = len(SIZES), seed: int = 0) -> None:
        self.dim = dim
        self.rng = np.random.default_rng(seed)

    def __call__(self, x):
        return self.rng.normal(size=(len(x), self.dim))


def rotated():
    return Linear(rotation())


def permuted(rep, perm):
    return lambda x: np.asarray(rep(x))[:, perm]


def duplicated(x):
    """Every factor twice: MIG is 0, informativeness unchanged."""
    return torch.cat([x, x], dim=1)


class GaussianEncoder(torch.nn.Module):
    """A fake trained model: ``encode`` gives ``mu = A x`` and a constant ``logvar``."""

    def __init__(self, matrix: np.ndarray, logvar: float) -> None:
        super().__init__()
        self.register_buffer("matrix", torch.as_tensor(matrix, dtype=torch.float64))
        self.logvar = logvar

    def encode(self, x):
        mu = x.to(torch.float64) @ self.matrix
        return mu, torch.full_like(mu, self.logvar)

    def representation(self, x):
        return self.encode(x)[0]


def test_factor_dataset_interface():
    ds = dataset()
    rng = np.random.default_rng(0)
    f = ds.sample_factors(1000, rng)
    assert f.shape == (1000, 3) and f.dtype == np.int64
    assert (f.min(axis=0) == 0).all() and (f.max(axis=0) == np.array(SIZES) - 1).all()
    obs = ds.sample_observations_from_factors(f, rng)
    assert torch.allclose(obs, torch.as_tensor(f / (np.array(SIZES) - 1)))
    assert len(ds) == 60
