"""InfoVAE: weights (1 − α) and (α + λ − 1), the MMD against prior samples, validation."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.estimators import mmd
from disentangle.objectives.info_vae import InfoVAE

pytestmark = pytest.mark.usefixtures("one_thread")


def test_defaults_and_weights():
    obj = OBJECTIVES.build("info_vae")
    assert (obj.alpha, obj.lambda_, obj.kernel, obj.kernel_scale) == (0.0, 1000.0, "rbf", None)
    assert (obj.kl_weight, obj.mmd_weight) == (1.0, 999.0)
    mmd_vae = InfoVAE(alpha=1.0, lambda_=500.0)
    assert (mmd_vae.kl_weight, mmd_vae.mmd_weight) == (0.0, 500.0)
    vae = InfoVAE(alpha=0.0, lambda_=1.0)
    assert (vae.kl_weight, vae.mmd_weight) == (1.0, 0.0)


def test_validation():
    with pytest.raises(ValueError, match="alpha"):
        InfoVAE(alpha=1.5)
    with pytest.raises(ValueError, match="lambda_ must be a positive number"):
        InfoVAE(lambda_=0.0)
    with pytest.raises(ValueError, match="at least 1 − alpha"):
        InfoVAE(alpha=0.0, lambda_=0.5)
    with pytest.raises(ValueError, match="kernel"):
        InfoVAE(kernel="laplace")


@pytest.mark.parametrize("kernel,scale", [("rbf", None), ("imq", 3.0)])
def test_loss_value(kernel, scale):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=3, hidden_sizes=[16])
    obj = InfoVAE(alpha=0.25, lambda_=10.0, kernel=kernel, kernel_scale=scale)
    x = (torch.rand(16, 1, 8, 8) > 0.5).float()
    torch.manual_seed(1)
    terms = obj(model, x, step=0)
    torch.manual_seed(1)
    out = model(x)
    prior = torch.randn(out.z.shape)  # drawn right after the posterior sample, as in the objective
    recon = F.binary_cross_entropy_with_logits(out.logits, x, reduction="none").flatten(1).sum(1).mean()
    kl = (0.5 * (out.mu.square() + out.logvar.exp() - out.logvar - 1)).sum(1).mean()
    m = mmd(out.z, prior, kernel, scale=6.0 if scale is None else scale)  # default scale 2·latent_dim
    assert torch.allclose(terms["mmd"], m, rtol=1e-5)
    assert torch.allclose(terms["loss"], recon + 0.75 * kl + 9.25 * m, rtol=1e-5)
