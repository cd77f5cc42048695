"""Ada-GVAE, Ada-ML-VAE, GVAE, ML-VAE by value and by gradient, against the formulas of Locatello et
al. 2020 written out with plain torch (no library estimator): a posterior table as the "encoder" and
a linear decoder, so that the gradient on every μ and log σ² can be compared with autograd's of the
hand-written loss."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentangle.data.pairs import PairBatch
from disentangle.objectives import OBJECTIVES

pytestmark = pytest.mark.usefixtures("one_thread")

B, D = 3, 4  # pairs, latent dimensions


class _Table(nn.Module):
    """``encode`` returns a fixed table of posteriors (rows: the x1 block, then the x2 block), a linear
    decoder maps a code to the logits of a 1×2×2 image."""

    latent_dim = D

    def __init__(self, mu: torch.Tensor, logvar: torch.Tensor, weight: torch.Tensor) -> None:
        super().__init__()
        self.mu, self.logvar, self.weight = nn.Parameter(mu), nn.Parameter(logvar), nn.Parameter(weight)

    def encode(self, images):
        assert images.shape[0] == 2 * B
        return self.mu, self.logvar

    def decode(self, z):
        return (z @ self.weight.T).view(-1, 1, 2, 2)


def _posteriors():
    # per pair: dims 0 and 1 nearly equal, dim 3 far apart, dim 2 in between (pair-dependent)
    mu1 = torch.tensor([[0.0, 1.0, 0.5, -1.0], [0.3, -0.2, 0.0, 2.0], [1.0, 1.0, -0.5, 0.0]])
    mu2 = torch.tensor([[0.05, 1.0, 1.6, 2.0], [0.3, -0.1, 2.2, -1.0], [1.0, 1.05, 0.3, 3.0]])
    logvar1 = torch.tensor([[-1.0, 0.2, 0.0, -0.5], [0.0, -0.3, 0.4, 0.1], [-0.2, 0.0, 0.3, -1.0]])
    logvar2 = torch.tensor([[-0.9, 0.2, 0.3, 0.5], [0.1, -0.3, -0.2, 0.0], [-0.2, 0.1, 0.0, 0.4]])
    return mu1, logvar1, mu2, logvar2


def _hand_loss(model, x1, x2, changed, name, beta, eps):
    """The pair loss from the paper's definitions, plain torch."""
    mu1, mu2 = model.mu[:B], model.mu[B:]
    lv1, lv2 = model.logvar[:B], model.logvar[B:]
    v1, v2 = lv1.exp(), lv2.exp()
    with torch.no_grad():
        delta = 0.5 * (torch.log(v2 / v1) + v1 / v2 + (mu1 - mu2) ** 2 / v2 - 1.0)  # KL(q1 ‖ q2) per dim
        if name.startswith("ada_"):
            tau = (delta.max(1, keepdim=True).values + delta.min(1, keepdim=True).values) / 2
            shared = delta < tau
        else:
            shared = torch.ones(B, D, dtype=torch.bool)
            shared[torch.arange(B), changed] = False
    if name.endswith("gvae"):  # Hosoya: average of the means and of the variances
        agg_mu, agg_var = (mu1 + mu2) / 2, (v1 + v2) / 2
    else:  # Bouchacourt: normalised product
        agg_var = 1.0 / (1.0 / v1 + 1.0 / v2)
        agg_mu = (mu1 / v1 + mu2 / v2) * agg_var
    loss = 0.0
    for j, (mu, v, x) in enumerate(((mu1, v1, x1), (mu2, v2, x2))):
        m = torch.where(shared, agg_mu, mu)
        var = torch.where(shared, agg_var, v)
        z = m + var.sqrt() * eps[j * B : (j + 1) * B]
        logits = model.decode(z)
        recon = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / B
        kl = 0.5 * (m**2 + var - var.log() - 1.0).sum() / B
        loss = loss + 0.5 * (recon + beta * kl)
    return loss, shared


