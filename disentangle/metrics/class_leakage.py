"""Class leakage: how well the class can be read from the content code (the class/content family)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np

from .._core import checks
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, is_sample, one_of, select_factors
from .registration import register_metric

LeakagePredictor = Literal["logistic_regression", "mlp"]


# ---------------------------------------------------------------- the settings both class metrics share
def check_class_factors_setting(value: Any) -> tuple[int | str, ...] | None:
    """``class_factors``: ``None`` (the default class, :func:`resolve_metric_class_factors`) or a factor
    (name or index) or a non-empty list of them, else a :class:`~disentangle._core.checks.ParameterError`."""
    from ..data.classes import check_class_factors

    return check_class_factors(value)


def check_class_dim_setting(value: Any) -> int | None:
    """``class_dim``: ``None`` (half the code dimensions, rounded down) or an integer ``>= 1``."""
    return None if value is None else checks.positive_int("class_dim", value)


def resolve_metric_class_factors(dataset: Any, class_factors: Sequence[int | str] | None, who: str) -> tuple[int, ...]:
    """The factor (or label column) indices that make a class, for ``who`` (e.g. ``"the metric
    'class_leakage'"``, the subject of its error messages).

    ``class_factors`` names factors (names or indices) as the class/content objectives'
    ``objective.class_factors`` does; ``None`` is the first factor with more than one value (``shape``
    on dSprites and sprites, the first label column that varies on a labelled sample). Checked
    against ``dataset`` (:func:`disentangle.data.classes.resolve_class_factors`): an unknown or
    repeated factor, or every factor of a grid, is a :class:`~disentangle._core.checks.ParameterError`.
    """
    from ..data.classes import resolve_class_factors

    if class_factors is None:
        varying = select_factors(dataset, None)
        if len(varying) == 0:
            raise checks.ParameterError(
                "class_factors", f"{who} needs a class, and every factor of this dataset has a single "
                "value. Evaluate it on a dataset whose factors vary."
            )
        class_factors = (int(varying[0]),)
    return resolve_class_factors(class_factors, dataset, who=who)


def resolve_metric_class_dim(class_dim: int | None, code_dim: int, who: str) -> int:
    """``C``, the size of the class code (the last ``C`` of ``code_dim`` code dimensions): ``class_dim``,
    or ``code_dim // 2`` (the class/content objectives' default) when ``None``; a
    :class:`~disentangle._core.checks.ParameterError` unless ``1 <= C < code_dim``."""
    value = code_dim // 2 if class_dim is None else int(class_dim)
    if not 1 <= value < code_dim:
        given = f"class_dim is {value}" if class_dim is not None else f"the default class_dim (half the code) is {value}"
        fix = (
            f"Set class_dim between 1 and {code_dim - 1}: the model's objective.class_dim for a class/content model."
            if code_dim >= 2 else "A code of one dimension cannot be split; evaluate a model with at least 2 latents."
        )
        raise checks.ParameterError(
            "class_dim", f"{who} splits each {code_dim}-dimensional code into a content code (the first "
            f"dimensions) and a class code (the last class_dim) and needs at least one of each; {given}. {fix}"
        )
    return value


def class_labels(dataset: Any, factors: np.ndarray, class_factors: tuple[int, ...]) -> np.ndarray:
    """The class ``(n,)`` int64 of factor rows ``(n, K)`` (label rows on a labelled sample), as the
    class/content objectives number classes: on a grid the mixed-radix index of the class factors'
    values (:func:`~disentangle.data.classes.class_labels_of_factors`), on a labelled sample the rank
    of the label combination among those that occur (:func:`~disentangle.data.classes.class_index`)."""
    import torch

    from ..data.classes import class_index, class_labels_of_factors

    factors = np.asarray(factors)
    if is_sample(dataset):
        values = class_index(dataset, tuple(class_factors)).values
        lookup = {tuple(v): i for i, v in enumerate(np.asarray(values).tolist())}
        return np.asarray([lookup[tuple(r)] for r in factors[:, list(class_factors)].tolist()], dtype=np.int64)
    rows = torch.as_tensor(factors.astype(np.int64, copy=False))
    return class_labels_of_factors(rows, dataset.factor_sizes, tuple(class_factors)).numpy()


def majority_rate(labels: np.ndarray) -> float:
    """The rate of the most frequent value of ``labels`` (the accuracy of always guessing it)."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return 0.0
    return float(np.bincount(np.unique(labels, return_inverse=True)[1].reshape(-1)).max() / labels.size)


def normalised_accuracy(accuracy: float, chance: float) -> float:
    """``max(0, (accuracy − chance) / (1 − chance))``; 0 where ``chance`` is 1 (a single class)."""
    if chance >= 1.0:
        return 0.0
    return max(0.0, (accuracy - chance) / (1.0 - chance))


# ---------------------------------------------------------------- the metric
CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2),
    num_test=count("num_test"),
    predictor=one_of("predictor", get_args(LeakagePredictor)),
    class_factors=check_class_factors_setting,
    class_dim=check_class_dim_setting,
)


