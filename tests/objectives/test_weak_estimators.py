"""Weak-supervision estimators: pair_kl, adaptive_shared_mask, aggregate_pair, against independent
computations (torch.distributions, hand formulas, an encoder exact on the factors)."""
from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from disentangle.data.pairs import sample_pair_factors
from disentangle.objectives.estimators import adaptive_shared_mask, aggregate_pair, pair_kl


def _posteriors(seed: int, shape=(64, 10)):
    g = torch.Generator().manual_seed(seed)
    mu1, mu2 = torch.randn(shape, generator=g) * 2, torch.randn(shape, generator=g) * 2
    logvar1, logvar2 = torch.randn(shape, generator=g) * 1.5, torch.randn(shape, generator=g) * 1.5
    return mu1, logvar1, mu2, logvar2


def test_pair_kl_matches_torch_distributions():
    mu1, logvar1, mu2, logvar2 = _posteriors(0)
    expected = kl_divergence(Normal(mu1.double(), (0.5 * logvar1.double()).exp()), Normal(mu2.double(), (0.5 * logvar2.double()).exp()))
    got = pair_kl(mu1, logvar1, mu2, logvar2)
    assert got.shape == (64, 10) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    # KL(q ‖ q) = 0 and the direction matters: KL(q1 ‖ q2) ≠ KL(q2 ‖ q1)
    assert pair_kl(mu1, logvar1, mu1, logvar1).abs().max() < 1e-6
    assert not torch.allclose(got, pair_kl(mu2, logvar2, mu1, logvar1))


