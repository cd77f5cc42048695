"""The ``elbo`` metric: analytic values on planted models, on a grid and on an unlabelled sample."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from disentangle.data import IndexedImageDataset
from disentangle.data.samples import SampleDataset
from disentangle.errors import ConfigError
from disentangle.metrics import METRICS, elbo, metric_applies

pytestmark = pytest.mark.usefixtures("one_thread")

PIXELS = 16


class _Planted(nn.Module):
    """encode -> (mu, logvar) fixed; decode -> constant logits c (whatever z)."""

    def __init__(self, mu: float, logvar: float, c: float, dim: int = 3, reconstruction: str | None = None) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))
        self.mu, self.logvar, self.c, self.dim = mu, logvar, c, dim
        self.config = {"objective": {"reconstruction": reconstruction}} if reconstruction else None

    def encode(self, x):
        n = x.shape[0]
        return torch.full((n, self.dim), self.mu), torch.full((n, self.dim), self.logvar)

    def decode(self, z):
        return torch.full((z.shape[0], 1, 4, 4), self.c) + 0 * z.sum(1)[:, None, None, None]


def _grid(value: int) -> IndexedImageDataset:
    images = torch.full((6, 1, 4, 4), value, dtype=torch.uint8)
    return IndexedImageDataset(images, ("a", "b"), (2, 3), scale=1.0)


def _softplus(v: float) -> float:
    return math.log1p(math.exp(v))


@pytest.mark.parametrize("value", [0, 1])
def test_bernoulli_terms_are_the_closed_form(value):
    model = _Planted(mu=1.0, logvar=math.log(2.0), c=0.7)
    out = elbo(_grid(value), model, num_samples=50)
    recon = PIXELS * (_softplus(-0.7) if value else _softplus(0.7))
    kl = 3 * 0.5 * (1.0 + 2.0 - math.log(2.0) - 1.0)
    assert out["reconstruction"] == pytest.approx(recon, rel=1e-6)
    assert out["kl"] == pytest.approx(kl, rel=1e-6)
    assert out["elbo"] == pytest.approx(-(recon + kl), rel=1e-6)
    s = 1 / (1 + math.exp(-0.7))
    assert out["mse"] == pytest.approx((s - value) ** 2, rel=1e-6)


def test_auto_takes_the_models_own_likelihood():
    model = _Planted(mu=0.0, logvar=0.0, c=0.0, reconstruction="gaussian")
    out = elbo(_grid(1), model, num_samples=20)
    assert out["reconstruction"] == pytest.approx(PIXELS * 0.25, rel=1e-6)  # (sigmoid(0) - 1)^2 per pixel
    assert out["kl"] == pytest.approx(0.0, abs=1e-7)
    bern = elbo(_grid(1), model, num_samples=20, reconstruction="bernoulli")
    assert bern["reconstruction"] == pytest.approx(PIXELS * math.log(2.0), rel=1e-6)


def test_an_unlabelled_sample_is_scored_and_the_draws_are_seeded():
    g = torch.Generator().manual_seed(0)
    images = (torch.rand(40, 1, 4, 4, generator=g) > 0.5).to(torch.uint8)
    sample = SampleDataset(images, scale=1.0)
    assert metric_applies("elbo", sample)
    model = _Planted(mu=0.0, logvar=0.0, c=0.3)
    a, b = elbo(sample, model, num_samples=4000, seed=1), elbo(sample, model, num_samples=4000, seed=1)
    assert a == b
    # the expected reconstruction: ones cost softplus(-c), zeros softplus(c), at the sample's ones rate
    ones = images.float().mean().item()
    expected = PIXELS * (ones * _softplus(-0.3) + (1 - ones) * _softplus(0.3))
    assert a["reconstruction"] == pytest.approx(expected, rel=0.02)


def test_a_real_vae_matches_the_objectives_terms_on_one_image():
    from disentangle.models.vae import VAE
    from disentangle.objectives.losses import kl_normal_per_dim, reconstruction_loss

    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 4, 4), latent_dim=2, hidden_sizes=[8])
    ds = _grid(1)  # every image the same: the reconstruction differs only through the posterior draw
    out = elbo(ds, model, num_samples=1, seed=3)
    x = torch.ones(1, 1, 4, 4)
    with torch.no_grad():
        mu, logvar = model.encode(x)
        kl = kl_normal_per_dim(mu, logvar).sum().item()
        mse = (torch.sigmoid(model.decode(mu)) - x).square().mean().item()
    assert out["kl"] == pytest.approx(kl, rel=1e-5)
    assert out["mse"] == pytest.approx(mse, rel=1e-5)
    # the draw's reconstruction lies where the decoder's likelihood of this image can be
    with torch.no_grad():
        draws = [reconstruction_loss(model.decode(mu + torch.randn_like(mu) * (0.5 * logvar).exp()), x).item() for _ in range(200)]
    assert min(draws) - 1e-4 <= out["reconstruction"] <= max(draws) + 1e-4


def test_bad_settings_and_models_without_a_decoder():
    with pytest.raises(ConfigError, match="reconstruction"):
        METRICS.get("elbo")(_grid(0), _Planted(0, 0, 0), reconstruction="laplace")

    class _EncoderOnly(nn.Module):
        def encode(self, x):
            return torch.zeros(len(x), 2), torch.zeros(len(x), 2)

    with pytest.raises(ConfigError, match="decoder"):
        elbo(_grid(0), _EncoderOnly())
    assert np.isfinite(elbo(_grid(0), _Planted(0, 0, 0), num_samples=3)["elbo"])


def test_a_gan_has_no_posterior_to_score():
    """InfoGAN's codes have a uniform prior and no posterior: 'all' recorded an ELBO of -58,156 for the
    zoo's InfoGAN. 'all' now leaves the posterior metrics out for a GAN, and naming one is refused."""
    import types

    import pytest
    import torch

    from disentangle.errors import ConfigError
    from disentangle.metrics import elbo as elbo_metric
    from disentangle.metrics import elbo_decomposition, resolve_metric_names

    gan = types.SimpleNamespace(decoder=types.SimpleNamespace(code_prior="uniform"),
                                encode=lambda x: (torch.zeros(len(x), 2), torch.zeros(len(x), 2)),
                                decode=lambda z: torch.zeros(len(z), 1, 4, 4))
    names = resolve_metric_names("all", gan)
    assert "elbo" not in names and "elbo_decomposition" not in names and "mig" in names
    vae = types.SimpleNamespace(decoder=types.SimpleNamespace(), encode=gan.encode, decode=gan.decode)
    assert {"elbo", "elbo_decomposition"} <= set(resolve_metric_names("all", vae))
    for metric in (elbo_metric, elbo_decomposition):
        with pytest.raises(ConfigError, match="this model is a GAN: its codes have a uniform prior and no posterior"):
            metric(None, gan)


def test_chens_mig_estimator_is_refused_for_a_gan_and_the_histogram_one_is_not():
    """Chen's estimator samples N(mu, exp(logvar)): a GAN's Q gives logvar 0, so codes in [-1, 1]
    drowned in unit noise (a GAN encoding its factors exactly scored 0.07 against the histogram's
    1.0). It is refused, with the estimator to use."""
    import types

    import pytest
    import torch

    from disentangle.errors import ConfigError
    from disentangle.metrics import mig

    dataset = _grid(0)

    def encode(x):
        codes = x.reshape(len(x), -1)[:, :2].float()
        return codes, torch.zeros_like(codes)

    gan = types.SimpleNamespace(decoder=types.SimpleNamespace(code_prior="uniform"), encode=encode,
                                representation=lambda x: encode(torch.as_tensor(x))[0])
    with pytest.raises(ConfigError, match="mig with estimator='chen' scores a VAE's posterior .* Use estimator='histogram'"):
        mig(dataset, gan, estimator="chen")
    assert set(mig(dataset, gan, num_train=64)) >= {"mig"}
