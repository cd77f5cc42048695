"""``train.schedules``: every kind by its formula, the config's checks, and a scheduled β that is
logged step by step, moves the loss as its formula says and resumes bit-exactly."""
from __future__ import annotations

import json
import math

import pytest
import torch

from disentangle._core.schedules import Schedule, parse_schedules
from disentangle.config import load_config
from disentangle.errors import ConfigError
from disentangle.sweep.ids import run_id
from disentangle.training import fit

pytestmark = pytest.mark.usefixtures("one_thread")


def _schedule(**spec):
    return Schedule.from_dict("objective.beta", spec)


def test_every_kind_follows_its_formula():
    linear = _schedule(kind="linear", start=0, end=4, steps=100)
    assert [linear.value(t) for t in (0, 25, 100, 500)] == [0.0, 1.0, 4.0, 4.0]
    cosine = _schedule(kind="cosine", start=1, end=3, steps=10)
    assert cosine.value(0) == 1 and cosine.value(5) == pytest.approx(2.0) and cosine.value(10) == pytest.approx(3.0)
    assert cosine.value(2) == pytest.approx(1 + 2 * (1 - math.cos(math.pi * 0.2)) / 2)
    step = _schedule(kind="step", start=8, gamma=0.5, every=10)
    assert [step.value(t) for t in (0, 9, 10, 25)] == [8, 8, 4, 2]
    assert _schedule(kind="constant", value=3).value(12345) == 3
    # Fu et al.: 4 cycles of 25 steps, rising over the first half of each, then flat; end after
    cyclical = _schedule(kind="cyclical", start=0, end=1, steps=100)
    assert [cyclical.value(t) for t in (0, 6, 13, 20, 25, 30, 100, 1000)] == \
        pytest.approx([0.0, 0.48, 1.0, 1.0, 0.0, 0.4, 1.0, 1.0])
    delayed = _schedule(kind="linear", start=0, end=1, steps=10, delay=5)
    assert [delayed.value(t) for t in (0, 5, 10, 15)] == [0.0, 0.0, 0.5, 1.0]


@pytest.mark.parametrize("spec, match", [
    ({"kind": "lineer", "start": 0, "end": 1, "steps": 5}, "unknown kind 'lineer'. Did you mean 'linear'?"),
    ({"kind": "linear", "start": 0, "steps": 5}, "missing end"),
    ({"kind": "linear", "start": 0, "end": 1, "steps": 5, "step": 3}, "unknown parameter\\(s\\) step"),
    ({"kind": "linear", "start": 0, "end": 1, "steps": 0}, "steps is 0; give a whole number >= 1"),
    ({"kind": "cyclical", "start": 0, "end": 1, "steps": 9, "ratio": 2}, "ratio is 2"),
    ({"kind": "constant", "value": "x"}, "value is 'x'; give a number"),
    (4, "give a mapping with a 'kind'"),
])
def test_a_bad_schedule_is_one_clear_error(spec, match):
    with pytest.raises(ConfigError, match=match):
        parse_schedules({"objective.beta": spec})


def test_the_config_checks_what_a_schedule_applies_to(tmp_path, tiny_overrides):
    bad = tiny_overrides(tmp_path, steps=4, **{"train.schedules": "{objective.bta: {kind: constant, value: 1}}"})
    with pytest.raises(ConfigError, match="'objective.bta', which is not a numeric parameter of the objective "
                                          "'beta_vae'. Did you mean 'beta'?"):
        load_config(None, bad)
    with pytest.raises(ConfigError, match="applies to a numeric parameter of the objective"):
        load_config(None, tiny_overrides(tmp_path, steps=4, **{"train.schedules": "{model.latent_dim: {kind: constant, value: 1}}"}))
    with pytest.raises(ConfigError, match="one schedule of the learning rate at a time"):
        load_config(None, tiny_overrides(tmp_path, steps=4, **{
            "train.schedules": "{train.lr: {kind: constant, value: 1}}", "train.lr_schedule": "cosine"}))


def _records(run):
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if "metrics" not in line]


