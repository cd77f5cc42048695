"""β-TCVAE (Chen et al. 2018): the KL split into index-code MI, total correlation and dim-wise KL."""
from __future__ import annotations

from typing import Literal

import torch

from .._core import checks, distributed
from . import OBJECTIVES
from .base import Objective
from .estimators import TC_METHODS, decompose_kl
from .losses import Reconstruction, check_reconstruction, kl_normal_per_dim, reconstruction_loss


@OBJECTIVES.register("beta_tcvae")
class BetaTCVAE(Objective):
    """β-TCVAE: ``recon + α·MI + β·TC + γ·dimKL``.

    Chen, Li, Grosse & Duvenaud, "Isolating Sources of Disentanglement in Variational
    Autoencoders", NeurIPS 2018, eq. 4. With ``z ~ q(z|x)`` one sample per data point::

        MI     = E[log q(z|x) − log q(z)]
        TC     = E[log q(z) − Σ_j log q(z_j)]
        dimKL  = E[Σ_j log q(z_j) − log p(z_j)]

    and ``MI + TC + dimKL = E[log q(z|x) − log p(z)]`` (the single-sample KL). ``log q(z)`` and
    ``log q(z_j)`` are estimated on the batch with minibatch-stratified (``"mss"``, default) or
    minibatch-weighted (``"mws"``) sampling, see
    :func:`~disentangle.objectives.estimators.log_importance_weights`; both need the dataset size
    N, which the trainer passes to :meth:`setup` from the dataset (737,280 for dSprites) — never
    the batch size. With ``alpha = gamma = 1`` the loss is ``recon + KL_sampled + (β − 1)·TC``, the
    usual β-TCVAE. In a multi-process run the estimates use the codes and posteriors of the whole
    batch (gathered from every process, with gradients), so M is the global batch size.

    Parameters
    ----------
    beta:
        TC weight. Default 6 (one value of Locatello et al.'s sweep 1, 2, 4, 6, 8, 10).
    alpha:
        Index-code MI weight. Default 1.
    gamma:
        Dimension-wise KL weight. Default 1.
    estimator:
        ``"mss"`` (default) or ``"mws"``.
    reconstruction:
        ``"bernoulli"`` (default) or ``"gaussian"``.

    Terms: ``loss``, ``recon``, ``mutual_info``, ``total_correlation``, ``dimwise_kl``,
    ``kl_sampled`` (their sum), ``kl`` and ``kl_per_dim`` (analytic, for comparison with the other
    objectives), ``elbo`` (= −(recon + analytic kl)). All values in nats, constants included.
    """

    def __init__(
        self,
        beta: float = 6.0,
        alpha: float = 1.0,
        gamma: float = 1.0,
        estimator: Literal["mss", "mws"] = "mss",
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__()
        self.alpha = checks.non_negative("alpha", alpha)
        self.beta = checks.non_negative("beta", beta)
        self.gamma = checks.non_negative("gamma", gamma)
        self.estimator = checks.choice("estimator", estimator, TC_METHODS)
        self.reconstruction = check_reconstruction(reconstruction)

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        if self.dataset_size is None:
            raise RuntimeError(
                "β-TCVAE needs the dataset size N: call objective.setup(model=..., dataset_size=len(dataset)) "
                "first (the trainer does)."
            )
        out = model(x)
        recon = reconstruction_loss(out.logits, x, self.reconstruction)
        # q(z) is estimated over the whole batch: every process's codes and posteriors
        z, mu, logvar = (distributed.gather(t) for t in (out.z, out.mu, out.logvar))
        parts = decompose_kl(z, mu, logvar, self.dataset_size, self.estimator)
        kl_per_dim = kl_normal_per_dim(out.mu, out.logvar)
        kl = kl_per_dim.sum()
        loss = (
            recon
            + self.alpha * parts["mutual_info"]
            + self.beta * parts["total_correlation"]
            + self.gamma * parts["dimwise_kl"]
        )
        return {
            "loss": loss,
            "recon": recon,
            "mutual_info": parts["mutual_info"],
            "total_correlation": parts["total_correlation"],
            "dimwise_kl": parts["dimwise_kl"],
            "kl_sampled": parts["kl"],
            "kl": kl,
            "kl_per_dim": kl_per_dim,
            "elbo": -(recon + kl),
        }
