"""Semi-supervised VAEs: the supervised regularisers by value, the schedules, the loss of each S2
objective against its twin, training, resume and a planted effect of the labels."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from disentangle.config import load_config
from disentangle.data.labels import LabelledBatch, LabelsSpec, make_labelled_set
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.semi_supervised import S2_TWINS
from disentangle.objectives.supervised import (
    SupervisedRegularizer,
    cov_loss,
    l2_loss,
    supervised_weight,
    xent_loss,
    zero_diagonal,
)
from disentangle.train import main
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------------------- the regularisers
def test_xent_at_zero_means_is_b_k_ln2():
    labels = torch.tensor([[0.0, 3.0, 31.0], [2.0, 0.0, 7.0]])
    mu = torch.zeros(2, 10)
    assert xent_loss(mu, labels, torch.tensor([3.0, 6.0, 32.0])).item() == pytest.approx(2 * 3 * math.log(2))


def test_xent_matches_the_sigmoid_cross_entropy_with_normalised_targets(rng):
    mu = torch.tensor(rng.normal(size=(5, 4)), dtype=torch.float32)
    labels = torch.tensor(rng.integers(0, 6, size=(5, 3)), dtype=torch.float32)
    sizes = np.array([3.0, 6.0, 6.0])
    t = labels.numpy() / sizes
    m = mu.numpy()[:, :3]
    expected = np.sum(np.maximum(m, 0) - m * t + np.log1p(np.exp(-np.abs(m))))  # TF's stable form
    assert xent_loss(mu, labels, torch.tensor(sizes, dtype=torch.float32)).item() == pytest.approx(expected, rel=1e-5)


def test_l2_is_zero_when_the_scaled_means_equal_the_labels():
    labels = torch.tensor([[0.0, 2.0], [4.0, 1.0]])
    mu = torch.cat([labels / 2, torch.randn(2, 3)], 1)
    assert l2_loss(mu, labels, torch.tensor(2.0)).item() == 0.0
    assert l2_loss(mu, labels, torch.tensor(1.0)).item() == pytest.approx(((labels / 2 - labels) ** 2).sum().item())


def test_cov_is_the_off_diagonal_cross_covariance_of_planted_correlated_data(rng):
    n = 400
    y = rng.normal(size=(n, 3))
    mu = np.concatenate([y @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]), rng.normal(size=(n, 2))], 1)
    cross = (mu - mu.mean(0)).T @ (y - y.mean(0)) / n  # (5, 3), numpy
    off = cross.copy()
    off[np.arange(3), np.arange(3)] = 0
    value = cov_loss(torch.tensor(mu, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)).item()
    assert value == pytest.approx((off**2).sum(), rel=1e-4)
    assert value > 0.2  # the planted 0.5 between latent 0 and factor 1 is there
    assert torch.equal(zero_diagonal(torch.ones(2, 3)), torch.tensor([[0.0, 1, 1], [1, 0, 1]]))


def test_embed_in_closed_form_at_known_embeddings():
    reg = SupervisedRegularizer("embed", embed_sigma=2.0)
    reg.build((3, 2))
    with torch.no_grad():
        reg.embeddings[0].copy_(torch.tensor([0.0, 1.0, 2.0]))
        reg.embeddings[1].copy_(torch.tensor([-1.0, 1.0]))
    mu = torch.tensor([[1.0, 1.0, 9.0], [0.5, -1.0, 9.0]])
    labels = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    expected = 0.0
    for j, emb in enumerate(([0.0, 1.0, 2.0], [-1.0, 1.0])):
        ces = []
        for b in range(2):
            logits = -((mu[b, j].item() - np.array(emb)) * 2.0) ** 2
            ces.append(-(logits[int(labels[b, j])] - np.log(np.exp(logits).sum())))
        expected += np.mean(ces)
    assert reg(mu, labels).item() == pytest.approx(expected, rel=1e-5)


def test_a_learned_embed_temperature_is_one_per_factor_as_the_reference():
    """disentanglement_lib creates ``tf.get_variable("sigma", [1])`` inside each factor's variable scope:
    one temperature per factor, Glorot-uniform for a scalar (U(−√3, √3))."""
    torch.manual_seed(0)
    reg = SupervisedRegularizer("embed", embed_sigma="learn")
    reg.build((3, 2))
    assert reg.sigmas.shape == (2,) and bool((reg.sigmas.abs() <= 3**0.5).all()) and reg.sigmas[0] != reg.sigmas[1]
    with torch.no_grad():
        reg.embeddings[0].copy_(torch.tensor([0.0, 1.0, 2.0]))
        reg.embeddings[1].copy_(torch.tensor([-1.0, 1.0]))
        reg.sigmas.copy_(torch.tensor([2.0, 0.5]))
    mu = torch.tensor([[1.0, 1.0, 9.0], [0.5, -1.0, 9.0]])
    labels = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    expected = 0.0
    for j, (emb, sigma) in enumerate((([0.0, 1.0, 2.0], 2.0), ([-1.0, 1.0], 0.5))):
        ces = []
        for b in range(2):
            logits = -((mu[b, j].item() - np.array(emb)) * sigma) ** 2
            ces.append(-(logits[int(labels[b, j])] - np.log(np.exp(logits).sum())))
        expected += np.mean(ces)
    loss = reg(mu, labels)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert bool((reg.sigmas.grad != 0).all())  # each factor's temperature learns from its own term
    # a checkpoint from when one temperature was shared loads into every factor's
    old = {k: v for k, v in reg.state_dict().items() if k != "sigmas"} | {"sigma": torch.tensor(1.5)}
    again = SupervisedRegularizer("embed", embed_sigma="learn")
    again.build((3, 2))
    again.load_state_dict(old)
    assert torch.equal(again.sigmas.detach(), torch.tensor([1.5, 1.5]))


def test_embed_with_order_is_a_line_of_learned_slope_and_offset():
    reg = SupervisedRegularizer("embed", embed_use_order=True)
    reg.build((4,))
    with torch.no_grad():
        reg.slopes.fill_(0.5)
        reg.offsets.fill_(-1.0)
    assert torch.allclose(reg.embedding(0), torch.tensor([-1.0, -0.5, 0.0, 0.5]))


@pytest.mark.parametrize(
    ("schedule", "step", "expected"),
    [
        ("fixed", 0, 4.0), ("fixed", 10**6, 4.0),
        ("anneal", 0, 0.0), ("anneal", 50, 2.0), ("anneal", 100, 4.0), ("anneal", 1000, 4.0),
        ("fine_tune", 0, 0.0), ("fine_tune", 100, 0.0), ("fine_tune", 101, 4.0), ("fine_tune", 5000, 4.0),
    ],
)
def test_schedules_at_their_edges(schedule, step, expected):
    assert supervised_weight(4.0, step, schedule, 100) == expected


# ---------------------------------------------------------------------------- the objectives
def _model_and_batch(tiny_dataset, latent_dim: int = 4):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=latent_dim, hidden_sizes=[16])
    labelled = make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=20))
    g = torch.Generator().manual_seed(0)
    return model, labelled, g


@pytest.mark.parametrize("name", sorted(S2_TWINS))
def test_the_loss_is_the_twins_loss_plus_the_weighted_supervised_term(name, tiny_dataset):
    model, labelled, g = _model_and_batch(tiny_dataset)
    small = {"discriminator_hidden": 8, "discriminator_layers": 1} if "factor" in name else {}
    s2 = OBJECTIVES.build(name, gamma_sup=3.0, **small)
    twin = OBJECTIVES.build(S2_TWINS[name], **small)
    for obj in (s2, twin):
        obj.setup(model=model, dataset_size=len(tiny_dataset))
    twin.load_state_dict({k: v for k, v in s2.state_dict().items() if not k.startswith(("regularizer", "labelled_drawn"))})
    s2.attach_labels(labelled)
    batch = s2.sample_batch(tiny_dataset, 8, g)
    assert isinstance(batch, LabelledBatch) and batch.labelled.shape == batch.x.shape
    torch.manual_seed(1)
    terms = s2(model, batch, step=0)
    torch.manual_seed(1)
    twin_terms = twin(model, batch.x, step=0)
    mu_l, _ = model.encode(batch.labelled)
    sup = xent_loss(mu_l, batch.labels, torch.tensor([2.0, 3.0, 4.0]))
    assert terms["supervised"].item() == pytest.approx(sup.item(), rel=1e-5)
    assert terms["loss"].item() == pytest.approx(twin_terms["loss"].item() + 3.0 * sup.item(), rel=1e-5)


def test_too_few_latents_for_the_labels_is_a_clear_error(tiny_dataset):
    model, labelled, _ = _model_and_batch(tiny_dataset, latent_dim=2)
    obj = OBJECTIVES.build("s2_beta_vae")
    obj.setup(model=model, dataset_size=24)
    with pytest.raises(ConfigError, match="latent_dim=3 or more"):
        obj.attach_labels(labelled)


def test_bad_supervision_settings_are_config_errors():
    with pytest.raises(ConfigError, match="supervised_loss"):
        load_config(None, ["objective.name=s2_beta_vae", "objective.supervised_loss=mse"])
    with pytest.raises(ConfigError, match="supervised_schedule"):
        load_config(None, ["objective.name=s2_beta_vae", "objective.supervised_schedule=linear"])


def _labels_overrides(**extra):
    return {"data.labels.num_labelled": 40, "train.lr": 1e-3, **extra}


@pytest.mark.parametrize("loss", ["xent", "l2", "cov", "embed"])
def test_resume_is_bit_exact(loss, tmp_path, tiny_overrides):
    extra = _labels_overrides(**{"objective.name": "s2_beta_vae", "objective.supervised_loss": loss})
    full = tmp_path / "full"
    Trainer(load_config(None, tiny_overrides(full, steps=8, **extra))).fit()
    part = tmp_path / "part"
    Trainer(load_config(None, tiny_overrides(part, steps=4, **extra))).fit()
    assert main(["--resume", str(part), "train.steps=8"]) == 0
    a = torch.load(full / "checkpoint.pt", weights_only=True)
    b = torch.load(part / "checkpoint.pt", weights_only=True)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    for key, value in a["objective"].items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, b["objective"][key]), key
    assert a["objective"]["labelled_drawn"].item() == b["objective"]["labelled_drawn"].item() == 64
    if loss in ("l2", "embed"):  # the learned parameters of R_s have their optimizer, checkpointed
        assert "supervised" in a["optimizers"]
        assert any(k.startswith("regularizer.") for k in a["objective"])


def test_factor_vae_variant_trains_its_discriminator_and_logs_the_supervision(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    extra = _labels_overrides(**{
        "objective.name": "s2_factor_vae", "objective.discriminator_hidden": 8,
        "objective.discriminator_layers": 1, "objective.supervised_schedule": "fine_tune",
        "objective.schedule_steps": 3,
    })
    Trainer(load_config(None, tiny_overrides(run, steps=6, **extra))).fit()
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if '"loss"' in line]
    # the records of steps t = 1, 3, 5 (0-based): γ is 0 up to t = T = 3 and 4 after
    assert [r["step"] for r in records] == [2, 4, 6]
    assert [r["gamma_sup"] for r in records] == [0.0, 0.0, 4.0]
    assert all("discriminator_loss" in r and "supervised" in r for r in records)


def test_labels_align_latents_with_their_factors_better_than_the_twin(tmp_path, tiny_overrides):
    """A planted effect: with labels, latent j tracks factor j far better than without, same steps and seed."""
    scores = {}
    for name in ("beta_vae", "s2_beta_vae"):
        extra = {"objective.name": name, "objective.beta": 1.0, "data.labels.num_labelled": 200, "train.lr": 3e-3}
        cfg = load_config(None, tiny_overrides(tmp_path / name, steps=300, **extra))
        trainer = Trainer(cfg)
        trainer.fit()
        ds = trainer.dataset
        factors = np.array(np.meshgrid(*[np.arange(s) for s in ds.factor_sizes], indexing="ij")).reshape(3, -1).T
        images = ds.observe(torch.as_tensor(ds.factors_to_indices(factors)), None)
        with torch.no_grad():
            mu = trainer.model.encode(images)[0].numpy()
        corr = [abs(np.corrcoef(mu[:, j], factors[:, j])[0, 1]) for j in range(3)]
        scores[name] = float(np.mean(corr))
    assert scores["s2_beta_vae"] > 0.9, scores
    assert scores["s2_beta_vae"] > scores["beta_vae"] + 0.2, scores
