"""The F-statistic loss (disentangle.objectives.f_statistic): the F(1, ν) CDF against scipy, the pair
statistics against scipy's one-way ANOVA, the loss against its definition, planted separations,
the objective's terms, training, resume and config errors."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from disentangle._core import distributed
from disentangle.config import load_config
from disentangle.data.classes import ClassBatch
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.f_statistic import (
    FStatistic,
    f_distribution_cdf,
    f_statistic_loss,
    log_f1_cdf,
    pair_statistics,
)
from disentangle.train import main
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


# ---------------------------------------------------------------------------- the F(1, ν) CDF
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_the_cdf_matches_scipy(dtype, tol):
    f = torch.cat([torch.zeros(1), torch.logspace(-5, 4, 61)]).to(dtype)
    for dof in list(range(1, 41)) + [63, 64, 125, 254]:
        ours = f_distribution_cdf(f, dof).double().numpy()
        np.testing.assert_allclose(ours, stats.f.cdf(f.double().numpy(), 1, dof), rtol=0, atol=tol, err_msg=str(dof))


def test_the_log_cdf_is_accurate_in_the_far_left_tail():
    """Where the CDF is tiny its logarithm (what the loss takes) keeps its relative accuracy."""
    f = torch.logspace(-30, -4, 14, dtype=torch.float64)
    for dof in (1, 2, 7, 30):
        x = f / (f + dof)
        ours = log_f1_cdf(x, torch.tensor(dof)).numpy()
        np.testing.assert_allclose(ours, stats.f.logcdf(f.numpy(), 1, dof), rtol=1e-10)
        ours32 = log_f1_cdf(x.float(), torch.tensor(dof)).double().numpy()
        np.testing.assert_allclose(ours32, stats.f.logcdf(f.numpy(), 1, dof), rtol=1e-5)


def test_the_cdf_is_differentiable_with_the_density_as_its_derivative():
    f = torch.tensor([0.01, 0.3, 1.0, 2.5, 7.0, 40.0], dtype=torch.float64, requires_grad=True)
    dofs = torch.tensor([1, 2, 3, 10, 11, 50])
    (grad,) = torch.autograd.grad(f_distribution_cdf(f, dofs).sum(), f)
    expected = stats.f.pdf(f.detach().numpy(), 1, dofs.numpy())
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-9)


def test_dof_broadcasts_per_element():
    f = torch.tensor([[0.5, 3.0], [0.5, 3.0]], dtype=torch.float64)
    dof = torch.tensor([[4], [9]])
    ours = f_distribution_cdf(f, dof)
    np.testing.assert_allclose(ours.numpy(), stats.f.cdf(f.numpy(), 1, dof.numpy()), atol=1e-12)


# ---------------------------------------------------------------------------- pair statistics
def _planted(seed=0, groups=(0, 0, 1, 2, 1, 0, 2, 1), size=3, dims=4, shift=None):
    """Codes of ``len(groups)`` groups of ``size`` rows with the groups' classes; ``shift[k]`` moves
    dimension ``k`` by that much per class index."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.tensor(groups).repeat_interleave(size)
    z = torch.randn(len(labels), dims, generator=g, dtype=torch.float64)
    if shift is not None:
        z = z + labels[:, None].double() * torch.tensor(shift, dtype=torch.float64)
    return z, labels


def test_pair_statistics_match_scipy_one_way_anova():
    """Three classes with unequal counts (classes pooled over their groups): every pair and dimension."""
    z, labels = _planted()
    st = pair_statistics(z, labels, group_size=3)
    pairs = st.valid.nonzero().tolist()
    assert len(pairs) == 3
    seen = set()
    for i, j in pairs:
        a, b = int(st.labels[i]), int(st.labels[j])
        seen.add(frozenset((a, b)))
        za, zb = z[labels == a].numpy(), z[labels == b].numpy()
        assert int(st.dof[i, j]) == len(za) + len(zb) - 2
        for k in range(z.shape[1]):
            anova = stats.f_oneway(za[:, k], zb[:, k])
            assert st.f[i, j, k].item() == pytest.approx(anova.statistic, rel=1e-10)
            assert f_distribution_cdf(st.f[i, j, k], st.dof[i, j]).item() == pytest.approx(1 - anova.pvalue, abs=1e-10)
    assert seen == {frozenset((0, 1)), frozenset((0, 2)), frozenset((1, 2))}
    # pooling does not depend on how the rows are grouped
    rows = pair_statistics(z, labels, group_size=1)
    assert torch.allclose(rows.f[rows.valid].sort(0).values, st.f[st.valid].sort(0).values)


