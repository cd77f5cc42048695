"""M2 (Kingma et al. 2014) with Siddharth et al.'s importance estimator: the bounds by value against
explicit loops over the classes and samples, the entropy, the importance weights' reduction to the
plain average, a perfect classifier, the factor choice, training, bit-exact resume, no host round
trip for the importance estimator, and a planted effect of the labels."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentangle.config import load_config
from disentangle.data.labels import LabelledBatch, LabelsSpec, make_labelled_set
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.m2 import (
    M2,
    categorical_entropy,
    importance_labelled_bound,
    unlabelled_terms,
)
from disentangle.train import main
from disentangle.training.trainer import Trainer

from ..training.test_host_sync import run_meta_step, run_trainer_step

pytestmark = pytest.mark.usefixtures("one_thread")

LATENT = 6
C = 4  # factor c of the tiny dataset
DZ = LATENT - C


def _built(tiny_dataset, latent_dim: int = LATENT, **params):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=latent_dim, hidden_sizes=[16])
    objective = OBJECTIVES.build("m2", **{"factor": "c", **params})
    objective.setup(model=model, dataset_size=len(tiny_dataset))
    objective.attach_labels(make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=20)))
    batch = objective.sample_batch(tiny_dataset, 8, torch.Generator().manual_seed(0))
    return model, objective, batch


def _bce(logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, x, reduction="none").flatten(1).sum(1)


def _onehot(index: int | torch.Tensor, rows: int) -> torch.Tensor:
    out = torch.zeros(rows, C)
    if isinstance(index, int):
        out[:, index] = 1.0
    else:
        out[torch.arange(rows), index] = 1.0
    return out


# ---------------------------------------------------------------------------- the pieces
def test_the_entropy_of_a_uniform_classifier_is_ln_c():
    for classes in (2, 3, 7):
        log_q = torch.log_softmax(torch.zeros(5, classes), -1)
        assert torch.allclose(categorical_entropy(log_q), torch.full((5,), math.log(classes)))
        nll = torch.rand(1, 5, classes)
        recon, kl_y = unlabelled_terms(nll, log_q.unsqueeze(0))
        assert torch.allclose(kl_y, torch.zeros(5), atol=1e-6)  # KL(uniform ‖ uniform)
        assert torch.allclose(recon, nll.mean(-1)[0])  # a uniform q averages over the classes
    # a one-hot q: no entropy, KL = ln C, the NLL of its class
    log_q = torch.log_softmax(torch.tensor([[30.0, 0.0, 0.0]]), -1)
    assert categorical_entropy(log_q).item() == pytest.approx(0.0, abs=1e-9)
    recon, kl_y = unlabelled_terms(torch.tensor([[[1.0, 2.0, 3.0]]]), log_q.unsqueeze(0))
    assert recon.item() == pytest.approx(1.0, rel=1e-6) and kl_y.item() == pytest.approx(math.log(3), rel=1e-6)


def test_the_importance_bound_is_the_plain_average_when_q_y_does_not_depend_on_z():
    g = torch.Generator().manual_seed(0)
    log_px, log_pz_qz = -torch.rand(5, 3, generator=g) * 100, -torch.rand(5, 3, generator=g)
    log_qy = torch.log(torch.tensor([0.2, 0.7, 0.9])).expand(5, 3)  # one value per image, the same for all z
    bound, log_qy_hat = importance_labelled_bound(log_px, log_pz_qz, log_qy, num_classes=4, beta=2.0)
    plain = (log_px - math.log(4) + 2.0 * log_pz_qz).mean(0)
    assert torch.allclose(bound, plain, rtol=1e-6)
    assert torch.allclose(log_qy_hat, log_qy[0])


def test_the_importance_bound_self_normalises_its_weights_over_the_samples():
    g = torch.Generator().manual_seed(1)
    log_px, log_pz_qz = -torch.rand(3, 2, generator=g) * 10, -torch.rand(3, 2, generator=g)
    q = torch.tensor([[0.1, 0.5], [0.6, 0.5], [0.3, 0.2]])
    bound, log_qy_hat = importance_labelled_bound(log_px, log_pz_qz, q.log(), num_classes=3, beta=0.5)
    for b in range(2):
        w = q[:, b] / q[:, b].sum()
        inner = log_px[:, b] - math.log(3) + 0.5 * log_pz_qz[:, b] - q[:, b].log()
        expected = float((w * inner).sum() + q[:, b].mean().log())
        assert bound[b].item() == pytest.approx(expected, rel=1e-6)
        assert log_qy_hat[b].item() == pytest.approx(math.log(q[:, b].mean().item()), rel=1e-6)


# ---------------------------------------------------------------------------- the objective by value
def test_the_marginal_estimator_against_an_explicit_loop_over_the_classes(tiny_dataset):
    model, obj, batch = _built(tiny_dataset, alpha=0.5, beta=2.0)
    assert isinstance(batch, LabelledBatch) and obj.num_classes == C and obj.factor_name == "c"
    torch.manual_seed(1)
    terms = obj(model, batch, step=0)
    torch.manual_seed(1)
    eps_u, eps_l = torch.randn(8, DZ), torch.randn(8, DZ)  # the objective's draws: unlabelled, then labelled
    x, xl, y = batch.x, batch.labelled, batch.labels[:, 2].long()
    with torch.no_grad():
        mu, lv = model.encode(x)
        z = mu[:, C:] + torch.exp(0.5 * lv[:, C:]) * eps_u
        q = torch.softmax(obj.classifier(mu)[:, :C], 1)
        recon = sum(q[:, c] * _bce(model.decode(torch.cat([_onehot(c, 8), z], 1)), x) for c in range(C))
        kl_z = 0.5 * (mu[:, C:] ** 2 + lv[:, C:].exp() - lv[:, C:] - 1).sum(1)
        kl_y = math.log(C) + (q * q.log()).sum(1)
        mul, lvl = model.encode(xl)
        zl = mul[:, C:] + torch.exp(0.5 * lvl[:, C:]) * eps_l
        nll_l = _bce(model.decode(torch.cat([_onehot(y, 8), zl], 1)), xl)
        kl_zl = 0.5 * (mul[:, C:] ** 2 + lvl[:, C:].exp() - lvl[:, C:] - 1).sum(1)
        log_ql = torch.log_softmax(obj.classifier(mul)[:, :C], 1)
        supervised = -log_ql[torch.arange(8), y]
    labelled = nll_l + math.log(C) + 2.0 * kl_zl
    expected = {
        "recon": recon.mean(),
        "kl": (kl_z + kl_y).mean(),
        "kl_y": kl_y.mean(),
        "elbo": -(recon + kl_z + kl_y).mean(),
        "labelled": labelled.mean(),
        "supervised": supervised.mean(),
        "loss": (recon + 2.0 * kl_z + kl_y).mean() + labelled.mean() + 0.5 * supervised.mean(),
        "classifier_accuracy": (log_ql.argmax(1) == y).float().mean(),
    }
    for key, value in expected.items():
        assert terms[key].item() == pytest.approx(value.item(), rel=1e-5, abs=1e-6), key


def test_the_importance_estimator_against_an_explicit_loop_over_samples_and_classes(tiny_dataset):
    S = 3
    model, obj, batch = _built(tiny_dataset, alpha=0.5, beta=2.0, estimator="importance", samples=S)
    torch.manual_seed(2)
    terms = obj(model, batch, step=0)
    torch.manual_seed(2)
    eps_u, eps_l = torch.randn(S * 8, DZ).view(S, 8, DZ), torch.randn(S * 8, DZ).view(S, 8, DZ)
    x, xl, y = batch.x, batch.labelled, batch.labels[:, 2].long()
    recon, kl_y = torch.zeros(8), torch.zeros(8)
    log_px, log_pz_qz, log_qy = [], [], []
    with torch.no_grad():
        mu, lv = model.encode(x)
        mul, lvl = model.encode(xl)
        for s in range(S):
            z = mu[:, C:] + torch.exp(0.5 * lv[:, C:]) * eps_u[s]
            q = torch.softmax(obj.classifier(torch.cat([mu[:, :C], z], 1))[:, :C], 1)  # q(y | z_s, x)
            recon += sum(q[:, c] * _bce(model.decode(torch.cat([_onehot(c, 8), z], 1)), x) for c in range(C)) / S
            kl_y += (math.log(C) + (q * q.log()).sum(1)) / S
            zl = mul[:, C:] + torch.exp(0.5 * lvl[:, C:]) * eps_l[s]
            log_px.append(-_bce(model.decode(torch.cat([_onehot(y, 8), zl], 1)), xl))
            prior = torch.distributions.Normal(0.0, 1.0).log_prob(zl).sum(1)
            posterior = torch.distributions.Normal(mul[:, C:], torch.exp(0.5 * lvl[:, C:])).log_prob(zl).sum(1)
            log_pz_qz.append(prior - posterior)
            log_qy.append(torch.log_softmax(obj.classifier(torch.cat([mul[:, :C], zl], 1))[:, :C], 1)[torch.arange(8), y])
        kl_z = 0.5 * (mu[:, C:] ** 2 + lv[:, C:].exp() - lv[:, C:] - 1).sum(1)
    log_px, log_pz_qz, log_qy = torch.stack(log_px), torch.stack(log_pz_qz), torch.stack(log_qy)
    w = log_qy.exp() / log_qy.exp().sum(0)
    q_hat = log_qy.exp().mean(0)
    bound = (w * (log_px - math.log(C) + 2.0 * log_pz_qz - log_qy)).sum(0) + q_hat.log()
    expected = {
        "recon": recon.mean(),
        "kl": (kl_z + kl_y).mean(),
        "labelled": -bound.mean(),
        "supervised": -q_hat.log().mean(),
        # Siddharth et al.: Σ w̄ log p(x,y,z)/q(y,z|x) + (1 + α) log q̂(y|x)
        "loss": (recon + 2.0 * kl_z + kl_y).mean() - bound.mean() - 0.5 * q_hat.log().mean(),
    }
    for key, value in expected.items():
        assert terms[key].item() == pytest.approx(value.item(), rel=1e-5, abs=1e-6), key


def test_with_a_classifier_blind_to_z_the_estimators_agree_on_the_classes(tiny_dataset):
    """q(y | z, x) independent of z (the classifier's z-columns zero): the importance estimator's
    unlabelled bound, classification term and accuracy are the marginal estimator's."""
    model, marginal, batch = _built(tiny_dataset, samples=2)
    importance = OBJECTIVES.build("m2", factor="c", estimator="importance", samples=2)
    importance.setup(model=model, dataset_size=24)
    importance.attach_labels(marginal.labelled)
    with torch.no_grad():
        marginal.classifier.weight[:, C:] = 0.0
    importance.load_state_dict(marginal.state_dict())
    torch.manual_seed(3)
    a = marginal(model, batch, step=0)
    torch.manual_seed(3)
    b = importance(model, batch, step=0)
    for key in ("recon", "kl", "elbo", "supervised", "classifier_accuracy"):
        assert b[key].item() == pytest.approx(a[key].item(), rel=1e-5, abs=1e-6), key


class _Oracle(nn.Module):
    """A stand-in VAE whose first 3 encoder means are 20·onehot(class), the class written in the
    first pixel of each 4×4 image (class / 10)."""

    latent_dim = LATENT
    image_shape = (1, 4, 4)

    def __init__(self) -> None:
        super().__init__()
        self.decoder = nn.Linear(LATENT, 16)

    def encode(self, x):
        c = (x[:, 0, 0, 0] * 10).round().long()
        mu = torch.cat([20.0 * torch.eye(3)[c], x.flatten(1)[:, 1 : 1 + LATENT - 3]], 1)
        return mu, torch.full_like(mu, -1.0)

    def decode(self, z):
        return self.decoder(z).view(-1, 1, 4, 4)


@pytest.mark.parametrize("estimator", ["marginal", "importance"])
def test_the_labelled_term_at_a_perfect_classifier(estimator, tiny_dataset):
    """q(y | x_l) = 1 on the true class: no classification loss, full accuracy, and α changes nothing."""
    torch.manual_seed(0)
    model = _Oracle()
    obj = OBJECTIVES.build("m2", factor="b", estimator=estimator, samples=3)  # factor b: 3 classes
    obj.setup(model=model, dataset_size=24)
    obj.attach_labels(make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=20)))
    with torch.no_grad():
        obj.classifier.weight.zero_()
        obj.classifier.weight[:3, :3] = torch.eye(3)
        obj.classifier.bias.zero_()
    classes = torch.tensor([0, 1, 2, 2, 1, 0, 1, 2])
    images = torch.rand(8, 1, 4, 4)
    images[:, 0, 0, 0] = classes / 10
    labels = torch.zeros(8, 3)
    labels[:, 1] = classes.float()
    unlabelled = torch.rand(8, 1, 4, 4)
    unlabelled[:, 0, 0, 0] = torch.randint(0, 3, (8,)) / 10
    batch = LabelledBatch(unlabelled, images, labels)
    losses = []
    for alpha in (0.0, 10.0):
        obj.alpha = alpha
        torch.manual_seed(4)
        terms = obj(model, batch, step=0)
        losses.append(terms["loss"].item())
        assert terms["supervised"].item() == pytest.approx(0.0, abs=1e-6)
        assert terms["classifier_accuracy"].item() == 1.0
    assert losses[0] == pytest.approx(losses[1], abs=1e-4)


