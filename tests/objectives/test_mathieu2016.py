"""Mathieu et al. 2016 (disentangle.objectives.mathieu2016): the loss against an independent
computation, the choice of the fakes' codes, the pair discriminator by value, no gradient leaks
between the phases, a planted class the discriminator learns, training, resume and config errors."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from disentangle._core import distributed
from disentangle.config import TrainConfig, load_config
from disentangle.data.classes import ClassBatch
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.base import minimize_terms
from disentangle.objectives.mathieu2016 import Mathieu2016, PairDiscriminator, group_partners, other_class_rows
from disentangle.train import main
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

LATENT, CLASS = 5, 2


def _setup(seed: int = 0, **params):
    torch.manual_seed(seed)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=LATENT, hidden_sizes=[32])
    params = {"class_factors": ["b"], "class_dim": CLASS, "discriminator_hidden": 16, **params}
    obj = OBJECTIVES.build("mathieu2016", **params)
    obj.setup(model=model, dataset_size=24)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    return model, obj, opts


def _batch(obj, dataset, size: int = 12, seed: int = 4) -> ClassBatch:
    return obj.sample_batch(dataset, size, torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------- helpers by value
def test_group_partners_are_the_next_member_of_the_group():
    assert group_partners(6, 2).tolist() == [1, 0, 3, 2, 5, 4]
    assert group_partners(6, 3).tolist() == [1, 2, 0, 4, 5, 3]
    with pytest.raises(ValueError):
        group_partners(5, 2)


def test_other_class_rows_picks_uniformly_among_the_other_classes():
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 0])
    counts = torch.zeros(8, 8)
    with distributed.random_source(torch.Generator().manual_seed(0)):
        for _ in range(800):
            index, has_other = other_class_rows(labels)
            assert has_other.all()
            assert (labels[index] != labels).all()
            counts[torch.arange(8), index] += 1
    # row 0 (class 0): rows 2, 3, 4, 5 each with probability 1/4; row 2 (class 1): 0, 1, 4, 5, 6, 7 each 1/6
    freq = counts / 800
    torch.testing.assert_close(freq[0, [2, 3, 4, 5]], torch.full((4,), 0.25), atol=0.06, rtol=0)
    torch.testing.assert_close(freq[2, [0, 1, 4, 5, 6, 7]], torch.full((6,), 1 / 6), atol=0.06, rtol=0)
    _, has_other = other_class_rows(torch.zeros(6, dtype=torch.int64))
    assert not has_other.any()


# ---------------------------------------------------------------------------- the loss
def _by_hand(model, obj, batch, seed, fake_content):
    """Every term in float64 from its definition, with the noise of ``seed`` redrawn in the documented
    order: the reparameterisation, the prior codes, then one uniform per row for the other class."""
    x, labels = batch.x, batch.labels
    b, d = x.shape[0], LATENT - CLASS
    with torch.no_grad():
        mu, logvar = (t.double() for t in model.encode(x))
    g = torch.Generator().manual_seed(seed)
    eps = torch.randn((b, d), generator=g).double()
    prior = torch.randn((b, d), generator=g).double()
    u = torch.rand(b, generator=g)
    z = mu[:, :d] + (0.5 * logvar[:, :d]).exp() * eps
    s = mu[:, d:]
    partner = [i + 1 if i % 2 == 0 else i - 1 for i in range(b)]
    z_fake = prior.clone()
    if fake_content == "other_class":
        for i in range(b):
            others = [j for j in range(b) if labels[j] != labels[i]]
            if others:
                z_fake[i] = z[others[int(u[i] * len(others))]]

    def decode(codes):
        with torch.no_grad():
            return torch.sigmoid(model.decode(codes.float()).double())

    def sse(images):
        return ((images - x.double()) ** 2).sum() / b

    recon = sse(decode(torch.cat([z, s], 1)))
    swap = sse(decode(torch.cat([z, s[partner]], 1)))
    kl = 0.5 * (mu[:, :d] ** 2 + logvar[:, :d].exp() - logvar[:, :d] - 1).sum() / b
    fake = decode(torch.cat([z_fake, s], 1))
    with torch.no_grad():
        logit = obj.discriminator(x, fake.float()).double()
        real_logit = obj.discriminator(x, x[partner]).double()
    r = obj.real_label
    p_fake, p_real = torch.sigmoid(logit), torch.sigmoid(real_logit)
    adversarial = -(r * p_fake.log() + (1 - r) * (1 - p_fake).log()).mean()
    d_loss = 0.5 * (-(r * p_real.log() + (1 - r) * (1 - p_real).log()).mean() - (1 - p_fake).log().mean())
    d_acc = 0.5 * ((real_logit > 0).double().mean() + (logit <= 0).double().mean())
    loss = obj.recon_weight * recon + obj.swap_weight * swap + obj.kl_weight * kl + obj.adversarial_weight * 256 * adversarial
    return {
        "loss": loss, "recon": recon, "swap_recon": swap, "kl": kl, "adversarial": adversarial,
        "discriminator_loss": d_loss, "discriminator_accuracy": d_acc,
    }


@pytest.mark.parametrize("fake_content", ["other_class", "prior"])
def test_the_loss_matches_an_independent_computation(fake_content, tiny_dataset):
    model, obj, _ = _setup(fake_content=fake_content, recon_weight=0.7, swap_weight=1.3, kl_weight=0.4, adversarial_weight=0.02)
    batch = _batch(obj, tiny_dataset)
    assert len(set(batch.labels.tolist())) > 1  # the batch has other classes to draw from
    with distributed.random_source(torch.Generator().manual_seed(11)):
        terms = obj(model, batch, step=0)
    expected = _by_hand(model, obj, batch, 11, fake_content)
    assert set(terms) == set(expected)
    for key, value in expected.items():
        torch.testing.assert_close(terms[key].double(), value, rtol=1e-5, atol=1e-5, msg=key)


def test_a_batch_of_one_class_takes_prior_codes_for_the_fakes(tiny_dataset):
    """No other class to draw from: the fakes' codes are the prior draws, as with fake_content=prior."""
    model, obj, _ = _setup()
    batch = _batch(obj, tiny_dataset)
    one_class = ClassBatch(batch.x, torch.zeros_like(batch.labels), batch.indices)
    with distributed.random_source(torch.Generator().manual_seed(3)):
        terms = obj(model, one_class, step=0)
    expected = _by_hand(model, obj, one_class, 3, "prior")
    torch.testing.assert_close(terms["adversarial"].double(), expected["adversarial"], rtol=1e-5, atol=1e-6)


