"""Group ML-VAE and GVAE (disentangle.objectives.group) and the group sampler (disentangle.data.groups):
the group posteriors by value, the sampler's invariants and determinism, the loss against an
independent computation, the multi-process rule, config errors, training and resume."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from disentangle._core import distributed
from disentangle.config import load_config
from disentangle.data import IndexedImageDataset
from disentangle.data.base import BatchShard, sampling_shard
from disentangle.data.groups import GroupBatch, sample_group_factors, sample_groups
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.group import GroupGVAE, GroupMLVAE, average_of_gaussians, product_of_gaussians
from disentangle.train import main
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = (2, 3, 4)


# ---------------------------------------------------------------------------- the group posteriors
def _members(mu: torch.Tensor, logvar: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` identical members per group, group-major."""
    return mu.repeat_interleave(n, dim=0), logvar.repeat_interleave(n, dim=0)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_product_of_identical_members_divides_the_variance_by_n(n):
    mu = torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, -0.25]])
    logvar = torch.tensor([[0.0, -2.0, 1.5], [-0.5, 0.3, 4.0]])
    g_mu, g_logvar = product_of_gaussians(*_members(mu, logvar, n), n)
    torch.testing.assert_close(g_mu, mu)
    torch.testing.assert_close(g_logvar.exp(), logvar.exp() / n)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_average_of_identical_members_keeps_the_posterior(n):
    mu = torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, -0.25]])
    logvar = torch.tensor([[0.0, -2.0, 1.5], [-0.5, 0.3, 4.0]])
    g_mu, g_logvar = average_of_gaussians(*_members(mu, logvar, n), n)
    torch.testing.assert_close(g_mu, mu)
    torch.testing.assert_close(g_logvar, logvar)


def test_product_of_two_gaussians_is_the_closed_form():
    # N(1, 4) · N(3, 1): σ² = 4·1/(4 + 1) = 0.8, μ = (1/4 + 3/1)·0.8 = 2.6; second dimension N(−2, 0.5) · N(0, 2)
    mu = torch.tensor([[1.0, -2.0], [3.0, 0.0]])
    var = torch.tensor([[4.0, 0.5], [1.0, 2.0]])
    g_mu, g_logvar = product_of_gaussians(mu, var.log(), 2)
    v = [4.0 * 1.0 / 5.0, 0.5 * 2.0 / 2.5]
    m = [(1.0 / 4.0 + 3.0 / 1.0) * v[0], (-2.0 / 0.5 + 0.0 / 2.0) * v[1]]
    torch.testing.assert_close(g_mu, torch.tensor([m]))
    torch.testing.assert_close(g_logvar.exp(), torch.tensor([v]))
    assert g_mu[0, 0].item() == pytest.approx(2.6) and g_logvar.exp()[0, 0].item() == pytest.approx(0.8)


def test_product_and_average_of_random_groups_match_numpy(rng):
    n, groups, dim = 4, 6, 3
    mu = rng.normal(size=(groups * n, dim))
    logvar = rng.normal(size=(groups * n, dim))
    t_mu, t_logvar = torch.tensor(mu, dtype=torch.float32), torch.tensor(logvar, dtype=torch.float32)
    m, v = mu.reshape(groups, n, dim), np.exp(logvar).reshape(groups, n, dim)
    # average: mean of the means, mean of the variances
    a_mu, a_logvar = average_of_gaussians(t_mu, t_logvar, n)
    np.testing.assert_allclose(a_mu.numpy(), m.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.exp(a_logvar.numpy()), v.mean(1), rtol=1e-5)
    # product: precisions add up, precision-weighted mean
    p_mu, p_logvar = product_of_gaussians(t_mu, t_logvar, n)
    precision = (1.0 / v).sum(1)
    np.testing.assert_allclose(np.exp(p_logvar.numpy()), 1.0 / precision, rtol=1e-5)
    np.testing.assert_allclose(p_mu.numpy(), (m / v).sum(1) / precision, rtol=1e-4, atol=1e-5)


