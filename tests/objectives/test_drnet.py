"""DrNet (disentangle.objectives.drnet): the loss against an independent computation, the
similarity's stop-gradient, the scene discriminator by value, no gradient leaks between the phases,
a planted class in the pose codes that the discriminator finds, training, resume and config errors."""
from __future__ import annotations

import copy
import functools
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentangle._core import distributed
from disentangle.config import TrainConfig, load_config
from disentangle.data.classes import ClassBatch
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.base import minimize_terms
from disentangle.objectives.drnet import DrNet
from disentangle.train import main
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

LATENT, CLASS = 5, 2
POSE = LATENT - CLASS


def _setup(seed: int = 0, **params):
    torch.manual_seed(seed)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=LATENT, hidden_sizes=[32])
    params = {"class_factors": ["b"], "class_dim": CLASS, "discriminator_hidden": 16, **params}
    obj = OBJECTIVES.build("drnet", **params)
    obj.setup(model=model, dataset_size=24)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    return model, obj, opts


def _batch(obj, dataset, size: int = 12, seed: int = 4) -> ClassBatch:
    return obj.sample_batch(dataset, size, torch.Generator().manual_seed(seed))


def _bce(logits, target):
    """BCE with logits from its definition, float64."""
    p = torch.sigmoid(logits.double())
    return -(target * p.log() + (1 - target) * (1 - p).log()).mean()


# ---------------------------------------------------------------------------- the loss
def _standardized(codes):
    """Batch normalisation in training mode, from its definition (biased variance, eps 1e-5), float64."""
    mean = codes.mean(0)
    var = ((codes - mean) ** 2).mean(0)
    return (codes - mean) / (var + 1e-5).sqrt()


@pytest.mark.parametrize(("group_size", "normalization"), [(2, "batch"), (3, "batch"), (2, "none"), (3, "none")])
def test_the_loss_matches_an_independent_computation(group_size, normalization, tiny_dataset):
    alpha, beta = 0.7, 0.3
    model, obj, _ = _setup(
        group_size=group_size, similarity_weight=alpha, adversarial_weight=beta, similarity_normalization=normalization
    )
    batch = _batch(obj, tiny_dataset, size=12)
    x = batch.x.double()
    b = x.shape[0]
    with distributed.random_source(torch.Generator().manual_seed(0)):
        terms = obj(model, batch, step=0)
    with torch.no_grad():
        mu = model.encode(batch.x)[0].double()
        pose, content = mu[:, :POSE], mu[:, POSE:]
        # the partner of member k of a group is member (k + 1) mod N of the same group
        partner = [g * group_size + (k + 1) % group_size for g in range(b // group_size) for k in range(group_size)]
        image = torch.sigmoid(model.decode(torch.cat([pose, content[partner]], 1).float()).double())
        scene = obj.discriminator(torch.cat([pose[partner], pose], 1).float()).squeeze(1)
    recon = ((image - x) ** 2).sum() / b
    codes = _standardized(content) if normalization == "batch" else content
    similarity = ((codes[partner] - codes) ** 2).sum() / (b * CLASS)
    adversarial = _bce(scene, 0.5)
    expected = {
        "recon": recon, "similarity": similarity, "adversarial": adversarial,
        "loss": recon + 256 * (alpha * similarity + beta * adversarial),
    }
    for key, value in expected.items():
        torch.testing.assert_close(terms[key].double(), value, rtol=1e-5, atol=1e-6, msg=key)
    assert terms["adversarial"].item() >= math.log(2) - 1e-6  # BCE against ½ is at least log 2


def _encoder_grads(model, loss) -> list[torch.Tensor]:
    """``loss``'s gradients on the encoder's parameters; zeros for the log-variance head, which the
    codes do not use."""
    params = list(model.encoder.parameters())
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def test_the_similarity_pulls_each_content_code_toward_its_detached_target(tiny_dataset):
    """The reference code's stop-gradient: only h_c(x_p(i)) is moved toward h_c(x_i)."""
    model, obj, _ = _setup(similarity_normalization="none")
    batch = _batch(obj, tiny_dataset)
    grads = functools.partial(_encoder_grads, model)

    got = grads(obj.model_terms(model, batch)[0]["similarity"])
    content = model.encode(batch.x)[0][:, POSE:]
    partner = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10]
    detached = grads((content[partner] - content.detach()).square().mean())
    both = grads((content[partner] - content).square().mean())
    for g, d in zip(got, detached):
        torch.testing.assert_close(g, d)
    torch.testing.assert_close(sum(d.abs().sum() for d in detached) * 2, sum(w.abs().sum() for w in both))


def test_the_adversarial_term_moves_each_pose_code_against_its_detached_partner(tiny_dataset):
    """The reference code's stop-gradient (hp1 cloned): the pose encoder's adversarial gradient flows
    through pose(x_i) only, its partner's pose entering S as a constant; S itself does not move."""
    import torch.nn.functional as F

    model, obj, _ = _setup(similarity_normalization="none")
    batch = _batch(obj, tiny_dataset)
    grads = functools.partial(_encoder_grads, model)

    got = grads(obj.model_terms(model, batch)[0]["adversarial"])
    pose = model.encode(batch.x)[0][:, :POSE]
    partner = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10]

    def adversarial(first):
        logits = obj.discriminator(torch.cat([first, pose], 1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, 0.5))

    detached = grads(adversarial(pose[partner].detach()))
    both = grads(adversarial(pose[partner]))
    for g, d in zip(got, detached):
        torch.testing.assert_close(g, d)
    assert any(not torch.allclose(d, w) for d, w in zip(detached, both))  # the detach matters here
    assert all(p.grad is None for p in obj.discriminator.parameters())


