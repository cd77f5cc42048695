"""Value tests of the public estimators in ``disentangle.objectives.estimators``."""
from __future__ import annotations

import math

import pytest
import torch

from disentangle.objectives.estimators import (
    aggregate_posterior_log_density,
    decompose_kl,
    dip_covariance,
    gaussian_log_density,
    log_importance_weights,
    mmd,
    permute_dims,
    total_correlation,
)

DSPRITES_N = 737_280


def _gaussian_batch(g, m, d, sigma, mix=None):
    """Posteriors q(z|x_i) = N(μ_i, σ²I) with μ ~ N(0, I) (or N(0, mix mixᵀ)), and one z per row."""
    mu = torch.randn(m, d, generator=g, dtype=torch.float64).float()
    if mix is not None:
        mu = mu @ mix.T
    logvar = torch.full((m, d), 2.0 * math.log(sigma))
    z = mu + sigma * torch.randn(m, d, generator=g)
    return z, mu, logvar


# --------------------------------------------------------------------------- densities
def test_gaussian_log_density_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    z, mu, logvar = torch.randn(3, 5, 4, generator=g).unbind(0)
    expected = torch.distributions.Normal(mu, torch.exp(0.5 * logvar)).log_prob(z)
    assert torch.allclose(gaussian_log_density(z, mu, logvar), expected, atol=1e-6)
    # broadcasting, as used for the (M, M, D) pair matrix
    pairs = gaussian_log_density(z.unsqueeze(1), mu.unsqueeze(0), logvar.unsqueeze(0))
    assert pairs.shape == (5, 5, 4)
    assert torch.allclose(pairs[2, 3], gaussian_log_density(z[2], mu[3], logvar[3]))


# --------------------------------------------------------------------------- importance weights
@pytest.mark.parametrize("m,n", [(2, 10), (3, 3), (64, DSPRITES_N), (257, 10_000)])
def test_mss_weight_rows_sum_to_one_and_self_weight_is_one_over_n(m, n):
    log_w = log_importance_weights(m, n, "mss")
    assert log_w.shape == (m, m)
    # every row is a probability vector: logsumexp of the log-weights is 0
    assert torch.allclose(torch.logsumexp(log_w.double(), 1), torch.zeros(m, dtype=torch.float64), atol=1e-6)
    w = log_w.double().exp()
    # the sample's own posterior (the diagonal, *not* column 0) carries weight 1/N
    assert torch.allclose(w.diagonal(), torch.full((m,), 1.0 / n, dtype=torch.float64), rtol=1e-6)
    # one stratum entry per row, (N − M + 1)/(N (M − 1)); all others 1/(M − 1)
    strat = (n - m + 1) / (n * (m - 1))
    idx = torch.arange(m)
    assert torch.allclose(w[idx, (idx + 1) % m], torch.full((m,), strat, dtype=torch.float64), rtol=1e-6)
    rest = torch.ones(m, m, dtype=torch.bool)
    rest[idx, idx] = False
    rest[idx, (idx + 1) % m] = False
    assert torch.allclose(w[rest], torch.full((int(rest.sum()),), 1.0 / (m - 1), dtype=torch.float64), rtol=1e-6)


def test_mss_weights_hand_computed_example():
    # M = 3, N = 7: strata weight (7 − 3 + 1)/(7·2) = 5/14, the other point 1/2, self 1/7
    w = log_importance_weights(3, 7, "mss").double().exp()
    expected = torch.tensor([[1 / 7, 5 / 14, 1 / 2], [1 / 2, 1 / 7, 5 / 14], [5 / 14, 1 / 2, 1 / 7]], dtype=torch.float64)
    assert torch.allclose(w, expected, atol=1e-7)


def test_mws_weights_are_one_over_n_m():
    log_w = log_importance_weights(64, DSPRITES_N, "mws")
    assert torch.allclose(log_w, torch.full((64, 64), -math.log(DSPRITES_N * 64)))


