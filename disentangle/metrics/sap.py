"""The Separated Attribute Predictability score (Kumar et al., 2018)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import checks
from ._parallel import parallel_map
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, count, derived_seed, select_factors
from .registration import register_metric

CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2),
    num_test=count("num_test"),
    continuous_factors=lambda value: checks.boolean("continuous_factors", value),
)


@register_metric(
    checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"] + settings["num_test"], aliases=("sap",)
)
def sap_score(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_test: int = 5_000,
    continuous_factors: bool = False,
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """SAP: per factor, the gap between the two codes that predict it best on their own.

    Definition (Kumar et al. 2018, as in disentanglement_lib's ``compute_sap``): a score matrix
    ``S`` (``d x K``) rates how well each single code dimension ``j`` predicts factor ``k``:

    * discrete factors (default, as in the Locatello et al. study): the test accuracy (on
      ``num_test`` points) of a class-balanced linear SVM (scikit-learn ``LinearSVC(C=0.01,
      class_weight="balanced")``, one-vs-rest) trained on code ``j`` alone of ``num_train`` points;
    * ``continuous_factors=True``: the squared correlation of code ``j`` and factor ``k`` on the
      ``num_train`` points (0 where the code's variance is below 1e-12); ``num_test`` is unused.

    ``sap`` is the mean over the scored factors (``factors``, by name or index; default: every
    factor with more than one value) of the difference between the largest and the second-largest
    entry of the factor's column (the top-two gap). The ``d x K`` SVMs run on ``n_jobs`` joblib
    workers (default: one per core); they share one ``random_state`` derived from ``seed``, so the
    score does not change when code dimensions are permuted.

    Returns ``{"sap"}``.
    """
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes, factors = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    codes_test, factors_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
    factors, factors_test = factors[:, chosen], factors_test[:, chosen]
    if continuous_factors:
        matrix = squared_correlation_matrix(codes, factors)
    else:
        random_state = derived_seed(seed, 1)
        d, K = codes.shape[1], factors.shape[1]
        tasks = [
            (codes[:, j], factors[:, k], codes_test[:, j], factors_test[:, k], random_state)
            for j in range(d)
            for k in range(K)
        ]
        costs = [len(np.unique(factors[:, k])) for j in range(d) for k in range(K)]
        matrix = np.array(parallel_map(_svm_accuracy, tasks, n_jobs, costs)).reshape(d, K)
    return {"sap": sap_from_score_matrix(matrix)}




def sap_from_score_matrix(matrix: np.ndarray) -> float:
    """Mean over factors (columns) of the gap between the two largest entries of ``(d, K)`` scores.

    With a single code dimension the second-largest entry is taken as 0.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"the score matrix must be a non-empty (codes, factors) array, got {matrix.shape}.")
    ordered = np.sort(matrix, axis=0)
    second = ordered[-2] if matrix.shape[0] > 1 else np.zeros(matrix.shape[1])
    return float(np.mean(ordered[-1] - second))


def squared_correlation_matrix(codes: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """``(d, K)`` squared Pearson correlations, 0 for a code of variance <= 1e-12 (SAP, continuous)."""
    x = codes - codes.mean(axis=0)
    y = factors - factors.mean(axis=0)
    n = len(codes)
    cov = x.T @ y / (n - 1)
    var_x = (x**2).sum(axis=0) / (n - 1)
    var_y = (y**2).sum(axis=0) / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = cov**2 / (var_x[:, None] * var_y[None, :])
    out[var_x <= 1e-12, :] = 0.0
    return np.nan_to_num(out)


def _svm_accuracy(code, factor, code_test, factor_test, random_state):
    if len(np.unique(factor)) < 2:
        return float(np.mean(factor_test == factor[0]))
    from sklearn.svm import LinearSVC

    model = LinearSVC(C=0.01, class_weight="balanced", random_state=random_state)
    model.fit(code[:, None], factor)
    return float(np.mean(model.predict(code_test[:, None]) == factor_test))
