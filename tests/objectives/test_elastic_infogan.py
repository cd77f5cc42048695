"""Elastic-InfoGAN (``objective.name: elastic_infogan``, ``model.backbone: infogan_categorical``
with ``model.num_categories``): the Gumbel-softmax draws against the learned prior, the prior's gradient
by value, NT-Xent against an independent computation, the augmentations on planted images, which
phase moves which network, the representation, config errors, training and resume."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import disentangle
from disentangle._core import distributed
from disentangle.backbones import BACKBONES
from disentangle.backbones.init import initialize
from disentangle.config import TrainConfig, load_config
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.base import minimize_terms
from disentangle.objectives.elastic_infogan import (
    affine,
    augment,
    category_of,
    gumbel_noise,
    gumbel_softmax,
    nt_xent,
)
from disentangle.train import main
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": [8, 8], "hidden": 16, "q_hidden": 16, "noise_dim": 2}
K = 3


def _model(latent_dim: int = 5, num_categories: int = K, seed: int = 0) -> VAE:
    torch.manual_seed(seed)
    return VAE.from_backbone(
        "infogan_categorical", image_shape=(1, 16, 16), latent_dim=latent_dim, num_categories=num_categories, **SMALL
    )


def _objective(model: VAE, **params):
    obj = OBJECTIVES.build("elastic_infogan", **{"num_categories": K, **params})
    obj.setup(model=model, dataset_size=24)
    initialize(obj, "reference")
    return obj


def _x(seed: int = 0, n: int = 8) -> torch.Tensor:
    return (torch.rand(n, 1, 16, 16, generator=torch.Generator().manual_seed(seed)) > 0.5).float()


# ---------------------------------------------------------------------------- the learned prior
def test_gumbel_softmax_categories_are_drawn_with_the_prior_s_frequencies():
    prior = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = torch.log(prior) + 1.7  # logits are defined up to a constant
    n = 40_000
    with distributed.random_source(torch.Generator().manual_seed(0)):
        y = gumbel_softmax(logits, gumbel_noise(n, 4), temperature=0.1)
    assert torch.allclose(y.sum(1), torch.ones(n), atol=1e-5) and (y >= 0).all()
    counts = torch.bincount(y.argmax(1), minlength=4).double()
    expected = n * prior.double()
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 16.27, (counts, chi2)  # the 0.999 quantile of chi-square with 3 degrees of freedom
    # at τ = 0.1 the samples are nearly one-hot, so their mean is near the prior too
    torch.testing.assert_close(y.mean(0), prior, atol=0.02, rtol=0)
    assert (y.max(1).values > 0.9).float().mean() > 0.8


def test_the_objective_s_draws_follow_its_learned_prior():
    model = _model()
    obj = _objective(model)
    with torch.no_grad():
        obj.prior_logits.copy_(torch.log(torch.tensor([0.7, 0.2, 0.1])))
    torch.testing.assert_close(obj.prior(), torch.tensor([0.7, 0.2, 0.1]))
    with distributed.random_source(torch.Generator().manual_seed(1)):
        codes, noise, draw = obj.draw(20_000, model.decoder, "cpu", 0)
    assert codes.shape == (20_000, 5 - K) and noise.shape == (20_000, 2)
    assert draw.gumbel.shape == (20_000, K) and draw.augment.shape == (20_000, 4)
    assert codes.min() >= -1 and codes.max() <= 1 and draw.augment.min() >= 0 and draw.augment.max() < 1
    freq = torch.bincount(obj.categorical(draw.gumbel).argmax(1), minlength=K).float() / 20_000
    torch.testing.assert_close(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.015, rtol=0)


def test_the_gumbel_softmax_gradient_in_the_logits_by_value():
    """``y = softmax((log softmax(ℓ) + g)/τ)``: ``∂y/∂ℓ = (1/τ)(diag y − y yᵀ)(I − 1 πᵀ)``."""
    torch.manual_seed(0)
    tau = 0.5
    logits = torch.randn(4, dtype=torch.float64, requires_grad=True)
    g = -torch.log(-torch.log(torch.rand(6, 4, dtype=torch.float64)))
    w = torch.randn(6, 4, dtype=torch.float64)
    y = gumbel_softmax(logits, g, tau).double()
    (w * y).sum().backward()
    pi = torch.softmax(logits.detach(), 0)
    expected = torch.zeros(4, dtype=torch.float64)
    yd = y.detach()
    for b in range(6):
        jac = (torch.diag(yd[b]) - torch.outer(yd[b], yd[b])) / tau @ (torch.eye(4, dtype=torch.float64) - pi.unsqueeze(0))
        expected += jac.T @ w[b]
    torch.testing.assert_close(logits.grad, expected, rtol=1e-4, atol=1e-6)  # gumbel_softmax works in float32


def test_the_generator_s_loss_reaches_the_prior_logits_through_the_codes():
    model = _model()
    obj = _objective(model)
    disc, gen = obj.networks(model)
    seen = {}
    categorical = obj.categorical

    def spy(gumbel):
        y = categorical(gumbel)
        y.retain_grad()
        seen["y"] = y
        return y

    obj.categorical = spy
    with distributed.random_source(torch.Generator().manual_seed(3)):
        codes, noise, draw = obj.draw(8, gen, "cpu", 0)
    terms = obj.generator_terms(disc, gen, codes, noise, draw)
    terms["loss"].backward()
    y, upstream = seen["y"].detach().double(), seen["y"].grad.double()
    pi = obj.prior().detach().double()
    expected = torch.zeros(K, dtype=torch.float64)
    for b in range(8):
        jac = (torch.diag(y[b]) - torch.outer(y[b], y[b])) / 0.1 @ (torch.eye(K, dtype=torch.float64) - pi.unsqueeze(0))
        expected += jac.T @ upstream[b]
    assert obj.prior_logits.grad is not None and obj.prior_logits.grad.abs().sum() > 0
    torch.testing.assert_close(obj.prior_logits.grad.double(), expected, rtol=1e-3, atol=1e-7)
    assert all(p.grad is None for p in disc.parameters())  # D and Q frozen in G's phase


# ---------------------------------------------------------------------------- the contrastive loss
def _nt_xent_numpy(a: np.ndarray, b: np.ndarray, tau: float) -> float:
    reps = np.concatenate([a, b]).astype(np.float64)
    reps /= np.linalg.norm(reps, axis=1, keepdims=True)
    n = len(a)
    total = 0.0
    for i in range(2 * n):
        p = (i + n) % (2 * n)
        sims = [reps[i] @ reps[j] / tau for j in range(2 * n) if j != i]
        total += -(reps[i] @ reps[p] / tau) + math.log(sum(math.exp(s) for s in sims))
    return total / (2 * n)


@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_nt_xent_recomputed_independently(tau):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 5)).astype(np.float32)
    b = (a + 0.3 * rng.normal(size=(6, 5))).astype(np.float32)
    assert nt_xent(torch.from_numpy(a), torch.from_numpy(b), tau).item() == pytest.approx(_nt_xent_numpy(a, b, tau), rel=1e-5)
    # planted: each pair identical, pairs orthogonal: −log(e^{1/τ} / (e^{1/τ} + 2(n − 1)))
    e = torch.eye(4) * 3.0
    assert nt_xent(e, e, tau).item() == pytest.approx(-math.log(math.exp(1 / tau) / (math.exp(1 / tau) + 6)), rel=1e-6)


def test_the_discriminator_phase_s_contrastive_term_is_nt_xent_of_q_s_features_of_x_and_its_augmentation():
    model = _model()
    obj = _objective(model, augment_translation=0.1)
    disc, gen = obj.networks(model)
    model.eval()  # the spectral norms' power iteration still: the same weights in every pass
    x = _x()
    with distributed.random_source(torch.Generator().manual_seed(4)):
        codes, noise, draw = obj.draw(8, gen, "cpu", 0)
    terms = obj.discriminator_terms(disc, gen, x, codes, noise, draw)
    x_aug = augment(x, draw.augment, 20.0, 0.1, 0.1)
    assert not torch.equal(x_aug, x)
    _, fa, _ = disc.heads(disc.features(x))
    _, fb, _ = disc.heads(disc.features(x_aug))
    expected = _nt_xent_numpy(fa.detach().numpy(), fb.detach().numpy(), 1.0)
    assert terms["contrastive_loss"].item() == pytest.approx(expected, rel=1e-4)
    total = (terms["d_loss"] + 0.05 * terms["q_loss"] + terms["category_loss"] + 10 * terms["contrastive_loss"]).item()
    assert terms["discriminator_loss"].item() == pytest.approx(total, rel=1e-6)
    # the contrastive loss reaches Q's head, never the trunk
    obj.contrastive_weight = 1.0
    disc.zero_grad()
    terms["contrastive_loss"].backward()
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in disc.trunk.parameters())
    assert any(p.grad is not None and torch.count_nonzero(p.grad) > 0 for p in disc.q_head.parameters())


# ---------------------------------------------------------------------------- the augmentations
def test_augmentations_on_planted_images():
    x = torch.rand(2, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(augment(x, torch.full((2, 4), 0.5), 20.0, 0.1, 0.1), x, atol=1e-6, rtol=0)
    zero, one = torch.zeros(2), torch.ones(2)
    # a shift of 2 pixels (2 · 2/16 in the [-1, 1] frame): output column j samples input column j + 2
    shifted = affine(x, zero, one, torch.tensor([[4 / 16, 0.0], [0.0, 4 / 16]]))
    torch.testing.assert_close(shifted[0, :, :, :14], x[0, :, :, 2:], atol=1e-6, rtol=0)
    assert torch.count_nonzero(shifted[0, :, :, 14:]) == 0
    torch.testing.assert_close(shifted[1, :, :14, :], x[1, :, 2:, :], atol=1e-6, rtol=0)
    # a quarter turn is torch.rot90; a zoom of 2 keeps the centre and doubles it
    turned = affine(x, torch.full((2,), math.pi / 2), one, torch.zeros(2, 2))
    torch.testing.assert_close(turned, torch.rot90(x, 1, (2, 3)), atol=1e-5, rtol=0)
    blob = torch.zeros(1, 1, 16, 16)
    blob[..., 6:10, 6:10] = 1.0
    zoomed = affine(blob, torch.zeros(1), torch.full((1,), 2.0), torch.zeros(1, 2))
    assert zoomed[..., 5:11, 5:11].min() > 0.99 and zoomed[..., 4:12, 4:12].min() > 0.5  # bilinear at the edge
    assert zoomed[..., 3:13, 3:13].sum() == zoomed.sum()  # nothing beyond the bilinear edge
    assert zoomed.sum().item() == pytest.approx(64.0, rel=0.15)  # four times the area of the 4×4 blob
    # the ranges: u = 0 and u → 1 are the extremes, here ±90° exactly
    torch.testing.assert_close(augment(x[:1], torch.tensor([[1.0, 0.5, 0.5, 0.5]]), 90.0, 0.0, 0.0), turned[:1], atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------- which phase moves what
def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _params(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters alone (G's batch norm statistics move whenever G makes images in training mode)."""
    return {k: v.detach().clone() for k, v in module.named_parameters()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_each_phase_moves_only_its_own_networks():
    model = _model()
    obj = _objective(model)
    disc, gen = obj.networks(model)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3, betas=(0.5, 0.999)))
    ids = {k: {id(p) for g in o.param_groups for p in g["params"]} for k, o in opts.items()}
    assert ids["model"] == {id(p) for p in gen.parameters()} | {id(obj.prior_logits)}
    assert ids["discriminator"] == {id(p) for p in disc.parameters()} and set(opts) == {"model", "discriminator"}
    precision = Precision("fp32", "cpu")
    x = _x()
    with distributed.random_source(torch.Generator().manual_seed(5)):
        codes, noise, draw = obj.draw(8, gen, "cpu", 0)
    d0, g0, p0 = _state(disc), _params(gen), obj.prior_logits.detach().clone()
    minimize_terms(precision, opts["discriminator"], lambda: obj.discriminator_terms(disc, gen, x, codes, noise, draw), "discriminator_loss")
    d1 = _state(disc)
    assert not _same(d0, d1)
    assert _same(g0, _params(gen)) and torch.equal(p0, obj.prior_logits.detach())  # no gradient into G or the prior
    minimize_terms(precision, opts["model"], lambda: obj.generator_terms(disc, gen, codes, noise, draw))
    assert _same(d1, _state(disc))  # D and Q (spectral norms' vectors included) untouched by G's phase
    assert not _same(g0, _params(gen)) and not torch.equal(p0, obj.prior_logits.detach())