@pytest.mark.parametrize("m,n", [(2, 10), (3, 7), (64, DSPRITES_N), (2048, DSPRITES_N), (257, 10_000)])
def test_mss_weights_are_the_float64_matrix_rounded_once(m, n):
    """Built on the device from three logs in double precision: the float64 matrix rounded to float32."""
    weights = torch.full((m, m), 1.0 / (m - 1), dtype=torch.float64)
    idx = torch.arange(m)
    weights[idx, (idx + 1) % m] = (n - m + 1) / (n * (m - 1))
    weights[idx, idx] = 1.0 / n
    assert torch.equal(log_importance_weights(m, n, "mss"), weights.log().float())


def test_weight_matrix_is_built_on_the_device_and_cached_per_shape_dtype_and_device():
    from disentangle.objectives import estimators

    meta = log_importance_weights(16, 100, "mss", device="meta", dtype=torch.bfloat16)
    assert meta.device.type == "meta" and meta.dtype == torch.bfloat16 and meta.shape == (16, 16)
    a = estimators._cached_log_importance_weights(8, 100, "mss", torch.device("cpu"), torch.float32)
    assert a is estimators._cached_log_importance_weights(8, 100, "mss", torch.device("cpu"), torch.float32)
    assert a is not estimators._cached_log_importance_weights(8, 100, "mss", torch.device("cpu"), torch.float64)
    assert a is not estimators._cached_log_importance_weights(8, 101, "mss", torch.device("cpu"), torch.float32)
    assert torch.equal(a, log_importance_weights(8, 100, "mss"))
    # built outside inference mode, so a matrix first made there still enters a graph later
    estimators._cached_log_importance_weights.cache_clear()
    z = torch.randn(6, 3, requires_grad=True)
    with torch.inference_mode():
        total_correlation(z.detach(), z.detach(), torch.zeros(6, 3), 50)
    total_correlation(z, z.detach(), torch.zeros(6, 3), 50).backward()
    assert z.grad is not None


def test_weight_matrix_errors():
    with pytest.raises(ValueError, match="dataset_size >= batch_size"):
        log_importance_weights(64, 10, "mss")
    with pytest.raises(ValueError, match="method"):
        log_importance_weights(8, 100, "iwae")
    with pytest.raises(ValueError, match="at least 2"):
        log_importance_weights(1, 100, "mss")


def test_aggregate_posterior_matches_an_explicit_weighted_mixture():
    g = torch.Generator().manual_seed(1)
    z, mu, logvar = _gaussian_batch(g, 5, 3, 0.7)
    n = 50
    for method in ("mss", "mws"):
        w = log_importance_weights(5, n, method).double().exp()
        log_qz, log_qz_marg = aggregate_posterior_log_density(z, mu, logvar, n, method)
        dens = torch.distributions.Normal(mu.double(), torch.exp(0.5 * logvar.double()))
        for i in range(5):
            per_j = dens.log_prob(z[i].double()).exp()  # (M, D): q(z_i,d | x_j)
            assert math.isclose(log_qz[i].item(), math.log((w[i] * per_j.prod(1)).sum().item()), rel_tol=1e-5)
            for d in range(3):
                assert math.isclose(log_qz_marg[i, d].item(), math.log((w[i] * per_j[:, d]).sum().item()), rel_tol=1e-5)


# --------------------------------------------------------------------------- total correlation
def _buggy_log_weights(m, n):
    """The weight matrix of the original β-TCVAE code and its ports (1/N written into column 0)."""
    mm = m - 1
    strat = (n - mm) / (n * mm)
    w = torch.full((m, m), 1.0 / mm, dtype=torch.float64)
    w.view(-1)[:: mm + 1] = 1.0 / n
    w.view(-1)[1 :: mm + 1] = strat
    w[mm - 1, 0] = strat
    return w.log().float()


def test_mss_tc_of_independent_latents_is_zero_within_one_nat():
    # μ ~ N(0, I), σ = 1 fixed: q(z) = N(0, 2I) is a product, its TC is 0.
    g = torch.Generator().manual_seed(0)
    values = [
        total_correlation(*_gaussian_batch(g, 64, 10, 1.0), dataset_size=DSPRITES_N, method="mss").item()
        for _ in range(30)
    ]
    mean = sum(values) / len(values)
    assert abs(mean) < 1.0, mean  # measured: −0.47 (M = 64), −0.2 (M = 256), −0.08 (M = 1024)


