"""Reconstruction log-likelihoods and the Gaussian KL, shared by all objectives.

Conventions (as in Locatello et al. 2019 / disentanglement_lib): the decoder outputs logits;
every loss is **summed over pixels and latent dimensions and averaged over the batch**.
"""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from .. import _compat
from .._core import checks

__getattr__ = _compat.module_getattr(__name__)  # reparameterize, now in disentangle.models.vae

RECONSTRUCTIONS = ("bernoulli", "gaussian")
#: the decoder likelihood of an objective's ``reconstruction`` parameter
Reconstruction = Literal["bernoulli", "gaussian"]


def check_reconstruction(value: str) -> str:
    """``value`` if it is one of :data:`RECONSTRUCTIONS`, else a ``ConfigError`` with the choices."""
    return checks.choice("reconstruction", value, RECONSTRUCTIONS)


def reconstruction_loss(logits: torch.Tensor, x: torch.Tensor, distribution: str = "bernoulli") -> torch.Tensor:
    """Negative log-likelihood of ``x`` under the decoder, summed over pixels, mean over batch.

    * ``bernoulli``: ``BCEWithLogits(logits, x)`` — exact NLL for binary ``x`` and the usual
      (un-normalised) choice for grey-level ``x`` in [0, 1].
    * ``gaussian``: ``Σ (x − sigmoid(logits))²``, i.e. the NLL of a Gaussian with mean
      ``sigmoid(logits)`` and variance 1/2 up to an additive constant (disentanglement_lib's
      ``l2`` loss).
    """
    if logits.shape != x.shape:
        raise ValueError(f"decoder output {tuple(logits.shape)} does not match input {tuple(x.shape)}.")
    logits = logits.float()
    if distribution == "bernoulli":
        per_pixel = F.binary_cross_entropy_with_logits(logits, x, reduction="none")
    elif distribution == "gaussian":
        per_pixel = (torch.sigmoid(logits) - x).square()
    else:
        check_reconstruction(distribution)
        raise AssertionError  # unreachable: check_reconstruction raised
    return per_pixel.flatten(1).sum(1).mean()


def kl_normal_per_dim(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Per-dimension ``KL(N(μ, σ²) ‖ N(0, 1)) = ½(μ² + σ² − log σ² − 1)``, averaged over the batch.

    Returns a vector of length ``latent_dim``; its sum is the usual KL term.
    """
    mu, logvar = mu.float(), logvar.float()
    return 0.5 * (mu.square() + logvar.exp() - logvar - 1.0).mean(0)


def beta_vae_terms(
    logits: torch.Tensor,
    x: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    beta: float,
    distribution: str = "bernoulli",
) -> dict[str, torch.Tensor]:
    """The β-VAE terms ``loss = recon + β·KL``, ``recon``, ``kl``, ``kl_per_dim`` and ``elbo = −(recon + KL)``
    for decoder ``logits`` of ``x`` and the posterior ``N(mu, exp(logvar))`` (batch means, in nats)."""
    recon = reconstruction_loss(logits, x, distribution)
    kl_per_dim = kl_normal_per_dim(mu, logvar)
    kl = kl_per_dim.sum()
    return {"loss": recon + beta * kl, "recon": recon, "kl": kl, "kl_per_dim": kl_per_dim, "elbo": -(recon + kl)}
