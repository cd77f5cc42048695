"""``benchmarks/position_basis.py``: a position code planted in a rotated basis is found, and the best
rotation of its plane recovers the axis-aligned MIG (nothing is trained)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle.metrics import mig
from disentangle.metrics.synthetic import FactorObservationDataset

DATASET = FactorObservationDataset((3, 32, 32), ("shape", "position_x", "position_y"))


def _rotated(degrees: float):
    """A code: z0 the shape, (z2, z1) the (x, y) positions rotated by ``degrees``, z3 constant."""
    theta = np.deg2rad(degrees)

    def code(x: torch.Tensor) -> torch.Tensor:
        px, py = x[:, 1] - 0.5, x[:, 2] - 0.5
        u = np.cos(theta) * px - np.sin(theta) * py
        v = np.sin(theta) * px + np.cos(theta) * py
        return torch.stack([x[:, 0], v, u, torch.zeros_like(u)], dim=1)

    return code


def test_an_axis_aligned_position_code_needs_no_rotation(benchmark_script):
    script = benchmark_script("position_basis")
    r = script.position_basis(_rotated(0.0), DATASET)
    assert set(r["latents"]) == {1, 2}
    assert r["x"] == pytest.approx(r["x_rot"], abs=1e-9) and r["y"] == pytest.approx(r["y_rot"], abs=1e-9)
    assert r["theta"] in (0, 89, 1)  # 0 up to the binning; a degree either way bins almost the same
    assert r["x"] > 0.8 and r["y"] > 0.8
    assert r["mig"] == pytest.approx(mig(DATASET, _rotated(0.0), seed=0)["mig"], abs=1e-12)  # MIG's own sample


def test_a_diagonal_position_code_scores_low_and_its_rotation_is_found(benchmark_script):
    script = benchmark_script("position_basis")
    r = script.position_basis(_rotated(45.0), DATASET)
    assert r["mig"] == pytest.approx(mig(DATASET, _rotated(45.0), seed=0)["mig"], abs=1e-12)
    assert r["x"] < 0.2 and r["y"] < 0.2  # encoded, but on two latents each
    assert r["theta"] == 45
    assert r["x_rot"] > 0.8 and r["y_rot"] > 0.8 and r["mig_rot"] > r["mig"] + 0.4


def test_rotate_plane_keeps_other_columns_and_rotates_standardised_pairs(benchmark_script):
    script = benchmark_script("position_basis")
    codes = np.random.default_rng(0).normal(size=(500, 3)) * [1.0, 3.0, 0.5] + [0.0, 2.0, 1.0]
    out = script.rotate_plane(codes, 1, 2, 90.0)
    np.testing.assert_array_equal(out[:, 0], codes[:, 0])
    z = (codes[:, 1:] - codes[:, 1:].mean(0)) / codes[:, 1:].std(0)
    np.testing.assert_allclose(out[:, 1], -z[:, 1], atol=1e-12)
    np.testing.assert_allclose(out[:, 2], z[:, 0], atol=1e-12)


def test_a_sample_given_is_the_one_drawn_otherwise(benchmark_script):
    """A caller that has encoded MIG's points (trajectories_300k.code_scores) gets the same answer."""
    from disentangle.metrics._representation import as_representation_function
    from disentangle.metrics._sampling import sample_codes_and_factors

    script = benchmark_script("position_basis")
    code = _rotated(30.0)
    sample = sample_codes_and_factors(DATASET, as_representation_function(code), script.NUM_TRAIN,
                                      np.random.default_rng(3))
    assert script.position_basis(code, DATASET, seed=3, sample=sample) == script.position_basis(code, DATASET, seed=3)