# ---------------------------------------------------------------------------- the factor
def test_the_factor_by_name_and_by_index(tiny_dataset):
    _, obj, _ = _built(tiny_dataset)
    assert (obj.column, obj.num_classes) == (2, 4)
    _, obj, _ = _built(tiny_dataset, factor=1)
    assert (obj.column, obj.factor_name, obj.num_classes) == (1, "b", 3)


def test_the_default_factor_is_the_first_that_fits(tiny_dataset):
    _, obj, _ = _built(tiny_dataset, factor=None)
    assert obj.factor_name == "a"


def test_factor_errors_name_the_fix(tiny_dataset):
    with pytest.raises(ConfigError, match="objective.factor is 'colour'.*a, b, c"):
        _built(tiny_dataset, factor="colour")
    with pytest.raises(ConfigError, match="objective.factor is 7"):
        _built(tiny_dataset, factor=7)
    with pytest.raises(ConfigError, match="model.latent_dim=5 or more"):
        _built(tiny_dataset, latent_dim=4)  # factor c: 4 classes, one dimension left for z needed


def test_bad_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="estimator"):
        load_config(None, ["objective.name=m2", "objective.estimator=iwae"])
    with pytest.raises(ConfigError, match="factor"):
        load_config(None, ["objective.name=m2", "objective.factor=-1"])
    with pytest.raises(ConfigError, match="samples"):
        load_config(None, ["objective.name=m2", "objective.samples=0"])
    assert load_config(None, ["objective.name=m2"]).objective.params["factor"] is None