def test_group_posteriors_are_stable_for_extreme_log_variances():
    mu = torch.tensor([[1.0], [-1.0]])
    logvar = torch.tensor([[-120.0], [120.0]])  # σ² far outside float32 either way
    p_mu, p_logvar = product_of_gaussians(mu, logvar, 2)
    assert p_mu.item() == pytest.approx(1.0) and p_logvar.item() == pytest.approx(-120.0)  # the certain member wins
    a_mu, a_logvar = average_of_gaussians(mu, logvar, 2)
    assert a_mu.item() == pytest.approx(0.0) and a_logvar.item() == pytest.approx(120.0 - math.log(2.0))


# ---------------------------------------------------------------------------- the sampler
@pytest.fixture
def grid_images():
    """A 2×3×4 grid of distinct 16×16 binary images: image i has i + 1 pixels on."""
    images = torch.zeros(24, 1, 16, 16, dtype=torch.uint8)
    for i in range(24):
        images[i, 0].view(-1)[: i + 1] = 1
    return IndexedImageDataset(images, ("a", "b", "c"), SIZES, scale=1.0)


def _factors_of(x: torch.Tensor) -> torch.Tensor:
    """The factor classes of images made by ``grid_images`` (pixels on − 1 is the grid index)."""
    index = (x > 0).flatten(1).sum(1) - 1
    strides = torch.tensor([12, 4, 1])
    return (index[:, None] // strides) % torch.tensor(SIZES)


def test_a_group_shares_one_value_of_the_factor_named_by_shared(grid_images):
    groups, n = 300, 3
    batch = sample_groups(grid_images, groups, n, torch.Generator().manual_seed(0))
    assert isinstance(batch, GroupBatch) and batch.x.shape == (groups * n, 1, 16, 16)
    assert batch.shared.dtype == torch.int64 and batch.shared.shape == (groups,)
    factors = _factors_of(batch.x).view(groups, n, 3)
    shared_values = factors.gather(2, batch.shared[:, None, None].expand(groups, n, 1)).squeeze(2)
    assert (shared_values == shared_values[:, :1]).all()
    # every factor is shared by some groups, and the other factors do vary within groups
    assert set(batch.shared.tolist()) == {0, 1, 2}
    other = torch.ones(groups, 3, dtype=torch.bool).scatter(1, batch.shared[:, None], False)
    varies = (factors != factors[:, :1]).any(1)
    assert varies[other].float().mean() > 0.5
    # the shared value is uniform over its classes (factor 2 has 4)
    values = shared_values[batch.shared == 2, 0]
    assert set(values.tolist()) == {0, 1, 2, 3}


def test_shared_factors_restricts_the_shared_factor(grid_images):
    batch = sample_groups(grid_images, 200, 2, torch.Generator().manual_seed(1), shared_factors=[0, 2])
    assert set(batch.shared.tolist()) == {0, 2}
    factors = _factors_of(batch.x).view(200, 2, 3)
    assert (factors[:, 0].gather(1, batch.shared[:, None]) == factors[:, 1].gather(1, batch.shared[:, None])).all()
    with pytest.raises(ConfigError, match="3 factors"):
        sample_groups(grid_images, 4, 2, torch.Generator(), shared_factors=[3])
    with pytest.raises(ConfigError, match="twice"):
        sample_groups(grid_images, 4, 2, torch.Generator(), shared_factors=[1, 1])


def test_the_batch_is_reproducible_from_the_generator(grid_images):
    a = sample_groups(grid_images, 64, 3, torch.Generator().manual_seed(7))
    b = sample_groups(grid_images, 64, 3, torch.Generator().manual_seed(7))
    assert torch.equal(a.x, b.x) and torch.equal(a.shared, b.shared)
    c = sample_groups(grid_images, 64, 3, torch.Generator().manual_seed(8))
    assert not torch.equal(a.x, c.x)


def test_the_generator_moves_the_same_way_whatever_the_dataset(grid_images, tiny_dataset):
    """The factors come from the generator and the factor sizes alone: two grid datasets of the same
    grid (different images) draw the same factors and leave the generator in the same state, which
    is the state after drawing the factors alone (a plain grid dataset draws nothing more)."""
    g1, g2, g3 = (torch.Generator().manual_seed(3) for _ in range(3))
    batch = sample_groups(grid_images, 50, 2, g1)
    sample_groups(tiny_dataset, 50, 2, g2)
    factors = sample_group_factors(SIZES, 50, 2, g3)
    assert torch.equal(g1.get_state(), g2.get_state()) and torch.equal(g1.get_state(), g3.get_state())
    assert torch.equal(_factors_of(batch.x), factors.factors) and torch.equal(batch.shared, factors.shared)


class HiddenInstanceDataset:
    """A ground-truth dataset (protocol only, no GridDataset) with a hidden nuisance per observation:
    pixel 0 holds the factor code, pixel 1 the instance."""

    factor_names = ("a", "b", "c")
    factor_sizes = SIZES

    def sample_factors(self, n, rng):
        return np.column_stack([rng.integers(0, s, n) for s in self.factor_sizes])

    def sample_observations_from_factors(self, factors, rng):
        out = torch.zeros(len(factors), 1, 2, 2)
        out[:, 0, 0, 0] = torch.as_tensor(factors @ np.array([12, 4, 1]), dtype=torch.float32) / 24
        out[:, 0, 0, 1] = torch.as_tensor(rng.integers(0, 10, len(factors)), dtype=torch.float32) / 10
        return out


def test_datasets_without_grid_storage_go_through_the_ground_truth_interface(grid_images):
    g = torch.Generator().manual_seed(6)
    batch = sample_groups(HiddenInstanceDataset(), 100, 3, g)
    grid = sample_groups(grid_images, 100, 3, torch.Generator().manual_seed(6))
    # the same factors as for a grid dataset of the same sizes
    index = (batch.x[:, 0, 0, 0] * 24).round().long()
    assert torch.equal(index, (_factors_of(grid.x) * torch.tensor([12, 4, 1])).sum(1))
    assert torch.equal(batch.shared, grid.shared)
    # the hidden instance is drawn per member; the batch is reproducible
    assert (batch.x[0::3, 0, 0, 1] != batch.x[1::3, 0, 0, 1]).float().mean() > 0.7
    again = sample_groups(HiddenInstanceDataset(), 100, 3, torch.Generator().manual_seed(6))
    assert torch.equal(again.x, batch.x)


def test_a_shard_renders_whole_groups_of_the_global_batch(grid_images):
    whole = sample_groups(grid_images, 8, 3, torch.Generator().manual_seed(2))
    for rank in (0, 1):
        g = torch.Generator().manual_seed(2)
        with sampling_shard(BatchShard(rank, 2)):
            part = sample_groups(grid_images, 8, 3, g)
        assert torch.equal(part.x, whole.x[rank * 12 : (rank + 1) * 12])
        assert torch.equal(part.shared, whole.shared[rank * 4 : (rank + 1) * 4])
    with sampling_shard(BatchShard(0, 2)), pytest.raises(ConfigError, match="whole groups"):
        sample_groups(grid_images, 7, 3, torch.Generator())


# ---------------------------------------------------------------------------- the loss
def _model(latent_dim: int = 5, seed: int = 0) -> VAE:
    torch.manual_seed(seed)
    return VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=latent_dim, hidden_sizes=[32])