def _loss_by_hand(z, labels, d):
    """The mean over pairs of −Σ of the d largest log F-CDFs, from scipy."""
    classes = sorted(set(labels.tolist()))
    losses = []
    for ia, a in enumerate(classes):
        for b in classes[ia + 1 :]:
            za, zb = z[labels == a].numpy(), z[labels == b].numpy()
            dof = len(za) + len(zb) - 2
            logs = sorted((stats.f.logcdf(stats.f_oneway(za[:, k], zb[:, k]).statistic, 1, dof) for k in range(z.shape[1])), reverse=True)
            losses.append(-sum(logs[:d]))
    return sum(losses) / len(losses)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_the_loss_matches_its_definition(d):
    z, labels = _planted(seed=1, shift=[0.0, 0.4, 0.0, 0.1])
    got = f_statistic_loss(z, labels, d, group_size=3)
    assert got.item() == pytest.approx(_loss_by_hand(z, labels, d), rel=1e-9)
    got32 = f_statistic_loss(z.float(), labels, d, group_size=3)
    assert got32.dtype == torch.float32
    assert got32.item() == pytest.approx(_loss_by_hand(z, labels, d), rel=1e-4)


def test_a_planted_separating_dimension_lowers_the_loss():
    """The loss falls as one dimension separates the classes, the more the farther apart; with d = 2
    one separating dimension is not enough and a second lowers the loss further."""
    base = [f_statistic_loss(*_planted(seed=s), 1, group_size=3).item() for s in range(5)]
    one = [f_statistic_loss(*_planted(seed=s, shift=[0, 0, 2.0, 0]), 1, group_size=3).item() for s in range(5)]
    assert all(o < 0.1 * b for o, b in zip(one, base)), (one, base)
    for seed in range(5):
        by_shift = [f_statistic_loss(*_planted(seed=seed, shift=[0, 0, s, 0]), 1, group_size=3).item() for s in (1, 2, 4)]
        assert by_shift[0] > by_shift[1] > by_shift[2] >= 0, by_shift
    d2_one = f_statistic_loss(*_planted(seed=0, shift=[0, 0, 2.0, 0]), 2, group_size=3).item()
    d2_two = f_statistic_loss(*_planted(seed=0, shift=[2.0, 0, 2.0, 0]), 2, group_size=3).item()
    assert d2_two < 0.1 * d2_one
    # saturation: a pair separated far beyond the clip contributes (almost) nothing and no gradient
    z, labels = _planted(seed=0, shift=[0, 0, 1e4, 0])
    z.requires_grad_(True)
    loss = f_statistic_loss(z, labels, 1, group_size=3)
    (grad,) = torch.autograd.grad(loss, z)
    assert loss.item() < 1e-4 and grad.abs().max().item() == 0.0


def test_the_gradient_pushes_the_class_means_apart():
    """Two classes, dimension 2 planted apart (class 1 above class 0): with d = 1 the gradient is on
    that dimension alone, and descending it moves class 1's mean up and class 0's down."""
    z, labels = _planted(seed=0, groups=(0, 1, 0, 1), shift=[0, 0, 2.0, 0])
    z.requires_grad_(True)
    (grad,) = torch.autograd.grad(f_statistic_loss(z, labels, 1, group_size=3), z)
    step = -grad
    assert step[labels == 1, 2].mean() > 0 > step[labels == 0, 2].mean()
    assert torch.equal(grad[:, [0, 1, 3]], torch.zeros_like(grad[:, [0, 1, 3]]))


def test_one_class_gives_zero_loss_and_a_finite_gradient():
    z, _ = _planted(seed=3)
    z.requires_grad_(True)
    loss = f_statistic_loss(z, torch.zeros(len(z), dtype=torch.int64), 2, group_size=3)
    assert loss.item() == 0.0
    (grad,) = torch.autograd.grad(loss, z)
    assert torch.equal(grad, torch.zeros_like(grad))


def test_identical_codes_give_a_finite_loss():
    z = torch.zeros(8, 3, requires_grad=True)
    loss = f_statistic_loss(z, torch.tensor([0, 0, 1, 1, 0, 0, 1, 1]), 2, group_size=2)
    (grad,) = torch.autograd.grad(loss, z)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    assert loss.item() == pytest.approx(-2 * log_f1_cdf(torch.tensor(1e-37), torch.tensor(6)).item(), rel=1e-5)


# ---------------------------------------------------------------------------- the objective
LATENT, CLASS = 5, 2


def _setup(seed: int = 0, **params):
    torch.manual_seed(seed)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=LATENT, hidden_sizes=[32])
    obj = OBJECTIVES.build("f_statistic", **{"class_factors": ["b"], "class_dim": CLASS, "group_size": 2, **params})
    obj.setup(model=model, dataset_size=24)
    return model, obj