# ---------------------------------------------------------------------------- the representation
def test_encode_gives_q_s_continuous_means_then_the_category_s_probabilities():
    model = _model().eval()
    x = _x()
    mu, logvar = model.encode(x)
    assert mu.shape == (8, 5) and torch.equal(logvar, torch.zeros(8, 5))
    _, _, q_out = model.encoder.heads(model.encoder.features(x))
    torch.testing.assert_close(mu[:, :2], q_out[:, :2])
    torch.testing.assert_close(mu[:, 2:], torch.softmax(q_out[:, 2:], 1))
    torch.testing.assert_close(mu[:, 2:].sum(1), torch.ones(8))
    torch.testing.assert_close(model.encoder.discriminate(x)[1], mu)
    assert torch.equal(category_of(model, x), q_out[:, 2:].argmax(1))
    # without categories, the heads give InfoGAN's Q unchanged
    plain = VAE.from_backbone("infogan", image_shape=(1, 16, 16), latent_dim=3, **SMALL).eval()
    torch.testing.assert_close(plain.encode(x)[0], plain.encoder.heads(plain.encoder.features(x))[2])


def test_bad_parameters_and_mismatched_models_are_config_errors(tmp_path, tiny_overrides):
    for params, name in [
        ({"num_categories": 1}, "num_categories"), ({"gumbel_temperature": 0.0}, "gumbel_temperature"),
        ({"category_weight": -1.0}, "category_weight"), ({"contrastive_weight": float("inf")}, "contrastive_weight"),
        ({"contrastive_temperature": -0.5}, "contrastive_temperature"), ({"augment_rotation": 200.0}, "augment_rotation"),
        ({"augment_zoom": 1.0}, "augment_zoom"), ({"augment_translation": 0.7}, "augment_translation"),
    ]:
        with pytest.raises(ConfigError, match=name):
            OBJECTIVES.build("elastic_infogan", **params)
    with pytest.raises(ConfigError, match="num_categories"):
        BACKBONES.build("infogan_categorical", image_shape=(1, 16, 16), latent_dim=3, num_categories=1)
    with pytest.raises(ConfigError, match="num_categories"):
        BACKBONES.build("infogan_categorical", image_shape=(1, 16, 16), latent_dim=3, num_categories=4)
    with pytest.raises(ConfigError, match="model.num_categories=3"):
        OBJECTIVES.build("elastic_infogan", num_categories=3).setup(model=_model(num_categories=2), dataset_size=10)
    plain = VAE.from_backbone("infogan", image_shape=(1, 16, 16), latent_dim=5, **SMALL)
    with pytest.raises(ConfigError, match="backbone=infogan_categorical"):
        OBJECTIVES.build("elastic_infogan", num_categories=3).setup(model=plain, dataset_size=10)
    for name in ("infogan", "infogan_cr"):  # continuous-code objectives refuse a categorical model
        with pytest.raises(ConfigError, match="elastic_infogan"):
            OBJECTIVES.build(name).setup(model=_model(), dataset_size=10)
    with pytest.raises(ConfigError, match="gumbel_temperature"):
        load_config(None, tiny_overrides(tmp_path, **{"objective.name": "elastic_infogan", "objective.gumbel_temperature": 0}))


