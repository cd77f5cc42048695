"""The BetaVAE disentanglement score (Higgins et al., 2017)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import checks
from ._parallel import parallel_map
from ._representation import as_representation_function
from ._sampling import sample_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, factor_names, select_factors
from .registration import register_metric

CHECK_SETTINGS = SettingsChecks(
    batch_size=count("batch_size"), num_train=count("num_train", 2), num_eval=count("num_eval")
)


@register_metric(
    checks=CHECK_SETTINGS,
    draws=lambda settings: 2 * settings["batch_size"] * (settings["num_train"] + settings["num_eval"]),
    data="grid",
    aliases=("beta_vae",),
)
def beta_vae_score(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    batch_size: int = 64,
    num_train: int = 10_000,
    num_eval: int = 5_000,
    factors: Sequence[str | int] | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """BetaVAE score: accuracy of a linear classifier predicting which factor was held fixed.

    Definition (Higgins et al. 2017, as implemented in disentanglement_lib's
    ``compute_beta_vae_sklearn``): one training point is made by drawing a factor index ``k``
    uniformly among the scored factors (``factors``, by name or index, at least two; default:
    every factor with more than one value, as fixing a single-valued factor fixes nothing), two
    batches of ``batch_size`` factor vectors where the second batch copies factor
    ``k`` of the first row by row (all other factors independent), and taking the mean over the
    batch of ``|r(x1) - r(x2)|`` (per code dimension) as the feature vector, with label ``k``.
    A scikit-learn ``LogisticRegression`` with its default settings (L2, ``C=1``, lbfgs, 100
    iterations, multinomial) is fitted on ``num_train`` such points; ``train_accuracy`` is its
    accuracy on them and ``eval_accuracy`` on ``num_eval`` fresh points. Chance level is ``1/K``.

    Codes are not normalised (as in the reference). All pairs are sampled at once and the
    representation is called on ``representation_batch_size`` observations at a time.

    Returns ``{"train_accuracy", "eval_accuracy"}``.
    """
    chosen = select_factors(dataset, factors)
    if len(chosen) < 2:
        names = factor_names(dataset)
        raise checks.ParameterError(
            "factors",
            f"the BetaVAE score needs at least two factors with more than one value to tell apart; "
            f"got {[names[k] for k in chosen]}.",
        )
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)

    x_train, y_train = _sample_points(dataset, code_fn, chosen, batch_size, num_train, rng)
    x_eval, y_eval = _sample_points(dataset, code_fn, chosen, batch_size, num_eval, rng)
    if len(np.unique(y_train)) < 2:
        raise ValueError(
            "all BetaVAE training points fixed the same factor (too few points); increase num_train."
        )
    train_acc, eval_acc = parallel_map(
        _fit_logistic, [(x_train, y_train, x_eval, y_eval, derived_seed(seed, 1))], n_jobs=1
    )[0]
    return as_float_dict({"train_accuracy": train_acc, "eval_accuracy": eval_acc})


def _fit_logistic(x_train, y_train, x_eval, y_eval, random_state):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(random_state=random_state).fit(x_train, y_train)
    return (
        float(np.mean(model.predict(x_train) == y_train)),
        float(np.mean(model.predict(x_eval) == y_eval)),
    )


def _sample_points(dataset, code_fn, chosen, batch_size, num_points, rng):
    """``num_points`` BetaVAE feature vectors ``(num_points, d)`` and their labels (factor indices)."""
    labels = chosen[rng.integers(len(chosen), size=num_points)]
    first = sample_factors(dataset, num_points * batch_size, rng).reshape(num_points, batch_size, -1)
    second = sample_factors(dataset, num_points * batch_size, rng).reshape(num_points, batch_size, -1)
    rows = np.arange(num_points)
    second[rows, :, labels] = first[rows, :, labels]
    # whole pairs of batches per representation call (both halves in one call)
    per_call = max(1, code_fn.batch_size // (2 * batch_size))
    features = []
    for start in range(0, num_points, per_call):
        stop = min(start + per_call, num_points)
        m = stop - start
        factors = np.concatenate(
            [first[start:stop].reshape(m * batch_size, -1), second[start:stop].reshape(m * batch_size, -1)]
        )
        obs = dataset.sample_observations_from_factors(factors, rng)
        codes = code_fn(obs)
        diff = np.abs(codes[: m * batch_size] - codes[m * batch_size :])
        features.append(diff.reshape(m, batch_size, -1).mean(axis=1))
    return np.concatenate(features, axis=0), labels
