"""FactorVAE: discriminator, update order, gradient isolation, TC estimate, bit-exact resume."""
from __future__ import annotations

import copy
import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentangle.config import TrainConfig, load_config
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.factor_vae import FactorVAE
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import Trainer, fit

pytestmark = pytest.mark.usefixtures("one_thread")


def _setup(seed=0, latent_dim=4, **params):
    torch.manual_seed(seed)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=latent_dim, hidden_sizes=[32])
    params.setdefault("discriminator_hidden", 32)
    obj = OBJECTIVES.build("factor_vae", **params)
    obj.setup(model=model, dataset_size=1000)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    x = (torch.rand(16, 1, 8, 8, generator=torch.Generator().manual_seed(seed)) > 0.5).float()
    return model, obj, opts, x


def test_defaults_and_discriminator_architecture():
    obj = FactorVAE()
    assert obj.gamma == 30.0 and obj.discriminator_lr == 1e-4 and obj.discriminator_betas == (0.5, 0.9)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=10, hidden_sizes=[16])
    obj.setup(model=model, dataset_size=737_280)
    linears = [m for m in obj.discriminator.modules() if isinstance(m, nn.Linear)]
    acts = [m for m in obj.discriminator.modules() if isinstance(m, nn.LeakyReLU)]
    assert [(l.in_features, l.out_features) for l in linears] == [(10, 1000)] + [(1000, 1000)] * 5 + [(1000, 2)]
    assert len(acts) == 6 and all(a.negative_slope == 0.2 for a in acts)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-4))
    assert set(opts) == {"model", "discriminator"}
    d = opts["discriminator"]
    assert isinstance(d, torch.optim.Adam)
    assert d.defaults["lr"] == 1e-4 and tuple(d.defaults["betas"]) == (0.5, 0.9)
    d_params = {id(p) for g in d.param_groups for p in g["params"]}
    m_params = {id(p) for g in opts["model"].param_groups for p in g["params"]}
    assert d_params == {id(p) for p in obj.discriminator.parameters()}
    assert m_params == {id(p) for p in model.parameters()} and not d_params & m_params
    # the discriminator is part of the objective's state (checkpointed with it)
    assert any(k.startswith("discriminator.") for k in obj.state_dict())


def test_parameter_validation():
    with pytest.raises(ValueError, match="gamma"):
        FactorVAE(gamma=-1.0)
    with pytest.raises(ValueError, match="discriminator_betas"):
        FactorVAE(discriminator_betas=[0.5])
    with pytest.raises(ValueError, match="reconstruction"):
        FactorVAE(reconstruction="poisson")
    with pytest.raises(RuntimeError, match="setup"):
        build_optimizers(nn.Linear(1, 1), FactorVAE(), TrainConfig(lr=1e-4))


def test_vae_loss_value_and_tc_is_the_mean_logit_difference():
    model, obj, _, x = _setup(gamma=7.0)
    torch.manual_seed(11)
    terms, z = obj.vae_terms(model, x)
    # recompute with the same noise
    torch.manual_seed(11)
    out = model(x)
    assert torch.equal(out.z, z)
    recon = F.binary_cross_entropy_with_logits(out.logits, x, reduction="none").flatten(1).sum(1).mean()
    kl = (0.5 * (out.mu.square() + out.logvar.exp() - out.logvar - 1)).sum(1).mean()
    logits = obj.discriminator(z)
    tc = (logits[:, 0] - logits[:, 1]).mean()
    assert torch.allclose(terms["tc"], tc)
    assert torch.allclose(terms["loss"], recon + kl + 7.0 * tc, rtol=1e-6)
    assert torch.allclose(terms["kl"], kl, rtol=1e-6) and torch.allclose(terms["recon"], recon, rtol=1e-6)


class _FirstCoordinate(nn.Module):
    """A fixed 'discriminator' with logits (z₀, 0)."""

    def forward(self, z):
        return torch.stack([z[:, 0], torch.zeros_like(z[:, 0])], 1)


def test_discriminator_loss_and_accuracy_values():
    _, obj, _, _ = _setup()
    obj.discriminator.net = nn.Sequential(_FirstCoordinate())
    z = torch.randn(10, 4, generator=torch.Generator().manual_seed(1))
    d = obj.discriminator_terms(z, torch.Generator().manual_seed(0))
    from disentangle.objectives.estimators import permute_dims

    zp = permute_dims(z, torch.Generator().manual_seed(0))
    # class 0 for z: −log softmax₀ = softplus(−z₀); class 1 for permuted: softplus(z₀)
    expected_loss = 0.5 * F.softplus(-z[:, 0]).mean() + 0.5 * F.softplus(zp[:, 0]).mean()
    expected_acc = 0.5 * (z[:, 0] >= 0).float().mean() + 0.5 * (zp[:, 0] < 0).float().mean()
    assert torch.allclose(d["discriminator_loss"], expected_loss, rtol=1e-6)
    assert torch.allclose(d["discriminator_accuracy"], expected_acc)


def test_vae_step_never_touches_the_discriminator():
    model, obj, opts, x = _setup()
    before = copy.deepcopy(obj.discriminator.state_dict())
    prec = Precision("fp32", "cpu")
    with prec.autocast():
        terms, _ = obj.vae_terms(model, x)
    prec.minimize(terms["loss"], opts["model"])
    assert all(p.grad is None for p in obj.discriminator.parameters())
    assert all(p.requires_grad for p in obj.discriminator.parameters())  # unfrozen again
    for k, v in obj.discriminator.state_dict().items():
        assert torch.equal(v, before[k])
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.parameters())