def test_the_batch_normalised_similarity_ignores_the_codes_scale(tiny_dataset):
    """The trivial minimum of the raw similarity, codes shrunk toward a constant, gains nothing once
    the codes are standardised over the batch; the raw similarity shrinks with the square of the scale."""
    model, obj, _ = _setup(similarity_normalization="batch")
    _, raw, _ = _setup(similarity_normalization="none")  # the similarity does not read S
    batch = _batch(obj, tiny_dataset)
    before = {n: obj(model, batch, step=0)["similarity"].item() for n, obj in (("batch", obj), ("none", raw))}
    with torch.no_grad():  # halve every code's distance to the batch mean
        mu = model.encode(batch.x)[0]
    scaled = _Scaled(model, mu.mean(0), 0.5)
    after = {n: obj(scaled, batch, step=0)["similarity"].item() for n, obj in (("batch", obj), ("none", raw))}
    assert after["none"] == pytest.approx(before["none"] * 0.25, rel=1e-4)
    # unchanged but for batch normalisation's eps (1e-5 beside the codes' variances)
    assert after["batch"] == pytest.approx(before["batch"], rel=0.02)
    content = (mu.mean(0) + 0.5 * (mu - mu.mean(0)))[:, POSE:].double()
    partner = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10]
    codes = _standardized(content)
    assert after["batch"] == pytest.approx((((codes[partner] - codes) ** 2).mean()).item(), rel=1e-5)


class _Scaled(nn.Module):
    """``model`` whose posterior means are ``centre + s · (μ − centre)``."""

    def __init__(self, model, centre, s):
        super().__init__()
        self.model, self.centre, self.s = model, centre, s

    def encode(self, x):
        mu, logvar = self.model.encode(x)
        return self.centre + self.s * (mu - self.centre), logvar

    def decode(self, z):
        return self.model.decode(z)


def test_identical_members_have_no_similarity_loss():
    model, obj, _ = _setup()
    x = (torch.rand(3, 1, 16, 16, generator=torch.Generator().manual_seed(0)) > 0.5).float().repeat_interleave(2, 0)
    terms = obj(model, ClassBatch(x, torch.tensor([0, 0, 1, 1, 2, 2]), torch.arange(6)), step=0)
    assert terms["similarity"].item() == 0.0
    with torch.no_grad():  # and the reconstruction is the plain autoencoder's
        expected = ((model.decode_mean(model.encode(x)[0]) - x) ** 2).flatten(1).sum(1).mean()
    torch.testing.assert_close(terms["recon"], expected)