def test_identical_members_make_the_swap_the_reconstruction():
    """Members of a group that are one image have one specified code, so swapping it changes nothing."""
    model, obj, _ = _setup()
    x = (torch.rand(3, 1, 16, 16, generator=torch.Generator().manual_seed(0)) > 0.5).float().repeat_interleave(2, 0)
    batch = ClassBatch(x, torch.tensor([0, 0, 1, 1, 2, 2]), torch.arange(6))
    with distributed.random_source(torch.Generator().manual_seed(1)):
        terms = obj(model, batch, step=0)
    torch.testing.assert_close(terms["swap_recon"], terms["recon"])


# ---------------------------------------------------------------------------- the discriminator
class _Brightness(nn.Module):
    """A fixed 'discriminator' net: logit = 8 · (mean of the second image − mean of the first)."""

    def forward(self, pair):
        c = pair.shape[1] // 2
        return 8.0 * (pair[:, c:].flatten(1).mean(1) - pair[:, :c].flatten(1).mean(1))[:, None]


def test_discriminator_loss_and_accuracy_values():
    _, obj, _ = _setup(real_label=0.9)
    obj.discriminator.net = _Brightness()
    x = torch.rand(6, 1, 16, 16, generator=torch.Generator().manual_seed(2))
    fake = torch.rand(6, 1, 16, 16, generator=torch.Generator().manual_seed(3))
    terms = obj.discriminator_terms(x, fake)
    mean = x.flatten(1).mean(1).double()
    real = 8 * (mean[[1, 0, 3, 2, 5, 4]] - mean)
    fake_l = 8 * (fake.flatten(1).mean(1).double() - mean)
    softplus = torch.nn.functional.softplus
    # BCE(l, t) = t·softplus(−l) + (1 − t)·softplus(l)
    expected = 0.5 * ((0.9 * softplus(-real) + 0.1 * softplus(real)).mean() + softplus(fake_l).mean())
    torch.testing.assert_close(terms["discriminator_loss"].double(), expected, rtol=1e-5, atol=1e-6)
    accuracy = 0.5 * ((real > 0).double().mean() + (fake_l <= 0).double().mean())
    assert terms["discriminator_accuracy"].item() == pytest.approx(accuracy.item())


