"""Fully connected encoder/decoder for any input shape (Locatello et al. 2019's ``fc`` architecture)."""
from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from .._core import checks
from . import BACKBONES
from ._heads import GaussianHead


def _mlp(sizes: list[int], activation: str = "relu") -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU(inplace=True) if activation == "relu" else nn.Tanh()]
    return nn.Sequential(*layers)


class MLPEncoder(nn.Module):
    def __init__(self, in_features: int, latent_dim: int, hidden: list[int]) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), _mlp([in_features, *hidden]))
        self.head = GaussianHead(hidden[-1] if hidden else in_features, latent_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(self.body(x))


class MLPDecoder(nn.Module):
    """Fully connected decoder: ``hidden`` layers with ``activation``, then a linear layer to logits."""

    def __init__(
        self, image_shape: tuple[int, ...], latent_dim: int, hidden: list[int], activation: str = "relu"
    ) -> None:
        super().__init__()
        self.image_shape = tuple(image_shape)
        last = hidden[-1] if hidden else latent_dim
        self.body = nn.Sequential(_mlp([latent_dim, *hidden], activation), nn.Linear(last, math.prod(image_shape)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.body(z).view(z.shape[0], *self.image_shape)


#: disentanglement_lib's ``fc_decoder``: three 1200-unit layers with tanh
LOCATELLO_DECODER = ([1200, 1200, 1200], "tanh")
DECODERS = ("mirror", "locatello")


def _check_mlp_params(hidden_sizes: list[int] = [1200, 1200], decoder: str = "mirror") -> list[int]:  # noqa: B006 (never mutated)
    hidden = list(hidden_sizes)
    for h in hidden:
        checks.positive_int("hidden_sizes", h)
    checks.choice("decoder", decoder, DECODERS)
    return [int(h) for h in hidden]


@BACKBONES.register("mlp")
def mlp(
    image_shape: tuple[int, int, int],
    latent_dim: int,
    hidden_sizes: list[int] = [1200, 1200],  # noqa: B006 (the config schema's default, as YAML writes it; never mutated)
    decoder: Literal["mirror", "locatello"] = "mirror",
) -> tuple[nn.Module, nn.Module]:
    """MLP encoder/decoder for any input shape.

    The encoder has ``hidden_sizes`` ReLU layers, then linear heads for the posterior mean and
    log-variance; with the default 1200-1200 it is Locatello et al. 2019's fully connected encoder
    (disentanglement_lib's ``fc_encoder``). The decoder is chosen by ``decoder``:

    * ``"mirror"`` (default): ``hidden_sizes`` reversed, ReLU — a symmetric decoder;
    * ``"locatello"``: disentanglement_lib's ``fc_decoder``, 1200-1200-1200 with tanh, as in
      Locatello et al. 2019 (``hidden_sizes`` then only shapes the encoder).
    """
    hidden = _check_mlp_params(hidden_sizes, decoder)
    if decoder == "locatello":
        dec_hidden, activation = LOCATELLO_DECODER
        dec = MLPDecoder(image_shape, latent_dim, list(dec_hidden), activation)
    else:
        dec = MLPDecoder(image_shape, latent_dim, hidden[::-1], "relu")
    return MLPEncoder(math.prod(image_shape), latent_dim, hidden), dec


mlp.validate_params = _check_mlp_params  # type: ignore[attr-defined]  # config-time value checks
