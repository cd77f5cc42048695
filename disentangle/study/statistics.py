"""The statistics of the study: rank correlations, nested variance decomposition, quartiles.

Pure functions on numpy arrays; missing values are NaN and are left out pairwise or per score.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_PAIRS = 3  # fewer complete pairs than this give no rank correlation


@dataclass
class Matrix:
    """A labelled matrix of rank correlations and the number of runs behind each entry."""

    rows: list[str]
    columns: list[str]
    values: np.ndarray  # (len(rows), len(columns)), NaN where undefined
    counts: np.ndarray  # (len(rows), len(columns)) int: runs with both scores present

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {r: {c: float(self.values[i, j]) for j, c in enumerate(self.columns)} for i, r in enumerate(self.rows)}


def spearman(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Spearman's rank correlation of ``a`` and ``b`` over the entries where both are finite.

    ρ = Pearson correlation of the ranks (ties get their average rank), as
    ``scipy.stats.spearmanr``. Returns ``(ρ, n)``; ρ is NaN when ``n < 3`` or either side is
    constant on those entries.
    """
    from scipy.stats import spearmanr

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    n = int(ok.sum())
    if n < MIN_PAIRS or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan"), n
    return float(spearmanr(a[ok], b[ok]).statistic), n


def rank_correlation_matrix(
    scores: dict[str, np.ndarray], rows: Sequence[str], columns: Sequence[str], mask: np.ndarray | None = None
) -> Matrix:
    """Spearman's ρ between every ``rows`` score and every ``columns`` score, on the runs in ``mask``."""
    values = np.full((len(rows), len(columns)), np.nan)
    counts = np.zeros((len(rows), len(columns)), dtype=np.int64)
    for i, r in enumerate(rows):
        for j, c in enumerate(columns):
            a, b = scores[r], scores[c]
            if mask is not None:
                a, b = a[mask], b[mask]
            values[i, j], counts[i, j] = spearman(a, b)
    return Matrix(list(rows), list(columns), values, counts)


@dataclass
class VarianceShares:
    method: float
    strength: float
    residual: float
    n_runs: int
    n_methods: int
    n_settings: int


def variance_explained(values: np.ndarray, methods: Sequence[str], settings: Sequence[str]) -> VarianceShares:
    """Shares of a score's sum of squares: between methods, between strengths within a method, residual.

    The nested (hierarchical) one-way ANOVA decomposition, with y_mki the score of seed i of
    setting k (the strength) of method m, ȳ the grand mean, ȳ_m the method mean and ȳ_mk the
    setting mean (means over the runs present, so unbalanced designs are fine)::

        SS_total    = Σ_mki (y_mki − ȳ)²
        SS_method   = Σ_m   n_m  (ȳ_m  − ȳ)²
        SS_strength = Σ_mk  n_mk (ȳ_mk − ȳ_m)²
        SS_residual = Σ_mki (y_mki − ȳ_mk)²          (seed and noise)

    SS_total = SS_method + SS_strength + SS_residual exactly, and each share is SS / SS_total, so
    the three sum to 1. These are descriptive shares (η²), not unbiased variance components: with
    few seeds per setting the strength share includes about (settings − methods)·σ² of seed
    noise. Runs with a NaN score are left out; a constant score gives NaN shares.
    """
    y = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(y)
    y = y[ok]
    m = np.asarray(methods, dtype=object)[ok]
    s = np.array([f"{a}\x00{b}" for a, b in zip(np.asarray(methods, dtype=object)[ok], np.asarray(settings, dtype=object)[ok])], dtype=object)
    n = len(y)
    if n == 0:
        return VarianceShares(np.nan, np.nan, np.nan, 0, 0, 0)
    method_ids = np.unique(m, return_inverse=True)[1]
    setting_ids, setting_index = np.unique(s, return_inverse=True)
    grand = y.mean()
    method_mean = np.bincount(method_ids, weights=y) / np.bincount(method_ids)
    setting_mean = np.bincount(setting_index, weights=y) / np.bincount(setting_index)
    # each setting belongs to exactly one method: the method of any of its runs
    setting_method = np.zeros(len(setting_ids), dtype=np.int64)
    setting_method[setting_index] = method_ids
    ss_total = float(np.sum((y - grand) ** 2))
    ss_method = float(np.sum((method_mean[method_ids] - grand) ** 2))
    ss_strength = float(np.sum((setting_mean[setting_index] - method_mean[method_ids]) ** 2))
    ss_residual = float(np.sum((y - setting_mean[setting_index]) ** 2))
    counts = (n, int(method_ids.max()) + 1, len(setting_ids))
    if ss_total <= 1e-12 * max(1.0, float(np.sum(y**2))):
        return VarianceShares(np.nan, np.nan, np.nan, *counts)
    total = ss_method + ss_strength + ss_residual  # = ss_total up to rounding; normalise so shares sum to 1
    return VarianceShares(ss_method / total, ss_strength / total, ss_residual / total, *counts)


@dataclass
class Quartiles:
    n: int
    median: float
    q25: float
    q75: float

    @property
    def iqr(self) -> float:
        return self.q75 - self.q25


def quartiles(values: np.ndarray) -> Quartiles:
    """Median and quartiles of the finite values (``np.percentile``, linear interpolation)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return Quartiles(0, np.nan, np.nan, np.nan)
    q25, median, q75 = np.percentile(v, [25, 50, 75])
    return Quartiles(len(v), float(median), float(q25), float(q75))
