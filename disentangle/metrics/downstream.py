"""Downstream classification from the codes (Locatello et al., 2019)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np

from .._core import checks
from ._parallel import parallel_map
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, count, derived_seed, factor_names, one_of, select_factors
from .registration import register_metric

Predictor = Literal["logistic_regression", "gradient_boosting", "hist_gradient_boosting"]
DownstreamBooster = Literal["exact", "sklearn"]
#: predictor name -> short prefix used in the score names
PREDICTORS = dict(zip(get_args(Predictor), ("lr", "gbt", "hgbt"), strict=True))


def _check_sizes(num_train: Any) -> tuple[int, ...]:
    sizes = (num_train,) if isinstance(num_train, (int, np.integer)) else num_train
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
        raise checks.ParameterError(
            "num_train", f"num_train must be a training-set size or a non-empty list of them, got {num_train!r}."
        )
    return tuple(checks.positive_int("num_train", n) for n in sizes)


def _check_predictors(predictors: Any) -> tuple[str, ...]:
    names = (predictors,) if isinstance(predictors, str) else predictors
    if not isinstance(names, Sequence) or not names:
        raise checks.ParameterError(
            "predictors", f"predictors must name at least one of {', '.join(PREDICTORS)}; got {predictors!r}."
        )
    return tuple(checks.choice("predictors", p, tuple(PREDICTORS)) for p in names)


def _check_together(settings: dict[str, Any]) -> None:
    sizes, predictors = settings.get("num_train"), settings.get("predictors")
    if sizes and predictors and "logistic_regression" in predictors and min(sizes) < 5:
        raise checks.ParameterError(
            "num_train",
            f"num_train entries must be >= 5 for logistic_regression (5-fold cross-validation); got {min(sizes)}.",
        )


CHECK_SETTINGS = SettingsChecks(
    _check_together,
    num_train=_check_sizes,
    num_test=count("num_test"),
    predictors=_check_predictors,
    booster=one_of("booster", get_args(DownstreamBooster)),
)


@register_metric(
    checks=CHECK_SETTINGS,
    draws=lambda s: sum(_check_sizes(s["num_train"])) + len(_check_sizes(s["num_train"])) * s["num_test"],
    aliases=("downstream",),
)
def downstream_task(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: Sequence[int] = (10, 100, 1_000, 10_000),
    num_test: int = 5_000,
    predictors: Sequence[Predictor] = ("logistic_regression", "gradient_boosting"),
    booster: DownstreamBooster = "exact",
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Accuracy of classifiers predicting each factor from the codes, and their sample efficiency.

    Definition (Locatello et al. 2019, disentanglement_lib's ``compute_downstream_task``): for each
    training-set size ``n`` in ``num_train``, draw ``n`` training points and ``num_test`` test points
    (fresh for every size), fit one classifier per factor on the codes and record its accuracy.
    Predictors:

    * ``"logistic_regression"`` (prefix ``lr``): ``LogisticRegressionCV(Cs=10,
      cv=KFold(n_splits=5))`` (L2, lbfgs, accuracy as the selection score, as in the reference);
    * ``"gradient_boosting"`` (prefix ``gbt``): ``GradientBoostingClassifier()`` with defaults, grown
      by our exact numba implementation of the same algorithm (``booster="exact"``, default, all
      factors at once; see :func:`disentangle.metrics.dci`) or by scikit-learn itself
      (``booster="sklearn"``);
    * ``"hist_gradient_boosting"`` (``hgbt``, not in the reference): the histogram booster
      with the same structure as the DCI ``booster="hist"`` option.

    ``factors`` (default: every factor with more than one value) are the factors, by name or
    index, that are predicted and averaged. A factor whose training sample holds a single class is
    predicted as that class.

    Scores, for each predictor prefix ``p`` and size ``n``: ``p_n:mean_test_accuracy``,
    ``p_n:mean_train_accuracy``, ``p_n:min_test_accuracy``, ``p_n:min_train_accuracy`` and
    ``p_n:test_accuracy_<factor>``; plus ``p:sample_efficiency`` = mean test accuracy with 100
    training points / mean test accuracy with 10,000 (Locatello et al.'s statistical efficiency;
    only when both sizes are in ``num_train``). The fits run on ``n_jobs`` joblib workers (threads
    of the exact booster).
    """
    seed, sizes, num_test = seed, num_train, num_test
    chosen = select_factors(dataset, factors)
    names = [factor_names(dataset)[k] for k in chosen]
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    random_state = derived_seed(seed, 1)

    tasks, costs, keys = [], [], []
    results: dict[tuple[str, int, int], tuple[float, float]] = {}
    for n in sizes:
        x_train, y_train = sample_codes_and_factors(dataset, code_fn, n, rng)
        x_test, y_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
        y_train, y_test = y_train[:, chosen], y_test[:, chosen]
        for predictor in predictors:
            if predictor == "gradient_boosting" and booster == "exact":
                # every factor in one joint fit, its trees grown in parallel threads
                from .dci import importance_matrix

                _, train_acc, test_acc = importance_matrix(
                    x_train, y_train, x_test, y_test, booster="exact", random_state=random_state, n_jobs=n_jobs
                )
                results.update({(predictor, n, k): (train_acc[k], test_acc[k]) for k in range(len(train_acc))})
                continue
            for k in range(y_train.shape[1]):
                tasks.append((predictor, x_train, y_train[:, k], x_test, y_test[:, k], random_state))
                classes = len(np.unique(y_train[:, k]))
                costs.append(n * (classes if predictor != "logistic_regression" else 1))
                keys.append((predictor, n, k))
    results.update(zip(keys, parallel_map(_fit_predictor, tasks, n_jobs, costs, prefer="processes")))

    scores: dict[str, float] = {}
    for predictor in predictors:
        prefix = PREDICTORS[predictor]
        for n in sizes:
            train = [results[(predictor, n, k)][0] for k in range(len(names))]
            test = [results[(predictor, n, k)][1] for k in range(len(names))]
            tag = f"{prefix}_{n}"
            scores[f"{tag}:mean_test_accuracy"] = float(np.mean(test))
            scores[f"{tag}:mean_train_accuracy"] = float(np.mean(train))
            scores[f"{tag}:min_test_accuracy"] = float(np.min(test))
            scores[f"{tag}:min_train_accuracy"] = float(np.min(train))
            for name, acc in zip(names, test):
                scores[f"{tag}:test_accuracy_{name}"] = float(acc)
        if 100 in sizes and 10_000 in sizes:
            scores[f"{prefix}:sample_efficiency"] = (
                scores[f"{prefix}_100:mean_test_accuracy"] / scores[f"{prefix}_10000:mean_test_accuracy"]
            )
    return scores




