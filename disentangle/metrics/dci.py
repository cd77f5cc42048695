"""Disentanglement, completeness and informativeness (Eastwood & Williams, 2018)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np

from ._parallel import parallel_map, resolve_n_jobs
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, one_of, select_factors
from .registration import register_metric

Booster = Literal["exact", "sklearn", "hist"]
BOOSTERS: tuple[str, ...] = get_args(Booster)

CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2), num_test=count("num_test"), booster=one_of("booster", BOOSTERS)
)

#: added to every importance before normalising (as in disentanglement_lib), so that a code or
#: factor with no importance at all gets a uniform distribution (score 0) instead of 0/0.
EPSILON = 1e-11


@register_metric(checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"] + settings["num_test"])
def dci(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_test: int = 5_000,
    booster: Booster = "exact",
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """DCI: disentanglement, completeness and informativeness from a tree-ensemble importance matrix.

    Definition (Eastwood & Williams 2018, as in disentanglement_lib's ``compute_dci``):

    * For each factor ``k`` a classifier predicts the factor class from the codes of ``num_train``
      points: gradient-boosted trees with scikit-learn's ``GradientBoostingClassifier()`` defaults
      (100 stages of depth-3 regression trees on the log-loss gradient, one tree per class per
      stage, learning rate 0.1, exact greedy splits). Column ``k`` of the importance matrix ``R``
      (``d x K``) is its impurity-based ``feature_importances_`` (total decrease of squared error
      per code over all trees, summing to 1 over codes).

      ``booster="exact"`` (default) grows these trees with our numba implementation of the same
      algorithm (:mod:`disentangle.metrics._boosting`): all factors at once, in ``n_jobs``
      threads. Its training-set predictions equal scikit-learn's up to floating-point rounding;
      importances differ only where two codes separate a node's samples identically (an exact
      tie, broken at random by both). ``booster="sklearn"`` runs ``GradientBoostingClassifier``
      itself (the reference, ``random_state`` derived from ``seed``). Codes must be finite in
      float32, to which both cast them.
    * ``informativeness_train``/``informativeness_test``: the classifiers' accuracies on the
      training points and on ``num_test`` test points, averaged over factors (accuracy, not error, as
      in disentanglement_lib).
    * ``disentanglement``: per code ``j``, ``D_j = 1 - H_K(P_j)`` where ``P_j = R[j, :] / sum_k
      R[j, k]`` and ``H_K`` is the entropy with logarithm base ``K`` (number of factors); the score
      is ``sum_j rho_j D_j`` with ``rho_j = sum_k R[j, k] / sum R`` (row/code weights).
    * ``completeness``: per factor ``k``, ``C_k = 1 - H_d(R[:, k] / sum_j R[j, k])`` with base ``d``
      (number of codes); the score is ``sum_k C_k`` weighted by ``sum_j R[j, k] / sum R``.
    * As in the reference, ``1e-11`` is added to ``R`` before each normalisation. With one factor
      (or one code) the base-1 entropy is undefined and ``D_j`` (``C_k``) is taken as 1.

    ``booster="hist"`` is an option that gives different (close, not equal) values:
    scikit-learn's ``HistGradientBoostingClassifier`` with the same structure (100 iterations, depth
    3, learning rate 0.1, ``min_samples_leaf=1``, no L2, no early stopping; features binned into 255
    quantile bins) and importances from the total split gain per code (normalised per factor).
    ``benchmarks/RESULTS-metrics.md`` gives its measured agreement with the default.

    ``factors`` (default: every factor with more than one value) are the factors, by name or
    index, that make up the ``K`` columns of ``R`` and the informativeness average. A factor with a
    single value is never scored: it would add a column of zero importance that changes every
    ``D_j`` through the entropy base ``K``.

    ``n_jobs`` (default: one per core) is the number of threads growing trees (``"exact"``) or of
    joblib workers fitting factors, the largest first (``"sklearn"``, ``"hist"``); results do not
    depend on it.

    Returns ``{"disentanglement", "completeness", "informativeness_train", "informativeness_test"}``.
    """
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes_train, factors_train = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    codes_test, factors_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
    importance, train_acc, test_acc = importance_matrix(
        codes_train, factors_train[:, chosen], codes_test, factors_test[:, chosen],
        booster=booster, random_state=derived_seed(seed, 1), n_jobs=n_jobs,
    )
    scores = dci_from_importance(importance)
    scores["informativeness_train"] = float(np.mean(train_acc))
    scores["informativeness_test"] = float(np.mean(test_acc))
    return as_float_dict(scores)




def importance_matrix(
    codes_train: np.ndarray,
    factors_train: np.ndarray,
    codes_test: np.ndarray,
    factors_test: np.ndarray,
    *,
    booster: Booster = "exact",
    random_state: int = 0,
    n_jobs: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(R (d, K), train accuracy (K,), test accuracy (K,))`` from one classifier per factor."""
    one_of("booster", BOOSTERS)(booster)
    codes_train = np.asarray(codes_train, dtype=np.float64)
    codes_test = np.asarray(codes_test, dtype=np.float64)
    if codes_train.ndim != 2 or factors_train.ndim != 2 or len(codes_train) != len(factors_train):
        raise ValueError(
            f"codes (n, d) and factors (n, K) must have the same number of rows; got "
            f"{codes_train.shape} and {factors_train.shape}."
        )
    if booster == "exact":
        return _exact_importance_matrix(codes_train, factors_train, codes_test, factors_test, random_state, n_jobs)
    tasks = [
        (codes_train, factors_train[:, k], codes_test, factors_test[:, k], booster, random_state)
        for k in range(factors_train.shape[1])
    ]
    costs = [len(np.unique(t[1])) for t in tasks]  # a multiclass booster fits one tree per class
    results = parallel_map(_fit_factor, tasks, n_jobs, costs, prefer="processes")
    importance = np.stack([r[0] for r in results], axis=1)
    return importance, np.array([r[1] for r in results]), np.array([r[2] for r in results])