def test_mss_tc_of_sharper_independent_latents_and_the_column_zero_bug():
    # σ = 0.3: the own-sample weight matters; the correct diagonal gives ≈ −0.3 nats, the layout of
    # the original code (1/N into column 0) gives ≈ +7.8 nats for the same batches.
    g = torch.Generator().manual_seed(0)
    ours, buggy = [], []
    for _ in range(20):
        z, mu, logvar = _gaussian_batch(g, 64, 10, 0.3)
        ours.append(total_correlation(z, mu, logvar, DSPRITES_N, "mss").item())
        log_w = _buggy_log_weights(64, DSPRITES_N)
        pairs = gaussian_log_density(z.unsqueeze(1), mu.unsqueeze(0), logvar.unsqueeze(0))
        log_qz = torch.logsumexp(log_w + pairs.sum(2), 1)
        log_prod = torch.logsumexp(log_w.unsqueeze(2) + pairs, 1).sum(1)
        buggy.append((log_qz - log_prod).mean().item())
    assert abs(sum(ours) / len(ours)) < 1.0
    assert sum(buggy) / len(buggy) > 5.0


def test_mss_tc_of_correlated_gaussian_matches_closed_form():
    # 2-D, z ~ N(0, [[1, ρ], [ρ, 1]]) overall: TC = −½ log(1 − ρ²) (0.511 nats for ρ = 0.8)
    rho, sigma = 0.8, 0.3
    cov_mu = torch.tensor([[1.0, rho], [rho, 1.0]]) - sigma**2 * torch.eye(2)
    mix = torch.linalg.cholesky(cov_mu)
    g = torch.Generator().manual_seed(3)
    values = [total_correlation(*_gaussian_batch(g, 256, 2, sigma, mix), DSPRITES_N, "mss").item() for _ in range(20)]
    assert abs(sum(values) / len(values) - (-0.5 * math.log(1 - rho**2))) < 0.1


def test_mws_tc_is_finite_and_carries_its_constants():
    g = torch.Generator().manual_seed(0)
    z, mu, logvar = _gaussian_batch(g, 64, 10, 1.0)
    tc = total_correlation(z, mu, logvar, DSPRITES_N, "mws")
    assert torch.isfinite(tc)
    # = disentanglement_lib's constant-free estimate + (D − 1) log(N M)
    pairs = gaussian_log_density(z.unsqueeze(1), mu.unsqueeze(0), logvar.unsqueeze(0))
    no_const = (torch.logsumexp(pairs.sum(2), 1) - torch.logsumexp(pairs, 1).sum(1)).mean()
    assert math.isclose(tc.item(), no_const.item() + 9 * math.log(DSPRITES_N * 64), rel_tol=1e-5)
    # MWS is strongly biased upwards for independent latents (≈ 122 nats here); it is reported, not tested to be 0
    assert tc.item() > 100


@pytest.mark.parametrize("method", ["mss", "mws"])
def test_decomposition_adds_up_to_the_sampled_kl(method):
    g = torch.Generator().manual_seed(4)
    mu = 0.8 * torch.randn(64, 6, generator=g)
    logvar = torch.randn(64, 6, generator=g) * 0.3 - 1.0
    z = mu + torch.exp(0.5 * logvar) * torch.randn(64, 6, generator=g)
    parts = decompose_kl(z, mu, logvar, 10_000, method)
    total = parts["mutual_info"] + parts["total_correlation"] + parts["dimwise_kl"]
    assert torch.allclose(total, parts["kl"], atol=1e-4)
    # the sampled KL is E[log q(z|x) − log p(z)] at the same samples
    sampled = (gaussian_log_density(z, mu, logvar) - gaussian_log_density(z, torch.zeros(()), torch.zeros(()))).sum(1).mean()
    assert torch.allclose(parts["kl"], sampled, atol=1e-5)
    assert torch.allclose(parts["total_correlation"], total_correlation(z, mu, logvar, 10_000, method))