def test_a_linear_beta_is_logged_step_by_step_moves_the_loss_and_resumes_bit_exactly(tmp_path, tiny_overrides):
    schedule = {"train.schedules": "{objective.beta: {kind: linear, start: 0, end: 4, steps: 8}}", "train.log_every": 1}
    whole = fit(load_config(None, tiny_overrides(tmp_path / "whole", steps=10, **schedule))).out_dir
    records = _records(whole)
    assert [r["objective.beta"] for r in records] == [min(4.0, 0.5 * t) for t in range(10)]  # the value of step t + 1
    for r in records:  # beta_vae: loss = recon + beta · kl, with the scheduled beta
        assert r["loss"] == pytest.approx(r["recon"] + r["objective.beta"] * r["kl"], rel=1e-5)
    fit(load_config(None, tiny_overrides(tmp_path / "parts", steps=4, **schedule)))
    parts = fit(load_config(None, tiny_overrides(tmp_path / "parts", steps=10, **schedule)), resume=True).out_dir
    a = torch.load(whole / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(parts / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [(r["step"], r["loss"]) for r in _records(parts)] == [(r["step"], r["loss"]) for r in records]


def test_a_scheduled_learning_rate_is_the_one_the_optimizer_uses(tmp_path, tiny_overrides):
    frozen = fit(load_config(None, tiny_overrides(tmp_path / "frozen", steps=4, **{
        "train.schedules": "{train.lr: {kind: constant, value: 0}}"}))).out_dir
    first = fit(load_config(None, tiny_overrides(tmp_path / "first", steps=4, **{"train.steps": 4, "train.lr": 0.0001})))
    start = torch.load(tmp_path / "first" / "checkpoint.pt", weights_only=True)["model"]
    end = torch.load(frozen / "checkpoint.pt", weights_only=True)["model"]
    assert first.step == 4 and not all(torch.equal(start[k], end[k]) for k in start)  # lr 1e-4 moves the weights
    # a zero rate from the first step leaves the initial weights (the same seed: the same start)
    init = fit(load_config(None, tiny_overrides(tmp_path / "zero", steps=1, **{"train.lr": 1e-30})))
    zero = torch.load(init.out_dir / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.allclose(zero[k], end[k], rtol=0, atol=1e-12) for k in zero)
    assert _records(frozen)[-1]["train.lr"] == 0.0


def test_no_schedule_keeps_every_run_id_and_a_schedule_changes_it(tmp_path, tiny_overrides):
    plain = load_config(None, tiny_overrides(tmp_path, steps=4))
    raw = plain.to_dict()
    raw["train"].pop("schedules")  # a config from before the key existed
    assert run_id(plain) == run_id(raw)
    scheduled = load_config(None, tiny_overrides(tmp_path, steps=4, **{
        "train.schedules": "{objective.beta: {kind: constant, value: 1}}"}))
    assert run_id(scheduled) != run_id(plain)


def test_a_scheduled_learning_rate_leaves_an_objectives_own_networks_at_their_rates(tmp_path, tiny_overrides):
    """``train.lr`` is the model's rate: FactorVAE's discriminator keeps ``objective.discriminator_lr``
    (scheduling it to 0 freezes the VAE at its initial weights, not the discriminator, which learns)."""
    out = tmp_path / "factor"
    fit(load_config(None, tiny_overrides(out, steps=4, **{
        "objective.name": "factor_vae", "objective.discriminator_lr": 0.001,
        "train.schedules": "{train.lr: {kind: constant, value: 0}}"})))
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    # both networks at their initial weights: one step at rates of 1e-30 (the same seed, the same start)
    start = fit(load_config(None, tiny_overrides(tmp_path / "start", steps=1, **{
        "objective.name": "factor_vae", "objective.discriminator_lr": 1e-30, "train.lr": 1e-30})))
    init = torch.load(start.out_dir / "checkpoint.pt", weights_only=True)
    assert all(torch.allclose(init["model"][k], state["model"][k], rtol=0, atol=1e-12) for k in state["model"])
    discriminator = {k: v for k, v in state["objective"].items() if k.startswith("discriminator.")}
    assert discriminator and not all(torch.allclose(v, init["objective"][k], rtol=0, atol=1e-6)
                                     for k, v in discriminator.items())
