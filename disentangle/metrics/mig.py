"""The Mutual Information Gap (Chen et al., 2018): histogram estimator and Chen et al.'s estimator."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np
import torch

from . import _gaussian as G
from ._information import discrete_entropy, discrete_mutual_info, histogram_discretize
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, check_dataset, count, factor_names, one_of, select_factors
from .registration import register_metric

Estimator = Literal["histogram", "chen"]
ESTIMATORS: tuple[str, ...] = get_args(Estimator)

CHECK_SETTINGS = SettingsChecks(
    estimator=one_of("estimator", ESTIMATORS),
    num_train=count("num_train", 2),
    num_bins=count("num_bins"),
    num_samples=count("num_samples"),
)


@register_metric(
    checks=CHECK_SETTINGS, needs_model=lambda settings: settings["estimator"] == "chen",
    draws=lambda settings: settings["num_train"],
    data=lambda settings: "grid" if settings["estimator"] == "chen" else "labels",
)
def mig(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    estimator: Estimator = "histogram",
    num_train: int = 10_000,
    num_bins: int = 20,
    num_samples: int = 10_000,
    factors: Sequence[str | int] | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Mutual Information Gap: per factor, the normalised gap between its two most informative codes.

    ``MIG = mean_k (I(z_a; v_k) - I(z_b; v_k)) / H(v_k)`` where ``z_a`` and ``z_b`` are the code
    dimensions with the largest and second-largest mutual information with factor ``v_k``
    (Chen et al. 2018). Mutual information and entropy are in nats. Two estimators:

    ``estimator="histogram"`` (default; disentanglement_lib's ``compute_mig``, used by Locatello et
    al.): the posterior means of ``num_train`` sampled observations are discretised per code
    dimension into ``num_bins`` equal-width bins spanning that dimension's [min, max] (see
    :func:`~disentangle.metrics._information.histogram_discretize`), ``I(z_j; v_k)`` is the plug-in
    discrete mutual information of the binned codes and the factor classes, and ``H(v_k)`` is the
    plug-in entropy of the sampled factor classes. Works with any representation.

    ``estimator="chen"``: Chen et al.'s own estimator, which is a different quantity. It needs a
    model with ``encode(x) -> (mu, logvar)`` and uses the Gaussian posterior ``q(z|x)`` of *every*
    point of the factor grid (``prod(factor_sizes)`` observations). With ``q(z_j) = mean_n
    q(z_j|x_n)``, ``H(z_j) = -E log q(z_j)`` is estimated from ``num_samples`` draws ``z ~ q(z|x_n)``
    at distinct random grid points, ``H(z_j | v_k)`` is the average over the values ``v`` of factor
    ``k`` of the same estimate restricted to the grid points with ``v_k = v``, ``I = max(H(z_j) -
    H(z_j | v_k), 0)`` and ``H(v_k) = log(size_k)``. It costs about ``(K + 1) * num_samples *
    prod(factor_sizes) * d`` density evaluations (minutes on a GPU for dSprites, far longer on a
    CPU), so it is meant for final evaluation, not for monitoring. ``num_train``/``num_bins`` are
    ignored by it.

    ``factors`` (default: every factor with more than one value) lists the factors, by name or
    index, whose gaps are averaged; the others are still sampled, only not scored. Chen et al.'s
    dSprites protocol leaves the shape out (their MIG averages scale, orientation and the two
    positions)::

        mig(dsprites, model, estimator="chen", factors=["scale", "orientation", "position_x", "position_y"])

    Factors with a single value are never scored (zero entropy, see
    :func:`~disentangle.metrics._settings.select_factors`), nor is a factor that the histogram
    estimator's sample happens to hold at one value. With one code dimension the second-largest
    information is taken as 0.

    Returns ``{"mig", "mig_<factor name>" for each scored factor}``.
    """
    chosen = select_factors(dataset, factors)
    names = [factor_names(dataset)[k] for k in chosen]
    if estimator == "chen":
        from . import refuse_without_a_posterior

        # its samples of N(mu, exp(logvar)) would be a GAN's codes in [-1, 1] drowned in unit noise
        refuse_without_a_posterior("mig with estimator='chen'", representation,
                                   "Use estimator='histogram' (the default), which reads the codes themselves.")
        mi, entropy = _chen_mutual_information(
            dataset, representation, seed, num_samples, representation_batch_size, chosen
        )
    else:
        code_fn = as_representation_function(representation, representation_batch_size)
        rng = np.random.default_rng(seed)
        codes, sampled = sample_codes_and_factors(dataset, code_fn, num_train, rng)
        sampled = sampled[:, chosen]
        mi = discrete_mutual_info(histogram_discretize(codes, num_bins), sampled)
        entropy = discrete_entropy(sampled)
    gaps = mig_from_mutual_info(mi, entropy)
    valid = ~np.isnan(gaps)
    scores = {"mig": float(gaps[valid].mean()) if valid.any() else 0.0}
    for name, gap, ok in zip(names, gaps, valid):
        if ok:
            scores[f"mig_{name}"] = float(gap)
    return as_float_dict(scores)