# ---------------------------------------------------------------------------- through the trainer
@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_overrides):
    """A 6-step run in one go, and one of 3 steps resumed to 6."""
    base = tmp_path_factory.mktemp("elastic")
    torch.set_num_threads(1)

    def overrides(run, steps):
        return tiny_overrides(run, steps=steps, **{"objective.name": "elastic_infogan", "train.checkpoint_every": 3,
                                                   "objective.augment_translation": 0.05})

    whole = Trainer(load_config(None, overrides(base / "whole", 6))).fit()
    Trainer(load_config(None, overrides(base / "part", 3))).fit()
    assert main(["--resume", str(base / "part"), "train.steps=6"]) == 0
    return whole, base


def test_training_gives_finite_terms(runs):
    whole, base = runs
    assert whole.step == 6
    records = [json.loads(line) for line in (base / "whole" / "log.jsonl").read_text().splitlines() if '"loss"' in line]
    assert records
    for record in records:
        for key in ("loss", "g_loss", "g_category_loss", "d_loss", "q_loss", "category_loss", "contrastive_loss",
                    "mi_lower_bound", "prior_entropy"):
            assert math.isfinite(record[key]), (key, record)
        assert len(record["prior"]) == 2 and sum(record["prior"]) == pytest.approx(1.0, abs=1e-5)
    ckpt = torch.load(base / "whole" / "checkpoint.pt", weights_only=True)
    assert not torch.equal(ckpt["objective"]["prior_logits"], torch.zeros(2))  # the prior was trained


