"""The VAE model: an encoder/decoder pair from a backbone, with the user-facing API.

* ``model.encode(x) -> (mu, logvar)``: the diagonal Gaussian posterior ``q(z|x)``.
* ``model.decode(z) -> logits``: decoder **logits**; the image mean is ``sigmoid(logits)``
  (``model.decode_mean``), for both Bernoulli and Gaussian reconstruction.
* ``model.representation(x) -> mu``: the posterior means, as used by the metrics; accepts any
  batch size (it is evaluated in chunks, without gradients), numpy arrays and uint8 images.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from .._core import distributed
from ..backbones import BACKBONES
from ..backbones.init import DEFAULT_INIT, initialize
from ..errors import InputError


def reparameterize(
    mu: torch.Tensor, logvar: torch.Tensor, generator: torch.Generator | None = None, *, groups: int = 1
) -> torch.Tensor:
    """A sample ``z = μ + σ ε`` with ``ε ~ N(0, I)``, differentiable in μ and log σ².

    ``ε`` comes from ``generator`` when given; otherwise from the trainer's per-step generator
    (:func:`disentangle._core.distributed.normal`: drawn for the global batch, this process's rows kept,
    so a multi-process run gets the single-process noise), or torch's global RNG outside training.
    ``groups``: the rows are that many equal blocks of the batch (2 for the two elements of pairs).
    """
    if generator is not None:
        eps = torch.randn(mu.shape, dtype=mu.dtype, device=mu.device, generator=generator)
    else:
        eps = distributed.normal(mu.shape, groups=groups, dtype=mu.dtype, device=mu.device)
    return mu + torch.exp(0.5 * logvar) * eps


class VAEOutput(NamedTuple):
    """What ``model(x)`` returns: the posterior, one reparameterised sample of it, and the decoder
    logits of that sample."""

    mu: torch.Tensor
    """Posterior means ``(B, latent_dim)``."""
    logvar: torch.Tensor
    """Posterior log-variances ``(B, latent_dim)``."""
    z: torch.Tensor
    """A sample ``mu + exp(logvar / 2) * eps`` ``(B, latent_dim)``."""
    logits: torch.Tensor
    """Decoder logits of ``z``, ``(B, C, H, W)``."""


class VAE(nn.Module):
    """Gaussian-encoder VAE built from a registered backbone."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module, latent_dim: int, image_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.latent_dim = int(latent_dim)
        self.image_shape = tuple(int(v) for v in image_shape)
        #: the run's resolved config (nested dict) when loaded with :func:`disentangle.load`
        self.config: dict[str, Any] | None = None
        #: ``model.init``, the scheme the layers were initialised by (:meth:`from_backbone`); an
        #: objective that re-initialises a network of its own mid-run draws it by the same scheme
        self.init_scheme: str = DEFAULT_INIT

    @classmethod
    def from_backbone(
        cls, backbone: str, *, image_shape: tuple[int, ...], latent_dim: int, init: str = DEFAULT_INIT, **params: Any
    ) -> VAE:
        """A VAE from a registered backbone (``model.backbone``) and its parameters, its layers
        initialised by ``init`` (``model.init``: ``reference``, disentanglement_lib's Glorot-uniform
        weights and zero biases, or ``pytorch``; :mod:`disentangle.backbones.init`)."""
        encoder, decoder = BACKBONES.build(backbone, image_shape=tuple(image_shape), latent_dim=latent_dim, **params)
        model = cls(encoder, decoder, latent_dim, image_shape)
        model.init_scheme = init
        return initialize(model, init)

    @classmethod
    def for_weights(cls, model_section: dict[str, Any], image_shape: tuple[int, ...]) -> VAE:
        """The VAE that a saved config's ``model`` section describes, to load trained weights into:
        its layers are left as constructed (``model.init`` only matters for training)."""
        params = dict(model_section)
        backbone, latent_dim = params.pop("backbone"), params.pop("latent_dim")
        params.pop("init", None)
        return cls.from_backbone(backbone, image_shape=tuple(image_shape), latent_dim=latent_dim, init="pytorch", **params)

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.parameters()).device

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and log-variance, each ``(B, latent_dim)``, of a float batch
        ``(B, C, H, W)`` in [0, 1] of the model's image shape (checked from the shape and dtype
        alone, so training reads nothing back from the device)."""
        self._check_batch(x)
        return self.encoder(x)

    def _check_batch(self, x: Any) -> None:
        c, h, w = self.image_shape if len(self.image_shape) == 3 else (None, None, None)
        expected = f"(B, {', '.join(str(v) for v in self.image_shape)})"
        if not isinstance(x, torch.Tensor):
            raise InputError(
                f"The model takes a tensor {expected} of images in [0, 1]; got {type(x).__name__}. "
                f"model.representation(x) also takes numpy arrays and uint8 images."
            )
        if x.dtype == torch.uint8:
            raise InputError(
                "The model takes float images in [0, 1]; got uint8 (0-255). Pass x.float() / 255, or use "
                "model.representation(x), which converts uint8 images."
            )
        if not x.is_floating_point():
            raise InputError(f"The model takes float images in [0, 1]; got dtype {x.dtype}.")
        if tuple(x.shape[1:]) != self.image_shape or x.dim() != len(self.image_shape) + 1:
            hint = ""
            if x.dim() == len(self.image_shape) and tuple(x.shape) == self.image_shape:
                hint = " For one image, pass x.unsqueeze(0)."
            elif c is not None and x.dim() == 4 and x.shape[1] != c and tuple(x.shape[2:]) == (h, w):
                hint = f" This model was trained on {c}-channel images; the batch has {x.shape[1]} channels."
            raise InputError(f"The model takes a batch {expected}; got shape {tuple(x.shape)}.{hint}")

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Decoder logits ``(B, C, H, W)``; apply ``sigmoid`` (or :meth:`decode_mean`) for images."""
        return self.decoder(z)

    def decode_mean(self, z: torch.Tensor) -> torch.Tensor:
        """Mean images in [0, 1]."""
        return torch.sigmoid(self.decode(z))

    def forward(self, x: torch.Tensor) -> VAEOutput:
        """Posterior, one sample ``z = μ + σ ε`` and its decoder logits.

        During training ``ε`` comes from the trainer's checkpointed per-step generator, drawn for the
        global batch (:func:`reparameterize`); elsewhere from torch's
        global RNG.
        """
        mu, logvar = self.encode(x)
        z = reparameterize(mu, logvar)
        return VAEOutput(mu, logvar, z, self.decode(z))

    @torch.no_grad()
    def representation(self, x: torch.Tensor | np.ndarray, batch_size: int | None = None) -> torch.Tensor:
        """Posterior means for a batch of observations of any size (chunked, no gradients; by
        default in chunks of 64 on a CPU, where small batches are faster, and 1,024 elsewhere).

        ``x`` may be a float tensor in [0, 1], a uint8 tensor (divided by 255) or a numpy array;
        it is moved to the model's device. Returns a float tensor on that device.
        """
        x = torch.as_tensor(x)
        if x.dtype == torch.uint8:
            x = x.float() / 255.0
        elif x.is_floating_point() and x.numel() and float(x.max()) > 1.5:
            raise InputError(
                f"The images look like 0-255 values (largest {float(x.max()):g}); the model takes images in "
                f"[0, 1]. Pass x / 255 (uint8 images are converted)."
            )
        if tuple(x.shape) == self.image_shape:  # a single observation
            x = x.unsqueeze(0)
        device = self.device
        batch_size = batch_size or (64 if device.type == "cpu" else 1024)
        outs = [self.encode(x[i : i + batch_size].to(device, torch.float32))[0] for i in range(0, len(x), batch_size)]
        return torch.cat(outs) if outs else torch.empty(0, self.latent_dim, device=device)

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """Mean reconstruction ``sigmoid(decode(mu))`` of a batch."""
        return self.decode_mean(self.encode(x.to(self.device))[0])
