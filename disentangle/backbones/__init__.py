"""Encoder/decoder pairs and the registry ``BACKBONES``.

A backbone builder is called as ``builder(image_shape=(C, H, W), latent_dim=d, **params)`` and
returns ``(encoder, decoder)``: ``encoder(x)`` maps images ``(B, C, H, W)`` to ``(mu, logvar)``,
each ``(B, d)``, and ``decoder(z)`` maps codes ``(B, d)`` to logits ``(B, C, H, W)``.
Register your own with ``@BACKBONES.register("name")``.
"""
from __future__ import annotations

from .._core.registry import Registry

BACKBONES: Registry = Registry("backbone")
"""The backbone registry: ``model.backbone`` names to builders ``(image_shape, latent_dim, **params)
-> (encoder, decoder)``; their keyword parameters are the other keys of the ``model`` section."""

__all__ = ["BACKBONES"]

from .._core.discovery import import_submodules  # noqa: E402

import_submodules(__name__, __path__)