# ---------------------------------------------------------------------------- the scene discriminator
class _Distance(nn.Module):
    """A fixed scene 'discriminator' net: logit = 1 − ‖h_p1 − h_p2‖²."""

    def forward(self, pair):
        return (1.0 - (pair[:, :POSE] - pair[:, POSE:]).square().sum(1))[:, None]


def test_discriminator_loss_and_accuracy_values():
    _, obj, _ = _setup()
    obj.discriminator.net = _Distance()
    pose = torch.randn(8, POSE, generator=torch.Generator().manual_seed(1)).double()
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 0])
    with distributed.random_source(torch.Generator().manual_seed(2)):
        terms = obj.discriminator_terms(pose.float(), labels)
    u = torch.rand(8, generator=torch.Generator().manual_seed(2))
    negatives = []
    for i in range(8):
        others = [j for j in range(8) if labels[j] != labels[i]]
        negatives.append(others[int(u[i] * len(others))])
    partner = [1, 0, 3, 2, 5, 4, 7, 6]
    same = 1 - ((pose[partner] - pose) ** 2).sum(1)
    different = 1 - ((pose[negatives] - pose) ** 2).sum(1)
    expected = 0.5 * (_bce(same, 1.0) + _bce(different, 0.0))
    torch.testing.assert_close(terms["discriminator_loss"].double(), expected, rtol=1e-5, atol=1e-6)
    accuracy = 0.5 * ((same > 0).double().mean() + (different <= 0).double().mean())
    assert terms["discriminator_accuracy"].item() == pytest.approx(accuracy.item())


def test_a_batch_of_one_class_pairs_with_the_next_group():
    _, obj, _ = _setup()
    obj.discriminator.net = _Distance()
    pose = torch.randn(6, POSE, generator=torch.Generator().manual_seed(3)).double()
    terms = obj.discriminator_terms(pose.float(), torch.zeros(6, dtype=torch.int64))
    same = 1 - ((pose[[1, 0, 3, 2, 5, 4]] - pose) ** 2).sum(1)
    different = 1 - ((pose[[2, 3, 4, 5, 0, 1]] - pose) ** 2).sum(1)
    torch.testing.assert_close(
        terms["discriminator_loss"].double(), 0.5 * (_bce(same, 1.0) + _bce(different, 0.0)), rtol=1e-5, atol=1e-6
    )


