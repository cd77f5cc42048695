"""Decomposition of the ELBO's KL term (Chen et al., 2018; Hoffman & Johnson, 2016)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from . import _gaussian as G
from . import _utils as U

ESTIMATORS = ("stratified", "weighted")


def elbo_decomposition(
    dataset: Any,
    model: Any,
    *,
    seed: int = 0,
    num_samples: int = 10_000,
    dataset_size: int | None = None,
    estimator: str = "stratified",
    representation_batch_size: int = U.DEFAULT_REPRESENTATION_BATCH_SIZE,
) -> dict[str, float]:
    """Index-code MI, total correlation and dimension-wise KL of a Gaussian-encoder model.

    With the aggregate posterior ``q(z) = (1/N) sum_n q(z|x_n)`` over the ``N`` points of the
    dataset and the prior ``p(z) = N(0, I)``, the average KL term of the ELBO splits as
    (Chen et al. 2018, eq. 2)::

        E_x KL(q(z|x) || p(z)) = I_q(x; z)                          index_code_mi
                               + KL(q(z) || prod_j q(z_j))           total_correlation
                               + sum_j KL(q(z_j) || p(z_j))          dimwise_kl

    The expectations are Monte-Carlo estimates over ``num_samples`` observations drawn uniformly
    from the dataset, one ``z ~ q(z|x_i)`` each. ``log q(z_i)`` (and each ``log q(z_ij)``) is
    estimated from the same sample of ``M = num_samples`` posteriors:

    * ``estimator="stratified"`` (default, Chen et al.'s minibatch stratified sampling): weight
      ``1/N`` for ``z_i``'s own posterior and ``(N - 1) / (N (M - 1))`` for each of the others, i.e.
      an unbiased estimate of ``q(z_i)`` given that ``z_i`` came from ``x_i``;
    * ``estimator="weighted"`` (minibatch weighted sampling, the β-TCVAE training estimator):
      ``log q(z_i) ~ logsumexp_j log q(z_i|x_j) - log(N M)``.

    ``N`` is ``dataset_size`` if given, else ``len(dataset)`` where the dataset defines it, else
    the number of points of its factor grid. The estimates are consistent as ``M`` grows; for
    ``M`` much smaller than ``N`` the total correlation and index-code MI are biased (MI is at most
    ``log N``). ``model`` must have ``encode(x) -> (mu, logvar)``. Cost: ``M^2 d`` density evaluations.

    Returns ``index_code_mi``, ``total_correlation``, ``dimwise_kl``, their sum ``estimated_kl``,
    the closed-form average ``kl`` (for comparison), and ``dimwise_kl_<j>`` per code dimension,
    all in nats.
    """
    seed = U.check_seed(seed)
    num_samples = U.check_positive_int("num_samples", num_samples, minimum=2)
    U.check_choice("estimator", estimator, ESTIMATORS)
    U.check_dataset(dataset)
    G.encoder_of(model)
    N = G.dataset_size(dataset) if dataset_size is None else U.check_positive_int("dataset_size", dataset_size)
    rng = np.random.default_rng(seed)
    factors = U.sample_factors(dataset, num_samples, rng)
    mu, logvar = G.encode_factors(dataset, model, factors, rng, representation_batch_size)
    z = G.sample_posterior(mu, logvar, rng)
    M, d = mu.shape

    log_qz_given_x = G.log_normal(z, mu, logvar).sum(dim=1)  # (M,)
    log_pz_dim = -0.5 * (G.LOG_2PI + z**2)  # (M, d)
    if estimator == "stratified":
        log_other = math.log(N - 1) - math.log(N) - math.log(M - 1) if N > 1 else -math.inf
        log_qz_dim, log_qz = G.logsumexp_mixture(
            z, mu, logvar,
            log_weight=log_other,
            own_index=torch.arange(M, device=mu.device),
            log_weight_own=-math.log(N),
        )
    else:
        log_qz_dim, log_qz = G.logsumexp_mixture(z, mu, logvar, log_weight=-math.log(N * M))

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
    return U.as_float_dict(scores)
