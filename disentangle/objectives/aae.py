"""Adversarial autoencoder (Makhzani et al. 2015): match q(z) to the prior with a latent discriminator."""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F

from .._core import checks, distributed
from ..models.vae import reparameterize
from . import OBJECTIVES
from .base import Objective, detached, minimize_terms
from .discriminator import LatentDiscriminatorMixin, frozen
from .losses import Reconstruction, check_reconstruction, reconstruction_loss

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision

ENCODERS = ("deterministic", "gaussian")


@OBJECTIVES.register("aae")
class AAE(LatentDiscriminatorMixin, Objective):
    """Adversarial autoencoder: reconstruction phase, then regularisation phase.

    Makhzani, Shlens, Jaitly, Goodfellow & Frey, "Adversarial Autoencoders", arXiv:1511.05644
    (section 2). Each training step, on one batch:

    1. **Reconstruction phase** (optimizer ``"model"``: encoder + decoder): minimise ``recon``.
    2. **Regularisation phase**, on the codes ``z = q(x)`` of the updated encoder:

       a. *discriminator* (optimizer ``"discriminator"``): binary cross-entropy telling prior
          samples ``z' ~ N(0, I)`` (label 1) from ``z.detach()`` (label 0); detached, so no
          gradient reaches the encoder;
       b. *generator* (optimizer ``"generator"``: encoder only): ``adversarial_weight ·
          BCE(D(z), 1)`` (the non-saturating form of ``−log D(z)``) with D's parameters frozen.

    The encoder is deterministic by default (``z = μ(x)``, the paper's main choice; the
    log-variance head is unused); ``encoder: gaussian`` samples ``z = μ + σ·ε``. There is no KL term
    and no β.

    Parameters
    ----------
    encoder:
        ``"deterministic"`` (default) or ``"gaussian"``.
    adversarial_weight:
        Weight of the generator loss. Default 1.
    discriminator_lr, discriminator_betas:
        Adam for D. Defaults 1e-4 and [0.5, 0.9] (not from the paper, which used SGD with momentum).
    discriminator_hidden, discriminator_layers:
        D's width and depth (ReLU). Defaults 1000 and 2 (Makhzani et al.).
    reconstruction:
        ``"bernoulli"`` (default) or ``"gaussian"``.

    Terms: ``loss`` (= recon + adversarial_weight · generator_loss, what the encoder minimises over
    the step), ``recon``, ``generator_loss``, ``discriminator_loss``, ``discriminator_accuracy``
    (fraction of prior and encoded codes classified correctly).
    """

    def __init__(
        self,
        encoder: Literal["deterministic", "gaussian"] = "deterministic",
        adversarial_weight: float = 1.0,
        discriminator_lr: float = 1e-4,
        discriminator_betas: tuple[float, float] = (0.5, 0.9),
        discriminator_hidden: int = 1000,
        discriminator_layers: int = 2,
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__()
        self.encoder_kind = checks.choice("encoder", encoder, ENCODERS)
        self.adversarial_weight = checks.non_negative("adversarial_weight", adversarial_weight)
        self._init_discriminator(discriminator_lr, discriminator_betas, discriminator_hidden, discriminator_layers)
        self.reconstruction = check_reconstruction(reconstruction)

    # ------------------------------------------------------------------ setup
    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        # Makhzani et al.: one logit, ReLU
        self._setup_discriminator(model, out_features=1, activation="relu")

    def extra_optimizers(self, model, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        """D's optimizer and the generator phase's, on the encoder with the model's settings."""
        return {
            "discriminator": self._discriminator_optimizer(make_optimizer),
            "generator": make_optimizer(model.encoder.parameters()),
        }

    # ------------------------------------------------------------------ pieces
    def encode(self, model, x: torch.Tensor) -> torch.Tensor:
        """The code ``z`` of ``x``: ``μ(x)``, or a sample of ``q(z|x)`` for ``encoder: gaussian``."""
        mu, logvar = model.encode(x)
        return mu if self.encoder_kind == "deterministic" else reparameterize(mu, logvar)

    def reconstruction_terms(self, model, x: torch.Tensor) -> dict[str, torch.Tensor]:
        recon = reconstruction_loss(model.decode(self.encode(model, x)), x, self.reconstruction)
        return {"recon": recon}

    def discriminator_terms(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """D's loss on prior samples (label 1) and ``z.detach()`` (label 0); never reaches the encoder."""
        disc = self._require_discriminator()
        z = z.detach()
        prior = distributed.normal(z.shape, device=z.device, dtype=z.dtype)  # per sample, like z
        logits = disc(torch.cat([prior, z])).float().squeeze(1)
        b = z.shape[0]
        # built on the device: labels made on the host would be copied there every step
        labels = torch.cat([logits.new_ones(b), logits.new_zeros(b)])
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        accuracy = ((logits > 0).float() == labels).float().mean()
        return {"discriminator_loss": loss, "discriminator_accuracy": accuracy}

    def generator_terms(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """``BCE(D(z), 1)`` with D frozen: gradients reach the encoder only."""
        disc = self._require_discriminator()
        with frozen(disc):
            logits = disc(z).float().squeeze(1)
        return {"generator_loss": F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))}

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        """All terms on one batch without any update (for evaluation)."""
        z = self.encode(model, x)
        recon = reconstruction_loss(model.decode(z), x, self.reconstruction)
        gen = self.generator_terms(z)["generator_loss"]
        with torch.no_grad():
            d_terms = self.discriminator_terms(z)
        return {
            "loss": recon + self.adversarial_weight * gen,
            "recon": recon,
            "generator_loss": gen,
            **d_terms,
        }

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
        terms = self.reconstruction_step(model, x, optimizers["model"], precision)
        with precision.autocast():
            z = self.encode(model, x)  # the codes after the reconstruction update
        terms.update(self.discriminator_step(z.detach(), optimizers["discriminator"], precision))
        terms.update(self.generator_step(z, optimizers["generator"], precision))
        terms["loss"] = terms["recon"] + self.adversarial_weight * terms["generator_loss"]
        return terms

    def reconstruction_step(self, model, x, optimizer, precision: Precision) -> dict[str, torch.Tensor]:
        return detached(minimize_terms(precision, optimizer, lambda: self.reconstruction_terms(model, x), "recon"))

    def generator_step(self, z, optimizer, precision: Precision) -> dict[str, torch.Tensor]:
        terms = minimize_terms(
            precision, optimizer, lambda: self.generator_terms(z),
            lambda terms: self.adversarial_weight * terms["generator_loss"],
        )
        return detached(terms)
