"""Unsupervised scores of a representation (Locatello et al., 2019)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._information import discrete_mutual_info, histogram_discretize
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, check_dataset, count
from .registration import register_metric

CHECK_SETTINGS = SettingsChecks(num_train=count("num_train", 2), num_bins=count("num_bins"))


@register_metric(
    checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"], data="images", aliases=("unsupervised",)
)
def unsupervised_scores(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_bins: int = 20,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Scores that need no factor labels: Gaussian total correlation, Wasserstein correlation, MI.

    Definitions (Locatello et al. 2019, disentanglement_lib's ``unsupervised_metrics``), on the
    codes of ``num_train`` sampled observations with sample covariance ``S`` (``ddof=1``):

    * ``gaussian_total_correlation``: the total correlation of ``N(0, S)``, i.e.
      ``KL(N(0, S) || N(0, diag S)) = (sum_j log S_jj - log det S) / 2`` (nats).
    * ``gaussian_wasserstein_correlation``: the squared 2-Wasserstein distance between ``N(0, S)``
      and ``N(0, diag S)``, ``2 tr S - 2 tr (D^1/2 S D^1/2)^1/2`` with ``D = diag S``; computed from
      the eigenvalues of the symmetric matrix ``D^1/2 S D^1/2`` (the same value as the reference's
      ``sqrtm(S * diag(S)[:, None])``, without its complex round-off).
      ``gaussian_wasserstein_correlation_norm`` divides it by ``tr S``.
    * ``mutual_info_score``: the mean over ordered pairs ``i != j`` of the histogram mutual
      information (nats, ``num_bins`` equal-width bins per dimension, as for MIG) between code
      dimensions ``i`` and ``j``. 0 for a one-dimensional code.

    Constant code dimensions are left out of the covariance scores (the limit of the scores as
    their variance goes to 0).

    Returns the four scores above.
    """
    check_dataset(dataset, labels=False)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes, _ = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    cov = np.atleast_2d(np.cov(codes, rowvar=False))
    # A constant dimension is independent of the others: leaving it out gives the limit value.
    keep = np.diag(cov) > 0
    cov = cov[np.ix_(keep, keep)]
    if not keep.any():
        cov = np.ones((1, 1))
    wasserstein = gaussian_wasserstein_correlation(cov)
    binned = histogram_discretize(codes, num_bins)
    mi = discrete_mutual_info(binned, binned)
    d = codes.shape[1]
    np.fill_diagonal(mi, 0.0)
    return as_float_dict(
        {
            "gaussian_total_correlation": gaussian_total_correlation(cov),
            "gaussian_wasserstein_correlation": wasserstein,
            "gaussian_wasserstein_correlation_norm": wasserstein / np.trace(cov) if np.trace(cov) > 0 else 0.0,
            "mutual_info_score": mi.sum() / (d * d - d) if d > 1 else 0.0,
        }
    )




def gaussian_total_correlation(cov: np.ndarray) -> float:
    """Total correlation (nats) of a zero-mean Gaussian with covariance ``cov``.

    ``0.5 * (sum log diag(cov) - log det cov)``; infinite for a singular ``cov``.
    """
    cov = _check_cov(cov)
    sign, logdet = np.linalg.slogdet(cov)
    if sign <= 0:
        return float("inf")
    return float(0.5 * (np.sum(np.log(np.diag(cov))) - logdet))


def gaussian_wasserstein_correlation(cov: np.ndarray) -> float:
    """Squared W2 distance between ``N(0, cov)`` and ``N(0, diag cov)``."""
    cov = _check_cov(cov)
    root_d = np.sqrt(np.diag(cov))
    eig = np.linalg.eigvalsh(root_d[:, None] * cov * root_d[None, :])
    return float(2.0 * np.trace(cov) - 2.0 * np.sum(np.sqrt(np.clip(eig, 0.0, None))))


def _check_cov(cov: np.ndarray) -> np.ndarray:
    cov = np.asarray(cov, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"a covariance matrix must be square, got shape {cov.shape}.")
    if (np.diag(cov) <= 0).any():
        raise ValueError("the covariance has a zero-variance dimension (a constant code).")
    return cov
