"""DIP-VAE-I and DIP-VAE-II (Kumar et al. 2018): match the aggregate posterior's covariance to I."""
from __future__ import annotations

import torch

from .._core import checks, distributed
from . import OBJECTIVES
from .base import Objective
from .estimators import dip_covariance
from .losses import Reconstruction, check_reconstruction, kl_normal_per_dim, reconstruction_loss


def dip_regularizer(cov: torch.Tensor, lambda_od: float, lambda_d: float) -> dict[str, torch.Tensor]:
    """``λ_od·Σ_{i≠j} C_ij² + λ_d·Σ_i (C_ii − 1)²`` and its two unweighted sums."""
    diag = torch.diagonal(cov)
    off_diag = cov - torch.diag_embed(diag)
    off = off_diag.square().sum()
    on = (diag - 1.0).square().sum()
    return {"dip_regularizer": lambda_od * off + lambda_d * on, "dip_off_diag": off, "dip_diag": on}


def _dip_terms(obj, model, x: torch.Tensor, kind: str) -> dict[str, torch.Tensor]:
    out = model(x)
    recon = reconstruction_loss(out.logits, x, obj.reconstruction)
    kl_per_dim = kl_normal_per_dim(out.mu, out.logvar)
    kl = kl_per_dim.sum()
    # the covariance of the whole batch (every process's posteriors, with gradients)
    cov = dip_covariance(distributed.gather(out.mu), distributed.gather(out.logvar), kind)
    reg = dip_regularizer(cov, obj.lambda_od, obj.lambda_d)
    return {
        "loss": recon + kl + reg["dip_regularizer"],
        "recon": recon,
        "kl": kl,
        "kl_per_dim": kl_per_dim,
        **reg,
        "elbo": -(recon + kl),
    }


def _check(lambda_od: float, lambda_d: float | None, factor: float, reconstruction: str) -> tuple[float, float]:
    lambda_od = checks.non_negative("lambda_od", lambda_od)
    lambda_d = factor * lambda_od if lambda_d is None else checks.non_negative("lambda_d", lambda_d)
    check_reconstruction(reconstruction)
    return lambda_od, lambda_d


@OBJECTIVES.register("dip_vae_i")
class DIPVAEI(Objective):
    """DIP-VAE-I: ``recon + KL + λ_od·Σ_{i≠j} C_ij² + λ_d·Σ_i (C_ii − 1)²``, ``C = Cov_batch[μ(x)]``.

    Kumar, Sattigeri & Balakrishnan, "Variational Inference of Disentangled Latent Concepts from
    Unlabeled Observations", ICLR 2018, eq. 6. The DIP term is added to the full VAE loss (KL
    weight 1, no β). ``C`` is the batch covariance of the posterior means (divided by the batch
    size), see :func:`~disentangle.objectives.estimators.dip_covariance`.

    Parameters
    ----------
    lambda_od:
        Off-diagonal weight. Default 10 (Locatello et al. sweep 1, 2, 5, 10, 20, 50).
    lambda_d:
        Diagonal weight; ``null`` (default) means ``10 · lambda_od`` (Kumar et al.; Locatello et al.).
    reconstruction:
        ``"bernoulli"`` (default) or ``"gaussian"``.

    Terms: ``loss``, ``recon``, ``kl``, ``kl_per_dim``, ``dip_regularizer`` (weighted),
    ``dip_off_diag`` (``Σ_{i≠j} C_ij²``), ``dip_diag`` (``Σ_i (C_ii − 1)²``), ``elbo``.
    """

    kind = "i"

    def __init__(self, lambda_od: float = 10.0, lambda_d: float | None = None, reconstruction: Reconstruction = "bernoulli") -> None:
        super().__init__()
        self.lambda_od, self.lambda_d = _check(lambda_od, lambda_d, 10.0, reconstruction)
        self.reconstruction = reconstruction

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        return _dip_terms(self, model, x, "i")


@OBJECTIVES.register("dip_vae_ii")
class DIPVAEII(Objective):
    """DIP-VAE-II: as DIP-VAE-I with ``C = Cov_batch[μ(x)] + mean_batch[diag σ²(x)]``.

    Kumar et al. 2018, eq. 7: ``C`` is then the covariance of ``z ~ q(z)`` itself (law of total
    covariance), estimated on the batch.

    Parameters
    ----------
    lambda_od:
        Off-diagonal weight. Default 10 (Locatello et al. sweep 1, 2, 5, 10, 20, 50).
    lambda_d:
        Diagonal weight; ``null`` (default) means ``lambda_od`` (Kumar et al.; Locatello et al.).
    reconstruction:
        ``"bernoulli"`` (default) or ``"gaussian"``.

    Terms: as DIP-VAE-I.
    """

    kind = "ii"

    def __init__(self, lambda_od: float = 10.0, lambda_d: float | None = None, reconstruction: Reconstruction = "bernoulli") -> None:
        super().__init__()
        self.lambda_od, self.lambda_d = _check(lambda_od, lambda_d, 1.0, reconstruction)
        self.reconstruction = reconstruction

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        return _dip_terms(self, model, x, "ii")
