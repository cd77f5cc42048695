"""Small networks and helpers shared by the adversarial objectives (FactorVAE, AAE).

* :class:`MLPDiscriminator` — a fully connected classifier on latent codes.
* :func:`frozen` — a context in which a module's parameters do not require gradients, so a loss
  computed through it sends gradients only to its *inputs* (the encoder), never to it.
* :func:`adam_betas` — validation of a ``[β1, β2]`` pair from the config.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

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
        if in_features < 1 or hidden < 1 or layers < 0 or out_features < 1:
            raise ValueError(
                f"invalid discriminator sizes: in_features={in_features}, hidden={hidden}, "
                f"layers={layers}, out_features={out_features}."
            )
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}.")
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


def adam_betas(name: str, betas: Sequence[float]) -> tuple[float, float]:
    """``betas`` as a validated ``(β1, β2)`` tuple, each in [0, 1)."""
    values = tuple(float(b) for b in betas)
    if len(values) != 2 or not all(0.0 <= b < 1.0 for b in values):
        raise ValueError(f"{name} must be two numbers in [0, 1) (Adam's β1, β2), got {list(betas)}.")
    return values  # type: ignore[return-value]


def positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value}.")
    return float(value)


def non_negative(name: str, value: float) -> float:
    if not value >= 0:
        raise ValueError(f"{name} must be non-negative, got {value}.")
    return float(value)
