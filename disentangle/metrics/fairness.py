"""Unfairness of classifiers trained on the codes (Locatello et al., 2019b)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

import numpy as np

from .._core import checks
from ._parallel import parallel_map, resolve_n_jobs
from ._representation import as_representation_function
from ._sampling import codes_for_factors, sample_codes_and_factors, sample_factors
from ._settings import (
    SettingsChecks,
    as_float_dict,
    check_dataset,
    count,
    derived_seed,
    factor_names,
    one_of,
    select_factors,
)
from .downstream import DownstreamBooster
from .registration import register_metric

FairnessPredictor = Literal["gradient_boosting", "logistic_regression"]

def _check_together(settings: dict[str, Any]) -> None:
    if settings.get("predictor") == "logistic_regression" and settings.get("num_train", 5) < 5:
        raise checks.ParameterError(
            "num_train", f"num_train must be >= 5 for logistic_regression (5-fold cross-validation); got {settings['num_train']}."
        )


CHECK_SETTINGS = SettingsChecks(
    _check_together,
    num_train=count("num_train", 2),
    num_test_points_per_class=count("num_test_points_per_class"),
    predictor=one_of("predictor", get_args(FairnessPredictor)),
    booster=one_of("booster", get_args(DownstreamBooster)),
)


def _draws(settings: dict[str, Any]) -> int:
    """At least two scored factors of two values each: ``num_train + 4 * num_test_points_per_class``
    observations at the least (the exact number, ``num_train + (K - 1) * sum_k size_k *
    num_test_points_per_class``, depends on the dataset)."""
    return settings["num_train"] + 4 * settings["num_test_points_per_class"]


@register_metric(checks=CHECK_SETTINGS, draws=_draws, data="grid")
def fairness(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_test_points_per_class: int = 100,
    predictor: FairnessPredictor = "gradient_boosting",
    booster: DownstreamBooster = "exact",
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Unfairness: how much a classifier's predictions of one factor move when another is intervened on.

    Locatello, Abbati, Rainforth, Bauer, Schölkopf & Bachem, "On the Fairness of Disentangled
    Representations", NeurIPS 2019 (section 4); as disentanglement_lib computes it
    (``compute_fairness``, ``inter_group_fairness`` and ``compute_scores_dict`` in
    ``evaluation/metrics/fairness.py``, with its ``fairness_study_v1`` settings: 10,000 training
    points, 100 test points per class, ``GradientBoostingClassifier()``).

    * One classifier per scored factor ``i`` (the *target*) is fitted on the codes of ``num_train``
      drawn points (the same first draw as DCI with the same seed).
    * For every other scored factor ``j`` (the *sensitive* factor): ``num_test_points_per_class``
      factor vectors are drawn once; for each value ``c`` of factor ``j`` they are copied with
      ``v_j := c`` (an intervention), new observations are drawn for them and encoded, and the
      target classifier's predictions are counted: ``counts[y, c]``.
    * With ``P(y)`` the distribution of predictions over all interventions and ``P(y | c)`` that
      under ``v_j = c``, ``TV_c = 1/2 sum_y |P(y | c) - P(y)|``; ``mean_fairness[i, j] = sum_c
      n_c TV_c / sum_c n_c`` (all ``n_c`` are equal here, so it is the mean over ``c``) and
      ``max_fairness[i, j] = max_c TV_c``. 0 is fair: the prediction of ``v_i`` does not depend on
      ``v_j``. A representation that entangles ``v_i`` with ``v_j`` gives classifiers of ``v_i``
      whose predictions move with ``v_j``.

    Scores, for each matrix ``m`` in ``mean_fairness``, ``max_fairness`` (lower is fairer), exactly
    the reference's aggregation with factor names in place of indices:

    * ``m:pred_<i>:sens_<j>`` for every pair ``i != j``;
    * ``m:pred_<i>:mean_sens``/``max_sens`` (over the sensitive factors of target ``i``) and
      ``m:sens_<j>:mean_pred``/``max_pred`` (over the targets of sensitive ``j``);
    * ``m:mean_pred:mean_sens`` (the paper's score, the reference's headline), ``m:mean_pred:max_sens``,
      ``m:max_pred:mean_sens``, ``m:max_pred:max_sens``, and the same over columns first:
      ``m:mean_sens:mean_pred``, ``m:mean_sens:max_pred``, ``m:max_sens:mean_pred``, ``m:max_sens:max_pred``.

    ``predictor``: ``"gradient_boosting"`` (default, the study's ``GradientBoostingClassifier()``;
    grown by our exact booster, ``booster="exact"``, all targets in one fit, or by scikit-learn,
    ``booster="sklearn"``) or ``"logistic_regression"`` (the reference's other predictor,
    ``LogisticRegressionCV(Cs=10, cv=KFold(5))``); see :func:`~disentangle.metrics.downstream_task`.
    ``factors`` (default: every factor with more than one value; at least two) are the targets and
    the sensitive factors. It intervenes on factors, so it needs a complete factor grid.

    Where we differ from the reference, and why: the total variations are computed in float64 (the
    reference's float32 moves them by about 1e-7); the classifiers' ``random_state`` is derived
    from ``seed`` (the reference leaves it unset); keys name factors (``pred_shape``, the
    reference's ``pred0``); single-valued factors are not scored (a target with one value is a
    constant prediction, a sensitive factor with one value no intervention). A target whose
    training sample holds a single class is predicted as that class (fairness 0).
    """
    chosen = select_factors(dataset, factors)
    sizes = check_dataset(dataset)
    names = [factor_names(dataset)[k] for k in chosen]
    if len(chosen) < 2:
        raise checks.ParameterError(
            "factors", f"fairness needs at least two factors with more than one value (a target and a "
            f"sensitive factor); got {names}."
        )
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes_train, factors_train = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    classify = fit_classifiers(
        codes_train, factors_train[:, chosen], predictor=predictor, booster=booster,
        random_state=derived_seed(seed, 1), n_jobs=n_jobs,
    )
    num = num_test_points_per_class
    mean_fairness = np.zeros((len(chosen), len(chosen)))
    max_fairness = np.zeros((len(chosen), len(chosen)))
    for a, i in enumerate(chosen):
        for b, j in enumerate(chosen):
            if a == b:
                continue
            original = sample_factors(dataset, num, rng)
            intervened = np.repeat(original[None], sizes[j], axis=0)  # (values of j, num, K)
            intervened[:, :, j] = np.arange(sizes[j])[:, None]
            codes = codes_for_factors(dataset, code_fn, intervened.reshape(-1, len(sizes)), rng)
            predictions = classify(codes)[:, a].reshape(sizes[j], num)
            counts = np.stack([np.bincount(p, minlength=sizes[i]) for p in predictions], axis=1)
            mean_fairness[a, b], max_fairness[a, b] = inter_group_fairness(counts)
    scores = fairness_scores(mean_fairness, "mean_fairness", names)
    scores.update(fairness_scores(max_fairness, "max_fairness", names))
    return as_float_dict(scores)