# ---------------------------------------------------------------------------- training
def _overrides(tiny_overrides, out_dir, steps, **extra):
    return tiny_overrides(out_dir, steps=steps, **{
        "objective.name": "m2", "objective.factor": "c", "data.labels.num_labelled": 40, "model.latent_dim": LATENT,
        **extra,
    })


@pytest.mark.parametrize("estimator", ["marginal", "importance"])
def test_a_short_run_ends_with_finite_losses(estimator, tmp_path, tiny_overrides):
    run = tmp_path / "run"
    cfg = load_config(None, _overrides(tiny_overrides, run, 6, **{"objective.estimator": estimator, "objective.samples": 2}))
    result = Trainer(cfg).fit()
    terms = result.last_terms
    for key in ("loss", "recon", "kl", "elbo", "labelled", "supervised", "classifier_accuracy"):
        assert math.isfinite(terms[key]), (key, terms)
    assert 0.0 <= terms["classifier_accuracy"] <= 1.0
    assert terms["elbo"] == pytest.approx(-(terms["recon"] + terms["kl"]), rel=1e-5)


@pytest.mark.parametrize("estimator", ["marginal", "importance"])
def test_resume_is_bit_exact(estimator, tmp_path, tiny_overrides):
    extra = {"objective.estimator": estimator, "objective.samples": 2, "train.lr": 1e-3}
    full = tmp_path / "full"
    Trainer(load_config(None, _overrides(tiny_overrides, full, 8, **extra))).fit()
    part = tmp_path / "part"
    Trainer(load_config(None, _overrides(tiny_overrides, part, 4, **extra))).fit()
    assert main(["--resume", str(part), "train.steps=8"]) == 0
    a = torch.load(full / "checkpoint.pt", weights_only=True)
    b = torch.load(part / "checkpoint.pt", weights_only=True)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert any(k.startswith("classifier.") for k in a["objective"])
    for key, value in a["objective"].items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, b["objective"][key]), key
    assert a["objective"]["labelled_drawn"].item() == 64
    assert "classifier" in a["optimizers"] and "classifier" in b["optimizers"]


