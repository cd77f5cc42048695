"""Audit value tests: reconstruction losses, the Gaussian KL and the β-VAE objective, against
hand-computed numbers and formulas written out independently of the library.

Written for a mutation audit: each test pins a number that a plausible wrong formula changes.
"""
from __future__ import annotations

import math

import pytest
import torch

from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_vae import BetaVAE
from disentangle.objectives.losses import beta_vae_terms, kl_normal_per_dim, reconstruction_loss

from .fixed_model import FixedModel

pytestmark = pytest.mark.usefixtures("one_thread")



def _softplus(v):
    return math.log1p(math.exp(v))


def test_bernoulli_nll_of_grey_level_targets_by_hand():
    # BCE(l, t) = softplus(l) − t·l, summed over 2 pixels, mean over a batch of 2
    logits = torch.tensor([[[[1.0, -2.0]]], [[[0.5, 3.0]]]])
    x = torch.tensor([[[[0.25, 0.6]]], [[[1.0, 0.0]]]])
    row0 = (_softplus(1.0) - 0.25 * 1.0) + (_softplus(-2.0) - 0.6 * -2.0)
    row1 = (_softplus(0.5) - 1.0 * 0.5) + (_softplus(3.0) - 0.0)
    assert math.isclose(reconstruction_loss(logits, x, "bernoulli").item(), (row0 + row1) / 2, rel_tol=1e-6)


def test_gaussian_squared_error_by_hand_with_unequal_rows():
    # sigmoid(log 3) = 0.75, sigmoid(0) = 0.5, sigmoid(−log 3) = 0.25
    l3 = math.log(3.0)
    logits = torch.tensor([[[[l3, 0.0, -l3]]], [[[0.0, 0.0, 0.0]]]])
    x = torch.tensor([[[[1.0, 0.0, 0.25]]], [[[0.5, 1.0, 0.0]]]])
    row0 = 0.25**2 + 0.5**2 + 0.0
    row1 = 0.0 + 0.25 + 0.25
    assert math.isclose(reconstruction_loss(logits, x, "gaussian").item(), (row0 + row1) / 2, rel_tol=1e-6)


def test_kl_per_dim_hand_values_with_large_mean():
    # ½(μ² + σ² − log σ² − 1): μ = 2, σ² = 1 → 2; μ = −3, σ² = e⁻² → ½(9 + e⁻² + 2 − 1)
    mu = torch.tensor([[2.0, -3.0], [0.0, 0.0]])
    logvar = torch.tensor([[0.0, -2.0], [0.0, 0.0]])
    expected = torch.tensor([2.0 / 2, 0.5 * (10.0 + math.exp(-2.0)) / 2])  # batch mean over 2 rows
    torch.testing.assert_close(kl_normal_per_dim(mu, logvar), expected)


def test_beta_vae_terms_hand_values():
    logits = torch.zeros(2, 1, 1, 3)
    x = torch.ones(2, 1, 1, 3)
    mu = torch.tensor([[1.0, 0.0], [1.0, 2.0]])
    logvar = torch.zeros(2, 2)
    terms = beta_vae_terms(logits, x, mu, logvar, beta=4.0)
    recon = 3 * math.log(2.0)
    kl = (0.5 * 1 + 0.5 * 1 + 0.5 * 4) / 2  # summed over dims, mean over batch: 1.5
    assert math.isclose(terms["recon"].item(), recon, rel_tol=1e-6)
    assert math.isclose(terms["kl"].item(), kl, rel_tol=1e-6)
    assert math.isclose(terms["loss"].item(), recon + 4.0 * kl, rel_tol=1e-6)
    assert math.isclose(terms["elbo"].item(), -(recon + kl), rel_tol=1e-6)


def _fixed_batch():
    mu = torch.tensor([[0.5, -1.0], [2.0, 0.0], [0.0, 1.5]])
    logvar = torch.tensor([[-1.0, 0.5], [0.0, -0.5], [1.0, 0.0]])
    z = mu + 0.1
    logits = torch.tensor([[0.3, -1.2, 2.0, 0.0], [1.0, 1.0, -0.5, 0.7], [-2.0, 0.1, 0.2, 0.3]]).view(3, 1, 2, 2)
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]]).view(3, 1, 2, 2)
    return mu, logvar, z, logits, x


def _kl_by_hand(mu, logvar):
    return (0.5 * (mu**2 + logvar.exp() - logvar - 1)).sum(1).mean()


def test_beta_vae_objective_uses_mu_and_logvar_in_their_roles_and_beta():
    mu, logvar, z, logits, x = _fixed_batch()
    model = FixedModel(mu, logvar, z, logits)
    terms = BetaVAE(beta=3.0)(model, x, step=0)
    recon = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="sum") / 3
    kl = _kl_by_hand(mu, logvar)
    torch.testing.assert_close(terms["kl"], kl)
    torch.testing.assert_close(terms["recon"], recon)
    torch.testing.assert_close(terms["loss"], recon + 3.0 * kl)


def test_beta_vae_objective_honours_gaussian_reconstruction():
    mu, logvar, z, logits, x = _fixed_batch()
    model = FixedModel(mu, logvar, z, logits)
    terms = BetaVAE(beta=2.0, reconstruction="gaussian")(model, x, step=0)
    recon = (torch.sigmoid(logits) - x).square().sum() / 3
    torch.testing.assert_close(terms["recon"], recon)
    torch.testing.assert_close(terms["loss"], recon + 2.0 * _kl_by_hand(mu, logvar))


def test_beta_vae_default_is_the_plain_vae():
    obj = OBJECTIVES.build("beta_vae")
    assert obj.beta == 1.0 and obj.reconstruction == "bernoulli"


def test_beta_vae_gradient_of_the_kl_term():
    # d/dμ β·KL = β·μ/B, d/dlogvar β·KL = β·½(σ² − 1)/B (recon does not depend on μ, logvar here)
    mu, logvar, z, logits, x = _fixed_batch()
    mu.requires_grad_(True)
    logvar.requires_grad_(True)
    BetaVAE(beta=3.0)(FixedModel(mu, logvar, z, logits), x, step=0)["loss"].backward()
    torch.testing.assert_close(mu.grad, 3.0 * mu.detach() / 3)
    torch.testing.assert_close(logvar.grad, 3.0 * 0.5 * (logvar.detach().exp() - 1) / 3)
