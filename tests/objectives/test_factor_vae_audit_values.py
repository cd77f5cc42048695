"""Audit value tests for FactorVAE and the shared latent discriminator: the γ·TC gradient that
reaches the codes, the sign and value of the TC term, the discriminator's own optimizer settings,
which codes the D step sees, and what :func:`frozen` restores."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentangle.config import TrainConfig
from disentangle.models.vae import VAE
from disentangle.objectives.discriminator import MLPDiscriminator, frozen
from disentangle.objectives.factor_vae import FactorVAE
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision

from .fixed_model import FixedModel

pytestmark = pytest.mark.usefixtures("one_thread")



class _FirstCoordinate(nn.Module):
    """Logits (z₀, 0): D₀ − D₁ = z₀."""

    def forward(self, z):
        return torch.stack([z[:, 0], torch.zeros_like(z[:, 0])], 1)


def _fixed(gamma):
    mu = torch.tensor([[0.5, -1.0], [1.0, 0.2], [-0.3, 0.4], [0.0, 0.0]])
    logvar = torch.tensor([[-1.0, 0.0], [0.5, -0.5], [0.0, 0.2], [0.0, 0.0]])
    z = torch.tensor([[-2.0, 0.3], [-1.0, -0.2], [0.5, 1.0], [-0.5, 0.0]], requires_grad=True)  # mean z₀ = −0.75
    logits = torch.zeros(4, 1, 1, 2)
    x = torch.ones(4, 1, 1, 2)
    model = FixedModel(mu, logvar, z, logits)
    obj = FactorVAE(gamma=gamma, discriminator_hidden=8, discriminator_layers=1)
    obj.setup(model=model, dataset_size=100)
    obj.discriminator.net = nn.Sequential(_FirstCoordinate())
    return obj, model, z, mu, logvar, x


def test_negative_tc_estimate_enters_the_loss_with_its_sign():
    obj, model, z, mu, logvar, x = _fixed(gamma=10.0)
    terms, _ = obj.vae_terms(model, x)
    recon = 2 * math.log(2.0)
    kl = (0.5 * (mu**2 + logvar.exp() - logvar - 1)).sum(1).mean().item()
    assert math.isclose(terms["tc"].item(), -0.75, rel_tol=1e-6)
    assert math.isclose(terms["loss"].item(), recon + kl + 10.0 * -0.75, rel_tol=1e-6)


def test_gamma_tc_gradient_reaches_the_codes():
    # d/dz [γ · mean_i (D₀(z_i) − D₁(z_i))] = γ/B on z₀, 0 on z₁ (recon and KL do not depend on z here)
    obj, model, z, *_ , x = _fixed(gamma=10.0)
    terms, _ = obj.vae_terms(model, x)
    terms["loss"].backward()
    expected = torch.zeros(4, 2)
    expected[:, 0] = 10.0 / 4
    torch.testing.assert_close(z.grad, expected)


def _real_setup(**train):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 4, 4), latent_dim=3, hidden_sizes=[8])
    obj = FactorVAE(discriminator_hidden=8, discriminator_layers=1, discriminator_lr=3e-4, discriminator_betas=(0.4, 0.8))
    obj.setup(model=model, dataset_size=100)
    return model, obj, build_optimizers(model, obj, TrainConfig(**train))


def test_discriminator_optimizer_keeps_its_own_lr_betas_and_no_weight_decay():
    # the model's settings all differ from D's, so none can leak into D's optimizer
    model, obj, opts = _real_setup(lr=2e-3, betas=(0.7, 0.95), weight_decay=0.1)
    d = opts["discriminator"]
    for group in d.param_groups:
        assert group["lr"] == 3e-4
        assert tuple(group["betas"]) == (0.4, 0.8)
        assert group["weight_decay"] == 0.0
    m = opts["model"].param_groups[0]
    assert m["lr"] == 2e-3 and m["weight_decay"] == 0.1


def test_discriminator_step_sees_the_codes_of_the_vae_step():
    """Kim & Mnih, Algorithm 1 (and disentanglement_lib): D is trained on the z drawn for the VAE
    step (detached), not on fresh codes of the updated encoder."""
    model, obj, opts = _real_setup(lr=1e-2)
    x = (torch.rand(6, 1, 4, 4, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    seen = {}
    vae_terms, d_step = obj.vae_terms, obj.discriminator_step

    def spy_vae_terms(m, xx):
        terms, z = vae_terms(m, xx)
        seen["vae_z"] = z.detach().clone()
        return terms, z

    def spy_d_step(z, optimizer, precision):
        seen["d_z"] = z.detach().clone()
        return d_step(z, optimizer, precision)

    obj.vae_terms, obj.discriminator_step = spy_vae_terms, spy_d_step
    torch.manual_seed(2)
    obj.train_step(model, x, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
    assert torch.equal(seen["vae_z"], seen["d_z"])


def test_discriminator_loss_is_the_mean_of_the_two_halves_by_hand():
    obj, *_ = _fixed(gamma=1.0)
    z = torch.tensor([[1.0, 0.0], [-2.0, 3.0], [0.5, -1.0]])
    d = obj.discriminator_terms(z, torch.Generator().manual_seed(0))
    # the permutation keeps column 0's multiset, so Σ softplus(z₀ᵖ) = Σ softplus(z₀)
    z0 = z[:, 0]
    expected = (F.softplus(-z0).sum() + F.softplus(z0).sum()) / 6
    torch.testing.assert_close(d["discriminator_loss"], expected)


def test_frozen_restores_each_parameters_own_flag():
    disc = MLPDiscriminator(2, hidden=4, layers=1, out_features=2)
    first = next(disc.parameters())
    first.requires_grad_(False)  # e.g. a user froze part of D
    with frozen(disc):
        assert not any(p.requires_grad for p in disc.parameters())
    assert not first.requires_grad
    assert all(p.requires_grad for p in list(disc.parameters())[1:])


@pytest.mark.parametrize("activation,cls", [("relu", nn.ReLU), ("leaky_relu", nn.LeakyReLU)])
def test_discriminator_activation(activation, cls):
    disc = MLPDiscriminator(2, hidden=4, layers=2, out_features=1, activation=activation)
    acts = [m for m in disc.modules() if isinstance(m, (nn.ReLU, nn.LeakyReLU))]
    assert len(acts) == 2 and all(type(a) is cls for a in acts)


def test_vae_step_gradient_is_the_gradient_of_the_full_loss():
    """The model optimizer steps on recon + KL + γ·TC, not only on recon + KL."""
    model, obj, opts = _real_setup(lr=1e-3)
    obj.gamma = 50.0
    x = (torch.rand(6, 1, 4, 4, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    ref_model, ref_obj = copy.deepcopy(model), copy.deepcopy(obj)
    torch.manual_seed(4)
    terms, _ = ref_obj.vae_terms(ref_model, x)
    terms["loss"].backward()
    torch.manual_seed(4)
    obj.train_step(model, x, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, msg=name)