@pytest.mark.parametrize(("shape", "kind"), [((1, 64, 64), "conv"), ((3, 64, 64), "conv"), ((1, 16, 16), "mlp")])
def test_each_pair_is_judged_on_its_own(shape, kind):
    """Both paths: a pair's logit depends on that pair alone (no batch statistics), and on both images."""
    torch.manual_seed(0)
    disc = PairDiscriminator(shape, hidden=16)
    assert disc.kind == kind
    a, b = torch.rand(4, *shape), torch.rand(4, *shape)
    logits = disc(a, b)
    a2 = a.clone()
    a2[1:] = torch.rand(3, *shape)
    again = disc(a2, b)
    assert torch.equal(again[0], logits[0]) and not torch.equal(again[1:], logits[1:])
    assert torch.isfinite(logits).all() and not torch.equal(disc(a, a)[0], logits[0])


def test_defaults_optimizers_and_state():
    obj = Mathieu2016()
    # the reference's weights with its [-1, 1] images' 4x squared errors accounted for
    assert (obj.recon_weight, obj.swap_weight, obj.kl_weight, obj.adversarial_weight) == (0.5, 1.0, 0.15, 0.0025)
    assert (obj.fake_content, obj.real_label, obj.group_size, obj.reconstruction) == ("other_class", 0.95, 2, "gaussian")
    assert obj.discriminator_lr is None and obj.discriminator_betas == (0.5, 0.999)
    model, obj, opts = _setup(discriminator_lr=3e-4)
    assert set(opts) == {"model", "discriminator"}
    d = opts["discriminator"]
    assert d.defaults["lr"] == 3e-4 and tuple(d.defaults["betas"]) == (0.5, 0.999) and d.defaults["weight_decay"] == 0
    d_params = {id(p) for g in d.param_groups for p in g["params"]}
    assert d_params == {id(p) for p in obj.discriminator.parameters()}
    assert not d_params & {id(p) for p in model.parameters()}
    assert any(k.startswith("discriminator.") for k in obj.state_dict())
    _, obj, opts = _setup()
    assert opts["discriminator"].defaults["lr"] == 1e-3  # null: the run's train.lr


