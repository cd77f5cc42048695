"""The models: what a run trains and what every metric, the study and the pictures read through
``encode``. :class:`~disentangle.models.vae.VAE` is a Gaussian-encoder VAE built from a registered
backbone."""
from __future__ import annotations

from .vae import VAE, VAEOutput, reparameterize

__all__ = ["VAE", "VAEOutput", "reparameterize"]