@register_metric(checks=CHECK_SETTINGS, draws=lambda s: s["num_train"] + s["num_test"], data="labels")
def class_leakage(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_test: int = 5_000,
    predictor: LeakagePredictor = "logistic_regression",
    class_factors: Sequence[str | int] | None = None,
    class_dim: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """How well a classifier reads an image's class from its content code (0: not at all).

    The class/content objectives (Mathieu et al. 2016; DrNet, Denton & Birodkar 2017; LORD, Gabbay &
    Hoshen 2020; the F-statistic loss, Ridgeway & Mozer 2018) split a ``D``-dimensional code into a
    content code, the first ``D − C`` dimensions, and a class code, the last ``C = class_dim``
    (:mod:`disentangle.objectives.class_content`). The content code should carry nothing of the
    class (its "leakage" into the content code) and the class code all of it; a classifier of the
    class trained on each part measures both. Here, on ``num_train`` drawn ``(code, factor)``
    pairs and ``num_test`` more (with the same seed and sizes, the draws of SAP, DCI and the
    modularity score, computed once under :func:`~disentangle.metrics.evaluate_metrics`):

    * the class ``y`` of a point is the combination of the values of its ``class_factors`` (names or
      indices; a labelled sample's label columns), numbered as the objectives number classes;
    * a classifier of ``y`` is fitted on the standardised content codes of the training points
      (each dimension centred and scaled to unit variance on the training points, scikit-learn's
      ``StandardScaler``) and scored on the test points: ``class_leakage_accuracy``;
    * ``class_leakage_chance`` is the rate of the most frequent class on the test points (the
      accuracy of always guessing it; ``1/K`` for ``K`` uniform classes on a grid);
    * ``class_leakage = max(0, (accuracy − chance) / (1 − chance))``: 0 when the content code tells
      no more of the class than chance, 1 when it tells the class of every test point (0 when the
      test points hold a single class);
    * ``class_code_accuracy``: the same classifier on the class code (it should be near 1: the class
      code is what tells classes apart).

    ``predictor``: ``"logistic_regression"`` (default): scikit-learn's multinomial
    ``LogisticRegression`` (L2, ``C = 1``, lbfgs, up to 1,000 iterations), a linear probe: it finds
    the class wherever it is a linear function of the code, and misses a class coded nonlinearly
    (e.g. in the norm of the code); ``"mlp"``: ``MLPClassifier`` with one hidden layer of 100 ReLU
    units (Adam, up to 300 epochs, scikit-learn's defaults otherwise), which finds such codes too,
    slower. A training sample of a single class predicts that class.

    ``class_factors`` (default: the first factor with more than one value, ``shape`` on dSprites and
    sprites) and ``class_dim`` (default: ``D // 2``, the objectives' default) should be the run's
    ``objective.class_factors`` and ``objective.class_dim`` for a model trained by a class/content
    objective: ``python -m disentangle.evaluate`` fills them from the run's config. For any other
    model the score reads the first ``D − C`` code dimensions against the last ``C``.

    Returns ``class_leakage``, ``class_leakage_accuracy``, ``class_leakage_chance`` and
    ``class_code_accuracy``.
    """
    chosen = resolve_metric_class_factors(dataset, class_factors, "the metric 'class_leakage'")
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    x_train, f_train = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    x_test, f_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
    c = resolve_metric_class_dim(class_dim, x_train.shape[1], "the metric 'class_leakage'")
    y_train, y_test = class_labels(dataset, f_train, chosen), class_labels(dataset, f_test, chosen)
    random_state = derived_seed(seed, 1)
    accuracy = probe_accuracy(x_train[:, :-c], y_train, x_test[:, :-c], y_test, predictor, random_state)
    class_accuracy = probe_accuracy(x_train[:, -c:], y_train, x_test[:, -c:], y_test, predictor, random_state)
    chance = majority_rate(y_test)
    return as_float_dict({
        "class_leakage": normalised_accuracy(accuracy, chance),
        "class_leakage_accuracy": accuracy,
        "class_leakage_chance": chance,
        "class_code_accuracy": class_accuracy,
    })


def probe_accuracy(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray,
    predictor: LeakagePredictor = "logistic_regression", random_state: int = 0,
) -> float:
    """Test accuracy of ``predictor`` (see :func:`class_leakage`) fitted on standardised ``x_train``."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    classes = np.unique(y_train)
    if len(classes) < 2:
        return float(np.mean(y_test == classes[0])) if len(classes) else 0.0
    if predictor == "logistic_regression":
        from sklearn.linear_model import LogisticRegression

        classifier = LogisticRegression(C=1.0, max_iter=1_000, random_state=random_state)
    else:
        from sklearn.neural_network import MLPClassifier

        classifier = MLPClassifier(hidden_layer_sizes=(100,), max_iter=300, random_state=random_state)
    model = make_pipeline(StandardScaler(), classifier)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the probe's accuracy is the answer either way
        model.fit(np.asarray(x_train, dtype=np.float64), y_train)
    return float(np.mean(model.predict(np.asarray(x_test, dtype=np.float64)) == y_test))


__all__ = [
    "class_labels",
    "class_leakage",
    "majority_rate",
    "normalised_accuracy",
    "probe_accuracy",
    "resolve_metric_class_dim",
    "resolve_metric_class_factors",
]

