"""Fully connected encoder/decoder for any input shape."""
from __future__ import annotations

import math

import torch
from torch import nn

from . import BACKBONES
from ._heads import GaussianHead


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class MLPEncoder(nn.Module):
    def __init__(self, in_features: int, latent_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), _mlp([in_features, *hidden]))
        self.head = GaussianHead(hidden[-1] if hidden else in_features, latent_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(self.body(x))


class MLPDecoder(nn.Module):
    def __init__(self, image_shape: tuple[int, ...], latent_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.image_shape = tuple(image_shape)
        last = hidden[-1] if hidden else latent_dim
        self.body = nn.Sequential(_mlp([latent_dim, *hidden]), nn.Linear(last, math.prod(image_shape)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.body(z).view(z.shape[0], *self.image_shape)


@BACKBONES.register("mlp")
def mlp(
    image_shape: tuple[int, int, int], latent_dim: int, hidden_sizes: list[int] = [1200, 1200]
) -> tuple[nn.Module, nn.Module]:
    """MLP encoder/decoder; ``hidden_sizes`` for the encoder, reversed for the decoder.

    The default 1200-1200 (ReLU) is the fully connected architecture of Locatello et al. 2019.
    """
    hidden = [int(h) for h in hidden_sizes]
    if any(h < 1 for h in hidden):
        raise ValueError(f"hidden_sizes must be positive integers, got {hidden_sizes}.")
    return (
        MLPEncoder(math.prod(image_shape), latent_dim, hidden),
        MLPDecoder(image_shape, latent_dim, hidden[::-1]),
    )
