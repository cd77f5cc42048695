"""Exact values of the score formulas on hand-made inputs: DCI, SAP, modularity, MIG, Gaussian TC."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import scipy.stats

from disentangle.metrics import dci
from disentangle.metrics.dci import (
    completeness_per_factor,
    dci_from_importance,
    disentanglement_per_code,
)
from disentangle.metrics.mig import mig_from_mutual_info
from disentangle.metrics.modularity import modularity_from_mutual_info
from disentangle.metrics.sap import sap_from_score_matrix, squared_correlation_matrix
from disentangle.metrics.unsupervised import (
    gaussian_total_correlation,
    gaussian_wasserstein_correlation,
)

from .test_common import dataset, perfect, rotated


def _reference_dci(r):
    """D and C written as in disentanglement_lib (scipy entropy of each row / column)."""
    d_code = 1.0 - scipy.stats.entropy(r.T + 1e-11, base=r.shape[1])
    c_factor = 1.0 - scipy.stats.entropy(r + 1e-11, base=r.shape[0])
    w = r if r.sum() > 0 else np.ones_like(r)
    return np.sum(d_code * w.sum(1) / w.sum()), np.sum(c_factor * w.sum(0) / w.sum())


@pytest.mark.parametrize(
    "matrix, expected",
    [
        (np.eye(3), (1.0, 1.0)),
        (np.ones((2, 2)), (0.0, 0.0)),
        (np.array([[1.0, 0.0], [1.0, 0.0]]), (1.0, 0.0)),  # two codes for one factor: D yes, C no
        (np.array([[0.5, 0.5], [0.0, 0.0]]), (0.0, 1.0)),  # one code for two factors: C yes, D no
        (np.zeros((3, 2)), (0.0, 0.0)),
    ],
)
def test_dci_hand_values(matrix, expected):
    scores = dci_from_importance(matrix)
    assert scores["disentanglement"] == pytest.approx(expected[0], abs=1e-8)
    assert scores["completeness"] == pytest.approx(expected[1], abs=1e-8)


def test_dci_matches_the_reference_formula_and_its_pieces():
    r = np.array([[0.6, 0.1, 0.0], [0.2, 0.7, 0.1], [0.2, 0.2, 0.9], [0.0, 0.0, 0.0]])
    scores = dci_from_importance(r)
    d_ref, c_ref = _reference_dci(r)
    assert scores["disentanglement"] == pytest.approx(d_ref, rel=1e-12)
    assert scores["completeness"] == pytest.approx(c_ref, rel=1e-12)
    p = r[1] / r[1].sum()
    assert disentanglement_per_code(r)[1] == pytest.approx(1 + np.sum(p * np.log(p)) / math.log(3), rel=1e-9)
    q = r[:, 0] / r[:, 0].sum()
    q = q[q > 0]
    assert completeness_per_factor(r)[0] == pytest.approx(1 + np.sum(q * np.log(q)) / math.log(4), abs=1e-9)
    assert disentanglement_per_code(np.ones((2, 1))).tolist() == [1.0, 1.0]  # one factor
    with pytest.raises(ValueError, match="non-negative"):
        dci_from_importance(-np.eye(2))


def test_sap_and_mig_top_two_gaps():
    scores = np.array([[0.9, 0.2], [0.5, 0.8], [0.1, 0.7]])
    assert sap_from_score_matrix(scores) == pytest.approx(((0.9 - 0.5) + (0.8 - 0.7)) / 2)
    assert sap_from_score_matrix(np.array([[0.7, 0.3]])) == pytest.approx(0.5)  # one code: gap to 0
    gaps = mig_from_mutual_info(scores, np.array([2.0, 0.5]))
    assert gaps.tolist() == pytest.approx([0.2, 0.2])
    assert np.isnan(mig_from_mutual_info(scores, np.array([1.0, 0.0]))[1])  # a constant factor


def test_squared_correlation_matches_numpy():
    rng = np.random.default_rng(0)
    codes = rng.normal(size=(500, 3))
    factors = np.stack([(codes[:, 0] > 0).astype(int), rng.integers(0, 4, 500)], axis=1)
    codes[:, 2] = 1.0  # constant code: score 0
    out = squared_correlation_matrix(codes, factors)
    for i in range(2):
        for j in range(2):
            assert out[i, j] == pytest.approx(np.corrcoef(codes[:, i], factors[:, j])[0, 1] ** 2, rel=1e-10)
    assert out[2].tolist() == [0.0, 0.0]


def test_modularity_hand_values():
    assert modularity_from_mutual_info(np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])) == 1.0
    # theta = 1, delta = (1 + 0.25 - 1) / (1 * 2) = 0.125 for the first code; a silent code scores 0
    assert modularity_from_mutual_info(np.array([[1.0, 0.5, 0.0], [0.0, 0.0, 0.0]])) == pytest.approx((0.875 + 0.0) / 2)


@pytest.mark.parametrize("rho", [0.0, 0.3, -0.8])
def test_gaussian_total_correlation_and_wasserstein_closed_forms(rho):
    cov = np.array([[1.0, rho], [rho, 1.0]])
    assert gaussian_total_correlation(cov) == pytest.approx(-0.5 * math.log(1 - rho**2), abs=1e-12)
    expected_w = 4.0 - 2.0 * (math.sqrt(1 + rho) + math.sqrt(1 - rho))
    assert gaussian_wasserstein_correlation(cov) == pytest.approx(expected_w, abs=1e-12)


def test_gaussian_scores_of_a_general_covariance():
    a = np.random.default_rng(1).normal(size=(4, 4))
    cov = a @ a.T + 0.5 * np.eye(4)
    scale = np.diag([0.1, 1.0, 3.0, 10.0])
    corr = cov / np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    tc = gaussian_total_correlation(cov)
    assert tc == pytest.approx(-0.5 * np.linalg.slogdet(corr)[1], rel=1e-10)
    assert gaussian_total_correlation(scale @ cov @ scale) == pytest.approx(tc, rel=1e-10)  # scale-free
    reference_w = 2 * np.trace(cov) - 2 * np.trace(scipy.linalg.sqrtm(cov * np.diag(cov)[:, None])).real
    assert gaussian_wasserstein_correlation(cov) == pytest.approx(reference_w, rel=1e-8)


@pytest.mark.slow
def test_hist_booster_is_close_to_the_default():
    for rep in (perfect, rotated()):
        a = dci(dataset(0.05), rep, num_train=2000, num_test=1000)
        b = dci(dataset(0.05), rep, num_train=2000, num_test=1000, booster="hist")
        for key in a:
            assert b[key] == pytest.approx(a[key], abs=0.1), key
