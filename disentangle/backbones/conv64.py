"""Convolutional encoder/decoder pairs for 64×64 images.

``conv64``: the architecture of Locatello et al. 2019 (disentanglement_lib's ``conv_encoder`` /
``deconv_decoder``), itself from Higgins et al. 2017:

* encoder: Conv 32 k4 s2 → Conv 32 k4 s2 → Conv 64 k2 s2 → Conv 64 k2 s2 (ReLU, TensorFlow
  "same" padding) → flatten 4·4·64 → FC 256 ReLU → linear heads μ, log σ²;
* decoder: FC 256 ReLU → FC 1024 ReLU → reshape 64×4×4 → ConvT 64 → 32 → 32 → C (k4 s2 p1,
  ReLU between) → logits.

``conv64_burgess``: Burgess et al. 2018 ("Understanding disentangling in β-VAE"): four
Conv 32 k4 s2, FC 256 → FC 256 → heads; mirrored decoder with kernel 4 throughout.
"""
from __future__ import annotations

import torch
from torch import nn

from . import BACKBONES
from ._heads import GaussianHead, check_image_shape


def _same_conv(in_ch: int, out_ch: int, kernel: int) -> nn.Conv2d:
    """Stride-2 convolution matching TensorFlow's "same" padding on even inputs.

    TF pads ``kernel - 2`` pixels in total for stride 2, split evenly (1/1 for k=4, 0 for k=2),
    so the spatial size halves exactly: 64 → 32 → 16 → 8 → 4.
    """
    return nn.Conv2d(in_ch, out_ch, kernel, stride=2, padding=(kernel - 2) // 2)


class ConvEncoder(nn.Module):
    def __init__(self, in_channels: int, latent_dim: int, filters, kernels, hidden: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        ch = in_channels
        for f, k in zip(filters, kernels):
            layers += [_same_conv(ch, f, k), nn.ReLU(inplace=True)]
            ch = f
        self.convs = nn.Sequential(*layers)
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(ch * 4 * 4, hidden), nn.ReLU(inplace=True))
        self.head = GaussianHead(hidden, latent_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(self.fc(self.convs(x)))


class ConvDecoder(nn.Module):
    def __init__(self, out_channels: int, latent_dim: int, fc_sizes, channels) -> None:
        super().__init__()
        fcs: list[nn.Module] = []
        prev = latent_dim
        for size in fc_sizes:
            fcs += [nn.Linear(prev, size), nn.ReLU(inplace=True)]
            prev = size
        self.fc = nn.Sequential(*fcs)
        self.start_channels = channels[0]
        deconvs: list[nn.Module] = []
        chans = list(channels) + [out_channels]
        for i, (a, b) in enumerate(zip(chans[:-1], chans[1:])):
            deconvs.append(nn.ConvTranspose2d(a, b, 4, stride=2, padding=1))
            if i < len(chans) - 2:
                deconvs.append(nn.ReLU(inplace=True))
        self.deconvs = nn.Sequential(*deconvs)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.fc(z).view(z.shape[0], self.start_channels, 4, 4)
        return self.deconvs(h)


@BACKBONES.register("conv64")
def conv64(image_shape: tuple[int, int, int], latent_dim: int) -> tuple[nn.Module, nn.Module]:
    """Locatello et al. 2019's conv encoder/decoder for 64×64 images with 1 or 3 channels."""
    c, _, _ = check_image_shape("conv64", image_shape)
    encoder = ConvEncoder(c, latent_dim, filters=(32, 32, 64, 64), kernels=(4, 4, 2, 2), hidden=256)
    decoder = ConvDecoder(c, latent_dim, fc_sizes=(256, 1024), channels=(64, 64, 32, 32))
    return encoder, decoder


@BACKBONES.register("conv64_burgess")
def conv64_burgess(image_shape: tuple[int, int, int], latent_dim: int) -> tuple[nn.Module, nn.Module]:
    """Burgess et al. 2018's encoder/decoder: 4×(32 filters, kernel 4, stride 2), FC 256-256."""
    c, _, _ = check_image_shape("conv64_burgess", image_shape)
    encoder = ConvEncoder(c, latent_dim, filters=(32, 32, 32, 32), kernels=(4, 4, 4, 4), hidden=256)
    encoder.fc.append(nn.Linear(256, 256))
    encoder.fc.append(nn.ReLU(inplace=True))
    decoder = ConvDecoder(c, latent_dim, fc_sizes=(256, 256, 512), channels=(32, 32, 32, 32))
    return encoder, decoder
