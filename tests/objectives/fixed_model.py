"""A stand-in VAE for value tests of the objectives: fixed posteriors, codes and logits whatever the
input, so a loss (and the gradients reaching ``mu``, ``logvar`` and ``z``) can be written out by hand."""
from __future__ import annotations

import torch
from torch import nn

from disentangle.models.vae import VAEOutput


class FixedModel(nn.Module):
    """Returns ``VAEOutput(mu, logvar, z, logits)`` for any input; ``dummy`` gives it a parameter."""

    def __init__(self, mu, logvar, z, logits):
        super().__init__()
        self.out = VAEOutput(mu=mu, logvar=logvar, z=z, logits=logits)
        self.latent_dim = mu.shape[1]
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return self.out
