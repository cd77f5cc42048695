"""FactorVAE (Kim & Mnih 2018): VAE + γ · TC, TC estimated by a discriminator (density-ratio trick)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from .._core import checks, distributed
from . import OBJECTIVES
from .base import Objective, detached, minimize_terms
from .discriminator import LatentDiscriminatorMixin, frozen
from .estimators import permute_dims
from .losses import Reconstruction, check_reconstruction, kl_normal_per_dim, reconstruction_loss

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision


@OBJECTIVES.register("factor_vae")
class FactorVAE(LatentDiscriminatorMixin, Objective):
    """FactorVAE: ``recon + KL + γ · TC`` with ``TC ≈ E_q(z)[D₀(z) − D₁(z)]``.

    Kim & Mnih, "Disentangling by Factorising", ICML 2018 (eq. 2 and Algorithm 1). ``D`` is a
    classifier with two logits, class 0 = "a sample of q(z)" and class 1 = "a sample of
    Π_j q(z_j)"; at its optimum ``D₀(z) − D₁(z) = log q(z)/Π_j q(z_j)``, so the batch mean of the
    logit difference estimates the total correlation in nats (the density-ratio trick).

    One training step (:meth:`train_step`), in this order:

    1. **VAE step** (optimizer ``"model"``): ``recon + KL + γ·TC`` with ``TC`` from ``D(z)``;
       ``D``'s parameters are frozen, so this loss moves the encoder/decoder only.
    2. **D step** (optimizer ``"discriminator"``, Adam lr 1e-4, β 0.5/0.9 by default): cross-entropy
       on ``z.detach()`` (class 0) and ``permute_dims(z.detach())`` (class 1), the codes of the
       same batch with each dimension permuted independently across it (as in disentanglement_lib;
       Kim & Mnih permute a second batch). Only detached codes enter, so it sends no gradient into
       the encoder. In a multi-process run the permutation is over the whole (gathered) batch.

    One step is one update of each network. disentanglement_lib's FactorVAE passes the global step
    to both optimizers' ``minimize`` (``methods/unsupervised/vae.py``), so each of its training
    iterations advances it by 2 and its ``model.training_steps = 300000`` stops after 150,000
    iterations: Locatello et al.'s FactorVAE models had 150,000 updates of each network, the other
    methods 300,000. Our recipes keep ``train.steps: 300000``, the schedule the paper states;
    ``train.steps=150000`` trains as many updates as the reference code did.

    The KL weight is 1 (the paper has no β). The discriminator is a submodule, built in
    :meth:`setup` once the latent size is known; it is saved with ``objective.state_dict()`` and its
    optimizer state by the trainer.

    Parameters
    ----------
    gamma:
        TC weight. Default 30 (one value of Locatello et al.'s sweep 10, 20, 30, 40, 50, 100).
    discriminator_lr, discriminator_betas:
        Adam for D. Defaults 1e-4 and [0.5, 0.9] (Kim & Mnih; Locatello et al.).
    discriminator_hidden, discriminator_layers:
        D's width and number of hidden layers. Defaults 1000 and 6 (LeakyReLU 0.2, 2 logits).
    reconstruction:
        ``"bernoulli"`` (default) or ``"gaussian"``.

    Terms: ``loss``, ``recon``, ``kl``, ``kl_per_dim``, ``tc`` (the discriminator's TC estimate,
    nats), ``elbo``, and from the D step ``discriminator_loss`` and ``discriminator_accuracy``
    (fraction of the 2·B codes, real and permuted, classified correctly).
    """

    def __init__(
        self,
        gamma: float = 30.0,
        discriminator_lr: float = 1e-4,
        discriminator_betas: tuple[float, float] = (0.5, 0.9),
        discriminator_hidden: int = 1000,
        discriminator_layers: int = 6,
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__()
        self.gamma = checks.non_negative("gamma", gamma)
        self._init_discriminator(discriminator_lr, discriminator_betas, discriminator_hidden, discriminator_layers)
        self.reconstruction = check_reconstruction(reconstruction)

    # ------------------------------------------------------------------ setup
    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        # Kim & Mnih: two logits, LeakyReLU 0.2
        self._setup_discriminator(model, out_features=2, activation="leaky_relu", negative_slope=0.2)

    # ------------------------------------------------------------------ losses
    def vae_terms(self, model, x: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The VAE step's terms and the sampled codes ``z`` (with their graph)."""
        disc = self._require_discriminator()
        out = model(x)
        recon = reconstruction_loss(out.logits, x, self.reconstruction)
        kl_per_dim = kl_normal_per_dim(out.mu, out.logvar)
        kl = kl_per_dim.sum()
        with frozen(disc):  # gradients reach the encoder through z, never D's parameters
            logits = disc(out.z).float()
        tc = (logits[:, 0] - logits[:, 1]).mean()
        terms = {
            "loss": recon + kl + self.gamma * tc,
            "recon": recon,
            "kl": kl,
            "kl_per_dim": kl_per_dim,
            "tc": tc,
            "elbo": -(recon + kl),
        }
        return terms, out.z

    def discriminator_terms(self, z: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """D's loss and accuracy on codes ``z`` (class 0) and their permutation (class 1).

        ``z`` is detached here, whatever the caller passes: this loss never reaches the encoder.
        The permutation is drawn from ``generator``, else the trainer's step generator, over the
        codes of the whole batch (gathered from every process); this process keeps its rows.
        """
        disc = self._require_discriminator()
        z = z.detach()
        generator = generator if generator is not None else distributed.global_generator()
        z_perm = distributed.shard_batch(permute_dims(distributed.gather_detached(z), generator))
        logits = disc(torch.cat([z, z_perm])).float()
        b = z.shape[0]
        # built on the device: labels made on the host would be copied there every step
        labels = torch.cat([logits.new_zeros(b, dtype=torch.long), logits.new_ones(b, dtype=torch.long)])
        # ½ E_q(z)[−log D₀] + ½ E_Πq(z_j)[−log D₁]  (equal halves, so the plain mean)
        loss = F.cross_entropy(logits, labels)
        accuracy = (logits.argmax(1) == labels).float().mean()
        return {"discriminator_loss": loss, "discriminator_accuracy": accuracy}

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        terms, z = self.vae_terms(model, x)
        with torch.no_grad():
            d_terms = self.discriminator_terms(z)
        return {**terms, **detached(d_terms)}

    # ------------------------------------------------------------------ training
    def train_step(
        self,
        model,
        x: torch.Tensor,
        *,
        step: int,
        optimizers: dict[str, torch.optim.Optimizer],
        precision: Precision,
    ) -> dict[str, torch.Tensor]:
        terms, z = minimize_terms(precision, optimizers["model"], lambda: self.vae_terms(model, x), lambda out: out[0]["loss"])
        terms.update(self.discriminator_step(z.detach(), optimizers["discriminator"], precision))
        return detached(terms)
