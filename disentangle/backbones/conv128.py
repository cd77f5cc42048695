"""Convolutional encoder/decoder for 128×128 images: ``model.backbone: conv128``.

``conv64`` (disentanglement_lib's ``conv_encoder`` / ``deconv_decoder``) with one more stride-2
stage in front, so that a 128×128 image reaches the same 4×4×64 feature map and the same dense
head:

* encoder: Conv 32 → Conv 32 → Conv 64 → Conv 64 → Conv 64, every one 4×4 stride 2 with
  TensorFlow "same" padding (1 pixel each side: 128 → 64 → 32 → 16 → 8 → 4), ReLU → flatten
  4·4·64 → FC 256 ReLU → linear heads μ, log σ²;
* decoder, mirrored: FC 256 ReLU → FC 1024 ReLU → reshape 64×4×4 → ConvT 64→64 → 64→64 → 64→32 →
  32→32 → 32→C (each 4×4 stride 2 padding 1, ReLU between; 4 → 8 → … → 128) → logits.

Parameters for C channels and d latents: encoder ``512·C + 442,880 + 514·d`` (the convolutions
``512·C + 32`` + 16,416 + 32,832 + 65,600 + 65,600, the dense layer 262,400, the heads
``2·(256·d + d)``), decoder ``513·C + 443,840 + 256·d`` (FC ``256·d + 256`` and 263,168, the
transposed convolutions 65,600 + 65,600 + 32,800 + 16,416 + ``512·C + C``): 449,556 and 447,939
for RGB and 10 latents, against conv64's 310,228 and 382,339 (the dense layers are the same; the
extra stage adds a 64→64 convolution on each side, and the encoder's 64-filter convolutions have
4×4 kernels where conv64's have 2×2).
``tests/backbones/test_conv128.py`` counts them by hand.

Every layer is a plain ``nn.Conv2d`` / ``nn.ConvTranspose2d`` / ``nn.Linear`` (zero padding), so
``model.init`` (Glorot-uniform weights and zero biases under ``reference``), channels-last and
``train.conv_transpose_via_conv`` apply to it exactly as to ``conv64``; every objective that trains
a VAE of ``conv64`` trains this one (their own networks, e.g. FactorVAE's discriminator, act on
the latents).

**Provenance — what is and is not published.** All kernels are 4×4, as in Higgins et al. 2017's
64×64 β-VAE encoder (four 4×4 stride-2 convolutions, 32-32-64-64, FC 256; checked here against
third-party reimplementations' descriptions of it, not the paper itself); disentanglement_lib's
``conv64`` uses 2×2 kernels in its two 64-filter layers instead, which this backbone does not
copy. No published disentanglement code with this exact 128×128 network was
found: the Falcor3D / Isaac3D datasets (NVlabs/High-res-disentanglement-datasets, Nie et al.
2020, "Semi-Supervised StyleGAN for Disentanglement Learning") were introduced with a StyleGAN at
512² / 1024², not a VAE, and the third-party VAE code found that uses Isaac3D
(ituvisionlab/FactorQVAE, ``data/isaac3d.py``) resizes it to 64×64 and uses residual blocks. The
search did not reach the VAE baselines' architecture in the semi-StyleGAN paper nor a CelebA-128
disentanglement paper's network, so ``conv128`` is this library's extension of the reference
architecture, not a reproduction of a published one; results with it are not comparable to
published 64×64 numbers.
"""
from __future__ import annotations

from torch import nn

from . import BACKBONES
from ._heads import check_image_shape
from .conv64 import ConvDecoder, ConvEncoder

#: the side of the square images conv128 takes
IMAGE_SIDE = 128
ENCODER_FILTERS = (32, 32, 64, 64, 64)
ENCODER_KERNELS = (4, 4, 4, 4, 4)
DECODER_CHANNELS = (64, 64, 64, 32, 32)


@BACKBONES.register("conv128")
def conv128(image_shape: tuple[int, int, int], latent_dim: int) -> tuple[nn.Module, nn.Module]:
    """conv64's encoder/decoder with one more stride-2 stage, for 128×128 images with 1 or 3 channels."""
    c, _, _ = check_image_shape("conv128", image_shape, size=IMAGE_SIDE)
    encoder = ConvEncoder(c, latent_dim, filters=ENCODER_FILTERS, kernels=ENCODER_KERNELS, hidden=256)
    decoder = ConvDecoder(c, latent_dim, fc_sizes=(256, 1024), channels=DECODER_CHANNELS)
    return encoder, decoder


#: the image side the builder takes (for code that builds every backbone on a fitting image)
conv128.image_side = IMAGE_SIDE  # type: ignore[attr-defined]
