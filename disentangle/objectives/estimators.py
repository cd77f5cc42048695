"""Estimators used by the objectives, as plain functions on tensors (no model needed).

* :func:`gaussian_log_density` — elementwise ``log N(z; μ, σ²)``.
* :func:`log_importance_weights` — the ``(M, M)`` log-weight matrix of minibatch-weighted
  sampling (MWS) or minibatch-stratified sampling (MSS), Chen et al. 2018, appendix C.
* :func:`aggregate_posterior_log_density` — batch estimates of ``log q(z)`` and ``log q(z_j)``.
* :func:`total_correlation`, :func:`decompose_kl` — β-TCVAE's TC and its KL decomposition.
* :func:`permute_dims` — FactorVAE's samples of ``Π_j q(z_j)`` (each column permuted independently).
* :func:`mmd` — the unbiased estimate of MMD² (Gretton et al. 2012) with RBF or
  inverse-multiquadratic kernels (InfoVAE / WAE).
* :func:`dip_covariance` — DIP-VAE-I/II's covariance of the aggregate posterior.

All values are in nats and include every constant, so that they are meaningful as numbers (not
only as gradients). Everything is computed in float32 even under autocast.
"""
from __future__ import annotations

import functools
import math

import torch

from .._core.gaussian import LOG_2PI, log_normal  # noqa: F401  (LOG_2PI: re-exported)
from .._core.hardware import autocast_enabled

TC_METHODS = ("mss", "mws")
KERNELS = ("rbf", "imq")
DIP_KINDS = ("i", "ii")

__all__ = [
    "DIP_KINDS",
    "KERNELS",
    "TC_METHODS",
    "aggregate_posterior_log_density",
    "decompose_kl",
    "dip_covariance",
    "gaussian_log_density",
    "log_importance_weights",
    "mmd",
    "permute_dims",
    "total_correlation",
]


def _float32(fn):
    """Run ``fn`` with autocast disabled, so matmuls/cdist stay in float32 under bf16/fp16 training."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
        # devices without autocast (meta, used to check a step for host tensors) have nothing to disable
        if tensor is None or not autocast_enabled(tensor.device.type):
            return fn(*args, **kwargs)
        with torch.autocast(device_type=tensor.device.type, enabled=False):
            return fn(*args, **kwargs)

    return wrapper


# ---------------------------------------------------------------------------- densities
@_float32
def gaussian_log_density(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Elementwise ``log N(z; μ, exp(logvar))`` (broadcasting), in nats.

    ``-½ (log 2π + log σ² + (z − μ)² / σ²)``; sum over the last axis for a diagonal Gaussian.
    """
    return log_normal(z.float(), mu.float(), logvar.float())


