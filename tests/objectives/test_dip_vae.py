"""DIP-VAE-I / II: default λ_d, covariance, regulariser and loss values."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.dip_vae import DIPVAEI, DIPVAEII, dip_regularizer

pytestmark = pytest.mark.usefixtures("one_thread")


def test_default_lambdas():
    i, ii = OBJECTIVES.build("dip_vae_i"), OBJECTIVES.build("dip_vae_ii")
    assert (i.lambda_od, i.lambda_d) == (10.0, 100.0)  # λ_d = 10 λ_od
    assert (ii.lambda_od, ii.lambda_d) == (10.0, 10.0)  # λ_d = λ_od
    assert DIPVAEI(lambda_od=2.0).lambda_d == 20.0 and DIPVAEII(lambda_od=2.0).lambda_d == 2.0
    assert DIPVAEI(lambda_od=2.0, lambda_d=3.0).lambda_d == 3.0
    with pytest.raises(ValueError, match="lambda_od"):
        DIPVAEI(lambda_od=-1.0)
    with pytest.raises(ValueError, match="lambda_d"):
        DIPVAEII(lambda_d=-1.0)


def test_regularizer_hand_computed():
    cov = torch.tensor([[2.0, 0.5], [0.5, 0.0]])
    reg = dip_regularizer(cov, lambda_od=3.0, lambda_d=7.0)
    # off-diagonal: 0.25 + 0.25 = 0.5; diagonal: (2 − 1)² + (0 − 1)² = 2
    assert reg["dip_off_diag"].item() == 0.5 and reg["dip_diag"].item() == 2.0
    assert reg["dip_regularizer"].item() == 3.0 * 0.5 + 7.0 * 2.0


@pytest.mark.parametrize("cls,kind", [(DIPVAEI, "i"), (DIPVAEII, "ii")])
def test_loss_value(cls, kind):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=3, hidden_sizes=[16])
    obj = cls(lambda_od=2.0, lambda_d=5.0)
    x = (torch.rand(20, 1, 8, 8) > 0.5).float()
    torch.manual_seed(1)
    terms = obj(model, x, step=0)
    torch.manual_seed(1)
    out = model(x)
    cov = torch.cov(out.mu.T, correction=0)
    if kind == "ii":
        cov = cov + torch.diag(out.logvar.exp().mean(0))
    off = (cov - torch.diag(cov.diagonal())).square().sum()
    diag = (cov.diagonal() - 1).square().sum()
    recon = F.binary_cross_entropy_with_logits(out.logits, x, reduction="none").flatten(1).sum(1).mean()
    kl = (0.5 * (out.mu.square() + out.logvar.exp() - out.logvar - 1)).sum(1).mean()
    assert torch.allclose(terms["dip_off_diag"], off, rtol=1e-4, atol=1e-7)
    assert torch.allclose(terms["dip_diag"], diag, rtol=1e-5)
    assert torch.allclose(terms["loss"], recon + kl + 2.0 * off + 5.0 * diag, rtol=1e-5)  # KL weight 1, no β