def test_encoder_gradients_are_identical_with_or_without_the_discriminator_step():
    """The D step sends no gradient into the encoder: exact equality of encoder grads and params."""
    runs = []
    for with_d_step in (True, False):
        model, obj, opts, x = _setup(seed=3)
        if not with_d_step:
            obj.discriminator_step = lambda z, optimizer, precision: {}
        d_before = copy.deepcopy(obj.discriminator.state_dict())
        torch.manual_seed(5)
        obj.train_step(model, x, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
        runs.append((model, obj, d_before))
    (m_a, o_a, d0), (m_b, _, _) = runs
    for (name, pa), pb in zip(m_a.encoder.named_parameters(), m_b.encoder.parameters()):
        assert pa.grad is not None and torch.equal(pa.grad, pb.grad), name
        assert torch.equal(pa, pb), name
    # and the D step did run (and moved D) in the first run
    assert any(not torch.equal(v, d0[k]) for k, v in o_a.discriminator.state_dict().items())


def test_discriminator_loss_has_no_path_to_the_encoder():
    model, obj, _, x = _setup()
    _, z = obj.vae_terms(model, x)
    assert z.requires_grad  # the live codes, graph to the encoder
    d_loss = obj.discriminator_terms(z)["discriminator_loss"]
    grads = torch.autograd.grad(d_loss, list(model.parameters()), allow_unused=True)
    assert all(g is None for g in grads)
    d_grads = torch.autograd.grad(d_loss, list(obj.discriminator.parameters()), allow_unused=True)
    assert all(g is not None for g in d_grads)


def test_discriminator_learns_the_tc_of_correlated_codes():
    """Trained alone on z ~ N(0, [[1, ρ], [ρ, 1]]), D's mean logit difference approaches TC = −½ log(1 − ρ²)."""
    torch.manual_seed(0)
    obj = FactorVAE(discriminator_hidden=64, discriminator_layers=2, discriminator_lr=1e-3)
    model = VAE.from_backbone("mlp", image_shape=(1, 2, 2), latent_dim=2, hidden_sizes=[4])
    obj.setup(model=model, dataset_size=100)
    opt = build_optimizers(model, obj, TrainConfig(lr=1e-4))["discriminator"]
    rho = 0.9
    mix = torch.linalg.cholesky(torch.tensor([[1.0, rho], [rho, 1.0]]))
    prec = Precision("fp32", "cpu")
    accs = []
    for _ in range(300):
        z = torch.randn(256, 2) @ mix.T
        accs.append(obj.discriminator_step(z, opt, prec)["discriminator_accuracy"].item())
    z = torch.randn(20_000, 2) @ mix.T
    with torch.no_grad():
        logits = obj.discriminator(z)
    tc_est = (logits[:, 0] - logits[:, 1]).mean().item()
    # true TC 0.830 nats; seeds 0-4 give 0.77-0.91 after 300 steps
    assert abs(tc_est - (-0.5 * math.log(1 - rho**2))) < 0.2, tc_est
    assert sum(accs[-50:]) / 50 > 0.7  # the Bayes-optimal accuracy is ≈ 0.76


def test_trainer_logs_all_terms_and_resume_is_bit_exact(tmp_path, tiny_overrides):
    extra = {"objective.name": "factor_vae", "objective.discriminator_hidden": 16, "objective.discriminator_layers": 2}
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=12, **extra)))
    fit(load_config(None, tiny_overrides(split, steps=8, **extra)))
    fit(load_config(None, tiny_overrides(split, steps=12, **extra)), resume=True)

    def records(path):
        return [{k: v for k, v in json.loads(l).items() if k not in ("steps_per_s", "wall_time_s")} for l in (path / "log.jsonl").read_text().splitlines()]

    a, b = records(straight), records(split)
    assert [r["step"] for r in a] == list(range(2, 13, 2))
    assert a == b  # every term, exactly
    assert set(a[-1]) >= {"loss", "recon", "kl", "kl_per_dim", "tc", "elbo", "discriminator_loss", "discriminator_accuracy"}
    ca = torch.load(straight / "checkpoint.pt", weights_only=True)
    cb = torch.load(split / "checkpoint.pt", weights_only=True)
    assert set(ca["optimizers"]) == {"model", "discriminator"}
    for part in ("model", "objective"):
        assert ca[part].keys() == cb[part].keys()
        for k, v in ca[part].items():
            assert torch.equal(v, cb[part][k]), (part, k)
    assert any(k.startswith("discriminator.") for k in ca["objective"])
    for name in ("model", "discriminator"):
        sa, sb = ca["optimizers"][name]["state"], cb["optimizers"][name]["state"]
        assert sa.keys() == sb.keys() and sa
        for idx in sa:
            for key in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(sa[idx][key], sb[idx][key])


def test_trainer_passes_the_dataset_size_and_builds_d_on_setup(tmp_path, tiny_overrides):
    cfg = load_config(None, tiny_overrides(tmp_path / "r", steps=2, **{"objective.name": "factor_vae", "objective.discriminator_hidden": 8}))
    trainer = Trainer(cfg)
    trainer.fit()
    assert trainer.objective.dataset_size == len(trainer.dataset) == 24
    assert trainer.objective.discriminator.in_features == cfg.model.latent_dim