def _objective(name: str, model: VAE, **params):
    objective = OBJECTIVES.build(name, **params)
    objective.setup(model=model, dataset_size=24)
    return objective


def _by_hand(model, images, n, content_dim, beta, kind, seed):
    """The loss in float64 from the encoder outputs and the noise of ``seed`` redrawn in the
    documented order (style noise per image, then content noise per group)."""
    with torch.no_grad():
        mu, logvar = (t.double() for t in model.encode(images))
    b, d = mu.shape
    s, groups = d - content_dim, b // n
    m, v = mu[:, s:].view(groups, n, content_dim), logvar[:, s:].exp().view(groups, n, content_dim)
    if kind == "product":
        var_c = 1.0 / (1.0 / v).sum(1)
        mu_c = (m / v).sum(1) * var_c
    else:
        mu_c, var_c = m.mean(1), v.mean(1)
    g = torch.Generator().manual_seed(seed)
    eps_s = torch.randn((b, s), generator=g).double()
    eps_c = torch.randn((groups, content_dim), generator=g).double()
    z_s = mu[:, :s] + (0.5 * logvar[:, :s]).exp() * eps_s
    z_c = mu_c + var_c.sqrt() * eps_c
    z = torch.cat([z_s, z_c.repeat_interleave(n, dim=0)], 1)
    with torch.no_grad():
        logits = model.decode(z.float()).double()
    recon = F.binary_cross_entropy_with_logits(logits, images.double(), reduction="sum") / b
    kl_s = 0.5 * (mu[:, :s] ** 2 + logvar[:, :s].exp() - logvar[:, :s] - 1).sum() / b
    kl_c = 0.5 * (mu_c**2 + var_c - var_c.log() - 1).sum() / b  # once per group, per image of the batch
    return {"recon": recon, "kl_style": kl_s, "kl_content": kl_c, "loss": recon + beta * (kl_s + kl_c)}


