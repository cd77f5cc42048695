"""Audit value tests for DIP-VAE, AnnealedVAE and InfoVAE, through a fixed fake model so that every
term has a hand-checkable value: the reconstruction option, |KL − C| on both sides of C and its
gradient, the MMD on the sampled codes with its gradient, and the unbiased MMD with n ≠ m."""
from __future__ import annotations

import math

import pytest
import torch

from disentangle.objectives.annealed_vae import AnnealedVAE
from disentangle.objectives.dip_vae import DIPVAEI, DIPVAEII
from disentangle.objectives.estimators import mmd
from disentangle.objectives.info_vae import InfoVAE

from .fixed_model import FixedModel

pytestmark = pytest.mark.usefixtures("one_thread")



def _batch(requires_grad=False):
    mu = torch.tensor([[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8], [0.2, 0.1]], requires_grad=requires_grad)
    logvar = torch.tensor([[-1.0, 0.2], [0.3, -0.6], [-0.2, -1.5], [0.0, 0.4]], requires_grad=requires_grad)
    z = torch.tensor([[0.9, -0.4], [1.1, 0.6], [-0.1, 1.2], [-1.3, 0.7]], requires_grad=requires_grad)
    logits = torch.tensor([[0.3, -1.2], [1.0, 0.5], [-2.0, 0.1], [0.7, 0.7]]).view(4, 1, 1, 2)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.25], [1.0, 1.0]]).view(4, 1, 1, 2)
    return FixedModel(mu, logvar, z, logits), mu, logvar, z, logits, x


def _kl(mu, logvar):
    return (0.5 * (mu**2 + logvar.exp() - logvar - 1)).sum(1).mean()


def _gauss(logits, x):
    return (torch.sigmoid(logits) - x).square().sum() / x.shape[0]


# ------------------------------------------------------------------------------------ DIP-VAE
@pytest.mark.parametrize("cls", [DIPVAEI, DIPVAEII])
def test_dip_gaussian_reconstruction_is_honoured(cls):
    model, mu, logvar, z, logits, x = _batch()
    terms = cls(lambda_od=2.0, lambda_d=5.0, reconstruction="gaussian")(model, x, step=0)
    torch.testing.assert_close(terms["recon"], _gauss(logits, x))
    torch.testing.assert_close(terms["loss"], _gauss(logits, x) + _kl(mu, logvar) + terms["dip_regularizer"])


def test_dip_ii_regulariser_by_hand():
    # μ = ±1 in dim 0 and ∓1 in dim 1 (perfectly anti-correlated), σ² = ½ everywhere
    mu = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    logvar = torch.full((2, 2), math.log(0.5))
    model = FixedModel(mu, logvar, mu, torch.zeros(2, 1, 1, 1))
    x = torch.ones(2, 1, 1, 1)
    t1 = DIPVAEI(lambda_od=3.0)(model, x, step=0)  # λ_d = 30: Cov μ = [[1, −1], [−1, 1]]
    assert t1["dip_off_diag"].item() == pytest.approx(2.0) and t1["dip_diag"].item() == pytest.approx(0.0, abs=1e-6)
    assert t1["dip_regularizer"].item() == pytest.approx(6.0)
    t2 = DIPVAEII(lambda_od=3.0)(model, x, step=0)  # λ_d = 3: C = [[1.5, −1], [−1, 1.5]]
    assert t2["dip_off_diag"].item() == pytest.approx(2.0) and t2["dip_diag"].item() == pytest.approx(0.5)
    assert t2["dip_regularizer"].item() == pytest.approx(3.0 * 2.0 + 3.0 * 0.5)


@pytest.mark.parametrize("cls,kind", [(DIPVAEI, "i"), (DIPVAEII, "ii")])
def test_dip_regulariser_gradient(cls, kind):
    model, mu, logvar, z, logits, x = _batch(requires_grad=True)
    terms = cls(lambda_od=2.0, lambda_d=5.0)(model, x, step=0)
    terms["dip_regularizer"].backward()
    m = mu.detach().double().requires_grad_(True)
    lv = logvar.detach().double().requires_grad_(True)
    c = (m - m.mean(0)).T @ (m - m.mean(0)) / m.shape[0]
    if kind == "ii":
        c = c + torch.diag(lv.exp().mean(0))
    off = c - torch.diag(torch.diagonal(c))
    (2.0 * off.square().sum() + 5.0 * (torch.diagonal(c) - 1).square().sum()).backward()
    torch.testing.assert_close(mu.grad.double(), m.grad, rtol=1e-5, atol=1e-6)
    if kind == "ii":
        torch.testing.assert_close(logvar.grad.double(), lv.grad, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------ AnnealedVAE
def test_annealed_loss_below_and_above_the_capacity():
    model, mu, logvar, z, logits, x = _batch()
    kl = _kl(mu, logvar).item()  # ≈ 0.64 nats
    recon = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="sum").item() / 4
    obj = AnnealedVAE(c_max=10.0, gamma=100.0, iteration_threshold=10)
    below = obj(model, x, step=10)  # C = 10 > KL
    assert below["capacity"].item() == 10.0
    assert below["loss"].item() == pytest.approx(recon + 100.0 * (10.0 - kl), rel=1e-6)
    above = obj(model, x, step=0)  # C = 0 < KL
    assert above["loss"].item() == pytest.approx(recon + 100.0 * kl, rel=1e-6)


