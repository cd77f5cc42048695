"""Decomposition of the ELBO's KL term (Chen et al., 2018; Hoffman & Johnson, 2016)."""
from __future__ import annotations

import math
from typing import Any, Literal, get_args

import numpy as np
import torch

from .._core import checks
from . import _gaussian as G
from ._settings import SettingsChecks, as_float_dict, check_dataset, count, one_of
from .registration import register_metric

Mixture = Literal["sample", "grid"]

CHECK_SETTINGS = SettingsChecks(
    num_samples=count("num_samples", 2),
    mixture=one_of("mixture", get_args(Mixture)),
    dataset_size=lambda value: None if value is None else checks.positive_int("dataset_size", value, minimum=2),
)


@register_metric(checks=CHECK_SETTINGS, requires_encoder=True, data="grid")
def elbo_decomposition(
    dataset: Any,
    model: Any,
    *,
    seed: int = 0,
    num_samples: int = 10_000,
    mixture: Mixture = "sample",
    dataset_size: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Index-code MI, total correlation and dimension-wise KL of a Gaussian-encoder model.

    With the aggregate posterior ``q(z) = (1/N) sum_n q(z|x_n)`` over the ``N`` points of the
    dataset and the prior ``p(z) = N(0, I)``, the average KL term of the ELBO splits as
    (Chen et al. 2018, eq. 2)::

        E_x KL(q(z|x) || p(z)) = I_q(x; z)                          index_code_mi
                               + KL(q(z) || prod_j q(z_j))           total_correlation
                               + sum_j KL(q(z_j) || p(z_j))          dimwise_kl

    The expectations are Monte-Carlo estimates over ``M = min(num_samples, grid size)`` distinct
    points of the factor grid drawn uniformly without replacement, one ``z_i ~ q(z|x_i)`` each.
    ``q(z_i)`` and each ``q(z_ij)`` are estimated from a mixture of posteriors:

    * ``mixture="sample"`` (default; cost ``M^2 d``): the same ``M`` posteriors, with Chen et al.'s
      minibatch stratified sampling weights, ``1/N`` for ``z_i``'s own posterior and ``(N - 1) /
      (N (M - 1))`` for each other one: an unbiased estimate of ``q(z_i)`` given that ``z_i`` came
      from ``x_i``, exact when ``M = N``. ``N`` is ``dataset_size`` if given, else
      ``len(dataset)`` where the dataset defines it, else the number of points of its factor grid.
      The log of a noisy estimate is biased low, and more so for the joint ``q(z)`` than for the
      marginals, so with ``M`` much smaller than ``N`` the total correlation comes out too low
      (e.g. -0.1 nats instead of 0 for 3 independent sharp codes at ``M = N / 3``).
    * ``mixture="grid"`` (cost ``M * G * d`` for a grid of ``G`` points, which are all encoded):
      the exact aggregate posterior over every point of the factor grid, as in Chen et al.'s own
      evaluation; only the outer expectation is sampled. Use it (on a GPU for dSprites) for final
      numbers.

    ``model`` must have ``encode(x) -> (mu, logvar)``.

    Returns ``index_code_mi``, ``total_correlation``, ``dimwise_kl``, their sum ``estimated_kl``,
    the closed-form average ``kl`` (for comparison), and ``dimwise_kl_<j>`` per code dimension,
    all in nats.
    """
    from . import refuse_without_a_posterior

    refuse_without_a_posterior("elbo_decomposition", model)
    sizes = check_dataset(dataset)
    G.encoder_of(model)
    N = G.dataset_size(dataset) if dataset_size is None else dataset_size
    grid_size = int(np.prod(sizes))
    if grid_size < 2 or N < 2:
        raise ValueError("the ELBO decomposition needs a dataset of at least two points.")
    rng = np.random.default_rng(seed)
    M = min(num_samples, grid_size)
    index = rng.choice(grid_size, size=M, replace=False)
    if mixture == "grid":
        all_factors = np.stack(np.unravel_index(np.arange(grid_size), sizes), axis=1).astype(np.int64)
        mu_all, logvar_all = G.encode_factors(dataset, model, all_factors, rng, representation_batch_size)
        pick = torch.as_tensor(index, device=mu_all.device)
        mu, logvar = mu_all[pick], logvar_all[pick]
    else:
        factors = np.stack(np.unravel_index(index, sizes), axis=1).astype(np.int64)
        mu, logvar = G.encode_factors(dataset, model, factors, rng, representation_batch_size)
    z = G.sample_posterior(mu, logvar, rng)
    d = mu.shape[1]

    log_qz_given_x = G.log_normal(z, mu, logvar).sum(dim=1)  # (M,)
    log_pz_dim = -0.5 * (G.LOG_2PI + z**2)  # (M, d)
    if mixture == "grid":
        log_qz_dim, log_qz = G.logsumexp_mixture(z, mu_all, logvar_all, log_weight=-math.log(grid_size))
    else:
        log_qz_dim, log_qz = G.logsumexp_mixture(
            z, mu, logvar,
            log_weight=math.log(N - 1) - math.log(N) - math.log(M - 1),
            own_index=torch.arange(M, device=mu.device),
            log_weight_own=-math.log(N),
        )
    e_log_qz_given_x = log_qz_given_x.mean().item()
    e_log_qz = log_qz.mean().item()
    e_log_qz_dim = log_qz_dim.mean(dim=0)
    e_log_pz_dim = log_pz_dim.mean(dim=0)
    dimwise = (e_log_qz_dim - e_log_pz_dim).cpu().numpy()
    analytic_kl = (0.5 * (mu**2 + logvar.exp() - 1.0 - logvar)).sum(dim=1).mean().item()
    scores = {
        "index_code_mi": e_log_qz_given_x - e_log_qz,
        "total_correlation": e_log_qz - e_log_qz_dim.sum().item(),
        "dimwise_kl": float(dimwise.sum()),
    }
    scores["estimated_kl"] = scores["index_code_mi"] + scores["total_correlation"] + scores["dimwise_kl"]
    scores["kl"] = analytic_kl
    for j in range(d):
        scores[f"dimwise_kl_{j}"] = float(dimwise[j])
    return as_float_dict(scores)
