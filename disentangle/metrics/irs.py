"""The Interventional Robustness Score (Suter et al., 2019)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import checks
from ._information import histogram_discretize
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, select_factors
from .registration import register_metric

CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2),
    diff_quantile=lambda value: checks.in_range("diff_quantile", value, 0.0, 1.0),
    num_bins=count("num_bins"),
)


@register_metric(checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"], data="labels")
def irs(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    diff_quantile: float = 0.99,
    num_bins: int = 20,
    factors: Sequence[str | int] | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """IRS: how little each code moves when the factors other than its parent change.

    Suter, Miladinović, Schölkopf & Bauer, "Robustly Disentangled Causal Mechanisms: Validating Deep
    Representations for Interventional Robustness", ICML 2019; as disentanglement_lib computes it
    (``compute_irs`` and ``scalable_disentanglement_score`` in ``evaluation/metrics/irs.py``, with its
    ``sample/irs/irs.gin`` settings: 10,000 points, ``diff_quantile=0.99``, 20 histogram bins).

    On ``num_train`` drawn ``(code, factor)`` pairs (the same first draw as MIG, DCI and SAP with
    the same seed):

    * Each factor's classes are discretised into ``num_bins`` equal-width histogram bins (as the
      reference does with its factors; a factor with at most ``num_bins`` classes keeps one bin
      per class, dSprites' 40 orientations and 32 positions are merged into 20 bins).
    * Code dimensions of zero variance on the sample are dropped (``z`` below are the others).
    * For code ``j`` and factor ``k``: ``E_jk = mean over the bins b of factor k of
      Q_q(|z_j - mean(z_j | v_k = b)| over the points with v_k = b)``, ``Q_q`` the
      ``diff_quantile`` quantile (numpy's linear interpolation; ``diff_quantile=1`` is the paper's
      maximum), the mean unweighted over the bins present in the sample.
    * ``IRS_jk = 1 - E_jk / M_j`` with ``M_j = max |z_j - mean(z_j)|`` over all points; the code's
      score is ``max_k IRS_jk`` (its parent factor is the argmax), and ``irs`` is the average of the
      codes' scores weighted by ``M_j`` (unweighted when every ``M_j`` is 0). With no code of
      nonzero variance, ``irs`` is 0.

    ``factors`` (default: every factor with more than one value) are the factors, by name or
    index, whose bins define the ``E_jk``. It needs (code, label) pairs only, so it also runs on a
    labelled sample without a grid.

    Where we differ from the reference, and why:

    * ``num_active_dims`` is the reference's number, kept under its name: disentanglement_lib
      returns ``np.sum(active_mus)``, the **sum of every value** of the non-constant code
      dimensions over the ``num_train`` points (a float that can be any sign, and near 0 for
      centred codes), not their count. ``num_active_dims_count`` is the count it meant: the number
      of code dimensions with nonzero variance.
    * The reference scores every factor; a factor with a single value (none in the reference's
      datasets) would be one bin whose ``E_jk`` is about ``Q_q(|z_j - mean z_j|)`` and credit every
      code with a spurious parent, so it is left out as in the library's other metrics.
    * Scores are named in lower case (``irs``, the reference's ``IRS``). The reference's
      ``batch_size`` (16, observations per representation call) is ``representation_batch_size``
      here; it changes no value.

    Returns ``{"irs", "num_active_dims", "num_active_dims_count"}``.
    """
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes, sampled = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    return irs_from_codes(codes, sampled[:, chosen], diff_quantile=diff_quantile, num_bins=num_bins)


def irs_from_codes(
    codes: np.ndarray, factors: np.ndarray, *, diff_quantile: float = 0.99, num_bins: int = 20
) -> dict[str, float]:
    """``{"irs", "num_active_dims", "num_active_dims_count"}`` of ``(n, d)`` codes and ``(n, K)``
    factor classes (see :func:`irs`): factors binned, constant codes dropped, then
    :func:`irs_matrix` and its weighted average."""
    codes = np.asarray(codes, dtype=np.float64)
    factors = np.asarray(factors)
    if codes.ndim != 2 or factors.ndim != 2 or len(codes) != len(factors):
        raise ValueError(
            f"codes (n, d) and factors (n, K) must have the same number of rows; got {codes.shape} and {factors.shape}."
        )
    binned = histogram_discretize(factors, num_bins)
    active = codes[:, codes.var(axis=0) > 0]
    scores = {
        "num_active_dims": float(np.sum(active)),  # the reference's quirk: a sum of values, not a count
        "num_active_dims_count": float(active.shape[1]),
    }
    if active.shape[1] == 0:
        return as_float_dict({"irs": 0.0, **scores})
    matrix, max_deviation = irs_matrix(active, binned, diff_quantile)
    per_code = matrix.max(axis=1)
    if max_deviation.sum() > 0:
        value = float(np.average(per_code, weights=max_deviation))
    else:
        value = float(np.mean(per_code))
    return as_float_dict({"irs": value, **scores})


def irs_matrix(codes: np.ndarray, factors: np.ndarray, diff_quantile: float = 0.99) -> tuple[np.ndarray, np.ndarray]:
    """``(IRS (d, K), M (d,))``: ``IRS[j, k] = 1 - E_jk / M_j`` for codes ``(n, d)`` and discrete
    factors ``(n, K)`` (see :func:`irs`); ``M_j = max |z_j - mean z_j|``."""
    codes = np.asarray(codes, dtype=np.float64)
    factors = np.asarray(factors)
    max_deviation = np.max(np.abs(codes - codes.mean(axis=0)), axis=0)
    expected = np.zeros((codes.shape[1], factors.shape[1]))
    for k in range(factors.shape[1]):
        values = np.unique(factors[:, k])
        for value in values:
            group = codes[factors[:, k] == value]
            spread = np.abs(group - group.mean(axis=0))
            expected[:, k] += np.percentile(spread, 100.0 * diff_quantile, axis=0)
        expected[:, k] /= len(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        matrix = 1.0 - expected / max_deviation[:, None]
    return matrix, max_deviation
