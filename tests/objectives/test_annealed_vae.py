"""AnnealedVAE: the capacity schedule (per step, stateless) and the loss value."""
from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from disentangle.config import load_config
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.annealed_vae import AnnealedVAE, linear_capacity
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


def test_defaults_follow_locatello_et_al():
    obj = OBJECTIVES.build("annealed_vae")
    assert (obj.gamma, obj.iteration_threshold, obj.c_max) == (1000.0, 100000, 25.0)
    assert not hasattr(obj, "beta")  # no β in Burgess et al.'s objective


@pytest.mark.parametrize(
    "step,expected", [(0, 0.0), (1, 25e-5), (25_000, 6.25), (50_000, 12.5), (100_000, 25.0), (100_001, 25.0), (300_000, 25.0)]
)
def test_capacity_rises_linearly_per_step_then_stays(step, expected):
    assert math.isclose(AnnealedVAE(c_max=25.0).capacity(step), expected, rel_tol=1e-12, abs_tol=1e-12)
    assert math.isclose(linear_capacity(step, 25.0, 100_000), expected, rel_tol=1e-12, abs_tol=1e-12)


def test_loss_value_and_evaluation_does_not_advance_the_schedule():
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=3, hidden_sizes=[16])
    obj = AnnealedVAE(c_max=10.0, gamma=100.0, iteration_threshold=40)
    x = (torch.rand(12, 1, 8, 8) > 0.5).float()
    for _ in range(3):  # repeated (evaluation) calls at a step give the same C: no hidden counter
        with torch.no_grad():
            obj(model, x, step=0)
    torch.manual_seed(1)
    terms = obj(model, x, step=10)
    torch.manual_seed(1)
    out = model(x)
    recon = F.binary_cross_entropy_with_logits(out.logits, x, reduction="none").flatten(1).sum(1).mean()
    kl = (0.5 * (out.mu.square() + out.logvar.exp() - out.logvar - 1)).sum(1).mean()
    assert terms["capacity"].item() == 2.5
    assert torch.allclose(terms["loss"], recon + 100.0 * (kl - 2.5).abs(), rtol=1e-6)
    assert torch.allclose(terms["elbo"], -(recon + kl), rtol=1e-6)
    assert torch.allclose(terms["kl_per_dim"].sum(), terms["kl"])


def test_validation():
    with pytest.raises(ValueError, match="iteration_threshold"):
        AnnealedVAE(iteration_threshold=0)
    with pytest.raises(ValueError, match="gamma"):
        AnnealedVAE(gamma=-1.0)
    with pytest.raises(ValueError, match="c_max"):
        AnnealedVAE(c_max=-5.0)


def test_trainer_advances_capacity_once_per_training_step(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    overrides = tiny_overrides(run, steps=8, **{"objective.name": "annealed_vae", "objective.c_max": 4.0, "objective.iteration_threshold": 4})
    fit(load_config(None, overrides))
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    # a record at step s holds the terms of the step that ran with step = s − 1 (0-based)
    assert [(r["step"], r["capacity"]) for r in records] == [(2, 1.0), (4, 3.0), (6, 4.0), (8, 4.0)]


def test_the_capacity_is_the_linear_train_schedule_to_the_bit():
    from disentangle._core.schedules import Schedule
    from disentangle.objectives.annealed_vae import capacity_schedule

    schedule = capacity_schedule(25.0, 100_000)
    assert schedule == Schedule.from_dict("x", {"kind": "linear", "start": 0, "end": 25, "steps": 100_000})
    objective = AnnealedVAE(c_max=25.0, iteration_threshold=100_000)
    for step in [*range(0, 300_001, 997), 99_999, 100_000, 100_001]:
        assert objective.capacity(step) == 25.0 * min(1.0, step / 100_000.0), step