def _check_batch(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> None:
    if z.ndim != 2 or mu.shape != z.shape or logvar.shape != z.shape:
        raise ValueError(
            "z, mu and logvar must all have shape (batch, latent_dim); got "
            f"{tuple(z.shape)}, {tuple(mu.shape)}, {tuple(logvar.shape)}."
        )


def log_importance_weights(
    batch_size: int,
    dataset_size: int,
    method: str = "mss",
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The ``(M, M)`` matrix ``log w[i, j]`` with ``q(z_i) ≈ Σ_j w[i, j] q(z_i | x_j)``.

    ``z_i`` is the sample drawn from ``q(z | x_i)``, ``M`` the batch size, ``N`` the dataset size,
    ``q(z) = (1/N) Σ_n q(z | x_n)`` the aggregate posterior.

    ``"mws"`` (minibatch-weighted sampling, Chen et al. 2018): every weight is ``1/(N·M)``. A row
    sums to ``1/N``, not 1, so the estimates of ``log q(z)`` and ``log q(z_j)`` are offset by about
    ``−log N`` each, and the MWS total correlation by about ``(D − 1)·log N`` (≈ 120 nats for
    dSprites with D = 10) even for independent codes. It is reported as is, constants included.

    ``"mss"`` (minibatch-stratified sampling, Chen et al. appendix C.2): the dataset is split into
    ``M − 1`` strata of ``N/(M − 1)`` points; the batch holds the sample's own point ``n* = x_i``
    and one point of each stratum (for the stratum of ``n*``, a point other than ``n*``). Each
    point is weighted by the fraction of the dataset it stands for::

        w[i, i]            = 1/N                          n* itself
        w[i, (i + 1) % M]  = (N − M + 1) / (N (M − 1))    the rest of n*'s stratum, N/(M−1) − 1 points
        w[i, j]            = 1/(M − 1)                    a whole stratum, for the other M − 2 points

    so every row sums to exactly 1 (``1/N + (N − M + 1)/(N(M − 1)) + (M − 2)/(M − 1) = 1``), and
    ``Σ_j w[i, j] q(z_i | x_j)`` is an unbiased estimate of ``q(z_i)`` over the stratified draw.
    (Which batch element plays "the rest of n*'s stratum" does not matter: batch elements are
    exchangeable.) The original implementation and its ports write the ``1/N`` entries with stride
    ``M`` — into column 0 — instead of ``M + 1`` — the diagonal — so each sample's own density gets
    weight ``1/(M − 1)`` instead of ``1/N``; not here.

    Built on ``device`` in ``dtype`` (default float32) from the three distinct log-weights, which
    are computed in Python's double precision and rounded once.
    """
    if method not in TC_METHODS:
        raise ValueError(f"method must be one of {TC_METHODS}, got {method!r}.")
    m, n = int(batch_size), int(dataset_size)
    if m < 1 or n < 1:
        raise ValueError(f"batch_size and dataset_size must be positive, got {batch_size} and {dataset_size}.")
    if method == "mws":
        return torch.full((m, m), -math.log(n) - math.log(m), dtype=dtype, device=device)
    if m < 2:
        raise ValueError("minibatch-stratified sampling needs a batch of at least 2 samples.")
    if n < m:
        raise ValueError(
            f"minibatch-stratified sampling needs dataset_size >= batch_size, got N={n} < M={m}; "
            "pass the size of the dataset, not of the batch."
        )
    # the logs in double precision on the host (N·(M−1) can exceed float32's exact integer range),
    # then only fills on the device: no host-built matrix to copy over
    weights = torch.full((m, m), math.log(1.0 / (m - 1)), dtype=dtype, device=device)
    stratum = math.log((n - m + 1) / (n * (m - 1)))
    weights.diagonal(1).fill_(stratum)  # w[i, i + 1] ...
    weights[m - 1, 0].fill_(stratum)  # ... and w[M − 1, 0]: the entries w[i, (i + 1) % M]
    weights.diagonal().fill_(math.log(1.0 / n))  # for m == 2 the "other" entry is the stratum entry, as it should be
    return weights


@functools.lru_cache(maxsize=16)
def _cached_log_importance_weights(
    batch_size: int, dataset_size: int, method: str, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    # read-only by the callers below; built outside inference mode and autograd so it can enter
    # any later graph
    with torch.inference_mode(False), torch.no_grad():
        return log_importance_weights(batch_size, dataset_size, method, device=device, dtype=dtype)


@_float32
def aggregate_posterior_log_density(
    z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, dataset_size: int, method: str = "mss"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch estimates of ``log q(z_i)`` (shape ``(M,)``) and ``log q(z_ij)`` (shape ``(M, D)``).

    ``q(z) = (1/N) Σ_n q(z | x_n)`` is the aggregate posterior; it is estimated from the batch's own
    posteriors with the weights of :func:`log_importance_weights`, the joint from the product of
    the per-dimension densities and each marginal from one dimension alone.
    """
    _check_batch(z, mu, logvar)
    # log q(z_i,d | x_j,d) for every pair (i, j): (M, M, D)
    log_q_pairs = gaussian_log_density(z.unsqueeze(1), mu.unsqueeze(0), logvar.unsqueeze(0))
    # (M, M), a function of the shapes alone: built once per (M, N, method, device, dtype)
    log_w = _cached_log_importance_weights(z.shape[0], int(dataset_size), method, z.device, log_q_pairs.dtype)
    log_qz = torch.logsumexp(log_w + log_q_pairs.sum(2), dim=1)
    log_qz_marginals = torch.logsumexp(log_w.unsqueeze(2) + log_q_pairs, dim=1)
    return log_qz, log_qz_marginals


@_float32
def total_correlation(
    z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, dataset_size: int, method: str = "mss"
) -> torch.Tensor:
    """Batch estimate of ``TC = KL(q(z) ‖ Π_j q(z_j)) = E_q(z)[log q(z) − Σ_j log q(z_j)]`` in nats.

    ``z`` are samples of ``q(z | x_i)`` (one per row), ``mu``/``logvar`` the posteriors of the same
    batch, ``dataset_size`` the number N of training points (never the batch size). ``method`` is
    ``"mss"`` (default; consistent: rows of weights sum to 1) or ``"mws"``. All constants are included.
    """
    log_qz, log_qz_marginals = aggregate_posterior_log_density(z, mu, logvar, dataset_size, method)
    return (log_qz - log_qz_marginals.sum(1)).mean()


@_float32
def decompose_kl(
    z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, dataset_size: int, method: str = "mss"
) -> dict[str, torch.Tensor]:
    """Chen et al.'s decomposition of the sampled KL term, estimated on one batch.

    With ``log q(z|x)``, ``log q(z)``, ``log q(z_j)`` and ``log p(z)`` evaluated at the same samples::

        mutual_info       = E[log q(z|x) − log q(z)]              (index-code MI)
        total_correlation = E[log q(z) − Σ_j log q(z_j)]
        dimwise_kl        = E[Σ_j log q(z_j) − log p(z_j)]
        kl                = E[log q(z|x) − log p(z)] = mutual_info + total_correlation + dimwise_kl

    Returns these four scalars (``kl`` is the single-sample KL estimate the three terms add up to).
    """
    log_qz, log_qz_marginals = aggregate_posterior_log_density(z, mu, logvar, dataset_size, method)
    log_qz_given_x = gaussian_log_density(z, mu, logvar).sum(1)
    zero = torch.zeros((), device=z.device)
    log_pz = gaussian_log_density(z, zero, zero).sum(1)
    log_qz_product = log_qz_marginals.sum(1)
    return {
        "mutual_info": (log_qz_given_x - log_qz).mean(),
        "total_correlation": (log_qz - log_qz_product).mean(),
        "dimwise_kl": (log_qz_product - log_pz).mean(),
        "kl": (log_qz_given_x - log_pz).mean(),
    }


# ---------------------------------------------------------------------------- FactorVAE
def permute_dims(z: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Each column of ``z`` (batch, D) permuted independently across the batch.

    Samples of ``Π_j q(z_j)`` from samples of ``q(z)`` (Kim & Mnih 2018, Algorithm 1). Vectorised:
    one ``argsort`` of uniform noise gives D independent uniform permutations.
    """
    if z.ndim != 2:
        raise ValueError(f"z must have shape (batch, latent_dim), got {tuple(z.shape)}.")
    noise = torch.rand(z.shape, generator=generator, device=z.device)
    return torch.gather(z, 0, noise.argsort(dim=0))


# ---------------------------------------------------------------------------- MMD
def _sq_dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # exact differences (not ‖a‖² + ‖b‖² − 2ab, which cancels badly in float32); finite gradients at 0
    return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist").square()


def _kernel(sq_dist: torch.Tensor, kernel: str, scale: float) -> torch.Tensor:
    if kernel == "rbf":
        return torch.exp(-sq_dist / scale)
    return scale / (scale + sq_dist)


@_float32
def mmd(x: torch.Tensor, y: torch.Tensor, kernel: str = "rbf", **kernel_params: float) -> torch.Tensor:
    """Unbiased estimate of the squared MMD between the samples ``x`` (n, D) and ``y`` (m, D).

    ``MMD²_u = Σ_{i≠i'} k(x_i, x_i')/(n(n−1)) + Σ_{j≠j'} k(y_j, y_j')/(m(m−1)) − 2 Σ_{i,j} k(x_i, y_j)/(nm)``
    (Gretton et al. 2012, eq. 3); it can be slightly negative. Kernels, with ``scale`` (default
    ``2·D``):

    * ``"rbf"``: ``k(x, y) = exp(−‖x − y‖² / scale)``, i.e. a Gaussian kernel of bandwidth
      ``σ_k² = scale / 2``; ``sigma=`` may be given instead of ``scale``;
    * ``"imq"``: ``k(x, y) = scale / (scale + ‖x − y‖²)`` (inverse multiquadratic).

    Why ``2·D``: for the IMQ kernel it is the constant ``C = 2·D·σ²`` (σ = 1) that Tolstikhin et
    al. 2018 (WAE) recommend for a N(0, I) prior. For the RBF kernel it is our choice, not theirs:
    ``2·D`` is the expected squared distance ``E‖x − y‖²`` between two independent N(0, I) draws,
    so the kernel neither saturates nor vanishes for codes near the prior.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}.")
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must be (n, D) and (m, D) with the same D, got {tuple(x.shape)} and {tuple(y.shape)}.")
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    if n < 2 or m < 2:
        raise ValueError("the unbiased MMD estimate needs at least 2 samples of each distribution.")
    params = dict(kernel_params)
    scale = params.pop("scale", None)
    if "sigma" in params:
        if kernel != "rbf" or scale is not None:
            raise ValueError("sigma= is the RBF bandwidth; give either scale= or (for rbf) sigma=, not both.")
        scale = 2.0 * float(params.pop("sigma")) ** 2
    if params:
        raise ValueError(f"unknown kernel parameters {sorted(params)}; use scale= (or sigma= for rbf).")
    scale = 2.0 * d if scale is None else float(scale)
    if not scale > 0:
        raise ValueError(f"the kernel scale must be positive, got {scale}.")
    x, y = x.float(), y.float()
    k_xx = _kernel(_sq_dist(x, x), kernel, scale)
    k_yy = _kernel(_sq_dist(y, y), kernel, scale)
    k_xy = _kernel(_sq_dist(x, y), kernel, scale)
    # the i == i' terms are excluded (that is what makes the estimate unbiased)
    sum_xx = k_xx.sum() - k_xx.diagonal().sum()
    sum_yy = k_yy.sum() - k_yy.diagonal().sum()
    return sum_xx / (n * (n - 1)) + sum_yy / (m * (m - 1)) - 2.0 * k_xy.mean()


# ---------------------------------------------------------------------------- DIP-VAE
@_float32
def dip_covariance(mu: torch.Tensor, logvar: torch.Tensor | None, kind: str) -> torch.Tensor:
    """DIP-VAE's covariance of the aggregate posterior, estimated on a batch (Kumar et al. 2018).

    * ``"i"``:  ``C = Cov_batch[μ(x)]``;
    * ``"ii"``: ``C = Cov_batch[μ(x)] + mean_batch[diag σ²(x)]`` (law of total covariance: the
      covariance of ``z ~ q(z)``).

    The batch covariance is the maximum-likelihood one, ``E[μμᵀ] − E[μ]E[μ]ᵀ`` (divided by the
    batch size M, as in Kumar et al. and disentanglement_lib), i.e. ``torch.cov(mu.T, correction=0)``.
    """
    if kind not in DIP_KINDS:
        raise ValueError(f"kind must be 'i' or 'ii', got {kind!r}.")
    if mu.ndim != 2:
        raise ValueError(f"mu must have shape (batch, latent_dim), got {tuple(mu.shape)}.")
    mu = mu.float()
    centred = mu - mu.mean(0, keepdim=True)
    cov = centred.T @ centred / mu.shape[0]
    if kind == "ii":
        if logvar is None or logvar.shape != mu.shape:
            raise ValueError("DIP-VAE-II needs logvar of the same shape as mu.")
        cov = cov + torch.diag(logvar.float().exp().mean(0))
    return cov


# ---------------------------------------------------------------------------- weak supervision
#: ``aggregate_pair`` kinds: Hosoya's average, Bouchacourt et al.'s product, disentanglement_lib's product
PAIR_AGGREGATIONS = ("gvae", "ml_vae", "ml_vae_dlib")
__all__ += ["PAIR_AGGREGATIONS", "adaptive_shared_mask", "aggregate_pair", "pair_kl"]


def _check_pair(*tensors: torch.Tensor) -> None:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ValueError(
            "mu1, logvar1, mu2 and logvar2 must all have the same shape (batch, latent_dim); got "
            + ", ".join(str(tuple(t.shape)) for t in tensors) + "."
        )


@_float32
def pair_kl(mu1: torch.Tensor, logvar1: torch.Tensor, mu2: torch.Tensor, logvar2: torch.Tensor) -> torch.Tensor:
    """Per-dimension ``δ_i = KL(N(μ1_i, σ1_i²) ‖ N(μ2_i, σ2_i²))`` in nats, shape ``(B, D)``.

    ``δ_i = ½ (log σ2² − log σ1² + (σ1² + (μ1 − μ2)²) / σ2² − 1)``: the divergence between the two
    posteriors of a pair, dimension by dimension, that Ada-GVAE / Ada-ML-VAE threshold
    (Locatello et al. 2020, "Weakly-Supervised Disentanglement Without Compromises", §4).
    disentanglement_lib's ``compute_kl`` returns twice this value (it leaves out the ½); the
    adaptive mask is the same either way, since the threshold scales with δ.
    """
    _check_pair(mu1, logvar1, mu2, logvar2)
    mu1, logvar1, mu2, logvar2 = mu1.float(), logvar1.float(), mu2.float(), logvar2.float()
    return 0.5 * (
        logvar2 - logvar1 + torch.exp(logvar1 - logvar2) + (mu1 - mu2).square() * torch.exp(-logvar2) - 1.0
    )


def adaptive_shared_mask(delta: torch.Tensor) -> torch.Tensor:
    """``True`` where a latent dimension is treated as shared by the two elements of a pair.

    Per pair (row of ``delta``, shape ``(B, D)``), the threshold is half-way between the largest and
    the smallest divergence, ``τ = (max_i δ_i + min_i δ_i) / 2``, and dimension ``i`` is shared
    when ``δ_i < τ`` (Locatello et al. 2020, §4; disentanglement_lib's ``aggregate_argmax``,
    which puts the δ into two equal-width bins over [min, max] and aggregates the lower bin). A
    dimension exactly at the threshold is not shared, and a row whose δ are all equal (e.g. two
    identical images) shares nothing: its posteriors are then left as they are.
    """
    if delta.ndim != 2:
        raise ValueError(f"delta must have shape (batch, latent_dim), got {tuple(delta.shape)}.")
    tau = 0.5 * (delta.amax(dim=1, keepdim=True) + delta.amin(dim=1, keepdim=True))
    return delta < tau


@_float32
def aggregate_pair(
    mu1: torch.Tensor, logvar1: torch.Tensor, mu2: torch.Tensor, logvar2: torch.Tensor, kind: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The aggregate ``(μ, log σ²)`` of the two posteriors of a pair, for every dimension.

    With ``σ1², σ2²`` the two variances:

    * ``"gvae"`` (Hosoya 2019, group-VAE as in disentanglement_lib): the average of the means and
      of the variances, ``μ = (μ1 + μ2)/2``, ``σ² = (σ1² + σ2²)/2``.
    * ``"ml_vae"`` (Bouchacourt et al. 2018, ML-VAE): the normalised product of the two Gaussians,
      ``σ² = σ1² σ2² / (σ1² + σ2²)``, ``μ = (μ1/σ1² + μ2/σ2²) σ²``.
    * ``"ml_vae_dlib"``: disentanglement_lib's ``MLVae``: the product's mean with twice its
      variance, ``σ² = 2 σ1² σ2² / (σ1² + σ2²)`` (the harmonic mean of the variances), so that
      two identical posteriors aggregate to themselves, as with ``"gvae"``.

    Computed in log space (``logaddexp``, a sigmoid weight for the mean), so extreme log-variances
    neither overflow nor divide by zero.
    """
    if kind not in PAIR_AGGREGATIONS:
        raise ValueError(f"kind must be one of {PAIR_AGGREGATIONS}, got {kind!r}.")
    _check_pair(mu1, logvar1, mu2, logvar2)
    mu1, logvar1, mu2, logvar2 = mu1.float(), logvar1.float(), mu2.float(), logvar2.float()
    log_sum = torch.logaddexp(logvar1, logvar2)  # log(σ1² + σ2²)
    if kind == "gvae":
        return 0.5 * (mu1 + mu2), log_sum - math.log(2.0)
    # product mean: (μ1 σ2² + μ2 σ1²) / (σ1² + σ2²), the weight of μ1 being σ2² / (σ1² + σ2²)
    weight1 = torch.sigmoid(logvar2 - logvar1)
    mu = weight1 * mu1 + (1.0 - weight1) * mu2
    logvar = logvar1 + logvar2 - log_sum
    if kind == "ml_vae_dlib":
        logvar = logvar + math.log(2.0)
    return mu, logvar