class _M2Importance(M2):
    """``m2`` with the importance estimator and two samples by default (for the host-sync guard,
    which trains every objective with its defaults)."""

    def __init__(
        self, factor: str | int | None = None, alpha: float = 1.0, beta: float = 1.0, estimator: str = "importance",
        samples: int = 2, reconstruction: str = "bernoulli",
    ) -> None:
        super().__init__(factor=factor, alpha=alpha, beta=beta, estimator=estimator, samples=samples,
                         reconstruction=reconstruction)


def test_the_importance_estimator_has_no_host_round_trip(tmp_path, tiny_overrides, monkeypatch):
    monkeypatch.setitem(OBJECTIVES._entries, "_m2_importance", _M2Importance)
    for precision in ("fp32", "bf16"):
        findings = run_trainer_step("_m2_importance", tmp_path / precision, tiny_overrides, precision)
        assert not findings, "\n".join(findings)
    findings = run_meta_step("_m2_importance", tmp_path / "meta", tiny_overrides)
    assert not findings, "\n".join(findings)


def test_with_labels_the_classifier_learns_the_factor(tmp_path, tiny_overrides):
    """A planted effect: the classifier's accuracy on the labelled factor c (4 classes, chance 1/4),
    over all the training labels, from chance before training to nearly every label after 300 steps."""
    cfg = load_config(None, _overrides(tiny_overrides, tmp_path / "run", 300, **{"train.lr": 3e-3}))

    def accuracy(trainer: Trainer) -> float:
        labelled = trainer.objective.labelled
        with torch.no_grad():
            mu = trainer.model.encode(labelled.train_images)[0]
            predicted = trainer.objective.class_log_probs(mu).argmax(-1)
        return (predicted == labelled.train_labels[:, 2].long()).float().mean().item()

    untrained = Trainer(cfg)
    untrained.device = torch.device("cpu")
    untrained._build()
    trained = Trainer(cfg)
    trained.fit()
    before, after = accuracy(untrained), accuracy(trained)
    assert before < 0.5, before
    assert after > 0.9, after