@pytest.mark.parametrize("reconstruction", ["bernoulli", "gaussian"])
def test_the_objective_matches_an_independent_computation(reconstruction, tiny_dataset):
    beta, lam = 2.0, 3.0
    model, obj = _setup(beta=beta, f_weight=lam, d=1, reconstruction=reconstruction)
    batch = obj.sample_batch(tiny_dataset, 12, torch.Generator().manual_seed(4))
    assert len(set(batch.labels.tolist())) > 1
    with distributed.random_source(torch.Generator().manual_seed(7)):
        terms = obj(model, batch, step=0)
    x = batch.x.double()
    with torch.no_grad():
        mu, logvar = (t.double() for t in model.encode(batch.x))
        eps = torch.randn(mu.shape, generator=torch.Generator().manual_seed(7)).double()
        logits = model.decode((mu + (0.5 * logvar).exp() * eps).float()).double()
    if reconstruction == "bernoulli":
        recon = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / len(x)
    else:
        recon = ((torch.sigmoid(logits) - x) ** 2).sum() / len(x)
    kl = 0.5 * (mu**2 + logvar.exp() - logvar - 1).sum() / len(x)
    f_loss = _loss_by_hand(mu[:, -CLASS:], batch.labels, 1)
    expected = {"recon": recon, "kl": kl, "f_loss": f_loss, "loss": recon + beta * kl + lam * f_loss}
    for key, value in expected.items():
        assert terms[key].item() == pytest.approx(float(value), rel=1e-5, abs=1e-5), key
    torch.testing.assert_close(terms["elbo"], -(terms["recon"] + terms["kl"]))


def test_the_f_loss_trains_the_encoder_class_means_only(tiny_dataset):
    model, obj = _setup()
    batch = obj.sample_batch(tiny_dataset, 12, torch.Generator().manual_seed(4))
    with distributed.random_source(torch.Generator().manual_seed(0)):
        f_loss = obj(model, batch, step=0)["f_loss"]
    params = dict(model.named_parameters())
    grads = dict(zip(params, torch.autograd.grad(f_loss, list(params.values()), allow_unused=True)))
    assert all(g is None for n, g in grads.items() if n.startswith("decoder.")), "the decoder"
    assert any(g is not None and g.abs().sum() > 0 for n, g in grads.items() if n.startswith("encoder."))
    # through the class dimensions' means alone: no gradient on the log-variances or the content means
    assert grads["encoder.head.logvar.weight"] is None
    used = grads["encoder.head.mean.weight"].abs().sum(1) > 0
    assert used.tolist() == [False] * (LATENT - CLASS) + [True] * CLASS


def test_training_moves_the_class_code_apart_on_a_planted_class(tiny_dataset):
    """Trained with the F loss alone (no reconstruction, β 0), the class code separates the
    tiny grid's classes of factor b: the loss falls far below its start."""
    model, obj = _setup(seed=1, beta=0.0, d=1)
    opt = torch.optim.Adam(model.encoder.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(60):
        batch = obj.sample_batch(tiny_dataset, 24, g)
        mu, _ = model.encode(batch.x)
        loss = obj.f_loss(mu[:, -CLASS:], batch.labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.1 * np.mean(losses[:5]), (losses[:5], losses[-5:])


def test_bf16_step_is_finite_and_logs_float32(tiny_dataset):
    from disentangle.config import TrainConfig
    from disentangle.training.optim import build_optimizers
    from disentangle.training.precision import Precision

    model, obj = _setup()
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    prec = Precision("bf16", "cpu")
    batch = obj.sample_batch(tiny_dataset, 8, torch.Generator().manual_seed(1))
    for step in range(2):
        terms = obj.train_step(model, batch, step=step, optimizers=opts, precision=prec)
        prec.update()
    assert all(torch.isfinite(v).all() and v.dtype == torch.float32 for v in terms.values()), terms


# ---------------------------------------------------------------------------- parameters
def test_defaults():
    obj = FStatistic()
    assert (obj.group_size, obj.d, obj.f_weight, obj.beta, obj.reconstruction) == (4, 2, 1.0, 1.0, "bernoulli")
    assert obj.requested_class_dim is None


EXTRA = {"objective.name": "f_statistic", "objective.class_factors": "[a]"}


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("d", 0, "objective.d"),
        ("d", 1.5, "objective.d"),
        ("f_weight", -1, "f_weight"),
        ("beta", -0.5, "beta"),
        ("group_size", 1, "group_size"),
        ("reconstruction", "l1", "reconstruction"),
        ("class_dim", 0, "class_dim"),
        ("class_factors", "[]", "class_factors"),
    ],
)
def test_bad_parameters_are_config_errors(key, value, match, tmp_path, tiny_overrides):
    with pytest.raises(ConfigError, match=match):
        load_config(None, tiny_overrides(tmp_path, **{**EXTRA, f"objective.{key}": value}))


