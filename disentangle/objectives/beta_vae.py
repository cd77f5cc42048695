"""β-VAE (Higgins et al. 2017); β = 1 is the plain VAE (Kingma & Welling 2014)."""
from __future__ import annotations

import torch

from .._core import checks
from . import OBJECTIVES
from .base import Objective
from .losses import Reconstruction, beta_vae_terms, check_reconstruction


@OBJECTIVES.register("beta_vae")
class BetaVAE(Objective):
    """β-VAE: ``recon + β · KL(q(z|x) ‖ N(0, I))``.

    Higgins et al., "β-VAE: Learning Basic Visual Concepts with a Constrained Variational
    Framework", ICLR 2017. ``recon`` is the decoder NLL summed over pixels (``bernoulli`` or
    ``gaussian``, see :func:`~disentangle.objectives.losses.reconstruction_loss`) and the KL is
    analytic, summed over latent dimensions; both are averaged over the batch.

    Parameters
    ----------
    beta:
        KL weight; 1 gives the VAE. Default 1 (Locatello et al. sweep 1, 2, 4, 6, 8, 16).
    reconstruction:
        ``"bernoulli"`` (default) or ``"gaussian"``.

    Terms: ``loss``, ``recon``, ``kl``, ``kl_per_dim``, ``elbo`` (= −(recon + kl)).
    """

    def __init__(self, beta: float = 1.0, reconstruction: Reconstruction = "bernoulli") -> None:
        super().__init__()
        self.beta = checks.non_negative("beta", beta)
        self.reconstruction = check_reconstruction(reconstruction)

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        out = model(x)
        return beta_vae_terms(out.logits, x, out.mu, out.logvar, self.beta, self.reconstruction)
