"""Downstream classification after removing the most informative codes (disentanglement_lib's reduced downstream task)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np

from .._core import checks
from ._parallel import parallel_map
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, factor_names, one_of, select_factors
from .downstream import DownstreamBooster, _check_sizes, _fit_predictor
from .registration import register_metric

#: the predictors of disentanglement_lib's ``predictor.predictor_fn`` (one per run)
SinglePredictor = Literal["gradient_boosting", "logistic_regression"]


def check_single_predictor_sizes(settings: dict[str, Any]) -> None:
    """Logistic regression's 5-fold cross-validation needs at least 5 training points per size."""
    sizes, predictor = settings.get("num_train"), settings.get("predictor")
    if sizes and predictor == "logistic_regression" and min(sizes) < 5:
        raise checks.ParameterError(
            "num_train",
            f"num_train entries must be >= 5 for logistic_regression (5-fold cross-validation); got {min(sizes)}.",
        )


CHECK_SETTINGS = SettingsChecks(
    check_single_predictor_sizes,
    num_train=_check_sizes,
    num_test=count("num_test"),
    num_factors_to_remove=count("num_factors_to_remove"),
    predictor=one_of("predictor", get_args(SinglePredictor)),
    booster=one_of("booster", get_args(DownstreamBooster)),
)


