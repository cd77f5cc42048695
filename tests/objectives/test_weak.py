"""Ada-GVAE, Ada-ML-VAE, GVAE, ML-VAE: the loss against an independent computation, the label
mask, parameter checks, every ready config trains on the sprites, bit-exact resume."""
from __future__ import annotations

import inspect
import json
import math
import typing
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from disentangle import ConfigError
from disentangle.config import TrainConfig, load_config
from disentangle.data import DATASETS
from disentangle.data.pairs import PairBatch
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.estimators import aggregate_pair, pair_kl
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import fit

ROOT = Path(__file__).resolve().parents[2]
WEAK = ("ada_gvae", "ada_ml_vae", "gvae", "ml_vae")
CONFIGS = sorted((ROOT / "configs" / "weak").glob("*.yaml"))


pytestmark = pytest.mark.usefixtures("one_thread")


def _setup(name, latent_dim=6, **params):
    dataset = DATASETS.build("sprites", image_size=16)
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=dataset.image_shape, latent_dim=latent_dim, hidden_sizes=[32])
    objective = OBJECTIVES.build(name, **params)
    objective.setup(model=model, dataset_size=len(dataset))
    return dataset, model, objective


def _reference_terms(model, batch, beta, kind, shared):
    """The loss written out per element of the pair, as disentanglement_lib's model_fn."""
    mu1, logvar1 = model.encode(batch.x1)
    mu2, logvar2 = model.encode(batch.x2)
    agg_mu, agg_logvar = aggregate_pair(mu1, logvar1, mu2, logvar2, kind)
    posteriors = [
        (torch.where(shared, agg_mu, mu), torch.where(shared, agg_logvar, logvar))
        for mu, logvar in ((mu1, logvar1), (mu2, logvar2))
    ]
    eps = torch.randn(2 * len(mu1), mu1.shape[1])  # the objective draws one (2B, D) noise tensor
    recon, kl = [], []
    for j, ((mu, logvar), x) in enumerate(zip(posteriors, (batch.x1, batch.x2))):
        z = mu + (0.5 * logvar).exp() * eps[j * len(mu1) : (j + 1) * len(mu1)]
        logits = model.decode(z)
        recon.append(F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / len(x))
        kl.append(0.5 * (mu.square() + logvar.exp() - logvar - 1).sum() / len(x))
    recon, kl = 0.5 * (recon[0] + recon[1]), 0.5 * (kl[0] + kl[1])
    return {"loss": recon + beta * kl, "recon": recon, "kl": kl}


@pytest.mark.parametrize(
    "name, kind, params",
    [
        ("ada_gvae", "gvae", {}),
        ("ada_ml_vae", "ml_vae", {}),
        ("ada_ml_vae", "ml_vae_dlib", {"aggregation": "disentanglement_lib"}),
        ("gvae", "gvae", {}),
        ("ml_vae", "ml_vae", {}),
    ],
)
def test_loss_matches_the_pairwise_beta_vae_written_out(name, kind, params):
    dataset, model, objective = _setup(name, beta=3.0, **params)
    batch = objective.sample_batch(dataset, 32, torch.Generator().manual_seed(1))
    with torch.no_grad():
        mu1, logvar1 = model.encode(batch.x1)
        mu2, logvar2 = model.encode(batch.x2)
        delta = pair_kl(mu1, logvar1, mu2, logvar2)
        if name.startswith("ada_"):  # the threshold, written out with numpy
            d = delta.double().numpy()
            shared = torch.as_tensor(d < (d.max(1, keepdims=True) + d.min(1, keepdims=True)) / 2)
        else:
            shared = torch.ones_like(delta, dtype=torch.bool)
            shared[torch.arange(32), batch.changed] = False
        torch.manual_seed(2)
        terms = objective(model, batch, step=0)
        torch.manual_seed(2)
        expected = _reference_terms(model, batch, 3.0, kind, shared)
    for key, value in expected.items():
        torch.testing.assert_close(terms[key], value, rtol=1e-5, atol=1e-4, msg=key)
    torch.testing.assert_close(terms["shared_dims"], shared.sum(1).float().mean())
    torch.testing.assert_close(terms["pair_kl_per_dim"], delta.mean(0))
    torch.testing.assert_close(terms["kl_per_dim"].sum(), terms["kl"])
    torch.testing.assert_close(terms["elbo"], -(terms["recon"] + terms["kl"]))
    if not name.startswith("ada_"):
        assert terms["shared_dims"].item() == 5.0  # latent_dim 6, one label dimension kept