@pytest.mark.parametrize("name", ["ada_gvae", "ada_ml_vae", "gvae", "ml_vae"])
def test_the_loss_and_its_gradients_match_the_papers_formulas(name):
    """The gradient reaches every μ and log σ² through the reparameterised sample and the KL, the
    shared dimensions through the aggregate: a stop-gradient anywhere in the sample (e.g. on σ) or a
    wrong half of the pair moves the gradients though the value may stay."""
    g = torch.Generator().manual_seed(0)
    mu1, lv1, mu2, lv2 = _posteriors()
    weight = torch.randn(4, D, generator=g)
    x1 = (torch.rand(B, 1, 2, 2, generator=g) > 0.5).float()
    x2 = (torch.rand(B, 1, 2, 2, generator=g) > 0.5).float()
    changed = torch.tensor([3, 2, 0])
    beta = 2.0

    model = _Table(torch.cat([mu1, mu2]), torch.cat([lv1, lv2]), weight)
    objective = OBJECTIVES.build(name, beta=beta)
    objective.setup(model=model, dataset_size=10)
    torch.manual_seed(5)
    terms = objective(model, PairBatch(x1, x2, changed), step=0)
    got = torch.autograd.grad(terms["loss"], [model.mu, model.logvar, model.weight])

    torch.manual_seed(5)
    eps = torch.randn(2 * B, D)  # the objective's one (2B, D) draw, x1 block first
    expected, shared = _hand_loss(model, x1, x2, changed, name, beta, eps)
    want = torch.autograd.grad(expected, [model.mu, model.logvar, model.weight])

    if name.startswith("ada_"):  # the planted structure is recovered: dims 0, 1 shared, dim 3 not
        assert shared[:, :2].all() and not shared[:, 3].any()
    torch.testing.assert_close(terms["loss"], expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(terms["shared_dims"], shared.sum(1).float().mean())
    for g_got, g_want, what in zip(got, want, ("mu", "logvar", "decoder")):
        torch.testing.assert_close(g_got, g_want, rtol=1e-4, atol=1e-5, msg=what)


# ---------------------------------------------------------------------------- the pairs an objective draws
def _factors_of_images(dataset, images):
    """The grid factors of each image of the tiny dataset (its 24 images are distinct)."""
    every = dataset.observe(torch.arange(len(dataset)), None)
    lookup = {bytes(img.to(torch.uint8).flatten().tolist()): i for i, img in enumerate(every)}
    index = torch.tensor([lookup[bytes(img.to(torch.uint8).flatten().tolist())] for img in images])
    assert tuple(dataset.factor_sizes) == (2, 3, 4)  # row-major grid index
    return torch.stack([index // 12, (index // 4) % 3, index % 4], 1)


@pytest.mark.parametrize(("name", "k", "most"), [("ada_gvae", 2, 2), ("ml_vae", 3, 3), ("ada_ml_vae", "random", 2)])
def test_the_objective_draws_pairs_with_its_own_k(name, k, most, tiny_dataset):
    """A planted effect of ``k``: the factors read back from the images of the objective's pairs
    differ in up to ``k`` factors (``random``: up to K − 1 = 2), and some pairs differ in more than
    one (with k = 1 none would)."""
    torch.manual_seed(0)
    model = _Table(torch.zeros(2 * B, D), torch.zeros(2 * B, D), torch.zeros(4, D))
    model.latent_dim = 3
    objective = OBJECTIVES.build(name, k=k)
    objective.setup(model=model, dataset_size=len(tiny_dataset))
    batch = objective.sample_batch(tiny_dataset, 200, torch.Generator().manual_seed(0))
    f1 = _factors_of_images(tiny_dataset, batch.x1)
    f2 = _factors_of_images(tiny_dataset, batch.x2)
    differ = (f1 != f2).sum(1)
    assert differ.max().item() == most
    assert (differ > 1).sum() > 10


@pytest.mark.parametrize("name", ["gvae", "ml_vae"])
def test_the_label_variants_need_as_many_latents_as_factors_and_no_more(name, tiny_dataset):
    """Latent j is tied to factor j: 3 factors need latent_dim 3 (accepted) and refuse 2."""
    from disentangle import ConfigError

    for latent_dim, ok in ((3, True), (2, False)):
        model = _Table(torch.zeros(2 * B, D), torch.zeros(2 * B, D), torch.zeros(4, D))
        model.latent_dim = latent_dim
        objective = OBJECTIVES.build(name)
        objective.setup(model=model, dataset_size=len(tiny_dataset))
        if ok:
            assert objective.sample_batch(tiny_dataset, 4, torch.Generator()).x1.shape[0] == 4
        else:
            with pytest.raises(ConfigError, match="latent_dim"):
                objective.sample_batch(tiny_dataset, 4, torch.Generator())