# ---------------------------------------------------------------------------- no gradient leaks
def test_the_model_phase_never_moves_the_discriminator(tiny_dataset):
    model, obj, opts = _setup()
    batch = _batch(obj, tiny_dataset)
    before = copy.deepcopy(obj.discriminator.state_dict())
    prec = Precision("fp32", "cpu")
    with prec.autocast():
        terms, _ = obj.model_terms(model, batch)
    # the generator's loss does reach the encoder and the decoder
    grads = torch.autograd.grad(terms["adversarial"], list(model.parameters()), retain_graph=True, allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    prec.minimize(terms["loss"], opts["model"])
    assert all(p.grad is None for p in obj.discriminator.parameters())
    assert all(p.requires_grad for p in obj.discriminator.parameters())  # unfrozen again
    for k, v in obj.discriminator.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_the_discriminator_loss_has_no_path_to_the_model(tiny_dataset):
    model, obj, _ = _setup()
    batch = _batch(obj, tiny_dataset)
    _, fake = obj.model_terms(model, batch)
    assert fake.requires_grad  # the live fakes, graph to the encoder and decoder
    d_loss = obj.discriminator_terms(batch.x, fake)["discriminator_loss"]
    assert all(g is None for g in torch.autograd.grad(d_loss, list(model.parameters()), retain_graph=True, allow_unused=True))
    assert all(g is not None for g in torch.autograd.grad(d_loss, list(obj.discriminator.parameters())))


def test_the_model_is_the_same_with_or_without_the_discriminator_phase(tiny_dataset):
    runs = []
    for with_d in (True, False):
        model, obj, opts = _setup(seed=3)
        batch = _batch(obj, tiny_dataset)
        if not with_d:
            obj.discriminator_terms = lambda x, fake: {"discriminator_loss": torch.zeros((), requires_grad=True)}
        d_before = copy.deepcopy(obj.discriminator.state_dict())
        with distributed.random_source(torch.Generator().manual_seed(5)):
            obj.train_step(model, batch, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
        runs.append((model, obj, d_before))
    (m_a, o_a, d0), (m_b, _, _) = runs
    for (name, pa), pb in zip(m_a.named_parameters(), m_b.parameters()):
        assert torch.equal(pa, pb), name
    assert any(not torch.equal(v, d0[k]) for k, v in o_a.discriminator.state_dict().items())  # D did move


# ---------------------------------------------------------------------------- planted effect
def _planted(n_groups: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pairs of one class (the class lights the left or the right half) over random noise, and fakes
    of the *other* class."""
    cls = torch.randint(0, 2, (n_groups,), generator=generator).repeat_interleave(2)

    def draw(c):
        img = 0.3 * torch.rand(len(c), 1, 16, 16, generator=generator)
        img[c == 0, :, :, :8] += 0.6
        img[c == 1, :, :, 8:] += 0.6
        return img

    return draw(cls), draw(1 - cls), cls


def test_the_discriminator_learns_which_pairs_share_a_class():
    _, obj, _ = _setup(seed=1, real_label=1.0, discriminator_hidden=32)
    opt = torch.optim.Adam(obj.discriminator.parameters(), lr=1e-3)
    prec = Precision("fp32", "cpu")
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        x, fake, _ = _planted(16, g)
        minimize_terms(prec, opt, lambda x=x, fake=fake: obj.discriminator_terms(x, fake), "discriminator_loss")
    x, fake, _ = _planted(64, g)
    with torch.no_grad():
        assert obj.discriminator_terms(x, fake)["discriminator_accuracy"].item() > 0.95


# ---------------------------------------------------------------------------- training
def test_conv_discriminator_trains_with_the_conv64_backbone():
    torch.manual_seed(0)
    model = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=4)
    obj = OBJECTIVES.build("mathieu2016", class_factors=[0], class_dim=2, discriminator_hidden=16)
    obj.setup(model=model, dataset_size=10)
    assert obj.discriminator.kind == "conv"
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-4))
    x = (torch.rand(4, 1, 64, 64, generator=torch.Generator().manual_seed(0)) > 0.5).float()
    batch = ClassBatch(x, torch.tensor([0, 0, 1, 1]), torch.arange(4))
    with distributed.random_source(torch.Generator().manual_seed(0)):
        terms = obj.train_step(model, batch, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
    assert all(torch.isfinite(v) for v in terms.values())


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


EXTRA = {"objective.name": "mathieu2016", "objective.class_factors": "[a]", "objective.discriminator_hidden": 16}


@pytest.mark.parametrize("fake_content", ["other_class", "prior"])
def test_training_gives_finite_terms(fake_content, tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=6, **EXTRA, **{"objective.fake_content": fake_content})))
    records = [r for r in _records(run) if "loss" in r]
    assert [r["step"] for r in records] == [2, 4, 6]
    for record in records:
        for key in ("loss", "recon", "swap_recon", "kl", "adversarial", "discriminator_loss", "discriminator_accuracy"):
            assert math.isfinite(record[key]), (key, record)


def test_resume_is_bit_exact(tmp_path, tiny_overrides):
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=8, **EXTRA)))
    fit(load_config(None, tiny_overrides(split, steps=4, **EXTRA)))
    fit(load_config(None, tiny_overrides(split, steps=8, **EXTRA)), resume=True)
    assert _records(straight) == _records(split)  # every term, exactly
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
        ("recon_weight", -1, "recon_weight"),
        ("adversarial_weight", -0.5, "adversarial_weight"),
        ("fake_content", "other", "fake_content"),
        ("real_label", 0.5, "real_label"),
        ("real_label", 1.2, "real_label"),
        ("discriminator_betas", "[0.5]", "discriminator_betas"),
        ("discriminator_lr", 0, "discriminator_lr"),
        ("discriminator_hidden", 0, "discriminator_hidden"),
        ("group_size", 1, "group_size"),
        ("reconstruction", "poisson", "reconstruction"),
        ("class_factors", "[]", "class_factors"),
    ],
)
def test_bad_parameters_are_config_errors(key, value, match, tmp_path, tiny_overrides):
    with pytest.raises(ConfigError, match=match):
        load_config(None, tiny_overrides(tmp_path, **{**EXTRA, f"objective.{key}": value}))


def test_no_reconstruction_at_all_is_a_config_error():
    with pytest.raises(ConfigError, match="swap_weight"):
        Mathieu2016(recon_weight=0, swap_weight=0)
    Mathieu2016(recon_weight=0)  # swapping alone still trains the decoder


# ---------------------------------------------------------------------------- shipped configs
@pytest.mark.parametrize(("data", "steps"), [("sprites", 20_000), ("dsprites", 300_000)])
def test_shipped_configs(data, steps):
    path = CONFIGS / data / "mathieu2016.yaml"
    assert path.read_text().startswith("#") and f"--config {data}/mathieu2016" in path.read_text()
    cfg = load_config(path)
    assert (cfg.data.name, cfg.model.backbone, cfg.model.latent_dim) == (data, "conv64", 10)
    assert cfg.objective.name == "mathieu2016"
    assert (cfg.objective.params["class_factors"], cfg.objective.params["class_dim"]) == (["shape"], 5)
    assert (cfg.train.steps, cfg.train.batch_size, cfg.train.lr) == (steps, 64, 1e-4)
    assert cfg.train.out_dir == f"runs/{data}_mathieu2016"


def test_the_cli_trains_from_the_dsprites_config(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    # the tiny grid's factors are a, b, c and its model's latent size 4
    extra = {"objective.class_factors": "[a]", "objective.class_dim": 2, "objective.discriminator_hidden": 16}
    assert main(["--config", str(CONFIGS / "dsprites" / "mathieu2016.yaml"), *tiny_overrides(run, steps=4, **extra)]) == 0
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 4 and math.isfinite(records[-1]["loss"])


def test_the_adversarial_term_reaches_the_encoder_through_the_fakes_other_class_codes(tiny_dataset):
    """The reference code backpropagates the generator's adversarial loss into z' (its z3, another
    image's encoding): a detach there would leave the encoder's gradient from the fakes' s alone."""
    model, obj, _ = _setup()
    batch = _batch(obj, tiny_dataset)
    params = [p for p in model.encoder.parameters() if p.requires_grad]

    def adversarial_grads():
        with distributed.random_source(torch.Generator().manual_seed(5)):
            loss = obj.model_terms(model, batch)[0]["adversarial"]
        return [torch.zeros_like(p) if g is None else g
                for p, g in zip(params, torch.autograd.grad(loss, params, allow_unused=True))]

    with_path = adversarial_grads()
    real = obj.fake_codes
    obj.fake_codes = lambda z, labels: real(z, labels).detach()
    try:
        without = adversarial_grads()
    finally:
        obj.fake_codes = real
    assert any(not torch.allclose(a, b) for a, b in zip(with_path, without))