def test_adaptive_mask_changes_with_the_pairs_label_variants_do_not():
    dataset, model, ada = _setup("ada_gvae", k=1)
    batch = ada.sample_batch(dataset, 16, torch.Generator().manual_seed(3))
    delta = torch.rand(16, 6)
    label_mask = OBJECTIVES.build("gvae").shared_mask(delta, batch.changed)
    assert torch.equal((~label_mask).nonzero()[:, 1], batch.changed)
    assert torch.equal(ada.shared_mask(delta, batch.changed), delta < (delta.amax(1, True) + delta.amin(1, True)) / 2)


def test_gradients_reach_encoder_and_decoder():
    dataset, model, objective = _setup("ada_ml_vae")
    batch = objective.sample_batch(dataset, 8, torch.Generator().manual_seed(4))
    objective(model, batch, step=0)["loss"].backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("name", WEAK)
def test_every_parameter_has_a_type_hint_and_a_default(name):
    hints = typing.get_type_hints(OBJECTIVES.get(name).__init__)
    for pname, param in OBJECTIVES.parameters(name).items():
        assert pname in hints, pname
        assert param.default is not inspect.Parameter.empty, pname
    OBJECTIVES.build(name)


@pytest.mark.parametrize(
    "override, match",
    [
        ("objective.beta=-1", "objective.beta"),
        ("objective.k=0", "objective.k"),
        ("objective.k=rnd", "objective.k"),
        ("objective.aggregation=prod", "disentanglement_lib"),
        ("objective.reconstruction=l2", "bernoulli"),
    ],
)
def test_bad_values_are_config_errors_at_load(tmp_path, override, match, tiny_overrides):
    with pytest.raises(ConfigError, match=match):
        load_config(None, tiny_overrides(tmp_path / "run", **{"objective.name": "ada_ml_vae"}) + [override])


def test_k_larger_than_the_factors_and_too_few_latents_are_config_errors(tmp_path):
    dataset, model, objective = _setup("ada_gvae", k=6)
    with pytest.raises(ConfigError, match="only 5 factors"):
        objective.sample_batch(dataset, 4, torch.Generator())
    dataset, model, objective = _setup("ml_vae", latent_dim=4)
    with pytest.raises(ConfigError, match="latent_dim"):
        objective.sample_batch(dataset, 4, torch.Generator())
    with pytest.raises(TypeError, match="pairs"):
        objective(model, torch.zeros(4, 1, 16, 16), step=0)


def test_forward_refuses_image_batches_with_a_clear_message():
    dataset, model, objective = _setup("ada_gvae")
    with pytest.raises(TypeError, match="sample_batch"):
        objective(model, dataset.sample_batch(4, torch.Generator()), step=0)


@pytest.mark.parametrize("name", WEAK)
def test_bf16_train_step_is_finite_and_logs_float32(name):
    dataset, model, objective = _setup(name)
    optimizers = build_optimizers(model, objective, TrainConfig(lr=1e-3))
    precision = Precision("bf16", torch.device("cpu"))
    g = torch.Generator().manual_seed(6)
    for step in range(2):
        batch = objective.sample_batch(dataset, 8, g)
        terms = objective.train_step(model, batch, step=step, optimizers=optimizers, precision=precision)
        precision.update()
    assert all(torch.isfinite(v).all() and v.dtype == torch.float32 for v in terms.values()), terms