@pytest.mark.parametrize(("name", "kind"), [("group_ml_vae", "product"), ("group_gvae", "average")])
def test_the_loss_matches_an_independent_computation(name, kind, grid_images):
    n, content_dim, beta = 3, 2, 2.5
    model = _model()
    objective = _objective(name, model, beta=beta, group_size=n, content_dim=content_dim)
    batch = objective.sample_batch(grid_images, 12, torch.Generator().manual_seed(4))
    with distributed.random_source(torch.Generator().manual_seed(11)):
        terms = objective(model, batch, step=0)
    expected = _by_hand(model, batch.x, n, content_dim, beta, kind, seed=11)
    for key, value in expected.items():
        torch.testing.assert_close(terms[key].double(), value, rtol=1e-5, atol=1e-5, msg=key)
    assert terms["kl_per_dim"].shape == (5,)
    torch.testing.assert_close(terms["kl_per_dim"].sum(), terms["kl"])
    torch.testing.assert_close(terms["kl"], terms["kl_style"] + terms["kl_content"])
    torch.testing.assert_close(terms["elbo"], -(terms["recon"] + terms["kl"]))
    terms["loss"].backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_members_share_one_content_sample_and_keep_their_own_style(grid_images, monkeypatch):
    n, content_dim = 4, 2
    model = _model()
    objective = _objective("group_ml_vae", model, group_size=n, content_dim=content_dim)
    batch = objective.sample_batch(grid_images, 16, torch.Generator().manual_seed(0))
    seen = {}
    decode = model.decode

    def capture(z):
        seen["z"] = z
        return decode(z)

    monkeypatch.setattr(model, "decode", capture)
    with distributed.random_source(torch.Generator().manual_seed(1)):
        objective(model, batch, step=0)
    z = seen["z"].detach().view(4, n, 5)
    content, style = z[..., 3:], z[..., :3]
    assert (content == content[:, :1]).all() and not (content[0] == content[1]).all()
    assert (style[:, 1:] != style[:, :1]).any(dim=2).all()


def test_the_content_kl_is_counted_once_per_group():
    """With every member the same image, the group ELBO is the style KL of N images plus the content
    KL of one group: per image, content KL / N."""
    model = _model()
    x = torch.rand(1, 1, 16, 16).round().expand(6, 1, 16, 16).contiguous()
    batch = GroupBatch(x, torch.zeros(2, dtype=torch.int64))
    objective = _objective("group_gvae", model, group_size=3, content_dim=2)
    with distributed.random_source(torch.Generator().manual_seed(0)):
        terms = objective(model, batch, step=0)
    with torch.no_grad():
        mu, logvar = model.encode(x[:1])
    per_dim = 0.5 * (mu**2 + logvar.exp() - logvar - 1)[0]
    torch.testing.assert_close(terms["kl_style"], per_dim[:3].sum())
    torch.testing.assert_close(terms["kl_content"], per_dim[3:].sum() / 3)