def test_defaults_architecture_and_optimizers():
    obj = DrNet()
    assert (obj.similarity_weight, obj.adversarial_weight, obj.group_size, obj.reconstruction) == (1.0, 0.1, 2, "gaussian")
    assert obj.discriminator_lr is None and obj.discriminator_betas is None
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=10, hidden_sizes=[16])
    obj = DrNet(class_factors=["b"])
    obj.setup(model=model, dataset_size=24)
    linears = [m for m in obj.discriminator.modules() if isinstance(m, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(10, 100), (100, 100), (100, 1)]  # 2 × 5 pose dims
    assert sum(isinstance(m, nn.ReLU) for m in obj.discriminator.modules()) == 2
    opts = build_optimizers(model, obj, TrainConfig(lr=2e-4, betas=(0.8, 0.99)))
    d = opts["discriminator"]
    assert d.defaults["lr"] == 2e-4 and tuple(d.defaults["betas"]) == (0.8, 0.99)  # null: the run's
    d_params = {id(p) for g in d.param_groups for p in g["params"]}
    assert d_params == {id(p) for p in obj.discriminator.parameters()}
    assert not d_params & {id(p) for p in model.parameters()}
    assert any(k.startswith("discriminator.") for k in obj.state_dict())


# ---------------------------------------------------------------------------- no gradient leaks
def test_the_model_phase_never_moves_the_scene_discriminator(tiny_dataset):
    model, obj, opts = _setup()
    batch = _batch(obj, tiny_dataset)
    before = copy.deepcopy(obj.discriminator.state_dict())
    prec = Precision("fp32", "cpu")
    with prec.autocast():
        terms, _ = obj.model_terms(model, batch)
    grads = torch.autograd.grad(terms["adversarial"], list(model.encoder.parameters()), retain_graph=True, allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)  # the pose encoder is trained by it
    prec.minimize(terms["loss"], opts["model"])
    assert all(p.grad is None for p in obj.discriminator.parameters())
    assert all(p.requires_grad for p in obj.discriminator.parameters())
    for k, v in obj.discriminator.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_the_discriminator_loss_has_no_path_to_the_model(tiny_dataset):
    model, obj, _ = _setup()
    batch = _batch(obj, tiny_dataset)
    _, pose = obj.model_terms(model, batch)
    assert pose.requires_grad
    d_loss = obj.discriminator_terms(pose, batch.labels)["discriminator_loss"]
    assert all(g is None for g in torch.autograd.grad(d_loss, list(model.parameters()), retain_graph=True, allow_unused=True))
    assert all(g is not None for g in torch.autograd.grad(d_loss, list(obj.discriminator.parameters())))


def test_the_model_is_the_same_with_or_without_the_discriminator_phase(tiny_dataset):
    runs = []
    for with_d in (True, False):
        model, obj, opts = _setup(seed=3)
        batch = _batch(obj, tiny_dataset)
        if not with_d:
            obj.discriminator_terms = lambda pose, labels: {"discriminator_loss": torch.zeros((), requires_grad=True)}
        d_before = copy.deepcopy(obj.discriminator.state_dict())
        with distributed.random_source(torch.Generator().manual_seed(5)):
            obj.train_step(model, batch, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
        runs.append((model, obj, d_before))
    (m_a, o_a, d0), (m_b, _, _) = runs
    for (name, pa), pb in zip(m_a.named_parameters(), m_b.parameters()):
        assert torch.equal(pa, pb), name
    assert any(not torch.equal(v, d0[k]) for k, v in o_a.discriminator.state_dict().items())


# ---------------------------------------------------------------------------- planted effect
def _train_scene_discriminator(carries_class: bool) -> float:
    """S trained alone on pose codes of 3 classes (groups of 2) that carry the class (a one-hot of it
    plus noise) or not (noise alone); its accuracy on fresh codes."""
    _, obj, _ = _setup(seed=0, discriminator_hidden=32)
    opt = torch.optim.Adam(obj.discriminator.parameters(), lr=3e-3)
    prec = Precision("fp32", "cpu")
    g = torch.Generator().manual_seed(0)

    def draw(groups):
        labels = torch.randint(0, 3, (groups,), generator=g).repeat_interleave(2)
        pose = torch.randn(2 * groups, POSE, generator=g)
        if carries_class:
            pose = 0.3 * pose + 2.0 * F.one_hot(labels, 3).float()
        return pose, labels

    with distributed.random_source(torch.Generator().manual_seed(1)):
        for _ in range(80):
            pose, labels = draw(32)
            minimize_terms(prec, opt, lambda p=pose, c=labels: obj.discriminator_terms(p, c), "discriminator_loss")
        pose, labels = draw(256)
        with torch.no_grad():
            return obj.discriminator_terms(pose, labels)["discriminator_accuracy"].item()


def test_the_scene_discriminator_finds_the_class_in_the_pose_codes_and_only_then():
    assert _train_scene_discriminator(carries_class=True) > 0.95
    assert _train_scene_discriminator(carries_class=False) < 0.65


# ---------------------------------------------------------------------------- training
def test_bf16_step_is_finite_and_logs_float32(tiny_dataset):
    model, obj, opts = _setup()
    prec = Precision("bf16", "cpu")
    batch = _batch(obj, tiny_dataset, 8)
    for step in range(2):
        terms = obj.train_step(model, batch, step=step, optimizers=opts, precision=prec)
        prec.update()
    assert all(torch.isfinite(v).all() and v.dtype == torch.float32 for v in terms.values()), terms


def _records(path):
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("steps_per_s", "wall_time_s")}
        for line in (path / "log.jsonl").read_text().splitlines()
    ]