def test_sampled_kl_is_unbiased_for_the_analytic_kl():
    g = torch.Generator().manual_seed(5)
    mu = torch.randn(4096, 3, generator=g)
    logvar = torch.randn(4096, 3, generator=g) * 0.5
    z = mu + torch.exp(0.5 * logvar) * torch.randn(4096, 3, generator=g)
    sampled = (gaussian_log_density(z, mu, logvar) - gaussian_log_density(z, torch.zeros(()), torch.zeros(()))).sum(1).mean()
    analytic = 0.5 * (mu.square() + logvar.exp() - logvar - 1).sum(1).mean()
    assert abs(sampled.item() - analytic.item()) < 0.05


def test_total_correlation_gradients_are_finite():
    g = torch.Generator().manual_seed(6)
    mu = torch.randn(32, 4, generator=g, requires_grad=True)
    logvar = torch.zeros(32, 4, requires_grad=True)
    z = mu + torch.exp(0.5 * logvar) * torch.randn(32, 4, generator=g)
    total_correlation(z, mu, logvar, 1000).backward()
    assert torch.isfinite(mu.grad).all() and torch.isfinite(logvar.grad).all()


# --------------------------------------------------------------------------- permute_dims
def test_permute_dims_permutes_each_column_independently():
    z = torch.arange(200, dtype=torch.float32).view(50, 4)
    g = torch.Generator().manual_seed(0)
    p = permute_dims(z, g)
    assert p.shape == z.shape
    for d in range(4):
        assert torch.equal(p[:, d].sort().values, z[:, d])  # a permutation of its own column
    orders = [tuple(((p[:, d] - d) / 4).long().tolist()) for d in range(4)]
    assert len(set(orders)) == 4  # different permutations per column
    assert torch.equal(p, permute_dims(z, torch.Generator().manual_seed(0)))  # reproducible


def test_permute_dims_destroys_dependence_but_keeps_marginals():
    g = torch.Generator().manual_seed(1)
    u = torch.randn(20_000, 1, generator=g)
    z = torch.cat([u, u], 1)  # perfectly correlated
    p = permute_dims(z, g)
    corr = torch.corrcoef(p.T)[0, 1]
    assert abs(corr.item()) < 0.03
    assert torch.equal(p[:, 0].sort().values, z[:, 0].sort().values)


# --------------------------------------------------------------------------- MMD
def _rbf_mmd2_gaussians(m1, s1, m2, s2, scale):
    """Closed-form MMD² with k = exp(−‖x − y‖²/scale) between N(m1, s1² I) and N(m2, s2² I)."""
    d = m1.numel()
    h2 = scale / 2.0  # kernel bandwidth σ_k²

    def ek(a, sa, b, sb):  # E k(X, Y), X ~ N(a, sa² I), Y ~ N(b, sb² I) independent
        v = h2 + sa**2 + sb**2
        return (h2 / v) ** (d / 2) * math.exp(-((a - b).square().sum().item()) / (2 * v))

    return ek(m1, s1, m1, s1) + ek(m2, s2, m2, s2) - 2 * ek(m1, s1, m2, s2)


def test_rbf_mmd_matches_the_closed_form_between_gaussians():
    d, scale = 3, 4.0
    m1, m2 = torch.zeros(d), torch.tensor([1.0, 0.0, 0.5])
    expected = _rbf_mmd2_gaussians(m1, 1.0, m2, 0.7, scale)
    g = torch.Generator().manual_seed(0)
    x = m1 + torch.randn(1500, d, generator=g)
    y = m2 + 0.7 * torch.randn(1500, d, generator=g)
    est = mmd(x, y, "rbf", scale=scale).item()
    assert abs(est - expected) < 0.02, (est, expected)  # expected 0.178; max error over 20 seeds 0.015


