import math

import torch
import torch.nn.functional as F

from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.losses import kl_normal_per_dim, reconstruction_loss


def test_kl_matches_closed_form_and_torch_distributions():
    torch.manual_seed(0)
    mu, logvar = torch.randn(7, 5), torch.randn(7, 5)
    ours = kl_normal_per_dim(mu, logvar)
    q = torch.distributions.Normal(mu, (0.5 * logvar).exp())
    p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
    ref = torch.distributions.kl_divergence(q, p).mean(0)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    # hand value: mu=1, sigma=1 -> KL = 0.5 ; mu=0, sigma^2=e -> 0.5*(e - 1 - 1)
    hand = kl_normal_per_dim(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]))
    torch.testing.assert_close(hand, torch.tensor([0.5, 0.5 * (math.e - 2.0)]))


def test_kl_monte_carlo_agrees():
    torch.manual_seed(1)
    mu, logvar = torch.tensor([[0.7, -1.2]]), torch.tensor([[-0.5, 0.3]])
    std = (0.5 * logvar).exp()
    z = mu + std * torch.randn(400_000, 2)
    log_q = torch.distributions.Normal(mu, std).log_prob(z)
    log_p = torch.distributions.Normal(0.0, 1.0).log_prob(z)
    mc = (log_q - log_p).mean(0)
    torch.testing.assert_close(kl_normal_per_dim(mu, logvar), mc, atol=1e-2, rtol=0)


def test_bernoulli_reconstruction_is_summed_over_pixels_mean_over_batch():
    logits = torch.tensor([[[[0.0, 2.0]]], [[[-1.0, 3.0]]]])
    x = torch.tensor([[[[1.0, 0.0]]], [[[0.0, 1.0]]]])
    per_pixel = F.binary_cross_entropy_with_logits(logits, x, reduction="none")
    expected = (per_pixel[0].sum() + per_pixel[1].sum()) / 2
    torch.testing.assert_close(reconstruction_loss(logits, x, "bernoulli"), expected)
    # log 2 per pixel for zero logits
    torch.testing.assert_close(reconstruction_loss(torch.zeros(3, 1, 4, 4), torch.ones(3, 1, 4, 4)), torch.tensor(16 * math.log(2)))


def test_gaussian_reconstruction_is_squared_error_of_sigmoid_mean():
    logits = torch.zeros(2, 1, 2, 2)  # mean 0.5 everywhere
    x = torch.ones(2, 1, 2, 2)
    torch.testing.assert_close(reconstruction_loss(logits, x, "gaussian"), torch.tensor(4 * 0.25))


def test_beta_vae_terms_are_consistent():
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=3, hidden_sizes=[16])
    x = (torch.rand(5, 1, 8, 8) > 0.5).float()
    for beta in (1.0, 4.0):
        torch.manual_seed(3)
        terms = OBJECTIVES.build("beta_vae", beta=beta)(model, x, step=0)
        torch.testing.assert_close(terms["kl"], terms["kl_per_dim"].sum())
        torch.testing.assert_close(terms["loss"], terms["recon"] + beta * terms["kl"])
        torch.testing.assert_close(terms["elbo"], -(terms["recon"] + terms["kl"]))
        assert (terms["kl_per_dim"] >= 0).all()