EXTRA = {"objective.name": "drnet", "objective.class_factors": "[a]", "objective.discriminator_hidden": 16}


def test_training_gives_finite_terms(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=6, **{**EXTRA, "objective.group_size": 4})))
    records = [r for r in _records(run) if "loss" in r]
    assert [r["step"] for r in records] == [2, 4, 6]
    for record in records:
        for key in ("loss", "recon", "similarity", "adversarial", "discriminator_loss", "discriminator_accuracy"):
            assert math.isfinite(record[key]), (key, record)


def test_resume_is_bit_exact(tmp_path, tiny_overrides):
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=8, **EXTRA)))
    fit(load_config(None, tiny_overrides(split, steps=4, **EXTRA)))
    fit(load_config(None, tiny_overrides(split, steps=8, **EXTRA)), resume=True)
    assert _records(straight) == _records(split)
    a = torch.load(straight / "checkpoint.pt", weights_only=True)
    b = torch.load(split / "checkpoint.pt", weights_only=True)
    assert set(a["optimizers"]) == {"model", "discriminator"}
    for part in ("model", "objective"):
        assert a[part].keys() == b[part].keys()
        for k, v in a[part].items():
            assert torch.equal(v, b[part][k]), (part, k)
    assert any(k.startswith("discriminator.") for k in a["objective"])


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("similarity_weight", -1, "similarity_weight"),
        ("adversarial_weight", -0.1, "adversarial_weight"),
        ("discriminator_hidden", 0, "discriminator_hidden"),
        ("discriminator_layers", 0, "discriminator_layers"),
        ("discriminator_lr", -1e-4, "discriminator_lr"),
        ("discriminator_betas", "[0.5, 1.0]", "discriminator_betas"),
        ("group_size", 1, "group_size"),
        ("reconstruction", "l1", "reconstruction"),
        ("similarity_normalization", "layer", "similarity_normalization"),
        ("class_dim", 0, "class_dim"),
    ],
)
def test_bad_parameters_are_config_errors(key, value, match, tmp_path, tiny_overrides):
    with pytest.raises(ConfigError, match=match):
        load_config(None, tiny_overrides(tmp_path, **{**EXTRA, f"objective.{key}": value}))


def test_class_dim_must_leave_pose_dimensions():
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=4, hidden_sizes=[16])
    with pytest.raises(ConfigError, match="class_dim between 1 and 3"):
        DrNet(class_dim=4).setup(model=model, dataset_size=24)


# ---------------------------------------------------------------------------- shipped configs
@pytest.mark.parametrize(("data", "steps"), [("sprites", 20_000), ("dsprites", 300_000)])
def test_shipped_configs(data, steps):
    path = CONFIGS / data / "drnet.yaml"
    assert path.read_text().startswith("#") and f"--config {data}/drnet" in path.read_text()
    cfg = load_config(path)
    assert (cfg.data.name, cfg.model.backbone, cfg.model.latent_dim) == (data, "conv64", 10)
    assert cfg.objective.name == "drnet"
    assert (cfg.objective.params["class_factors"], cfg.objective.params["class_dim"]) == (["shape"], 5)
    assert (cfg.train.steps, cfg.train.batch_size, cfg.train.lr) == (steps, 64, 1e-4)
    assert cfg.train.out_dir == f"runs/{data}_drnet"


def test_the_cli_trains_from_the_dsprites_config(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    # the tiny grid's factors are a, b, c and its model's latent size 4
    extra = {"objective.class_factors": "[a]", "objective.class_dim": 2, "objective.discriminator_hidden": 16}
    assert main(["--config", str(CONFIGS / "dsprites" / "drnet.yaml"), *tiny_overrides(run, steps=4, **extra)]) == 0
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 4 and math.isfinite(records[-1]["loss"])