@register_metric(
    checks=CHECK_SETTINGS,
    draws=lambda s: sum(_check_sizes(s["num_train"])) + len(_check_sizes(s["num_train"])) * s["num_test"],
    data="labels",
    aliases=("reduced_downstream",),
)
def reduced_downstream_task(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: Sequence[int] = (10_000,),
    num_test: int = 5_000,
    num_factors_to_remove: int = 1,
    predictor: SinglePredictor = "gradient_boosting",
    booster: DownstreamBooster = "exact",
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Accuracy of downstream classifiers once the codes most informative of one factor are removed.

    disentanglement_lib's ``compute_reduced_downstream_task`` (``evaluation/metrics/
    reduced_downstream_task.py``, its ``reduced_representation.correlation_measure`` the
    ``factorwise_dci`` importance, the only one it has): it measures how much information about a
    factor *leaks* out of the codes that carry it most. For each training-set size ``n`` in
    ``num_train``, ``n`` training and ``num_test`` test points are drawn (with the default sizes,
    DCI's draws for the same seed), and for each scored factor ``a`` (the *reduced factor*):

    1. ``num_factors_to_remove`` times: the DCI importance matrix of the current codes (one
       gradient-boosted-trees classifier per factor, ``GradientBoostingClassifier()``'s
       ``feature_importances_``, see :func:`~disentangle.metrics.dci`) is computed and the code of
       largest importance for factor ``a`` is deleted (the first one on a tie, as ``np.argmax``);
    2. on the remaining codes one classifier per scored factor (``predictor``) is fitted on the
       training points and its accuracy measured on them and on the test points.

    A disentangled code loses factor ``a`` with its one code: ``a``'s accuracy drops to what the
    other codes leak about it, while the other factors keep theirs.

    Scores, for each size ``n`` and reduced factor ``<a>`` (factor names, the reference's indices):

    * ``n:reduced_factor_<a>:mean_{train,test}_accuracy_reduced_factor`` (accuracy on factor ``a``),
    * ``n:reduced_factor_<a>:mean_{train,test}_accuracy_factor_<b>`` (every factor ``b``),
    * ``n:reduced_factor_<a>:mean_{train,test}_accuracy_non_reduced_factor`` (mean over ``b != a``),
    * ``n:mean_{train,test}_accuracy_reduced_factor`` and ``n:mean_{train,test}_accuracy_other_factors``
      (means of the two previous kinds over ``a``).

    Settings: the reference has no defaults (gin.REQUIRED) and ships one configuration, its test's
    (``num_train=[100]``, ``num_test=100``, ``num_factors_to_remove=1``, ``factorwise_dci``,
    ``GradientBoostingClassifier()``). We keep its one removal and its predictor and take DCI's
    sizes, 10,000 training and 5,000 test points, so that the scores are not dominated by sampling
    noise and the draws are shared with DCI. ``predictor="logistic_regression"`` is the reference's
    other predictor (``LogisticRegressionCV(Cs=10, cv=KFold(5))``); ``booster`` grows the trees of
    the importance and of the gradient-boosting predictor (``"exact"``, our numba booster, or
    ``"sklearn"``), see :func:`~disentangle.metrics.downstream_task`.

    Where we differ from the reference, and why: a fit is computed once and reused where the
    reference repeats the identical fit (the importance of the full codes, shared by every reduced
    factor; a gradient-boosting predictor on the same codes is the importance's own fit), which
    changes no value; classifiers get a ``random_state`` derived from ``seed`` (unset in the
    reference); ``factors`` (default: every factor with more than one value) are the factors
    predicted and reduced; with a single scored factor the ``non_reduced``/``other_factors`` scores
    (means over no factor, NaN in the reference) are left out. ``num_factors_to_remove`` must be
    smaller than the code's dimension (the reference fails without a code left).
    """
    chosen = select_factors(dataset, factors)
    names = [factor_names(dataset)[k] for k in chosen]
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    random_state = derived_seed(seed, 1)
    scores: dict[str, float] = {}
    for n in num_train:
        x_train, y_train = sample_codes_and_factors(dataset, code_fn, n, rng)
        x_test, y_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
        y_train, y_test = y_train[:, chosen], y_test[:, chosen]
        if num_factors_to_remove >= x_train.shape[1]:
            raise checks.ParameterError(
                "num_factors_to_remove",
                f"num_factors_to_remove ({num_factors_to_remove}) must be smaller than the number of codes "
                f"({x_train.shape[1]}): a classifier needs at least one code left.",
            )
        fits = ReducedFits(x_train, y_train, x_test, y_test, predictor, booster, random_state, n_jobs)
        reduced_train, reduced_test, other_train, other_test = [], [], [], []
        for a, name in enumerate(names):
            keep = np.arange(x_train.shape[1])
            for _ in range(num_factors_to_remove):
                keep = np.delete(keep, np.argmax(fits.importance(keep)[:, a]))
            train_acc, test_acc = fits.accuracy(keep)
            tag = f"{n}:reduced_factor_{name}"
            scores[f"{tag}:mean_train_accuracy_reduced_factor"] = train_acc[a]
            scores[f"{tag}:mean_test_accuracy_reduced_factor"] = test_acc[a]
            reduced_train.append(train_acc[a])
            reduced_test.append(test_acc[a])
            for b, other in enumerate(names):
                scores[f"{tag}:mean_train_accuracy_factor_{other}"] = train_acc[b]
                scores[f"{tag}:mean_test_accuracy_factor_{other}"] = test_acc[b]
            if len(names) > 1:
                others = np.arange(len(names)) != a
                scores[f"{tag}:mean_train_accuracy_non_reduced_factor"] = float(np.mean(train_acc[others]))
                scores[f"{tag}:mean_test_accuracy_non_reduced_factor"] = float(np.mean(test_acc[others]))
                other_train.append(scores[f"{tag}:mean_train_accuracy_non_reduced_factor"])
                other_test.append(scores[f"{tag}:mean_test_accuracy_non_reduced_factor"])
        scores[f"{n}:mean_train_accuracy_reduced_factor"] = float(np.mean(reduced_train))
        scores[f"{n}:mean_test_accuracy_reduced_factor"] = float(np.mean(reduced_test))
        if other_train:
            scores[f"{n}:mean_train_accuracy_other_factors"] = float(np.mean(other_train))
            scores[f"{n}:mean_test_accuracy_other_factors"] = float(np.mean(other_test))
    return as_float_dict(scores)


class ReducedFits:
    """The fits of one training size, each computed once per set of kept codes.

    :meth:`importance` is the DCI importance matrix ``(len(keep), K)`` of the codes ``keep``
    (gradient-boosted trees, ``booster``); :meth:`accuracy` the ``(K,)`` train and test accuracies
    of ``predictor`` on them. The gradient-boosting predictor of the same booster is the very fit
    of the importance, so it is not grown twice.
    """

    def __init__(self, x_train, y_train, x_test, y_test, predictor, booster, random_state, n_jobs) -> None:
        self.data = (x_train, y_train, x_test, y_test)
        self.predictor, self.booster = predictor, booster
        self.random_state, self.n_jobs = random_state, n_jobs
        self._trees: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._accuracy: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def _boosted(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = tuple(int(j) for j in keep)
        if key not in self._trees:
            from .dci import importance_matrix

            x_train, y_train, x_test, y_test = self.data
            self._trees[key] = importance_matrix(
                x_train[:, keep], y_train, x_test[:, keep], y_test,
                booster=self.booster, random_state=self.random_state, n_jobs=self.n_jobs,
            )
        return self._trees[key]

    def importance(self, keep: np.ndarray) -> np.ndarray:
        return self._boosted(keep)[0]

    def accuracy(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.predictor == "gradient_boosting":
            return self._boosted(keep)[1:]
        key = tuple(int(j) for j in keep)
        if key not in self._accuracy:
            x_train, y_train, x_test, y_test = self.data
            self._accuracy[key] = predictive_accuracy(
                x_train[:, keep], y_train, x_test[:, keep], y_test, predictor=self.predictor,
                booster=self.booster, random_state=self.random_state, n_jobs=self.n_jobs,
            )
        return self._accuracy[key]


def predictive_accuracy(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    *,
    predictor: str = "gradient_boosting",
    booster: str = "exact",
    random_state: int = 0,
    n_jobs: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(train accuracy (K,), test accuracy (K,))`` of one classifier per column of ``y_train``
    ``(n, K)``: the downstream task's predictors (see :func:`~disentangle.metrics.downstream_task`;
    all columns in one fit of the exact booster, else one fit per column on ``n_jobs`` workers). A
    column with a single training class is predicted as that class."""
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    if predictor == "gradient_boosting" and booster == "exact":
        from .dci import importance_matrix

        _, train, test = importance_matrix(
            x_train, y_train, x_test, y_test, booster="exact", random_state=random_state, n_jobs=n_jobs
        )
        return train, test
    tasks = [(predictor, x_train, y_train[:, k], x_test, y_test[:, k], random_state) for k in range(y_train.shape[1])]
    costs = [len(x_train) * (len(np.unique(t[2])) if predictor != "logistic_regression" else 1) for t in tasks]
    results = parallel_map(_fit_predictor, tasks, n_jobs, costs, prefer="processes")
    return np.array([r[0] for r in results]), np.array([r[1] for r in results])
