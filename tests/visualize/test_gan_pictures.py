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


CATEGORICAL = {**SMALL, "num_categories": 3}


def _categorical(monkeypatch):
    gan = VAE.from_backbone("infogan_categorical", image_shape=(1, 16, 16), latent_dim=5, **CATEGORICAL).eval()
    seen = []
    monkeypatch.setattr(gan, "decode_mean", lambda z: (seen.append(z.clone()), torch.zeros(len(z), 1, 16, 16))[1])
    return gan, seen


def test_an_elastic_infogans_category_is_drawn_and_traversed_one_hot(monkeypatch):
    """The generator was trained on (near) one-hot points of the simplex in its last K codes: prior
    samples draw a category, one-hot, and the traversals show the category as one row stepping
    through the K one-hots (not each slot swept over [-1, 1] alone)."""
    import numpy as np

    gan, seen = _categorical(monkeypatch)
    assert gan.num_categories == 3
    reconstructions.prior_samples(gan, num_samples=600, generator=torch.Generator().manual_seed(0))
    z = seen.pop()  # codes z0, z1; the category in z2-z4
    assert torch.equal(z[:, 2:].sum(1), torch.ones(600)) and set(z[:, 2:].unique().tolist()) == {0.0, 1.0}
    assert z[:, 2:].sum(0).min() > 150  # each category about a third
    assert z[:, :2].min() >= -1 and z[:, :2].max() <= 1
    grid = traversals.traversal_grid(gan, torch.zeros(1, 1, 16, 16), kl=np.arange(5.0), num_values=6)
    z = seen.pop().reshape(3, 6, 5)  # rows: the category (its slots scored highest), z1, z0
    assert grid.shape[0] == 3 * 18 + 2
    assert torch.equal(z[0, :, 2:].argmax(1), torch.tensor([0, 0, 1, 1, 2, 2]))
    assert torch.equal(z[0, :, 2:].sum(1), torch.ones(6))
    assert torch.allclose(z[1, :, 1], torch.linspace(-1, 1, 6)) and torch.allclose(z[2, :, 0], torch.linspace(-1, 1, 6))
    assert traversals._label(gan, 2, 4.0) == "category (z2-z4)"
    frames = traversals.traversal_animation(gan, torch.zeros(1, 1, 16, 16), kl=np.arange(5.0), num_frames=4)
    assert len(frames) == 4 and seen.pop().shape[0] == 3 * 4  # z0, z1 and the category


def test_the_category_is_one_panel_whatever_dims_name_and_starts_one_hot(monkeypatch):
    """Traversals given dims that name the category's slots show it once; the other codes' rows start
    from the likeliest category one-hot, not from Q's mix of probabilities."""
    import numpy as np

    from disentangle.visualize.latents import decoder_code

    gan, seen = _categorical(monkeypatch)
    probabilities = torch.tensor([[0.3, -0.5, 0.34, 0.36, 0.30]])
    monkeypatch.setattr(gan, "encode", lambda x: (probabilities.expand(len(x), -1), torch.zeros(len(x), 5)))
    start = decoder_code(gan, torch.zeros(1, 1, 16, 16))
    assert torch.equal(start, torch.tensor([[0.3, -0.5, 0.0, 1.0, 0.0]]))
    frames = traversals.traversal_animation(gan, torch.zeros(1, 1, 16, 16), kl=np.arange(5.0), num_frames=4,
                                            dims=[0, 2, 3, 4])
    z = seen.pop().reshape(2, 4, 5)  # z0 and the category, once
    assert len(frames) == 4 and torch.equal(z[0, :, 2:], torch.tensor([0.0, 1.0, 0.0]).expand(4, 3))