def test_pair_kl_is_float32_under_autocast():
    mu1, logvar1, mu2, logvar2 = (t.bfloat16() for t in _posteriors(1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert pair_kl(mu1, logvar1, mu2, logvar2).dtype == torch.float32


def test_pair_kl_rejects_mismatched_shapes():
    mu1, logvar1, mu2, logvar2 = _posteriors(2)
    with pytest.raises(ValueError, match="same shape"):
        pair_kl(mu1, logvar1, mu2[:, :3], logvar2)


@pytest.mark.parametrize("seed", range(5))
def test_mask_selects_exactly_the_dimensions_where_the_posteriors_differ(seed):
    g = torch.Generator().manual_seed(100 + seed)
    batch, dims = 256, 10
    mu1, logvar1 = torch.randn(batch, dims, generator=g), torch.randn(batch, dims, generator=g) * 0.5
    # each pair differs in a known, non-empty set of dimensions (at most dims - 1 of them)
    differs = torch.rand(batch, dims, generator=g) < torch.rand(batch, 1, generator=g)
    differs[:, 0] |= ~differs.any(1)
    differs[:, -1] &= ~differs.all(1)
    # shifts of 3 to 3.5 posterior std: every differing δ is within a factor 2 of the largest
    shift = (3 + 0.5 * torch.rand(batch, dims, generator=g)) * (0.5 * logvar1).exp()
    sign = torch.where(torch.rand(batch, dims, generator=g) < 0.5, -1.0, 1.0)
    mu2 = torch.where(differs, mu1 + sign * shift, mu1)
    delta = pair_kl(mu1, logvar1, mu2, logvar1)
    shared = adaptive_shared_mask(delta)
    assert shared.dtype == torch.bool
    assert torch.equal(shared, ~differs)


def test_mask_threshold_by_hand():
    delta = torch.tensor([[0.0, 1.0, 4.0, 2.0, 1.99], [3.0, 3.0, 3.0, 3.0, 3.0], [5.0, 0.2, 0.1, 9.9, 0.0]])
    # τ = (max + min)/2: 2, 3, 4.95; shared iff δ < τ (the threshold itself is not shared)
    expected = torch.tensor(
        [[True, True, False, False, True], [False] * 5, [False, True, True, False, True]]
    )
    assert torch.equal(adaptive_shared_mask(delta), expected)
    # the mask is invariant to the scale of δ (disentanglement_lib's compute_kl is 2·KL)
    assert torch.equal(adaptive_shared_mask(2 * delta), expected)


def test_gvae_aggregate_by_hand():
    mu1, logvar1 = torch.tensor([[1.0, -2.0]]), torch.tensor([[math.log(0.5), math.log(4.0)]])
    mu2, logvar2 = torch.tensor([[3.0, 2.0]]), torch.tensor([[math.log(1.5), math.log(0.25)]])
    mu, logvar = aggregate_pair(mu1, logvar1, mu2, logvar2, "gvae")
    torch.testing.assert_close(mu, torch.tensor([[2.0, 0.0]]))
    torch.testing.assert_close(logvar.exp(), torch.tensor([[1.0, 2.125]]))


def test_ml_vae_aggregates_by_hand():
    mu1, logvar1 = torch.tensor([[1.0, -2.0]]), torch.tensor([[math.log(0.5), math.log(4.0)]])
    mu2, logvar2 = torch.tensor([[3.0, 2.0]]), torch.tensor([[math.log(1.5), math.log(0.25)]])
    # product of N(1, .5) and N(3, 1.5): precision 2 + 2/3 = 8/3, var 3/8, mean (1·2 + 3·(2/3))·3/8 = 1.5
    # product of N(-2, 4) and N(2, .25): precision 1/4 + 4 = 17/4, var 4/17, mean (-1/2 + 8)·4/17 = 30/17
    mu, logvar = aggregate_pair(mu1, logvar1, mu2, logvar2, "ml_vae")
    torch.testing.assert_close(mu, torch.tensor([[1.5, 30 / 17]]))
    torch.testing.assert_close(logvar.exp(), torch.tensor([[3 / 8, 4 / 17]]))
    # disentanglement_lib: the same mean, twice the variance (2 σ1² σ2² / (σ1² + σ2²))
    mu_d, logvar_d = aggregate_pair(mu1, logvar1, mu2, logvar2, "ml_vae_dlib")
    torch.testing.assert_close(mu_d, mu)
    torch.testing.assert_close(logvar_d.exp(), torch.tensor([[3 / 4, 8 / 17]]))


def test_aggregates_agree_with_the_reference_formulas_on_random_posteriors():
    mu1, logvar1, mu2, logvar2 = (t.double() for t in _posteriors(3))
    v1, v2 = logvar1.exp(), logvar2.exp()
    # disentanglement_lib weak_vae.py, written out: GroupVAEBase and MLVae.model_fn
    ref = {
        "gvae": (0.5 * mu1 + 0.5 * mu2, (0.5 * v1 + 0.5 * v2).log()),
        "ml_vae_dlib": ((mu1 / v1 + mu2 / v2) * (2 * v1 * v2 / (v1 + v2)) * 0.5, (2 * v1 * v2 / (v1 + v2)).log()),
        "ml_vae": ((mu1 / v1 + mu2 / v2) / (1 / v1 + 1 / v2), (1 / (1 / v1 + 1 / v2)).log()),
    }
    for kind, (mu_ref, logvar_ref) in ref.items():
        mu, logvar = aggregate_pair(*(t.float() for t in (mu1, logvar1, mu2, logvar2)), kind)
        torch.testing.assert_close(mu.double(), mu_ref, rtol=1e-4, atol=1e-4, msg=kind)
        torch.testing.assert_close(logvar.double(), logvar_ref, rtol=1e-4, atol=1e-4, msg=kind)


def test_aggregates_are_finite_for_extreme_log_variances():
    mu1, mu2 = torch.tensor([[1.0, 1.0]]), torch.tensor([[-1.0, 2.0]])
    logvar1, logvar2 = torch.tensor([[-200.0, 90.0]]), torch.tensor([[200.0, 95.0]])
    for kind in ("gvae", "ml_vae", "ml_vae_dlib"):
        mu, logvar = aggregate_pair(mu1, logvar1, mu2, logvar2, kind)
        assert torch.isfinite(mu).all() and torch.isfinite(logvar).all(), kind
    # the product follows the much more precise posterior
    mu, logvar = aggregate_pair(mu1, logvar1, mu2, logvar2, "ml_vae")
    torch.testing.assert_close(mu[0, 0], torch.tensor(1.0))
    torch.testing.assert_close(logvar[0, 0], torch.tensor(-200.0))


def test_identical_posteriors_aggregate_to_themselves_except_the_product():
    mu, logvar = torch.randn(8, 4), torch.randn(8, 4)
    for kind in ("gvae", "ml_vae_dlib"):
        a_mu, a_logvar = aggregate_pair(mu, logvar, mu, logvar, kind)
        torch.testing.assert_close(a_mu, mu)
        torch.testing.assert_close(a_logvar, logvar)
    a_mu, a_logvar = aggregate_pair(mu, logvar, mu, logvar, "ml_vae")
    torch.testing.assert_close(a_mu, mu)
    torch.testing.assert_close(a_logvar, logvar - math.log(2.0))  # the product halves the variance


def test_unknown_aggregation_is_rejected():
    mu = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="gvae"):
        aggregate_pair(mu, mu, mu, mu, "mean")


@pytest.mark.parametrize("kind", ["gvae", "ml_vae", "ml_vae_dlib"])
def test_exact_encoder_on_single_factor_pairs_keeps_the_changed_dimension(kind):
    """An encoder that puts factor j into latent j (scaled class, fixed σ) plus two constant
    latents: on pairs that resample one factor, the adaptive mask aggregates every latent but the
    changed factor's, whose posteriors stay untouched; the shared latents become one posterior."""
    sizes = (3, 6, 40, 32, 32)
    pairs = sample_pair_factors(sizes, 4096, torch.Generator().manual_seed(5), k=1)
    scale = 1.0 / torch.tensor(sizes, dtype=torch.float32)

    def encode(factors):
        mu = torch.cat([factors.float() * scale, torch.zeros(len(factors), 2)], 1)
        logvar = torch.cat([torch.full((len(factors), 5), -6.0), torch.zeros(len(factors), 2)], 1)
        return mu, logvar

    (mu1, logvar1), (mu2, logvar2) = encode(pairs.factors1), encode(pairs.factors2)
    shared = adaptive_shared_mask(pair_kl(mu1, logvar1, mu2, logvar2))
    moved = torch.cat([pairs.factors1 != pairs.factors2, torch.zeros(len(mu1), 2, dtype=torch.bool)], 1)
    assert moved.sum(1).le(1).all() and moved.any()
    # pairs whose factor changed: exactly that latent is not shared; unchanged pairs: nothing shared
    changed_pairs = moved.any(1)
    assert torch.equal(shared[changed_pairs], ~moved[changed_pairs])
    assert not shared[~changed_pairs].any()
    agg_mu, agg_logvar = aggregate_pair(mu1, logvar1, mu2, logvar2, kind)
    new_mu1, new_mu2 = torch.where(shared, agg_mu, mu1), torch.where(shared, agg_mu, mu2)
    new_logvar1 = torch.where(shared, agg_logvar, logvar1)
    assert torch.equal(new_mu1[moved], mu1[moved]) and torch.equal(new_mu2[moved], mu2[moved])
    assert torch.equal(new_logvar1[moved], logvar1[moved])
    assert torch.equal(new_mu1[shared], new_mu2[shared])
    # latents of unchanged factors hold the same value in both images: the aggregate keeps it
    torch.testing.assert_close(new_mu1[shared], mu1[shared])
