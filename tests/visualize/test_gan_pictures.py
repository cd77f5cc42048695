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


def test_gan_codes_are_ordered_and_labelled_by_the_spread_of_their_inferred_values(monkeypatch):
    """A GAN's Q has a fixed unit variance, so its "KL" is ½E[μ²]: a code inferred near 0 everywhere
    would rank below a constant code at 0.9. The pictures order a GAN's codes by the sd of μ_j."""
    import numpy as np

    from disentangle.visualize import latent_scores
    from disentangle.visualize.latents import kl_per_dim

    gan = VAE.from_backbone("infogan", image_shape=(1, 16, 16), latent_dim=3, **SMALL).eval()
    spread = torch.linspace(-0.3, 0.3, 8)
    mu = torch.stack([spread, torch.full((8,), 0.9), 2 * spread], dim=1)  # code 1 constant, far from 0
    monkeypatch.setattr(gan, "encode", lambda x: (mu[: len(x)], torch.zeros(len(x), 3)))
    x = torch.zeros(8, 1, 16, 16)
    scores = latent_scores(gan, x)
    assert np.allclose(scores, mu.double().std(dim=0, unbiased=False).numpy()) and scores[1] == 0
    assert list(np.argsort(-kl_per_dim(gan, x))) == [1, 2, 0]  # what ordered them before
    assert list(np.argsort(-scores)) == [2, 0, 1]
    assert traversals._label(gan, 2, scores[2]) == f"z2 sd={scores[2]:.2f}"
