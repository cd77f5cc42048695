"""Audit value tests for the adversarial autoencoder: the reconstruction option in both the
training step's reconstruction phase and the evaluation terms."""
from __future__ import annotations

import pytest
import torch

from disentangle.models.vae import VAE
from disentangle.objectives.aae import AAE

pytestmark = pytest.mark.usefixtures("one_thread")


def test_gaussian_reconstruction_is_honoured_in_training_and_evaluation_terms():
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 4, 4), latent_dim=2, hidden_sizes=[8])
    obj = AAE(reconstruction="gaussian", discriminator_hidden=8)
    obj.setup(model=model, dataset_size=10)
    x = torch.rand(5, 1, 4, 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        mu, _ = model.encode(x)
        expected = (torch.sigmoid(model.decode(mu)) - x).square().flatten(1).sum(1).mean()
        torch.testing.assert_close(obj.reconstruction_terms(model, x)["recon"], expected)
        torch.testing.assert_close(obj(model, x, step=0)["recon"], expected)