def test_mmd_estimator_is_unbiased_at_small_sample_sizes():
    # averaged over many batches of 8, the *unbiased* estimator hits the closed form; the biased
    # (V-statistic) one would be off by ≈ 2(1 − E k)/8
    d, scale = 2, 4.0
    m1, m2 = torch.zeros(d), torch.tensor([0.8, 0.0])
    expected = _rbf_mmd2_gaussians(m1, 1.0, m2, 1.0, scale)
    g = torch.Generator().manual_seed(1)
    vals = torch.stack([
        mmd(torch.randn(8, d, generator=g), m2 + torch.randn(8, d, generator=g), "rbf", scale=scale)
        for _ in range(3000)
    ])
    assert abs(vals.mean().item() - expected) < 0.01, (vals.mean().item(), expected)


@pytest.mark.parametrize("kernel", ["rbf", "imq"])
def test_mmd_of_samples_of_one_distribution_is_near_zero(kernel):
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(1000, 10, generator=g), torch.randn(1000, 10, generator=g)
    assert abs(mmd(x, y, kernel).item()) < 2e-3
    shifted = mmd(x, y + 1.0, kernel).item()
    assert shifted > 50 * abs(mmd(x, y, kernel).item())


def test_mmd_hand_computed_example():
    x = torch.tensor([[0.0], [1.0]])
    y = torch.tensor([[0.0], [2.0]])
    # rbf, scale 1: k_xx(off) = e^{-1}, k_yy(off) = e^{-4}, k_xy = {1, e^{-4}, e^{-1}, e^{-1}}
    e = math.exp
    expected = e(-1) + e(-4) - 2 * (1 + e(-4) + 2 * e(-1)) / 4
    assert math.isclose(mmd(x, y, "rbf", scale=1.0).item(), expected, rel_tol=1e-6)
    assert math.isclose(mmd(x, y, "rbf", sigma=math.sqrt(0.5)).item(), expected, rel_tol=1e-6)
    # imq, scale 1: k = 1/(1 + d²)
    expected_imq = 1 / 2 + 1 / 5 - 2 * (1 + 1 / 5 + 1 / 2 + 1 / 2) / 4
    assert math.isclose(mmd(x, y, "imq", scale=1.0).item(), expected_imq, rel_tol=1e-6)
    with pytest.raises(ValueError, match="kernel"):
        mmd(x, y, "laplace")
    with pytest.raises(ValueError, match="unknown kernel parameters"):
        mmd(x, y, "rbf", bandwidth=1.0)


# --------------------------------------------------------------------------- DIP covariance
def test_dip_covariance_matches_torch_cov_and_adds_mean_posterior_variance():
    g = torch.Generator().manual_seed(7)
    mu = torch.randn(64, 5, generator=g) @ torch.randn(5, 5, generator=g)
    logvar = torch.randn(64, 5, generator=g)
    c1 = dip_covariance(mu, logvar, "i")
    assert torch.allclose(c1, torch.cov(mu.T, correction=0), atol=1e-5)
    c2 = dip_covariance(mu, logvar, "ii")
    assert torch.allclose(c2, torch.cov(mu.T, correction=0) + torch.diag(logvar.exp().mean(0)), atol=1e-5)


def test_dip_covariance_hand_computed_example():
    mu = torch.tensor([[1.0, 2.0], [3.0, 2.0], [2.0, 5.0]])  # mean (2, 3)
    # centred: (−1, −1), (1, −1), (0, 2); C = [[2, 0], [0, 6]] / 3
    expected = torch.tensor([[2 / 3, 0.0], [0.0, 2.0]])
    assert torch.allclose(dip_covariance(mu, None, "i"), expected)
    logvar = torch.log(torch.tensor([[1.0, 4.0], [2.0, 4.0], [3.0, 1.0]]))  # mean σ² = (2, 3)
    assert torch.allclose(dip_covariance(mu, logvar, "ii"), expected + torch.diag(torch.tensor([2.0, 3.0])))
    with pytest.raises(ValueError, match="kind"):
        dip_covariance(mu, logvar, "iii")