# ---------------------------------------------------------------------------- configs and training
def test_a_config_per_method_and_dataset():
    names = {p.stem for p in CONFIGS}
    assert names == {f"{m}_{d}" for m in WEAK for d in ("dsprites", "sprites")}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_uses_the_study_settings(path):
    cfg = load_config(path)
    method, dataset = path.stem.rsplit("_", 1)
    assert (cfg.objective.name, cfg.data.name) == (method, dataset)
    assert (cfg.model.backbone, cfg.model.latent_dim) == ("conv64", 10)
    t = cfg.train
    # the zoo's Ada-GVAE / Ada-ML-VAE recipes on the sprites are cut to 20,000 steps (their CPU weights)
    zoo_recipe = method.startswith("ada_") and dataset == "sprites"
    steps = 20_000 if zoo_recipe else 300_000
    assert (t.steps, t.batch_size, t.lr, tuple(t.betas)) == (steps, 64, 1e-4, (0.9, 0.999))
    assert t.precision == "fp32"
    assert cfg.objective.params["k"] == ("random" if method.startswith("ada_") else 1)
    assert path.read_text().startswith("#")


def _records(run):
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_config_trains_on_the_sprites(tmp_path, path):
    run = tmp_path / "run"
    overrides = [
        "data.name=sprites", "data.image_size=16", "model.backbone=mlp", "model.hidden_sizes=[32]",
        "train.steps=2", "train.batch_size=4", "train.log_every=1", "train.device=cpu",
        "train.progress=false", "train.traversals=false", "train.eval_every=0", f"train.out_dir={run}",
    ]
    result = fit(load_config(path, overrides))
    assert result.step == 2
    records = _records(run)
    assert [r["step"] for r in records] == [1, 2]
    last = records[-1]
    assert all(math.isfinite(last[k]) for k in ("loss", "recon", "kl", "elbo", "shared_dims"))
    assert len(last["kl_per_dim"]) == len(last["pair_kl_per_dim"]) == 10
    assert 0 <= last["shared_dims"] <= 10


@pytest.mark.parametrize("name, k", [("ada_gvae", "random"), ("ml_vae", 1)])
def test_resume_is_bit_exact_for_pair_objectives(tmp_path, name, k, tiny_overrides):
    extra = {"objective.name": name, "objective.k": k}
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=12, **extra)))
    fit(load_config(None, tiny_overrides(split, steps=8, **extra)))
    fit(load_config(None, tiny_overrides(split, steps=12, **extra)), resume=True)
    a = [{k: v for k, v in r.items() if k not in ("steps_per_s", "wall_time_s")} for r in _records(straight)]
    b = [{k: v for k, v in r.items() if k not in ("steps_per_s", "wall_time_s")} for r in _records(split)]
    assert [r["step"] for r in a] == list(range(2, 13, 2))
    assert a == b
    ca = torch.load(straight / "checkpoint.pt", weights_only=True)
    cb = torch.load(split / "checkpoint.pt", weights_only=True)
    for key, value in ca["model"].items():
        assert torch.equal(value, cb["model"][key]), key


def test_trainer_gives_pairs_to_pair_objectives(tmp_path, monkeypatch, tiny_overrides):
    seen = []
    original = OBJECTIVES.get("ada_gvae").forward

    def spy(self, model, x, *, step):
        seen.append(x)
        return original(self, model, x, step=step)

    monkeypatch.setattr(OBJECTIVES.get("ada_gvae"), "forward", spy)
    fit(load_config(None, tiny_overrides(tmp_path / "run", steps=2, **{"objective.name": "ada_gvae"})))
    assert len(seen) == 2 and all(isinstance(x, PairBatch) and x.x1.shape == (8, 1, 16, 16) for x in seen)
