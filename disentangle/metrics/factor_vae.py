"""The FactorVAE disentanglement score (Kim & Mnih, 2018)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import checks
from ._representation import as_representation_function
from ._sampling import codes_for_factors, sample_factors, sample_fixed_factor_groups
from ._settings import SettingsChecks, as_float_dict, check_dataset, count, select_factors
from .registration import register_metric

CHECK_SETTINGS = SettingsChecks(
    batch_size=count("batch_size", 2),
    num_train=count("num_train"),
    num_eval=count("num_eval"),
    num_variance_estimate=count("num_variance_estimate", 2),
    prune_threshold=lambda value: checks.non_negative("prune_threshold", value),
)


@register_metric(
    checks=CHECK_SETTINGS,
    draws=lambda s: s["num_variance_estimate"] + s["batch_size"] * (s["num_train"] + s["num_eval"]),
    data="grid",
    aliases=("factor_vae",),
)
def factor_vae_score(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    batch_size: int = 64,
    num_train: int = 10_000,
    num_eval: int = 5_000,
    num_variance_estimate: int = 10_000,
    prune_threshold: float = 0.05,
    factors: Sequence[str | int] | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """FactorVAE score: accuracy of a majority-vote classifier on the least-varying dimension.

    Definition (Kim & Mnih 2018, as in disentanglement_lib's ``compute_factor_vae``):

    1. The global variance of each code dimension is estimated (``ddof=1``) on
       ``num_variance_estimate`` observations; dimensions whose standard deviation is below
       ``prune_threshold`` (0.05, as in the Locatello et al. study) are *inactive* (collapsed to
       the prior) and never chosen. A dimension of zero variance is inactive even with
       ``prune_threshold=0`` (its normalised variance would be 0/0).
    2. One training point: draw a factor index ``k`` uniformly among the scored factors
       (``factors``, by name or index; default: every factor with more than one value, as
       holding a single-valued factor fixed fixes nothing) and ``batch_size`` factor vectors
       sharing one random value of factor ``k`` (all other factors uniform); divide the codes by the
       global standard deviation and take the active dimension of smallest variance (``ddof=1``),
       i.e. ``argmin_j var_j(batch) / var_j(global)``, as the point; its label is ``k``.
    3. The classifier maps each dimension to the factor it was most often the argmin for (majority
       vote over ``num_train`` points, ties to the lower factor index); ``train_accuracy`` is the
       fraction of training points it gets right and ``eval_accuracy`` that on ``num_eval`` fresh
       points. Chance level is ``1/K``.

    If no dimension is active, every score is 0. ``num_active_dims`` is the number of active
    dimensions (disentanglement_lib reports the length of its boolean mask, i.e. the total number
    of dimensions, there; this is the count the name promises).

    Returns ``{"train_accuracy", "eval_accuracy", "num_active_dims"}``.
    """
    sizes = check_dataset(dataset)
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)

    sampled = sample_factors(dataset, num_variance_estimate, rng)
    global_var = np.var(codes_for_factors(dataset, code_fn, sampled, rng), axis=0, ddof=1)
    active = (global_var > 0) & (np.sqrt(global_var) >= prune_threshold)
    if not active.any():
        return {"train_accuracy": 0.0, "eval_accuracy": 0.0, "num_active_dims": 0.0}

    def votes(num_points: int) -> np.ndarray:
        return _votes(dataset, code_fn, len(sizes), chosen, batch_size, num_points, rng, global_var, active)

    train_votes = votes(num_train)
    classifier = np.argmax(train_votes, axis=0)  # dimension -> factor
    dims = np.arange(train_votes.shape[1])
    train_acc = train_votes[classifier, dims].sum() / train_votes.sum()
    eval_votes = votes(num_eval)
    eval_acc = eval_votes[classifier, dims].sum() / eval_votes.sum()
    return as_float_dict(
        {"train_accuracy": train_acc, "eval_accuracy": eval_acc, "num_active_dims": int(active.sum())}
    )


def _votes(dataset, code_fn, num_factors, chosen, batch_size, num_points, rng, global_var, active):
    """``(K, d)`` counts of (fixed factor, argmin dimension) over ``num_points`` batches."""
    index, factors = sample_fixed_factor_groups(dataset, num_points, batch_size, rng, chosen)
    active_dims = np.flatnonzero(active)
    per_call = max(1, code_fn.batch_size // batch_size)
    argmins = np.empty(num_points, dtype=np.int64)
    for start in range(0, num_points, per_call):
        stop = min(start + per_call, num_points)
        m = stop - start
        obs = dataset.sample_observations_from_factors(factors[start:stop].reshape(m * batch_size, -1), rng)
        codes = code_fn(obs).reshape(m, batch_size, -1)
        local_var = np.var(codes[:, :, active_dims], axis=1, ddof=1)
        argmins[start:stop] = active_dims[np.argmin(local_var / global_var[active_dims], axis=1)]
    votes = np.zeros((num_factors, len(global_var)), dtype=np.int64)
    np.add.at(votes, (index, argmins), 1)
    return votes
