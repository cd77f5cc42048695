"""Pictures of a GAN: traversals and prior samples stay inside the codes' uniform prior."""
from __future__ import annotations

import torch

from disentangle.models.vae import VAE
from disentangle.visualize import reconstructions, traversals

SMALL = {"channels": [8, 8], "hidden": 16, "q_hidden": 16, "noise_dim": 2}


def test_gan_codes_traverse_their_uniform_range_and_vae_codes_two_sigma():
    gan = VAE.from_backbone("infogan", image_shape=(1, 16, 16), latent_dim=3, **SMALL)
    vae = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=3, hidden_sizes=[16])
    assert traversals.code_limit(gan) == 1.0 and traversals.code_limit(vae) == 2.0


def test_gan_prior_samples_draw_uniform_codes(monkeypatch):
    gan = VAE.from_backbone("infogan", image_shape=(1, 16, 16), latent_dim=3, **SMALL).eval()
    seen = []
    monkeypatch.setattr(gan, "decode_mean", lambda z: (seen.append(z), torch.zeros(len(z), 1, 16, 16))[1])
    reconstructions.prior_samples(gan, num_samples=2000, generator=torch.Generator().manual_seed(0))
    z = seen[0]
    assert z.min() >= -1 and z.max() <= 1 and abs(z.mean().item()) < 0.05
    assert abs(z.var().item() - 1 / 3) < 0.02  # the variance of U(-1, 1)