def test_annealed_capacity_term_gradient_flips_sign_at_the_capacity():
    # d/dμ γ|KL − C| = γ · sign(KL − C) · μ / B
    for step, sign in ((0, 1.0), (10, -1.0)):
        model, mu, logvar, z, logits, x = _batch(requires_grad=True)
        obj = AnnealedVAE(c_max=10.0, gamma=100.0, iteration_threshold=10)
        obj(model, x, step=step)["loss"].backward()
        torch.testing.assert_close(mu.grad, sign * 100.0 * mu.detach() / 4)


def test_annealed_gaussian_reconstruction_is_honoured():
    model, mu, logvar, z, logits, x = _batch()
    terms = AnnealedVAE(c_max=1.0, gamma=10.0, iteration_threshold=10, reconstruction="gaussian")(model, x, step=5)
    torch.testing.assert_close(terms["recon"], _gauss(logits, x))
    torch.testing.assert_close(terms["loss"], _gauss(logits, x) + 10.0 * (_kl(mu, logvar) - 0.5).abs())


# ------------------------------------------------------------------------------------ InfoVAE
def _info_terms(obj, model, x):
    torch.manual_seed(123)
    terms = obj(model, x, step=0)
    torch.manual_seed(123)
    prior = torch.randn(model.out.z.shape)  # the objective's only draw (the fake model draws nothing)
    return terms, prior


def test_info_vae_mmd_is_on_the_sampled_codes_and_has_its_gradient():
    model, mu, logvar, z, logits, x = _batch(requires_grad=True)
    obj = InfoVAE(alpha=1.0, lambda_=3.0)  # KL weight 0, MMD weight 3
    terms, prior = _info_terms(obj, model, x)
    expected = mmd(z.detach(), prior, "rbf", scale=4.0)
    torch.testing.assert_close(terms["mmd"], expected)
    terms["loss"].backward()
    zz = z.detach().clone().requires_grad_(True)
    (3.0 * mmd(zz, prior, "rbf", scale=4.0)).backward()
    torch.testing.assert_close(z.grad, zz.grad)
    assert mu.grad is None or torch.count_nonzero(mu.grad) == 0  # no KL term at α = 1


def test_info_vae_loss_value_and_gaussian_reconstruction():
    model, mu, logvar, z, logits, x = _batch()
    obj = InfoVAE(alpha=-1.0, lambda_=4.0, kernel="imq", reconstruction="gaussian")  # KL weight 2, MMD weight 2
    terms, prior = _info_terms(obj, model, x)
    m = mmd(z, prior, "imq", scale=4.0)
    torch.testing.assert_close(terms["recon"], _gauss(logits, x))
    torch.testing.assert_close(terms["loss"], _gauss(logits, x) + 2.0 * _kl(mu, logvar) + 2.0 * m)


# ------------------------------------------------------------------------------------ MMD, n ≠ m
def test_unbiased_mmd_with_unequal_sample_sizes_by_hand():
    x = torch.tensor([[0.0], [1.0]])
    y = torch.tensor([[0.0], [2.0], [3.0]])
    e = math.exp
    kxx = 2 * e(-1) / (2 * 1)
    kyy = 2 * (e(-4) + e(-9) + e(-1)) / (3 * 2)
    kxy = (1 + e(-4) + e(-9) + e(-1) + e(-1) + e(-4)) / 6
    assert mmd(x, y, "rbf", scale=1.0).item() == pytest.approx(kxx + kyy - 2 * kxy, rel=1e-5)
    assert mmd(y, x, "rbf", scale=1.0).item() == pytest.approx(kxx + kyy - 2 * kxy, rel=1e-5)
