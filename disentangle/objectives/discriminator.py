"""Small networks and helpers shared by the adversarial objectives (FactorVAE, AAE).

* :class:`MLPDiscriminator` — a fully connected classifier on latent codes.
* :func:`frozen` — a context in which a module's parameters do not require gradients, so a loss
  computed through it sends gradients only to its *inputs* (the encoder), never to it.
* :class:`LatentDiscriminatorMixin` — the discriminator's settings, construction at ``setup``, its
  own optimizer and its update step, shared by the objectives that train one.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from .._core import checks
from .base import detached, minimize_terms

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision

ACTIVATIONS = ("leaky_relu", "relu")


class MLPDiscriminator(nn.Module):
    """``layers`` hidden layers of ``hidden`` units, then a linear layer to ``out_features`` logits.

    ``MLPDiscriminator(10, hidden=1000, layers=6, out_features=2, activation="leaky_relu")`` is
    Kim & Mnih's FactorVAE discriminator (6 × 1000, LeakyReLU 0.2, 2 logits);
    ``MLPDiscriminator(10, 1000, 2, 1, "relu")`` is Makhzani et al.'s AAE discriminator.
    """

    def __init__(
        self,
        in_features: int,
        hidden: int = 1000,
        layers: int = 6,
        out_features: int = 2,
        activation: str = "leaky_relu",
        negative_slope: float = 0.2,
    ) -> None:
        super().__init__()
        checks.positive_int("in_features", in_features)
        checks.positive_int("hidden", hidden)
        checks.integer("layers", layers, minimum=0)
        checks.positive_int("out_features", out_features)
        checks.choice("activation", activation, ACTIVATIONS)
        mods: list[nn.Module] = []
        prev = in_features
        for _ in range(layers):
            mods.append(nn.Linear(prev, hidden))
            mods.append(nn.LeakyReLU(negative_slope) if activation == "leaky_relu" else nn.ReLU())
            prev = hidden
        mods.append(nn.Linear(prev, out_features))
        self.net = nn.Sequential(*mods)
        self.in_features = int(in_features)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """Within the block, ``module``'s parameters have ``requires_grad=False``.

    A loss computed through ``module`` inside the block back-propagates into the module's inputs
    but accumulates no gradient in (and therefore cannot step) the module itself.
    """
    flags = [(p, p.requires_grad) for p in module.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield module
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


class LatentDiscriminatorMixin:
    """For an objective that trains a discriminator on latent codes with its own optimizer.

    Call :meth:`_init_discriminator` in ``__init__`` (it validates and stores ``discriminator_lr``,
    ``discriminator_betas``, ``discriminator_hidden`` and ``discriminator_layers``) and
    :meth:`_setup_discriminator` in ``setup`` (it builds D for the model's latent size on the
    model's device, keeping an existing D of the right size, e.g. one restored from a checkpoint).
    :meth:`extra_optimizers` declares D's optimizer as ``"discriminator"`` and
    :meth:`discriminator_step` updates D with the objective's ``discriminator_terms(z)``.
    """

    discriminator: MLPDiscriminator | None

    def _init_discriminator(self, lr: float, betas: Sequence[float], hidden: int, layers: int) -> None:
        self.discriminator_lr = checks.positive("discriminator_lr", lr)
        self.discriminator_betas = checks.adam_betas("discriminator_betas", betas)
        self.discriminator_hidden = checks.positive_int("discriminator_hidden", hidden)
        self.discriminator_layers = checks.positive_int("discriminator_layers", layers)
        self.discriminator = None

    def _setup_discriminator(
        self, model: nn.Module, out_features: int, activation: str, negative_slope: float = 0.2
    ) -> None:
        latent_dim = int(model.latent_dim)
        if self.discriminator is None or self.discriminator.in_features != latent_dim:
            self.discriminator = MLPDiscriminator(
                latent_dim, self.discriminator_hidden, self.discriminator_layers, out_features,
                activation, negative_slope,
            )
        self.discriminator.to(next(model.parameters()).device)

    def _require_discriminator(self) -> MLPDiscriminator:
        if self.discriminator is None:
            raise RuntimeError(
                f"{type(self).__name__} needs setup(model=..., dataset_size=...) before use (it builds D there)."
            )
        return self.discriminator

    def _discriminator_optimizer(self, make_optimizer) -> torch.optim.Optimizer:
        """D's optimizer from the run's factory, with D's own learning rate and betas and no weight decay."""
        return make_optimizer(
            self._require_discriminator().parameters(),
            lr=self.discriminator_lr, betas=self.discriminator_betas, weight_decay=0.0,
        )

    def extra_optimizers(self, model: nn.Module, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        return {"discriminator": self._discriminator_optimizer(make_optimizer)}

    def discriminator_step(
        self, z: torch.Tensor, optimizer: torch.optim.Optimizer, precision: Precision
    ) -> dict[str, torch.Tensor]:
        """One update of D on detached codes ``z``; returns its (detached) terms.

        ``discriminator_terms(z)`` (the objective's) gives ``discriminator_loss``, a mean over this
        process's rows; the gradients are averaged over processes by ``precision`` before the step.
        """
        terms = minimize_terms(precision, optimizer, lambda: self.discriminator_terms(z.detach()), "discriminator_loss")
        return detached(terms)
