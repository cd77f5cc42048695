"""Audit value tests for β-TCVAE: every term recomputed from Chen et al. 2018 (eq. 4, appendix C)
with explicit loops in float64, on a fixed 3-sample batch, through a fixed fake model."""
from __future__ import annotations

import math

import pytest
import torch

from disentangle.objectives.beta_tcvae import BetaTCVAE

from .fixed_model import FixedModel

pytestmark = pytest.mark.usefixtures("one_thread")



MU = [[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8]]
LOGVAR = [[-1.0, 0.2], [0.3, -0.6], [-0.2, -1.5]]
Z = [[0.9, -0.4], [1.1, 0.6], [-0.1, 1.2]]
N = 7


def _log_n(z, mu, logvar):
    return -0.5 * (math.log(2 * math.pi) + logvar + (z - mu) ** 2 / math.exp(logvar))


def _weights(method):
    m = 3
    if method == "mws":
        return [[1.0 / (N * m)] * m for _ in range(m)]
    # MSS (Chen et al. C.2): own point 1/N, the rest of its stratum (N − M + 1)/(N(M − 1)), others 1/(M − 1)
    own, rest, other = 1.0 / N, (N - m + 1) / (N * (m - 1)), 1.0 / (m - 1)
    return [[own, rest, other], [other, own, rest], [rest, other, own]]


def _reference(method):
    w = _weights(method)
    mi = tc = dw = kls = 0.0
    for i in range(3):
        log_qzx = sum(_log_n(Z[i][d], MU[i][d], LOGVAR[i][d]) for d in range(2))
        log_pz = sum(_log_n(Z[i][d], 0.0, 0.0) for d in range(2))
        qz = sum(w[i][j] * math.exp(sum(_log_n(Z[i][d], MU[j][d], LOGVAR[j][d]) for d in range(2))) for j in range(3))
        log_prod = sum(
            math.log(sum(w[i][j] * math.exp(_log_n(Z[i][d], MU[j][d], LOGVAR[j][d])) for j in range(3))) for d in range(2)
        )
        mi += (log_qzx - math.log(qz)) / 3
        tc += (math.log(qz) - log_prod) / 3
        dw += (log_prod - log_pz) / 3
        kls += (log_qzx - log_pz) / 3
    return mi, tc, dw, kls


def _setup(reconstruction="bernoulli", **params):
    mu, logvar, z = torch.tensor(MU), torch.tensor(LOGVAR), torch.tensor(Z)
    logits = torch.tensor([[0.3, -1.2], [1.0, 0.5], [-2.0, 0.1]]).view(3, 1, 1, 2)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.25]]).view(3, 1, 1, 2)
    model = FixedModel(mu, logvar, z, logits)
    obj = BetaTCVAE(reconstruction=reconstruction, **params)
    obj.setup(model=model, dataset_size=N)
    return obj(model, x, step=0), mu, logvar, logits, x


@pytest.mark.parametrize("method", ["mss", "mws"])
def test_terms_match_an_explicit_float64_computation(method):
    terms, mu, logvar, logits, x = _setup(alpha=0.5, beta=3.0, gamma=2.0, estimator=method)
    mi, tc, dw, kls = _reference(method)
    assert math.isclose(terms["mutual_info"].item(), mi, rel_tol=1e-5, abs_tol=1e-5)
    assert math.isclose(terms["total_correlation"].item(), tc, rel_tol=1e-5, abs_tol=1e-5)
    assert math.isclose(terms["dimwise_kl"].item(), dw, rel_tol=1e-5, abs_tol=1e-5)
    assert math.isclose(terms["kl_sampled"].item(), kls, rel_tol=1e-5, abs_tol=1e-5)
    recon = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="sum").item() / 3
    assert math.isclose(terms["loss"].item(), recon + 0.5 * mi + 3.0 * tc + 2.0 * dw, rel_tol=1e-5)


def test_elbo_and_kl_are_the_analytic_ones_not_the_sampled_ones():
    terms, mu, logvar, logits, x = _setup()
    kl = (0.5 * (mu**2 + logvar.exp() - logvar - 1)).sum(1).mean()
    torch.testing.assert_close(terms["kl"], kl)
    torch.testing.assert_close(terms["elbo"], -(terms["recon"] + kl))
    # and the sampled KL really differs here, so the two cannot be confused
    assert abs(terms["kl_sampled"].item() - kl.item()) > 0.1


def test_gaussian_reconstruction_is_honoured():
    terms, mu, logvar, logits, x = _setup(reconstruction="gaussian", beta=1.0)
    recon = (torch.sigmoid(logits) - x).square().sum() / 3
    torch.testing.assert_close(terms["recon"], recon)
    torch.testing.assert_close(terms["loss"], recon + terms["kl_sampled"], rtol=1e-5, atol=1e-5)


def _torch_reference_loss(z, mu, logvar, alpha, beta, gamma):
    """α·MI + β·TC + γ·dimKL, MSS weights of Chen et al., written out in float64 torch (autograd)."""
    w = torch.tensor(_weights("mss"), dtype=torch.float64)
    log_pairs = -0.5 * (math.log(2 * math.pi) + logvar[None] + (z[:, None] - mu[None]) ** 2 / logvar[None].exp())
    log_qz = torch.log((w * log_pairs.sum(2).exp()).sum(1))
    log_prod = torch.log((w[:, :, None] * log_pairs.exp()).sum(1)).sum(1)
    log_qzx = (-0.5 * (math.log(2 * math.pi) + logvar + (z - mu) ** 2 / logvar.exp())).sum(1)
    log_pz = (-0.5 * (math.log(2 * math.pi) + z**2)).sum(1)
    return (alpha * (log_qzx - log_qz) + beta * (log_qz - log_prod) + gamma * (log_prod - log_pz)).mean()


def test_gradients_reach_codes_means_and_log_variances():
    leaves = [torch.tensor(v, requires_grad=True) for v in (MU, LOGVAR, Z)]
    mu, logvar, z = leaves
    logits = torch.zeros(3, 1, 1, 2)
    model = FixedModel(mu, logvar, z, logits)
    obj = BetaTCVAE(alpha=0.5, beta=3.0, gamma=2.0)
    obj.setup(model=model, dataset_size=N)
    obj(model, torch.ones(3, 1, 1, 2), step=0)["loss"].backward()
    ref = [t.detach().double().requires_grad_(True) for t in leaves]
    _torch_reference_loss(ref[2], ref[0], ref[1], 0.5, 3.0, 2.0).backward()
    for name, ours, theirs in zip(("mu", "logvar", "z"), leaves, ref):
        torch.testing.assert_close(ours.grad.double(), theirs.grad, rtol=1e-4, atol=1e-5, msg=name)