def mig_from_mutual_info(mutual_info: np.ndarray, factor_entropy: np.ndarray) -> np.ndarray:
    """Per-factor normalised gaps from a ``(d, K)`` mutual-information matrix and ``(K,)`` entropies.

    ``gap_k = (top1_k - top2_k) / H_k`` over the code axis; NaN where ``H_k == 0``.
    """
    mutual_info = np.asarray(mutual_info, dtype=np.float64)
    factor_entropy = np.asarray(factor_entropy, dtype=np.float64)
    if mutual_info.ndim != 2 or factor_entropy.shape != (mutual_info.shape[1],):
        raise ValueError(
            f"mutual_info must be (d, K) and factor_entropy (K,); got {mutual_info.shape} and "
            f"{factor_entropy.shape}."
        )
    ordered = -np.sort(-mutual_info, axis=0)
    second = ordered[1] if len(ordered) > 1 else np.zeros(ordered.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        gaps = (ordered[0] - second) / factor_entropy
    gaps[factor_entropy <= 0] = np.nan
    return gaps


def factor_grid(factor_sizes) -> np.ndarray:
    """Every factor vector of the grid, ``(prod(sizes), K)`` int64 in row-major order."""
    sizes = [int(s) for s in factor_sizes]
    return np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)


def _chen_mutual_information(dataset, model, seed, num_samples, batch_size, chosen):
    """``(d, len(chosen))`` mutual information and factor entropies with Chen et al.'s estimator."""
    sizes = check_dataset(dataset)
    rng = np.random.default_rng(seed)
    grid = factor_grid(sizes)
    mu, logvar = G.encode_factors(dataset, model, grid, rng, batch_size)
    z = G.sample_posterior(mu, logvar, rng)

    def entropy(indices: np.ndarray, generator: np.random.Generator) -> torch.Tensor:
        """``H(z_j)`` of the aggregate posterior of the given grid points, per dimension."""
        picked = indices if len(indices) <= num_samples else generator.choice(indices, num_samples, replace=False)
        idx = torch.as_tensor(indices, device=mu.device)
        pick = torch.as_tensor(picked, device=mu.device)
        per_dim, _ = G.logsumexp_mixture(
            z[pick], mu[idx], logvar[idx], log_weight=-math.log(len(indices)), joint=False
        )
        return -per_dim.mean(dim=0)

    marginal = entropy(np.arange(len(grid)), rng)
    mi = np.zeros((mu.shape[1], len(chosen)))
    for column, k in enumerate(chosen):
        size = sizes[k]
        # a generator per factor: a factor's score does not depend on which others are scored
        factor_rng = np.random.default_rng([seed, 1, int(k)])
        conditional = sum(entropy(np.flatnonzero(grid[:, k] == v), factor_rng) for v in range(size)) / size
        mi[:, column] = torch.clamp(marginal - conditional, min=0).cpu().numpy()
    return mi, np.log(np.asarray(sizes, dtype=np.float64)[chosen])
