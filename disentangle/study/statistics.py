"""The statistics of the study: rank correlations, nested variance decomposition, quartiles.

Pure functions on numpy arrays; missing values are NaN and are left out pairwise or per score.
"""
from __future__ import annotations

import math
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


EXACT_PERMUTATIONS_UP_TO = 8  # n! orderings enumerated for the exact test (40,320 at n = 8)


def spearman_test(a: np.ndarray, b: np.ndarray) -> tuple[float, float, int]:
    """Spearman's ρ of ``a`` and ``b`` (as :func:`spearman`) with its two-sided p-value.

    p = P(|ρ*| ≥ |ρ|) where ρ* is ρ after pairing ``b`` with a random ordering of ``a``: computed
    exactly over all n! orderings when n ≤ :data:`EXACT_PERMUTATIONS_UP_TO` (ties included, which
    the t approximation gets wrong at a handful of runs), else by ``scipy.stats.spearmanr``'s t
    approximation. Returns ``(ρ, p, n)``; both NaN when ρ is.
    """
    import itertools

    from scipy.stats import rankdata, spearmanr

    rho, n = spearman(a, b)
    if math.isnan(rho):
        return rho, float("nan"), n
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if n > EXACT_PERMUTATIONS_UP_TO:
        return rho, float(spearmanr(a[ok], b[ok]).pvalue), n
    ra, rb = rankdata(a[ok]), rankdata(b[ok])
    ra, rb = (ra - ra.mean()) / np.linalg.norm(ra - ra.mean()), (rb - rb.mean()) / np.linalg.norm(rb - rb.mean())
    orders = np.array(list(itertools.permutations(range(n))))
    null = ra[orders] @ rb
    return rho, float(np.mean(np.abs(null) >= abs(rho) - 1e-12)), n


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


ALPHA = 0.05  # significance level of the report's reading (after Holm's correction)


@dataclass
class VarianceShares:
    """The nested ANOVA of one score: shares (η²), their chance levels, F-test p-values.

    ``method``, ``strength``, ``residual``: shares of the sum of squares (sum to 1).
    ``df_*``: degrees of freedom M − 1, S − M, N − S (N runs, S settings, M methods).
    ``chance_*``: the share pure noise gives on average, df / (N − 1).
    ``p_method``, ``p_strength``: F-test p-values against the residual (NaN where untestable).
    ``p_method_adjusted``, ``p_strength_adjusted``: the same after Holm's correction over a family
    of tests (filled in by the caller that knows the family; NaN otherwise).
    """

    method: float
    strength: float
    residual: float
    n_runs: int
    n_methods: int
    n_settings: int
    df_method: int = 0
    df_strength: int = 0
    df_residual: int = 0
    chance_method: float = float("nan")
    chance_strength: float = float("nan")
    chance_residual: float = float("nan")
    p_method: float = float("nan")
    p_strength: float = float("nan")
    p_method_adjusted: float = float("nan")
    p_strength_adjusted: float = float("nan")


def chance_shares(n_runs: int, n_methods: int, n_settings: int) -> tuple[float, float, float]:
    """The expected shares (η²) of method, strength and residual when the score is pure noise.

    With i.i.d. Gaussian scores and no method or strength effect, the three sums of squares of
    :func:`variance_explained` are independent σ²·χ² variables with df_method = M − 1,
    df_strength = S − M and df_residual = N − S degrees of freedom (N runs, S settings, M
    methods; balanced or not), so the shares are Dirichlet(df/2) distributed and each has mean
    ``df / (N − 1)``. For 3 methods × 2 strengths × 2 seeds: 2/11, 3/11, 6/11 = 18 %, 27 %, 55 %.
    NaN for fewer than two runs.
    """
    total = n_runs - 1
    if total <= 0:
        return (float("nan"),) * 3
    return ((n_methods - 1) / total, (n_settings - n_methods) / total, (n_runs - n_settings) / total)


