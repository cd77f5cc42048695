from __future__ import annotations

import torch
from torch import nn

from ..errors import ConfigError


class GaussianHead(nn.Module):
    """Linear heads for the posterior mean and log-variance of a diagonal Gaussian."""

    def __init__(self, in_features: int, latent_dim: int) -> None:
        super().__init__()
        self.mean = nn.Linear(in_features, latent_dim)
        self.logvar = nn.Linear(in_features, latent_dim)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mean(h), self.logvar(h)


def check_image_shape(name: str, image_shape: tuple[int, int, int], size: int = 64) -> tuple[int, int, int]:
    if len(image_shape) != 3 or tuple(image_shape[1:]) != (size, size):
        raise ConfigError(
            f"model.backbone is '{name}', which needs {size}×{size} images (C, {size}, {size}); this dataset "
            f"gives {tuple(image_shape)}. Use model.backbone: mlp, or a dataset with {size}×{size} images."
        )
    return tuple(int(v) for v in image_shape)  # type: ignore[return-value]