def _exact_importance_matrix(codes_train, factors_train, codes_test, factors_test, random_state, n_jobs):
    from ._boosting import fit_boosted_trees

    num_factors = factors_train.shape[1]
    importance = np.zeros((codes_train.shape[1], num_factors))
    train_acc, test_acc = np.empty(num_factors), np.empty(num_factors)
    classes = [len(np.unique(factors_train[:, k])) for k in range(num_factors)]
    varying = [k for k in range(num_factors) if classes[k] >= 2]
    for k in set(range(num_factors)) - set(varying):
        train_acc[k], test_acc[k] = _constant_factor_accuracy(factors_train[:, k], factors_test[:, k])
    if varying:
        model = fit_boosted_trees(
            codes_train, factors_train[:, varying], seed=random_state,
            n_threads=resolve_n_jobs(n_jobs, sum(classes)),  # at most one thread per tree of a stage
        )
        importance[:, varying] = np.abs(model.importances)  # as the reference: |rounding| near 0
        train_acc[varying] = np.mean(model.predict() == factors_train[:, varying], axis=0)
        test_acc[varying] = np.mean(model.predict(codes_test) == factors_test[:, varying], axis=0)
    return importance, train_acc, test_acc


def _constant_factor_accuracy(y_train: np.ndarray, y_test: np.ndarray) -> tuple[float, float]:
    """A factor constant on the training points: nothing to learn, its one value is predicted."""
    value = y_train[0]
    return float(np.mean(y_train == value)), float(np.mean(y_test == value))


def _fit_factor(x_train, y_train, x_test, y_test, booster, random_state):
    if len(np.unique(y_train)) < 2:  # no importance
        return (np.zeros(x_train.shape[1]), *_constant_factor_accuracy(y_train, y_test))
    if booster == "sklearn":
        from sklearn.ensemble import GradientBoostingClassifier

        model = GradientBoostingClassifier(random_state=random_state).fit(x_train, y_train)
        importance = np.abs(model.feature_importances_)
    else:
        model = _hist_booster(random_state).fit(x_train, y_train)
        importance = _hist_gain_importance(model, x_train.shape[1])
    return (
        importance,
        float(np.mean(model.predict(x_train) == y_train)),
        float(np.mean(model.predict(x_test) == y_test)),
    )


def _hist_booster(random_state: int):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        learning_rate=0.1,
        max_iter=100,
        max_depth=3,
        max_leaf_nodes=None,
        min_samples_leaf=1,
        l2_regularization=0.0,
        early_stopping=False,
        random_state=random_state,
    )


def _hist_gain_importance(model, num_features: int) -> np.ndarray:
    """Total split gain per feature over all trees of a fitted HistGradientBoosting model, summing to 1."""
    predictors = getattr(model, "_predictors", None)
    if predictors is None:  # pragma: no cover - depends on scikit-learn internals
        raise RuntimeError(
            "this scikit-learn version does not expose HistGradientBoosting trees (_predictors); "
            "use booster='sklearn'."
        )
    total = np.zeros(num_features)
    for stage in predictors:
        for tree in stage:
            nodes = tree.nodes[tree.nodes["is_leaf"] == 0]
            np.add.at(total, nodes["feature_idx"], np.maximum(nodes["gain"], 0.0))
    s = total.sum()
    return total / s if s > 0 else total


def _one_minus_entropy(p: np.ndarray, base: int) -> np.ndarray:
    """``1 - H_base`` of each *column* of non-negative ``p`` after adding EPSILON and normalising."""
    if base < 2:
        return np.ones(p.shape[1])
    q = p + EPSILON
    q = q / q.sum(axis=0, keepdims=True)
    return 1.0 + (q * np.log(q)).sum(axis=0) / np.log(base)


def disentanglement_per_code(importance: np.ndarray) -> np.ndarray:
    """``1 - H_K(R[j, :] normalised)`` for each code ``j`` of a ``(d, K)`` importance matrix."""
    importance = _check_importance(importance)
    return _one_minus_entropy(importance.T, importance.shape[1])


def completeness_per_factor(importance: np.ndarray) -> np.ndarray:
    """``1 - H_d(R[:, k] normalised)`` for each factor ``k`` of a ``(d, K)`` importance matrix."""
    importance = _check_importance(importance)
    return _one_minus_entropy(importance, importance.shape[0])


def dci_from_importance(importance: np.ndarray) -> dict[str, float]:
    """``{"disentanglement", "completeness"}`` from a ``(d, K)`` importance matrix (see :func:`dci`).

    An all-zero matrix gets uniform weights (scores 0), as in the reference.
    """
    importance = _check_importance(importance)
    weights = importance if importance.sum() > 0 else np.ones_like(importance)
    code_weight = weights.sum(axis=1) / weights.sum()
    factor_weight = weights.sum(axis=0) / weights.sum()
    return {
        "disentanglement": float(np.sum(disentanglement_per_code(importance) * code_weight)),
        "completeness": float(np.sum(completeness_per_factor(importance) * factor_weight)),
    }


def _check_importance(importance: np.ndarray) -> np.ndarray:
    importance = np.asarray(importance, dtype=np.float64)
    if importance.ndim != 2 or importance.size == 0:
        raise ValueError(f"the importance matrix must be a non-empty (codes, factors) array, got {importance.shape}.")
    if (importance < 0).any() or not np.isfinite(importance).all():
        raise ValueError("the importance matrix must be finite and non-negative.")
    return importance
