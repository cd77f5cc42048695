from __future__ import annotations

import torch
from torch import nn

from .._core.hardware import autocast_enabled
from ..errors import ConfigError


class GaussianHead(nn.Module):
    """Linear heads for the posterior mean and log-variance of a diagonal Gaussian.

    Always computed in float32, also under bf16/fp16 autocast: the means and log-variances (and the
    sample ``z`` made from them) feed the KL, the total-correlation estimators and the pair
    divergences, which compare codes at the scale of the posterior's σ; rounded to bf16's 8 bits
    they lose that scale (``benchmarks/bf16_precision.py``). In fp32 training this changes nothing.
    """

    def __init__(self, in_features: int, latent_dim: int) -> None:
        super().__init__()
        self.mean = nn.Linear(in_features, latent_dim)
        self.logvar = nn.Linear(in_features, latent_dim)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        device = h.device.type
        if autocast_enabled(device):
            with torch.autocast(device_type=device, enabled=False):
                h = h.float()
                return self.mean(h), self.logvar(h)
        return self.mean(h), self.logvar(h)


def check_image_shape(name: str, image_shape: tuple[int, int, int], size: int = 64) -> tuple[int, int, int]:
    if len(image_shape) != 3 or tuple(image_shape[1:]) != (size, size):
        raise ConfigError(
            f"model.backbone is '{name}', which needs {size}×{size} images (C, {size}, {size}); this dataset "
            f"gives {tuple(image_shape)}. Use model.backbone: mlp, or a dataset with {size}×{size} images."
        )
    return tuple(int(v) for v in image_shape)  # type: ignore[return-value]