def f_test(share: float, df: int, residual: float, df_residual: int) -> float:
    """p-value of the F-test of an effect of the nested ANOVA against the residual.

    F = (SS_effect / df) / (SS_residual / df_residual) = (share / df) / (residual / df_residual),
    p = P(F(df, df_residual) ≥ F) (``scipy.stats.f.sf``): the probability that pure Gaussian
    noise gives a share at least this large relative to the residual. NaN when df or
    df_residual is 0 or the share is NaN; 0 when the residual is exactly 0 and the share is not.
    """
    from scipy.stats import f as f_distribution

    if df <= 0 or df_residual <= 0 or not np.isfinite(share) or not np.isfinite(residual):
        return float("nan")
    if residual <= 0:
        return 0.0 if share > 0 else float("nan")
    return float(f_distribution.sf((share / df) / (residual / df_residual), df, df_residual))


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979), NaN entries left out of the family and kept NaN.

    With the k finite p-values sorted, p₍₁₎ ≤ … ≤ p₍ₖ₎: adjusted p₍ᵢ₎ = max_{j ≤ i} min(1, (k − j + 1) p₍ⱼ₎).
    Rejecting where the adjusted p < α keeps the chance of any false finding in the family below α,
    whatever the dependence between the tests (the scores of a study are strongly correlated).
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    k = len(finite)
    if k == 0:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    adjusted = np.minimum(1.0, (k - np.arange(k)) * p[order])
    out[order] = np.maximum.accumulate(adjusted)
    return out


def detectable_share(df: int, df_residual: int, alpha: float = ALPHA) -> float:
    """The smallest share an effect must have to reach p < ``alpha`` when it is the only effect.

    With the other effect 0 the residual is 1 − η², so F = (η²/df) / ((1 − η²)/df_residual) ≥ F_crit
    gives η² ≥ F_crit·df / (df_residual + F_crit·df), F_crit the (1 − α) quantile of F(df,
    df_residual). A measure of the design's power: with few runs only huge effects can be told
    apart from noise. NaN when the effect cannot be tested.
    """
    from scipy.stats import f as f_distribution

    if df <= 0 or df_residual <= 0:
        return float("nan")
    critical = float(f_distribution.isf(alpha, df, df_residual))
    return critical * df / (df_residual + critical * df)


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
    the three sum to 1. These are descriptive shares (η²), not unbiased variance components: even
    pure noise gives each share df / (N − 1) on average (:func:`chance_shares`; df_method = M − 1,
    df_strength = S − M, df_residual = N − S for N runs in S settings of M methods), so each
    comes with that chance level and with the p-value of its F-test against the residual
    (:func:`f_test`: F_method = (SS_method/df_method) / (SS_residual/df_residual), likewise for
    the strength; the fixed-effects nested ANOVA, e.g. Montgomery, *Design and Analysis of
    Experiments*, ch. 14). Runs with a NaN score are left out; a constant score gives NaN shares
    and p-values.
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
    counts = (n, int(method_ids.max()) + 1, len(setting_ids))
    df = (counts[1] - 1, counts[2] - counts[1], counts[0] - counts[2])
    chance = chance_shares(*counts)
    method_share, strength_share, residual_share = _shares(y, method_ids, setting_index)
    return VarianceShares(
        method_share, strength_share, residual_share, *counts, *df, *chance,
        p_method=f_test(method_share, df[0], residual_share, df[2]),
        p_strength=f_test(strength_share, df[1], residual_share, df[2]),
    )


def _shares(y: np.ndarray, method_ids: np.ndarray, setting_index: np.ndarray) -> tuple[float, float, float]:
    """SS_method, SS_strength, SS_residual over their sum (NaN for a constant score)."""
    grand = y.mean()
    method_mean = np.bincount(method_ids, weights=y) / np.bincount(method_ids)
    setting_mean = np.bincount(setting_index, weights=y) / np.bincount(setting_index)
    ss_total = float(np.sum((y - grand) ** 2))
    ss_method = float(np.sum((method_mean[method_ids] - grand) ** 2))
    ss_strength = float(np.sum((setting_mean[setting_index] - method_mean[method_ids]) ** 2))
    ss_residual = float(np.sum((y - setting_mean[setting_index]) ** 2))
    if ss_total <= 1e-12 * max(1.0, float(np.sum(y**2))):
        return (np.nan, np.nan, np.nan)
    total = ss_method + ss_strength + ss_residual  # = ss_total up to rounding; normalise so shares sum to 1
    return (ss_method / total, ss_strength / total, ss_residual / total)


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
