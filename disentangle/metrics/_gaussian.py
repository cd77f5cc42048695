"""Gaussian-posterior helpers shared by Chen et al.'s MIG estimator and the ELBO decomposition."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._core.gaussian import LOG_2PI, log_normal, model_device  # noqa: F401  (LOG_2PI: re-exported)
from ..errors import ConfigError
from ._representation import default_representation_batch_size, eval_mode


def encoder_of(model: Any):
    """``model.encode`` (returning ``(mu, logvar)``), or a clear error where there is none."""
    encode = getattr(model, "encode", None)
    if not callable(encode):
        raise ConfigError(
            "this estimator needs a model with a Gaussian encoder, encode(x) -> (mu, logvar); "
            f"got {type(model).__name__}. Pass the trained model (disentangle.load(run_dir)), not "
            "a plain representation function."
        )
    return encode


def encode_factors(
    dataset: Any, model: Any, factors: np.ndarray, rng: np.random.Generator, batch_size: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Posterior ``(mu, logvar)`` (float64, on the model's device) for observations of ``factors``."""
    encode = encoder_of(model)
    device = model_device(model)
    batch_size = batch_size or default_representation_batch_size(device)
    mus, logvars = [], []
    with torch.no_grad(), eval_mode(model):
        for start in range(0, len(factors), batch_size):
            obs = dataset.sample_observations_from_factors(factors[start : start + batch_size], rng)
            if isinstance(obs, np.ndarray):
                obs = torch.as_tensor(obs)
            out = encode(obs.to(device) if isinstance(obs, torch.Tensor) else obs)
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise ValueError("model.encode(x) must return a pair (mu, logvar).")
            mu, logvar = (torch.as_tensor(t).to(device=device, dtype=torch.float64) for t in out)
            if mu.ndim != 2 or mu.shape != logvar.shape:
                raise ValueError(
                    f"model.encode(x) must return mu and logvar of the same shape (n, d); got "
                    f"{tuple(mu.shape)} and {tuple(logvar.shape)}."
                )
            mus.append(mu)
            logvars.append(logvar)
    mu, logvar = torch.cat(mus), torch.cat(logvars)
    if not (torch.isfinite(mu).all() and torch.isfinite(logvar).all()):
        raise ValueError("model.encode returned non-finite values.")
    return mu, logvar


def sample_posterior(mu: torch.Tensor, logvar: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """One draw ``z ~ N(mu, exp(logvar))`` per row, from a generator seeded by ``rng``."""
    gen = torch.Generator(device=mu.device)
    gen.manual_seed(int(rng.integers(0, 2**63 - 1)))
    eps = torch.randn(mu.shape, generator=gen, device=mu.device, dtype=mu.dtype)
    return mu + eps * torch.exp(0.5 * logvar)


def logsumexp_mixture(
    z: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    *,
    log_weight: float | torch.Tensor = 0.0,
    own_index: torch.Tensor | None = None,
    log_weight_own: float | None = None,
    joint: bool = True,
    max_elements: int = 2**23,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log of a weighted Gaussian mixture's density, per dimension and jointly.

    For each sample ``z[s]`` (``(S, d)``) and components ``n`` with ``mu[n], logvar[n]`` (``(N,
    d)``) returns ``per_dim[s, j] = logsumexp_n(log w_sn + log N(z[s, j]; mu[n, j], var[n, j]))``
    and ``joint[s] = logsumexp_n(log w_sn + sum_j log N(z[s, j]; ...))``. The weight is
    ``log_weight`` everywhere except ``log_weight_own`` at ``n == own_index[s]`` when given.
    Computed in blocks of at most ``max_elements`` densities; ``joint=False`` skips (and
    returns None for) the joint term.
    """
    S, d = z.shape
    N = mu.shape[0]
    const = -0.5 * (LOG_2PI + logvar)  # (N, d)
    inv_var = torch.exp(-logvar)
    block_n = max(1, min(N, max_elements // max(1, d)))
    block_s = max(1, max_elements // (block_n * d))
    per_dim = torch.empty((S, d), dtype=z.dtype, device=z.device)
    joint_out = torch.empty((S,), dtype=z.dtype, device=z.device) if joint else None
    for s0 in range(0, S, block_s):
        zs = z[s0 : s0 + block_s]
        acc_dim = None
        acc_joint = None
        for n0 in range(0, N, block_n):
            lp = const[None, n0 : n0 + block_n] - 0.5 * (zs[:, None, :] - mu[None, n0 : n0 + block_n]) ** 2 * inv_var[
                None, n0 : n0 + block_n
            ]  # (s, n, d)
            if own_index is None:
                w = torch.tensor(float(log_weight), dtype=z.dtype, device=z.device).expand(lp.shape[:2])
            else:
                w = torch.full(lp.shape[:2], float(log_weight), dtype=z.dtype, device=z.device)
                rows = torch.arange(lp.shape[0], device=z.device)
                cols = own_index[s0 : s0 + block_s] - n0
                inside = (cols >= 0) & (cols < lp.shape[1])
                w[rows[inside], cols[inside]] = float(log_weight_own)
            lse_dim = torch.logsumexp(lp + w[:, :, None], dim=1)
            acc_dim = lse_dim if acc_dim is None else torch.logaddexp(acc_dim, lse_dim)
            if joint:
                lse_joint = torch.logsumexp(lp.sum(dim=2) + w, dim=1)
                acc_joint = lse_joint if acc_joint is None else torch.logaddexp(acc_joint, lse_joint)
        per_dim[s0 : s0 + block_s] = acc_dim
        if joint:
            joint_out[s0 : s0 + block_s] = acc_joint
    return per_dim, joint_out


def dataset_size(dataset: Any) -> int:
    """``len(dataset)`` where defined, else the number of points of the factor grid."""
    try:
        n = len(dataset)
    except TypeError:
        n = None
    if n is None or n <= 0:
        n = int(np.prod([int(s) for s in dataset.factor_sizes]))
    return int(n)
