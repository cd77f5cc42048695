"""Modularity and explicitness (Ridgeway & Mozer, 2018)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._information import discrete_mutual_info, histogram_discretize, normalize_codes
from ._parallel import parallel_map
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, select_factors
from .registration import register_metric

CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2), num_test=count("num_test"), num_bins=count("num_bins")
)


@register_metric(
    checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"] + settings["num_test"], aliases=("modularity",)
)
def modularity_explicitness(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_test: int = 5_000,
    num_bins: int = 20,
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Modularity (does each code dimension depend on one factor?) and explicitness.

    Definitions (Ridgeway & Mozer 2018, as in disentanglement_lib's
    ``compute_modularity_explicitness``):

    * Modularity: ``m[j, k]`` is the histogram mutual information (nats, ``num_bins`` equal-width
      bins per code dimension, as for MIG) between code ``j`` and factor ``k`` on ``num_train``
      points. Per code, with ``theta_j = max_k m[j, k]``,
      ``delta_j = (sum_k m[j, k]^2 - theta_j^2) / (theta_j^2 (K - 1))`` and the code's modularity is
      ``1 - delta_j`` (0 for a code with no information); ``modularity`` is the mean over codes.
    * Explicitness: the codes are standardised with the training mean and standard deviation; per
      factor a scikit-learn ``LogisticRegression`` with default settings (multinomial, ``C=1``) is
      fitted on the ``num_train`` training codes, and its one-vs-rest ROC AUC (macro average over
      the factor's classes of the AUC of ``predict_proba[:, c]`` for "class == c") is computed on
      the training and on ``num_test`` test points. ``explicitness_train``/``explicitness_test``
      are the means over factors. Classes absent from the test sample are left out of its average.

    ``factors`` (default: every factor with more than one value) are the factors, by name or
    index, that make up the ``K`` columns of ``m`` and the explicitness average; a factor with a
    single value would add a column of zeros to every code's modularity, so it is never scored.

    The per-factor classifiers run on ``n_jobs`` joblib workers (default: one per core).

    Returns ``{"modularity", "explicitness_train", "explicitness_test"}``.
    """
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes_train, factors_train = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    codes_test, factors_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
    factors_train, factors_test = factors_train[:, chosen], factors_test[:, chosen]

    mi = discrete_mutual_info(histogram_discretize(codes_train, num_bins), factors_train)
    x_train, x_test = normalize_codes(codes_train, codes_test)
    random_state = derived_seed(seed, 1)
    tasks = [
        (x_train, factors_train[:, k], x_test, factors_test[:, k], random_state)
        for k in range(factors_train.shape[1])
    ]
    costs = [len(np.unique(t[1])) for t in tasks]
    aucs = np.array(parallel_map(_explicitness_per_factor, tasks, n_jobs, costs, prefer="processes"))
    return as_float_dict(
        {
            "modularity": modularity_from_mutual_info(mi),
            "explicitness_train": aucs[:, 0].mean(),
            "explicitness_test": aucs[:, 1].mean(),
        }
    )


def modularity_from_mutual_info(mutual_info: np.ndarray) -> float:
    """Mean over codes of ``1 - delta_j`` from a ``(d, K)`` mutual-information matrix (see above)."""
    mutual_info = np.asarray(mutual_info, dtype=np.float64)
    if mutual_info.ndim != 2:
        raise ValueError(f"mutual_info must be (d, K), got shape {mutual_info.shape}.")
    squared = mutual_info**2
    top = squared.max(axis=1)
    num_factors = squared.shape[1]
    if num_factors < 2:
        return float(np.mean(top > 0))  # one factor: every informative code is modular
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = (squared.sum(axis=1) - top) / (top * (num_factors - 1))
    score = np.where(top > 0, 1.0 - delta, 0.0)
    return float(score.mean())


def _explicitness_per_factor(x_train, y_train, x_test, y_test, random_state):
    """Train and test one-vs-rest ROC AUC of a logistic regression for one factor."""
    classes = np.unique(y_train)
    if len(classes) < 2:  # nothing to separate: a constant prediction is all there is
        return 0.5, 0.5
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(random_state=random_state).fit(x_train, y_train)
    return (
        _ovr_auc(y_train, model.predict_proba(x_train), model.classes_),
        _ovr_auc(y_test, model.predict_proba(x_test), model.classes_),
    )


def _ovr_auc(y: np.ndarray, proba: np.ndarray, classes: np.ndarray) -> float:
    """Macro ROC AUC of ``proba[:, c]`` for the binary labels ``y == classes[c]``."""
    from sklearn.metrics import roc_auc_score

    target = (y[:, None] == classes[None, :]).astype(np.int64)
    present = (target.sum(axis=0) > 0) & (target.sum(axis=0) < len(y))
    if not present.any():
        return 0.5
    return float(roc_auc_score(target[:, present], proba[:, present], average="macro"))
