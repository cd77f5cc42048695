"""The networks of InfoGAN / InfoGAN-CR (``model.backbone: infogan``), as in Lin et al.'s dSprites
code (``fjxmlzn/InfoGAN-CR``, ``InfoGAN-CR_dSprites/gan/network.py``).

A GAN seen through the VAE interface (:class:`~disentangle.models.vae.VAE`), so that every metric,
:func:`disentangle.load` and the pictures work unchanged:

* the **encoder** is the discriminator D with the InfoGAN head Q on the same trunk
  (:class:`InfoGANDiscriminator`): ``encoder(x) -> (μ, log σ²)`` is Q's Gaussian of the codes given
  an image, whose mean is the representation; :meth:`InfoGANDiscriminator.discriminate` gives D's
  real/fake logit and Q's output in one trunk pass (training);
* the **decoder** is the generator G (:class:`InfoGANGenerator`): ``decoder(c)`` is ``G(c, noise=0)``
  (the noise at the mean of its prior U(−1, 1)), so ``model.decode(c)`` gives traversals of the
  codes; :meth:`InfoGANGenerator.generate` takes the noise too (training). G's output is **logits**
  (the reference's last layer is a sigmoid; here ``decode_mean`` applies it).

``model.latent_dim`` is the number of codes c (5 in the dSprites recipe); ``noise_dim`` the number of
noise dimensions z (5). Both are drawn from U(−1, 1) by the objectives
(:mod:`disentangle.objectives.infogan`).

**A categorical code** (``model.backbone: infogan_categorical`` with ``num_categories`` K ≥ 2, for
``objective.name: elastic_infogan``): the last K of the ``latent_dim`` codes are one categorical
code, given to G as a (relaxed) one-hot vector and predicted by Q as K logits; the encoder returns
the first ``latent_dim − K`` outputs of Q (the continuous codes' means) followed by the **softmax**
of its K logits (the category's probabilities), so ``model.encode`` / ``model.representation`` give
``[continuous means, category probabilities]`` and ``model.decode`` takes a point of the simplex
(e.g. a one-hot) in the last K codes. The ``infogan`` backbone has no categorical code (K = 0).

Architecture, with ``channels = [32, 32, 64, 64]`` and ``hidden = q_hidden = 128`` (the reference's
defaults) for a C×64×64 image; convolutions 4×4 stride 2 padding 1 (TensorFlow's "same": each
halves the side), LeakyReLU 0.2; every layer of D and Q spectrally normalised
(``torch.nn.utils.parametrizations.spectral_norm``, one power iteration per training forward):

* D trunk: Conv C→32 → Conv 32→32 → Conv 32→64 → Conv 64→64 (64 → 32 → 16 → 8 → 4), flatten
  4·4·64 → FC 128; D head: FC 128 → 1 (a logit; the reference applies a sigmoid); Q head: FC 128 →
  ``q_hidden`` LeakyReLU → FC ``q_hidden`` → ``latent_dim`` (Q's mean μ). Q's standard deviation is
  fixed, ``q_std`` (1 in the reference): ``log σ² = 2 log q_std`` for every code and image. No batch
  norm in D (as the reference).
* G: FC (``latent_dim + noise_dim``) → 128, ReLU, BN → FC 128 → 4·4·64, ReLU, BN → reshape 64×4×4
  → ConvT 64→64, LeakyReLU, BN → ConvT 64→32, LeakyReLU, BN → ConvT 32→32, LeakyReLU, BN → ConvT
  32→C (logits); 4×4 → 8 → 16 → 32 → 64. The feature map at each resolution has D's channels
  (G mirrors D). Batch norm after the activation, as the reference (momentum 0.1 = TensorFlow's
  decay 0.9, ε 1e-5, learned scale and shift).
* H, InfoGAN-CR's contrastive discriminator (:class:`ContrastiveDiscriminator`, built by the
  objective, same sizes as D): D's trunk on the pair concatenated on channels (2C), FC 128 →
  K logits (K = ``latent_dim``; the last layer without spectral norm, as the reference).

**Image sizes**: square images whose side is ``4 · 2^n`` with ``1 ≤ n ≤ len(channels)``; the n
layers nearest the image are kept (``channels[:n]``), so a 16×16 image uses ``channels[:2]`` and
the bottom map is 4×4 always. ``channels`` of length 4 gives the reference for 64×64.

Differences from the reference: the layers' initialisation is ``model.init``'s (Glorot-uniform and
zero biases by default; the reference draws N(0, 0.02²)), and the spectral norm's power iteration
runs at every training-mode forward (the reference updates its vectors once per iteration; the
objectives put D and H in eval mode in the generator's phase, so that is once per phase each).
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

from .._core import checks
from ..errors import ConfigError
from . import BACKBONES

#: the reference's LeakyReLU slope
SLOPE = 0.2


def depth_for(image_shape: tuple[int, ...], channels: list[int]) -> int:
    """The number ``n`` of stride-2 layers for a ``(C, S, S)`` image, ``S = 4 · 2^n``; a
    :class:`ConfigError` naming the sizes that work otherwise."""
    if len(image_shape) != 3 or image_shape[1] != image_shape[2]:
        raise ConfigError(
            f"model.backbone is 'infogan', which needs square images (C, S, S); this dataset gives {tuple(image_shape)}."
        )
    side = int(image_shape[1])
    n = round(math.log2(side / 4)) if side >= 8 else 0
    if n < 1 or 4 * 2**n != side or n > len(channels):
        sizes = ", ".join(str(4 * 2**k) for k in range(1, len(channels) + 1))
        raise ConfigError(
            f"model.backbone is 'infogan' with model.channels={list(channels)}, which takes images of side "
            f"{sizes}; this dataset gives {tuple(image_shape)}. Give model.channels one entry per halving "
            f"of the side down to 4."
        )
    return n


class ConvTrunk(nn.Module):
    """Spectrally normalised stride-2 convolutions (LeakyReLU 0.2) down to 4×4, then FC ``hidden``
    (LeakyReLU 0.2): the shared trunk of D (and Q) and the trunk of H."""

    def __init__(self, in_channels: int, channels: list[int], hidden: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        prev = in_channels
        for ch in channels:
            layers += [spectral_norm(nn.Conv2d(prev, ch, 4, stride=2, padding=1)), nn.LeakyReLU(SLOPE)]
            prev = ch
        self.convs = nn.Sequential(*layers)
        self.fc = nn.Sequential(nn.Flatten(), spectral_norm(nn.Linear(prev * 4 * 4, hidden)), nn.LeakyReLU(SLOPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.convs(x))


class InfoGANDiscriminator(nn.Module):
    """D and Q on one trunk. ``forward(x) -> (μ, log σ²)`` of the codes (Q; the encoder of the
    VAE interface); :meth:`discriminate` adds D's logit."""

    def __init__(
        self, image_shape: tuple[int, int, int], latent_dim: int, channels: list[int], hidden: int,
        q_hidden: int, q_std: float, num_categories: int = 0,
    ) -> None:
        super().__init__()
        self.image_shape = tuple(int(v) for v in image_shape)
        self.latent_dim = int(latent_dim)
        #: K: the last K codes are one categorical code (Q's logits; the encoder gives their softmax)
        self.num_categories = int(num_categories)
        self.channels = [int(c) for c in channels]
        self.hidden = int(hidden)
        self.q_std = float(q_std)
        self.trunk = ConvTrunk(self.image_shape[0], self.channels, self.hidden)
        self.d_head = spectral_norm(nn.Linear(self.hidden, 1))
        self.q_head = nn.Sequential(
            spectral_norm(nn.Linear(self.hidden, q_hidden)), nn.LeakyReLU(SLOPE),
            spectral_norm(nn.Linear(q_hidden, self.latent_dim)),
        )

    def _q(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu = self.q_head(h)
        k = self.num_categories
        if k:  # the categorical code: its probabilities
            mu = torch.cat([mu[:, :-k], torch.softmax(mu[:, -k:].float(), dim=1).to(mu.dtype)], dim=1)
        return mu, mu.new_full(mu.shape, 2.0 * math.log(self.q_std))

    def forward(
        self, x: torch.Tensor, discriminate: bool = False, trunk_only: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Q's mean of the codes and its (fixed) log-variance, each ``(B, latent_dim)``; with
        ``discriminate``, D's logit ``(B,)`` before them (:meth:`discriminate`); with
        ``trunk_only``, the trunk's features ``(B, hidden)`` alone (:meth:`features`)."""
        h = self.trunk(x)
        if trunk_only:
            return h
        mu, logvar = self._q(h)
        if discriminate:
            return self.d_head(h).squeeze(1), mu, logvar
        return mu, logvar

    def discriminate(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(d_logit (B,), q_mu, q_logvar)`` from one pass of the trunk: D's logit of "real" and Q
        (through ``__call__``, so a compiled module compiles it too)."""
        return self(x, discriminate=True)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The trunk's features ``(B, hidden)`` of images ``x``, the input of :meth:`heads`
        (through ``__call__``)."""
        return self(x, trunk_only=True)

    def heads(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(d_logit (B,), q_features (B, q_hidden), q_out (B, latent_dim))`` of trunk features
        ``h``: D's logit, Q's hidden layer (after its activation) and Q's raw outputs (the
        continuous codes' means, then the categorical code's K logits, not probabilities)."""
        q_features = self.q_head[:-1](h)
        return self.d_head(h).squeeze(1), q_features, self.q_head[-1](q_features)


class InfoGANGenerator(nn.Module):
    """G: ``generate(c, noise) -> logits``; ``forward(c)`` is ``G(c, 0)`` (the decoder of the VAE
    interface)."""

    #: the prior of the codes and of the noise, U(−1, 1) (read by ModelCentrality's generator dataset)
    code_prior = "uniform"

    def __init__(self, image_shape: tuple[int, int, int], latent_dim: int, noise_dim: int, channels: list[int], hidden: int) -> None:
        super().__init__()
        self.image_shape = tuple(int(v) for v in image_shape)
        self.latent_dim = int(latent_dim)
        self.noise_dim = int(noise_dim)
        chans = [int(c) for c in reversed(channels)]  # the bottom (4×4) map first
        self.start_channels = chans[0]
        self.fc = nn.Sequential(
            nn.Linear(self.latent_dim + self.noise_dim, hidden), nn.ReLU(), nn.BatchNorm1d(hidden),
            nn.Linear(hidden, chans[0] * 4 * 4), nn.ReLU(), nn.BatchNorm1d(chans[0] * 4 * 4),
        )
        layers: list[nn.Module] = []
        for a, b in zip(chans[:-1], chans[1:]):
            layers += [nn.ConvTranspose2d(a, b, 4, stride=2, padding=1), nn.LeakyReLU(SLOPE), nn.BatchNorm2d(b)]
        layers.append(nn.ConvTranspose2d(chans[-1], self.image_shape[0], 4, stride=2, padding=1))
        self.deconvs = nn.Sequential(*layers)

    def generate(self, codes: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, C, H, W)`` of ``G(c, z)`` for codes ``(B, latent_dim)`` and noise ``(B, noise_dim)``
        (through ``__call__``, so a compiled module compiles it too)."""
        return self(codes, noise)

    def forward(self, codes: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """``G(c, z)``; without ``noise``, ``G(c, 0)``: the logits of the codes with the noise at its
        prior mean (the decoder of the VAE interface)."""
        if noise is None:
            noise = codes.new_zeros(codes.shape[0], self.noise_dim)
        h = self.fc(torch.cat([codes, noise.to(codes.dtype)], dim=1))
        return self.deconvs(h.view(codes.shape[0], self.start_channels, 4, 4))


class ContrastiveDiscriminator(nn.Module):
    """InfoGAN-CR's H: which of the K codes a pair of images shares. Input: the two images
    concatenated on channels ``(B, 2C, H, W)``; output: K logits."""

    def __init__(self, image_shape: tuple[int, int, int], num_codes: int, channels: list[int], hidden: int) -> None:
        super().__init__()
        self.num_codes = int(num_codes)
        self.trunk = ConvTrunk(2 * int(image_shape[0]), list(channels), int(hidden))
        self.head = nn.Linear(int(hidden), self.num_codes)  # no spectral norm on the last layer (reference)

    @classmethod
    def like(cls, discriminator: InfoGANDiscriminator) -> ContrastiveDiscriminator:
        """An H with D's image shape, trunk sizes and number of codes (as the reference)."""
        return cls(discriminator.image_shape, discriminator.latent_dim, discriminator.channels, discriminator.hidden)

    def forward(self, pair: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(pair))


def _networks(
    image_shape: tuple[int, int, int], latent_dim: int, noise_dim: int, channels: list[int], hidden: int,
    q_hidden: int, q_std: float, num_categories: int = 0,
) -> tuple[nn.Module, nn.Module]:
    """D with Q and G, the parameters checked (both backbones)."""
    checks.integer("noise_dim", noise_dim, minimum=0)
    chans = list(channels)
    if not chans:
        raise ConfigError("model.channels must list at least one number of channels, e.g. [32, 32, 64, 64].")
    for c in chans:
        checks.positive_int("channels", c)
    checks.positive_int("hidden", hidden)
    checks.positive_int("q_hidden", q_hidden)
    checks.positive("q_std", checks.finite("q_std", q_std))
    n = depth_for(image_shape, chans)
    chans = [int(c) for c in chans[:n]]
    encoder = InfoGANDiscriminator(image_shape, latent_dim, chans, hidden, q_hidden, q_std, num_categories)
    decoder = InfoGANGenerator(image_shape, latent_dim, noise_dim, chans, hidden)
    return encoder, decoder


@BACKBONES.register("infogan")
def infogan(
    image_shape: tuple[int, int, int],
    latent_dim: int,
    noise_dim: int = 5,
    channels: list[int] = [32, 32, 64, 64],  # noqa: B006 (the config schema's default; never mutated)
    hidden: int = 128,
    q_hidden: int = 128,
    q_std: float = 1.0,
) -> tuple[nn.Module, nn.Module]:
    """InfoGAN's D with its Q head (the encoder: Q's Gaussian of the codes) and G (the decoder:
    ``G(c, noise = 0)``), Lin et al.'s dSprites networks by default (the module docstring).

    ``noise_dim``: G's noise dimensions besides the ``latent_dim`` codes (5); ``channels``: D's
    convolution channels from the image down (G mirrors them), one per halving of the side down to
    4×4 (images of side ``4·2^n`` use the first n); ``hidden``: D's and G's fully connected width
    (128); ``q_hidden``: Q's hidden width (128, the reference's ``q_l_dim``); ``q_std``: Q's fixed
    standard deviation (1). Use with ``objective.name: infogan`` or ``infogan_cr``.
    """
    return _networks(image_shape, latent_dim, noise_dim, channels, hidden, q_hidden, q_std)


@BACKBONES.register("infogan_categorical")
def infogan_categorical(
    image_shape: tuple[int, int, int],
    latent_dim: int,
    num_categories: int = 10,
    noise_dim: int = 5,
    channels: list[int] = [32, 32, 64, 64],  # noqa: B006 (the config schema's default; never mutated)
    hidden: int = 128,
    q_hidden: int = 128,
    q_std: float = 1.0,
) -> tuple[nn.Module, nn.Module]:
    """``infogan``'s networks whose last ``num_categories`` codes are one categorical code: Q gives
    its K logits and the encoder their softmax, after the continuous codes' means (the module
    docstring). ``num_categories``: K, at least 2 and at most ``latent_dim`` (default 10, the
    Elastic-InfoGAN reference's MNIST digits); the other parameters as ``infogan``'s. Use with
    ``objective.name: elastic_infogan`` (its ``num_categories`` equal to this one).
    """
    k = checks.integer("num_categories", num_categories, minimum=2, maximum=int(latent_dim))
    return _networks(image_shape, latent_dim, noise_dim, channels, hidden, q_hidden, q_std, k)