def _fit_predictor(predictor, x_train, y_train, x_test, y_test, random_state):
    if len(np.unique(y_train)) < 2:
        from .dci import _constant_factor_accuracy

        return _constant_factor_accuracy(y_train, y_test)
    if predictor == "logistic_regression":
        model = _logistic_regression_cv(random_state)
    elif predictor == "gradient_boosting":
        from sklearn.ensemble import GradientBoostingClassifier

        model = GradientBoostingClassifier(random_state=random_state)
    else:
        from .dci import _hist_booster

        model = _hist_booster(random_state)
    model.fit(x_train, y_train)
    return float(np.mean(model.predict(x_train) == y_train)), float(np.mean(model.predict(x_test) == y_test))


def _logistic_regression_cv(random_state):
    """``LogisticRegressionCV(Cs=10, cv=KFold(5))`` with the reference's (L2, accuracy) choices made explicit."""
    import inspect

    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import KFold

    kwargs: dict[str, Any] = {"Cs": 10, "cv": KFold(n_splits=5), "random_state": random_state}
    params = inspect.signature(LogisticRegressionCV).parameters
    # newer scikit-learn versions warn unless these (unchanged) defaults are spelled out
    if "l1_ratios" in params:
        kwargs["l1_ratios"] = (0.0,)
    if "scoring" in params:
        kwargs["scoring"] = "accuracy"
    if "use_legacy_attributes" in params:
        kwargs["use_legacy_attributes"] = False
    return LogisticRegressionCV(**kwargs)