@pytest.mark.parametrize("name", ["group_ml_vae", "group_gvae"])
def test_two_processes_train_the_single_process_objective(name, grid_images, monkeypatch):
    """Each rank's whole groups and its rows of the global noise: the ranks' mean terms are the
    single-process terms (the rule of disentangle.objectives.base), simulated rank by rank."""
    model = _model()
    objective = _objective(name, model, group_size=2, content_dim=2)
    batch = objective.sample_batch(grid_images, 16, torch.Generator().manual_seed(5))
    with distributed.random_source(torch.Generator().manual_seed(9)):
        single = objective(model, batch, step=0)
    ranks = []
    for rank in (0, 1):
        monkeypatch.setattr(distributed._STATE, "rank_info", distributed.RankInfo(rank, 2))
        local = distributed.local_batch(batch, 16)
        assert local.x.shape[0] == 8 and local.shared.shape[0] == 4
        with distributed.random_source(torch.Generator().manual_seed(9)):
            ranks.append(objective(model, local, step=0))
    for key, value in single.items():
        torch.testing.assert_close((ranks[0][key] + ranks[1][key]) / 2, value, msg=key)


# ---------------------------------------------------------------------------- parameters
def test_content_dim_must_leave_a_style_dimension():
    model = _model(latent_dim=4)
    for bad in (4, 6):
        with pytest.raises(ConfigError, match="content_dim between 1 and 3"):
            _objective("group_gvae", model, content_dim=bad)
    assert _objective("group_gvae", model).content_dim == 2  # default: half the latent dimensions
    assert _objective("group_ml_vae", _model(latent_dim=10)).content_dim == 5
    with pytest.raises(ConfigError, match="latent_dim >= 2"):
        _objective("group_ml_vae", _model(latent_dim=1))


def test_bad_parameters_are_config_errors(tmp_path, tiny_overrides, grid_images):
    with pytest.raises(ConfigError, match="group_size"):
        load_config(None, tiny_overrides(tmp_path, **{"objective.name": "group_gvae", "objective.group_size": 1}))
    with pytest.raises(ConfigError, match="content_dim"):
        load_config(None, tiny_overrides(tmp_path, **{"objective.name": "group_ml_vae", "objective.content_dim": 0}))
    with pytest.raises(ConfigError, match="shared_factors"):
        load_config(None, tiny_overrides(tmp_path, **{"objective.name": "group_gvae", "objective.shared_factors": "[]"}))
    objective = GroupGVAE(group_size=3)
    with pytest.raises(ConfigError, match="multiple of group_size"):
        objective.sample_batch(grid_images, 8, torch.Generator())
    with pytest.raises(TypeError, match="GroupBatch"):
        GroupMLVAE()(_model(), torch.zeros(2, 1, 16, 16), step=0)


# ---------------------------------------------------------------------------- training
@pytest.mark.parametrize("name", ["group_ml_vae", "group_gvae"])
def test_training_gives_finite_terms(name, tmp_path, tiny_overrides):
    run = tmp_path / "run"
    extra = {"objective.name": name, "objective.content_dim": 2, "objective.group_size": 4}
    result = Trainer(load_config(None, tiny_overrides(run, steps=6, **extra))).fit()
    assert result.step == 6
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if '"loss"' in line]
    assert records
    for record in records:
        for key in ("loss", "recon", "kl", "kl_style", "kl_content", "elbo"):
            assert math.isfinite(record[key]), (key, record)
        assert len(record["kl_per_dim"]) == 4


def test_resume_is_bit_exact(tmp_path, tiny_overrides):
    extra = {"objective.name": "group_gvae", "objective.content_dim": 2}
    full = tmp_path / "full"
    Trainer(load_config(None, tiny_overrides(full, steps=8, **extra))).fit()
    part = tmp_path / "part"
    Trainer(load_config(None, tiny_overrides(part, steps=4, **extra))).fit()
    assert main(["--resume", str(part), "train.steps=8"]) == 0
    a = torch.load(full / "checkpoint.pt", weights_only=True)
    b = torch.load(part / "checkpoint.pt", weights_only=True)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