def test_d_must_fit_in_the_class_code(tmp_path, tiny_overrides):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=4, hidden_sizes=[16])
    with pytest.raises(ConfigError, match="objective.d between 1 and 2"):
        FStatistic(d=3).setup(model=model, dataset_size=24)  # class_dim: half of 4
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match="objective.d"):
        fit(load_config(None, tiny_overrides(run, steps=2, **{**EXTRA, "objective.d": 3})))


def test_a_batch_needs_whole_groups(tiny_dataset):
    with pytest.raises(ConfigError, match="multiple of group_size"):
        FStatistic(class_factors=["a"]).sample_batch(tiny_dataset, 6, torch.Generator())
    with pytest.raises(TypeError, match="ClassBatch"):
        _setup()[1](_setup()[0], torch.zeros(4, 1, 16, 16), step=0)


# ---------------------------------------------------------------------------- training
def _records(path):
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("steps_per_s", "wall_time_s")}
        for line in (path / "log.jsonl").read_text().splitlines()
    ]


def test_training_gives_finite_terms(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    extra = {**EXTRA, "objective.class_factors": "[c]", "objective.group_size": 2, "objective.class_dim": 2}
    fit(load_config(None, tiny_overrides(run, steps=6, **extra)))
    records = [r for r in _records(run) if "loss" in r]
    assert [r["step"] for r in records] == [2, 4, 6]
    for record in records:
        for key in ("loss", "recon", "kl", "elbo", "f_loss"):
            assert math.isfinite(record[key]), (key, record)
        assert len(record["kl_per_dim"]) == 4
    assert any(r["f_loss"] > 0 for r in records)  # 4 groups of factor c's 4 classes: pairs to separate


def test_resume_is_bit_exact(tmp_path, tiny_overrides):
    extra = {**EXTRA, "objective.class_factors": "[c]", "objective.group_size": 2}
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=8, **extra)))
    fit(load_config(None, tiny_overrides(split, steps=4, **extra)))
    fit(load_config(None, tiny_overrides(split, steps=8, **extra)), resume=True)
    assert _records(straight) == _records(split)
    a = torch.load(straight / "checkpoint.pt", weights_only=True)
    b = torch.load(split / "checkpoint.pt", weights_only=True)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key


# ---------------------------------------------------------------------------- shipped configs
@pytest.mark.parametrize(("data", "steps"), [("sprites", 20_000), ("dsprites", 300_000)])
def test_shipped_configs(data, steps):
    path = CONFIGS / data / "f_statistic.yaml"
    text = path.read_text()
    assert text.startswith("#") and f"--config {data}/f_statistic" in text
    cfg = load_config(path)
    assert (cfg.data.name, cfg.model.backbone, cfg.model.latent_dim) == (data, "conv64", 10)
    assert cfg.objective.name == "f_statistic"
    params = cfg.objective.params
    assert (params["class_factors"], params["class_dim"], params["group_size"], params["d"]) == (["shape"], 5, 4, 2)
    assert (cfg.train.steps, cfg.train.batch_size, cfg.train.lr) == (steps, 64, 1e-4)
    assert cfg.train.out_dir == f"runs/{data}_f_statistic"


def test_the_cli_trains_from_the_dsprites_config(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    extra = {"objective.class_factors": "[a]", "objective.class_dim": 2}
    assert main(["--config", str(CONFIGS / "dsprites" / "f_statistic.yaml"), *tiny_overrides(run, steps=4, **extra)]) == 0
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 4 and math.isfinite(records[-1]["loss"])


def test_class_batch_labels_drive_the_loss():
    """The same codes under labels that split them differently give different losses: the loss reads
    ClassBatch.labels, in the batch's group-major order."""
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=LATENT, hidden_sizes=[16])
    obj = FStatistic(class_factors=["b"], class_dim=CLASS, group_size=2, beta=0.0)
    obj.setup(model=model, dataset_size=24)
    x = torch.rand(8, 1, 16, 16, generator=torch.Generator().manual_seed(0)).round()
    with torch.no_grad():
        mu = model.encode(x)[0][:, -CLASS:]
    with distributed.random_source(torch.Generator().manual_seed(0)):
        a = obj(model, ClassBatch(x, torch.tensor([0, 0, 1, 1, 0, 0, 1, 1]), torch.arange(8)), step=0)["f_loss"]
    with distributed.random_source(torch.Generator().manual_seed(0)):
        b = obj(model, ClassBatch(x, torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), torch.arange(8)), step=0)["f_loss"]
    assert a.item() == pytest.approx(f_statistic_loss(mu.double(), torch.tensor([0, 0, 1, 1, 0, 0, 1, 1]), 2).item(), rel=1e-4)
    assert b.item() == pytest.approx(f_statistic_loss(mu.double(), torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), 2).item(), rel=1e-4)
    assert a.item() != pytest.approx(b.item())
