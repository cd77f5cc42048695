"""Chen et al.'s MIG estimator and the ELBO decomposition on fake Gaussian encoders."""
from __future__ import annotations

import math

import numpy as np
import pytest

from disentangle.metrics import FactorObservationDataset, elbo_decomposition, mig
from disentangle.metrics.mig import factor_grid

from .test_common import GaussianEncoder, dataset, rotation


def test_factor_grid_is_row_major():
    grid = factor_grid((2, 3))
    assert grid.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]


def test_chen_mig_perfect_rotated_and_uninformative():
    sharp = math.log(0.01**2)
    perfect = mig(dataset(), GaussianEncoder(np.eye(3), sharp), estimator="chen")
    assert perfect["mig"] > 0.95
    for name in ("a", "b", "c"):
        assert perfect[f"mig_{name}"] > 0.95
    mixed = mig(dataset(), GaussianEncoder(rotation(), sharp), estimator="chen")
    assert mixed["mig"] < 0.5
    flat = mig(dataset(), GaussianEncoder(np.zeros((3, 3)), 0.0), estimator="chen")
    assert flat["mig"] == pytest.approx(0.0, abs=1e-9)


def test_chen_mig_is_deterministic_and_subsamples():
    model = GaussianEncoder(rotation(), math.log(0.1**2))
    a = mig(dataset(), model, estimator="chen", num_samples=30, seed=1)
    assert a == mig(dataset(), model, estimator="chen", num_samples=30, seed=1)
    assert 0.0 <= a["mig"] <= 1.0


def test_elbo_decomposition_of_independent_codes_has_no_total_correlation():
    big = FactorObservationDataset((10, 12, 15))  # 1,800 grid points, all used
    model = GaussianEncoder(np.eye(3), math.log(0.02**2))
    out = elbo_decomposition(big, model, num_samples=5000)
    assert abs(out["total_correlation"]) < 0.03
    assert 0 < out["index_code_mi"] <= math.log(len(big)) + 1e-6
    # the three terms add up to a Monte-Carlo estimate of the closed-form average KL
    assert out["estimated_kl"] == pytest.approx(out["kl"], rel=0.05)
    assert sum(out[f"dimwise_kl_{j}"] for j in range(3)) == pytest.approx(out["dimwise_kl"])


def test_elbo_decomposition_sees_a_duplicated_code():
    model = GaussianEncoder(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]), math.log(0.05**2))
    out = elbo_decomposition(dataset(), model)
    # z0 and z1 both encode factor a: TC ~ I(z0; z1) ~ H(a) = log 3
    assert out["total_correlation"] == pytest.approx(math.log(3), abs=0.15)


def test_elbo_decomposition_subsample_and_errors():
    big = FactorObservationDataset((10, 12, 15))
    model = GaussianEncoder(np.eye(3), math.log(0.05**2))
    full = elbo_decomposition(big, model, num_samples=5000)
    part = elbo_decomposition(big, model, num_samples=600, seed=1)  # biased low (documented)
    grid = elbo_decomposition(big, model, num_samples=600, seed=1, mixture="grid")
    assert -0.2 < part["total_correlation"] < full["total_correlation"] + 0.01
    assert grid["total_correlation"] == pytest.approx(0.0, abs=1e-9)  # a product grid: exactly 0
    assert grid["dimwise_kl"] == pytest.approx(full["dimwise_kl"], rel=0.05)
    assert part["dimwise_kl"] == pytest.approx(full["dimwise_kl"], rel=0.05)
    with pytest.raises(Exception, match="encode"):
        elbo_decomposition(dataset(), lambda x: x)