def test_resume_is_bit_exact(runs):
    _, base = runs
    a = torch.load(base / "whole" / "checkpoint.pt", weights_only=True)
    b = torch.load(base / "part" / "checkpoint.pt", weights_only=True)
    assert a["step"] == b["step"] == 6
    for section in ("model", "objective"):
        assert a[section].keys() == b[section].keys()
        for key in a[section]:
            assert torch.equal(a[section][key], b[section][key]), f"{section}.{key} differs after resume"


def test_the_loaded_model_encodes_both_codes_and_a_metric_works_on_it(runs, tiny_dataset):
    from disentangle.metrics import METRICS

    _, base = runs
    model = disentangle.load(base / "whole")
    x = tiny_dataset.sample_batch(6, torch.Generator().manual_seed(0)).float()
    mu = model.representation(x)
    assert mu.shape == (6, 4)
    torch.testing.assert_close(mu[:, 2:].sum(1), torch.ones(6))
    assert category_of(model, x).tolist() == mu[:, 2:].argmax(1).tolist()
    scores = METRICS.get("mig")(tiny_dataset, model, num_train=200)
    assert scores and all(math.isfinite(v) for v in scores.values()), scores


@pytest.mark.parametrize("dataset", ["sprites", "dsprites"])
def test_the_shipped_configs_train(dataset, tmp_path, tiny_overrides):
    path = Path(__file__).resolve().parents[2] / "configs" / dataset / "elastic_infogan.yaml"
    cfg = load_config(path)
    assert (cfg.objective.name, cfg.model.backbone) == ("elastic_infogan", "infogan_categorical")
    assert cfg.objective.params["num_categories"] == cfg.model.params["num_categories"] == 3
    assert cfg.train.steps == {"sprites": 20_000, "dsprites": 300_000}[dataset]
    run = tmp_path / "run"
    # the tiny model (4 codes, 2 categories) replaces the recipe's; everything else is the recipe's
    assert main(["--config", str(path), *tiny_overrides(run, steps=2, **{
        "objective.name": "elastic_infogan", "train.checkpoint_every": 2})]) == 0
    assert torch.load(run / "checkpoint.pt", weights_only=True)["objective"]["prior_logits"].shape == (2,)