def inter_group_fairness(counts: np.ndarray) -> tuple[float, float]:
    """``(mean, max)`` total variation between the distribution of predictions under each
    sensitive value and the overall one, from ``counts[predicted class, sensitive value]``; the
    mean is weighted by the number of predictions per sensitive value."""
    counts = np.asarray(counts, dtype=np.float64)
    overall = counts.sum(axis=1) / counts.sum()
    per_value = counts.sum(axis=0)
    distances = np.abs(counts / per_value[None, :] - overall[:, None]).sum(axis=0) / 2.0
    return float(np.sum(distances * per_value) / per_value.sum()), float(np.max(distances))


def fairness_scores(matrix: np.ndarray, prefix: str, names: Sequence[str]) -> dict[str, float]:
    """The reference's ``compute_scores_dict``: every off-diagonal entry of a ``(targets,
    sensitive)`` matrix, its row and column means and maxima (diagonal left out) and the eight
    mean/max combinations of them (see :func:`fairness`)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    size = matrix.shape[0]
    if matrix.shape != (size, size) or size < 2 or len(names) != size:
        raise ValueError(f"the fairness matrix must be square with at least two factors, got {matrix.shape}.")
    off = ~np.eye(size, dtype=bool)
    scores: dict[str, float] = {}
    for a in range(size):
        for b in range(size):
            if a != b:
                scores[f"{prefix}:pred_{names[a]}:sens_{names[b]}"] = float(matrix[a, b])
    rows = [matrix[a, off[a]] for a in range(size)]
    columns = [matrix[off[:, b], b] for b in range(size)]
    for a, row in enumerate(rows):
        scores[f"{prefix}:pred_{names[a]}:mean_sens"] = float(np.mean(row))
        scores[f"{prefix}:pred_{names[a]}:max_sens"] = float(np.max(row))
    for b, column in enumerate(columns):
        scores[f"{prefix}:sens_{names[b]}:mean_pred"] = float(np.mean(column))
        scores[f"{prefix}:sens_{names[b]}:max_pred"] = float(np.max(column))
    column_means, column_maxima = [np.mean(c) for c in columns], [np.max(c) for c in columns]
    row_means, row_maxima = [np.mean(r) for r in rows], [np.max(r) for r in rows]
    scores[f"{prefix}:mean_sens:mean_pred"] = float(np.mean(column_means))
    scores[f"{prefix}:mean_sens:max_pred"] = float(np.mean(column_maxima))
    scores[f"{prefix}:max_sens:mean_pred"] = float(np.max(column_means))
    scores[f"{prefix}:max_sens:max_pred"] = float(np.max(column_maxima))
    scores[f"{prefix}:mean_pred:mean_sens"] = float(np.mean(row_means))
    scores[f"{prefix}:mean_pred:max_sens"] = float(np.mean(row_maxima))
    scores[f"{prefix}:max_pred:mean_sens"] = float(np.max(row_means))
    scores[f"{prefix}:max_pred:max_sens"] = float(np.max(row_maxima))
    return scores


def fit_classifiers(
    codes: np.ndarray,
    targets: np.ndarray,
    *,
    predictor: str = "gradient_boosting",
    booster: str = "exact",
    random_state: int = 0,
    n_jobs: int | None = None,
) -> Callable[[np.ndarray], np.ndarray]:
    """One classifier per column of ``targets`` ``(n, K)`` fitted on ``codes`` ``(n, d)``; returns
    ``predict(codes) -> (m, K)`` labels. A column with a single class is predicted as that class.

    ``"gradient_boosting"`` with ``booster="exact"`` grows every column's trees in one fit of our
    exact booster; otherwise the downstream task's classifiers are fitted, one per column, on
    ``n_jobs`` workers."""
    codes = np.asarray(codes, dtype=np.float64)
    targets = np.asarray(targets)
    constant = {k: targets[0, k] for k in range(targets.shape[1]) if len(np.unique(targets[:, k])) < 2}
    varying = [k for k in range(targets.shape[1]) if k not in constant]

    if predictor == "gradient_boosting" and booster == "exact":
        from ._boosting import fit_boosted_trees

        classes = sum(len(np.unique(targets[:, k])) for k in varying)
        model = fit_boosted_trees(
            codes, targets[:, varying], seed=random_state, n_threads=resolve_n_jobs(n_jobs, classes)
        ) if varying else None

        def predict_varying(x: np.ndarray) -> np.ndarray:
            return model.predict(x)
    else:
        tasks = [(predictor, codes, targets[:, k], random_state) for k in varying]
        costs = [len(np.unique(targets[:, k])) for k in varying]
        models = parallel_map(_fit_model, tasks, n_jobs, costs, prefer="processes")

        def predict_varying(x: np.ndarray) -> np.ndarray:
            return np.stack([m.predict(x) for m in models], axis=1)

    def predict(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        out = np.empty((len(x), targets.shape[1]), dtype=targets.dtype)
        for k, value in constant.items():
            out[:, k] = value
        if varying:
            out[:, varying] = predict_varying(x)
        return out

    return predict


def _fit_model(predictor: str, x: np.ndarray, y: np.ndarray, random_state: int):
    if predictor == "logistic_regression":
        from .downstream import _logistic_regression_cv

        model = _logistic_regression_cv(random_state)
    else:
        from sklearn.ensemble import GradientBoostingClassifier

        model = GradientBoostingClassifier(random_state=random_state)
    return model.fit(x, y)
