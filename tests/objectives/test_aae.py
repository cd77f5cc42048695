"""AAE: phases, optimizers, gradient isolation of the discriminator, encoder kinds."""
from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentangle.config import TrainConfig, load_config
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.aae import AAE
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


def _setup(seed=0, **params):
    torch.manual_seed(seed)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=4, hidden_sizes=[32])
    params.setdefault("discriminator_hidden", 32)
    obj = OBJECTIVES.build("aae", **params)
    obj.setup(model=model, dataset_size=1000)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    x = (torch.rand(16, 1, 8, 8, generator=torch.Generator().manual_seed(seed)) > 0.5).float()
    return model, obj, opts, x


def _ids(opt):
    return {id(p) for g in opt.param_groups for p in g["params"]}


def test_defaults_optimizers_and_architecture():
    model, obj, opts, _ = _setup(discriminator_hidden=1000)
    assert obj.encoder_kind == "deterministic" and not hasattr(obj, "beta")
    linears = [m for m in obj.discriminator.modules() if isinstance(m, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(4, 1000), (1000, 1000), (1000, 1)]
    assert set(opts) == {"model", "discriminator", "generator"}
    assert _ids(opts["model"]) == {id(p) for p in model.parameters()}
    assert _ids(opts["generator"]) == {id(p) for p in model.encoder.parameters()}
    assert _ids(opts["discriminator"]) == {id(p) for p in obj.discriminator.parameters()}
    assert tuple(opts["discriminator"].defaults["betas"]) == (0.5, 0.9)


def test_encoder_kinds():
    model, det, _, x = _setup()
    mu, logvar = model.encode(x)
    assert torch.equal(det.encode(model, x), mu)
    _, gau, _, _ = _setup(encoder="gaussian")
    torch.manual_seed(3)
    z = gau.encode(model, x)
    torch.manual_seed(3)
    assert torch.allclose(z, mu + torch.exp(0.5 * logvar) * torch.randn_like(mu))
    with pytest.raises(ValueError, match="encoder"):
        AAE(encoder="vq")


def test_discriminator_and_generator_loss_values():
    _, obj, _, _ = _setup()
    # a fixed D: logit = z₀
    obj.discriminator.net = nn.Sequential(nn.Linear(4, 1, bias=False))
    with torch.no_grad():
        obj.discriminator.net[0].weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    z = torch.randn(10, 4)
    torch.manual_seed(7)
    d = obj.discriminator_terms(z)
    torch.manual_seed(7)
    prior = torch.randn(10, 4)
    expected = 0.5 * F.softplus(-prior[:, 0]).mean() + 0.5 * F.softplus(z[:, 0]).mean()
    assert torch.allclose(d["discriminator_loss"], expected, rtol=1e-6)
    acc = 0.5 * (prior[:, 0] > 0).float().mean() + 0.5 * (z[:, 0] <= 0).float().mean()
    assert torch.allclose(d["discriminator_accuracy"], acc)
    g = obj.generator_terms(z)["generator_loss"]
    assert torch.allclose(g, F.softplus(-z[:, 0]).mean(), rtol=1e-6)


def test_discriminator_step_sends_no_gradient_into_the_encoder():
    """Encoder grads and params are identical whether or not the D step runs (G step disabled)."""
    runs = []
    for with_d_step in (True, False):
        model, obj, opts, x = _setup(seed=2)
        obj.generator_step = lambda z, optimizer, precision: {"generator_loss": torch.zeros(())}
        if not with_d_step:
            obj.discriminator_step = lambda z, optimizer, precision: {}
        d_before = copy.deepcopy(obj.discriminator.state_dict())
        torch.manual_seed(5)
        obj.train_step(model, x, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
        runs.append((model, obj, d_before))
    (m_a, o_a, d0), (m_b, _, _) = runs
    for (name, pa), pb in zip(m_a.encoder.named_parameters(), m_b.encoder.parameters()):
        if pa.grad is None:  # the unused log-variance head of the deterministic encoder
            assert pb.grad is None and "logvar" in name
            continue
        assert torch.equal(pa.grad, pb.grad), name
        assert torch.equal(pa, pb), name
    assert any(not torch.equal(v, d0[k]) for k, v in o_a.discriminator.state_dict().items())


def test_discriminator_loss_has_no_path_to_the_encoder():
    model, obj, _, x = _setup(encoder="gaussian")
    z = obj.encode(model, x)
    assert z.requires_grad
    d_loss = obj.discriminator_terms(z)["discriminator_loss"]
    assert all(g is None for g in torch.autograd.grad(d_loss, list(model.parameters()), allow_unused=True))


def test_generator_step_moves_the_encoder_only():
    model, obj, opts, x = _setup()
    d_before = copy.deepcopy(obj.discriminator.state_dict())
    dec_before = copy.deepcopy(model.decoder.state_dict())
    enc_before = copy.deepcopy(model.encoder.state_dict())
    z = obj.encode(model, x)
    obj.generator_step(z, opts["generator"], Precision("fp32", "cpu"))
    assert all(p.grad is None for p in obj.discriminator.parameters())
    assert all(torch.equal(v, d_before[k]) for k, v in obj.discriminator.state_dict().items())
    assert all(torch.equal(v, dec_before[k]) for k, v in model.decoder.state_dict().items())
    assert any(not torch.equal(v, enc_before[k]) for k, v in model.encoder.state_dict().items())


def test_discriminator_learns_the_log_density_ratio_of_prior_to_codes():
    """Trained alone, D's logit approaches log p(z)/q(z); its mean over codes is −KL(q ‖ p)."""
    _, obj, opts, _ = _setup(discriminator_hidden=64, discriminator_lr=1e-3)
    m, s = 0.5, 0.8  # codes q = N(m, s² I) in 4-D; KL(q ‖ N(0, I)) = 2 (s² + m² − 1 − log s²) = 0.670
    kl = 2 * (s**2 + m**2 - 1 - 2 * torch.log(torch.tensor(s)).item())
    prec = Precision("fp32", "cpu")
    torch.manual_seed(0)
    for _ in range(300):
        obj.discriminator_step(m + s * torch.randn(256, 4), opts["discriminator"], prec)
    with torch.no_grad():
        logits = obj.discriminator(m + s * torch.randn(20_000, 4)).squeeze(1)
    assert abs(logits.mean().item() + kl) < 0.2, (logits.mean().item(), -kl)


def test_generator_step_lowers_the_generator_loss():
    model, obj, opts, x = _setup()
    prec = Precision("fp32", "cpu")
    for _ in range(20):  # a D that tells the initial codes from the prior
        obj.discriminator_step(obj.encode(model, x).detach(), opts["discriminator"], prec)
    before = obj.generator_terms(obj.encode(model, x))["generator_loss"].item()
    for _ in range(5):
        obj.generator_step(obj.encode(model, x), opts["generator"], prec)
    after = obj.generator_terms(obj.encode(model, x))["generator_loss"].item()
    assert after < before


def test_trainer_runs_and_logs_all_terms(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4, **{"objective.name": "aae", "objective.discriminator_hidden": 16})))
    rec = json.loads((run / "log.jsonl").read_text().splitlines()[-1])
    assert set(rec) >= {"loss", "recon", "generator_loss", "discriminator_loss", "discriminator_accuracy"}
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert set(ckpt["optimizers"]) == {"model", "discriminator", "generator"}
