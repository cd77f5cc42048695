"""InfoGAN and InfoGAN-CR (``objective.name: infogan | infogan_cr``, ``model.backbone: infogan``):
values of the losses, the pair sampler, H on planted generators, the α schedule and H's
re-initialisation, the networks, and runs through the trainer (resume, load, metrics)."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

import disentangle
from disentangle._core import distributed
from disentangle.backbones import BACKBONES
from disentangle.backbones.infogan import ContrastiveDiscriminator, InfoGANDiscriminator, InfoGANGenerator
from disentangle.backbones.init import initialize
from disentangle.config import TrainConfig, load_config
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.infogan import changes_at, gaussian_nll, sample_pairs, stepped
from disentangle.training.checkpoint import load_checkpoint
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import Trainer
from tests.training.test_host_sync import StepGuard, _unchecked_optimizer_steps

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"channels": [8, 8], "hidden": 16, "q_hidden": 16, "noise_dim": 2}


def _model(latent_dim: int = 3, seed: int = 0, **params) -> VAE:
    torch.manual_seed(seed)
    return VAE.from_backbone("infogan", image_shape=(1, 16, 16), latent_dim=latent_dim, **{**SMALL, **params})


def _objective(name: str, model: VAE, **params):
    obj = OBJECTIVES.build(name, **params)
    obj.setup(model=model, dataset_size=24)
    initialize(obj, "reference")
    return obj


# ---------------------------------------------------------------------------- the Q loss
def test_q_loss_of_a_perfect_fixed_sigma_head_is_k_half_log_2pi():
    c = torch.rand(64, 5) * 2 - 1
    zeros = torch.zeros(64, 5)
    assert gaussian_nll(c, c, zeros).item() == pytest.approx(5 * 0.5 * math.log(2 * math.pi), abs=1e-6)
    assert 5 * 0.5 * math.log(2 * math.pi) == pytest.approx(4.5947, abs=1e-4)
    # an error δ adds δ²/2 per code; σ = 2 adds log 2 per code and divides the square by 4
    assert gaussian_nll(c, c + 0.5, zeros).item() == pytest.approx(4.5947 + 5 * 0.125, abs=1e-4)
    logvar = torch.full((64, 5), 2 * math.log(2.0))
    expected = 5 * (0.5 * math.log(2 * math.pi) + math.log(2.0) + 0.25 / 8)
    assert gaussian_nll(c, c + 0.5, logvar).item() == pytest.approx(expected, abs=1e-5)


def test_q_has_the_references_fixed_sigma_and_the_loss_uses_it():
    model = _model().eval()  # in training mode each pass moves the spectral norms' power iteration
    x = torch.rand(4, 1, 16, 16)
    mu, logvar = model.encode(x)
    assert torch.equal(logvar, torch.zeros(4, 3))  # q_std = 1, the reference's
    _, logvar2 = _model(q_std=0.5).encode(x)
    torch.testing.assert_close(logvar2, torch.full((4, 3), 2 * math.log(0.5)))
    # what the objective's Q loss sees is Q's output on D's trunk, in one pass
    d_logit, q_mu, q_logvar = model.encoder.discriminate(x)
    assert d_logit.shape == (4,)
    torch.testing.assert_close(q_mu, mu)
    assert gaussian_nll(q_mu, q_mu, q_logvar).item() == pytest.approx(3 * 0.5 * math.log(2 * math.pi), abs=1e-6)


# ---------------------------------------------------------------------------- the pair sampler
def _pairs(rows: int, k: int, n: int, gap: float, seed: int = 0):
    with distributed.random_source(torch.Generator().manual_seed(seed)):
        return sample_pairs(rows, k, n, gap)


@pytest.mark.parametrize("gap", [0.0, 0.5])
def test_pairs_share_the_chosen_code_and_the_noise_and_differ_elsewhere(gap):
    k, rows = 5, 20_000
    p = _pairs(rows, k, 3, gap)
    assert p.first.shape == p.second.shape == (rows, k) and p.noise.shape == (rows, 3) and p.labels.shape == (rows,)
    assert p.labels.dtype == torch.int64 and int(p.labels.min()) == 0 and int(p.labels.max()) == k - 1
    counts = torch.bincount(p.labels, minlength=k).float() / rows
    assert (counts - 1 / k).abs().max() < 0.015  # uniform over the codes
    same = nn.functional.one_hot(p.labels, k).bool()
    assert torch.equal(p.first[same], p.second[same])  # the chosen code, exactly
    diff = (p.first - p.second).abs()[~same]
    assert diff.min() >= gap - 1e-6 and (diff > 0).all()  # every other code, at least the gap apart
    for codes in (p.first, p.second):
        assert codes.min() >= -1 and codes.max() <= 1
    assert p.noise.min() >= -1 and p.noise.max() <= 1
    shared = p.first[same]  # U(-1, 1): mean 0, variance 1/3
    assert abs(shared.mean().item()) < 0.02 and shared.var().item() == pytest.approx(1 / 3, abs=0.02)
    if gap == 0:  # the others: independent U(-1, 1) draws
        other = p.second[~same]
        assert abs(other.mean().item()) < 0.02 and other.var().item() == pytest.approx(1 / 3, abs=0.02)
        assert abs(torch.corrcoef(torch.stack([p.first[~same], other]))[0, 1].item()) < 0.03


def test_pairs_come_from_the_step_generator_only():
    torch.manual_seed(1)
    a = _pairs(16, 4, 2, 0.3, seed=7)
    torch.manual_seed(2)
    b = _pairs(16, 4, 2, 0.3, seed=7)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


class _Recorder(nn.Module):
    """A generator that records what it is given and returns a constant image."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def generate(self, codes, noise):
        self.calls.append((codes, noise))
        return torch.zeros(codes.shape[0], 1, 16, 16)


def test_both_images_of_a_pair_are_made_with_the_same_noise():
    obj = _objective("infogan_cr", _model())
    rec = _Recorder()
    p = _pairs(8, 3, 2, 0.0)
    obj.contrastive_terms(rec, p, with_graph=False)
    (c1, z1), (c2, z2) = rec.calls
    assert z1 is p.noise and z2 is p.noise
    assert torch.equal(c1, p.first) and torch.equal(c2, p.second)


# ---------------------------------------------------------------------------- H on planted generators
class _Planted(nn.Module):
    """G that writes code k into band k of the image rows (and ignores the noise)."""

    def generate(self, codes, noise):
        b, k = codes.shape
        band = torch.arange(16) * k // 16
        return (4 * codes[:, band])[:, None, :, None].expand(b, 1, 16, 16).contiguous()


class _IgnoresCodes(nn.Module):
    """G that draws the noise into the image and ignores the codes."""

    def generate(self, codes, noise):
        b = codes.shape[0]
        band = torch.arange(16) * noise.shape[1] // 16
        return (4 * noise[:, band])[:, None, :, None].expand(b, 1, 16, 16).contiguous()


def _train_h(generator: nn.Module, steps: int, gap: float) -> dict[str, float]:
    torch.manual_seed(0)
    obj = OBJECTIVES.build("infogan_cr")
    obj.contrastive = initialize(ContrastiveDiscriminator((1, 16, 16), 3, [16, 16], 32))
    opt = torch.optim.Adam(obj.contrastive.parameters(), lr=2e-3, betas=(0.5, 0.999))
    precision = Precision("fp32", "cpu")
    with distributed.random_source(torch.Generator().manual_seed(1)):
        for _ in range(steps):
            obj.contrastive_step(generator, sample_pairs(64, 3, 2, gap), 0, {"contrastive": opt}, precision)
        with torch.no_grad():
            terms = obj.contrastive_terms(generator, sample_pairs(2048, 3, 2, gap), with_graph=False)
    return {k: v.item() for k, v in terms.items()}


def test_h_loss_is_log_k_when_the_generator_ignores_the_codes():
    terms = _train_h(_IgnoresCodes(), steps=300, gap=0.0)
    assert terms["cr_loss"] == pytest.approx(math.log(3), abs=0.01)  # measured 1.0986 (ln 3 = 1.0986)
    assert abs(terms["cr_accuracy"] - 1 / 3) < 0.05


def test_h_tells_the_shared_code_of_a_generator_that_writes_the_codes_into_the_pixels():
    """With a gap of 0.5 the codes a pair does not share are far apart, so the pairs are separable
    (with no gap, codes that happen to be nearly equal make some pairs ambiguous)."""
    terms = _train_h(_Planted(), steps=400, gap=0.5)
    assert terms["cr_accuracy"] > 0.98, terms  # measured 1.0, cr_loss 0.008
    assert terms["cr_loss"] < 0.1, terms


# ---------------------------------------------------------------------------- α's schedule and H's reset
def test_alpha_and_gap_schedules_and_when_h_is_reset():
    ref = OBJECTIVES.build("infogan_cr")  # the reference's dSprites values
    assert [ref.alpha(s) for s in (0, 1, 287_999, 288_000, 322_559, 10**7)] == [0, 0, 0, 2.0, 2.0, 2.0]
    assert [ref.gap(s) for s in (0, 288_000)] == [0.0, 0.0]
    assert [s for s in range(0, 600_000, 1000) if ref.resets_contrastive(s)] == [288_000]
    assert not ref.resets_contrastive(288_001) and not ref.resets_contrastive(576_000)
    obj = OBJECTIVES.build(
        "infogan_cr", cr_weight_start=0.5, cr_weight_increase=1.0, cr_weight_every=10, cr_weight_increases=2,
        gap_start=1.0, gap_decrease=0.25, gap_every=15, gap_decreases=2,
    )
    assert [obj.alpha(s) for s in (0, 9, 10, 19, 20, 30, 1000)] == [0.5, 0.5, 1.5, 1.5, 2.5, 2.5, 2.5]
    assert [obj.gap(s) for s in (0, 14, 15, 29, 30, 45)] == [1.0, 1.0, 0.75, 0.75, 0.5, 0.5]
    assert [s for s in range(100) if obj.resets_contrastive(s)] == [10, 15, 20, 30]
    assert stepped(7, 1.0, 2.0, 3, 5) == 5.0 and changes_at(6, 3, 2) and not changes_at(9, 3, 2)
    assert OBJECTIVES.build("infogan").alpha(10**7) == 0.0
    with pytest.raises(ConfigError, match="gap_start"):
        OBJECTIVES.build("infogan_cr", gap_start=2.5)


def _step(obj, model, optimizers, step: int, seed: int = 0):
    x = (torch.rand(8, 1, 16, 16, generator=torch.Generator().manual_seed(step)) > 0.5).float()
    with distributed.random_source(torch.Generator().manual_seed(100 + step + seed)):
        return obj.train_step(model, x, step=step, optimizers=optimizers, precision=Precision("fp32", "cpu"))


def test_h_and_its_adam_state_are_reinitialised_at_the_switch_and_nothing_else_is():
    model = _model()
    obj = _objective("infogan_cr", model, cr_weight_every=3)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3, betas=(0.5, 0.999)))
    h = obj.contrastive
    for step in range(3):
        terms = _step(obj, model, opts, step)
        assert terms["alpha"].item() == 0.0
    assert all(opts["contrastive"].state[p]["step"] == 3 for p in h.parameters())
    before = {k: v.clone() for k, v in h.state_dict().items()}
    g_before = {k: v.clone() for k, v in model.decoder.state_dict().items()}
    # the reset alone (what the switch step does first): fresh weights by model.init, no Adam state
    with distributed.random_source(torch.Generator().manual_seed(5)):
        obj.reset_contrastive(opts["contrastive"])
    assert not any(p in opts["contrastive"].state for p in h.parameters())
    linears = [m for m in h.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    assert all(torch.count_nonzero(m.bias) == 0 for m in linears)  # the reference init's zero biases
    assert all(not torch.equal(before[k], v) for k, v in h.state_dict().items() if k.endswith("original"))
    assert all(torch.equal(g_before[k], v) for k, v in model.decoder.state_dict().items())
    # the step at the switch resets H itself, then trains it once: step count 1, α on
    model2 = _model()
    obj2 = _objective("infogan_cr", model2, cr_weight_every=3)
    opts2 = build_optimizers(model2, obj2, TrainConfig(lr=1e-3, betas=(0.5, 0.999)))
    for step in range(4):
        terms = _step(obj2, model2, opts2, step)
    assert terms["alpha"].item() == 2.0
    assert all(opts2["contrastive"].state[p]["step"] == 1 for p in obj2.contrastive.parameters())
    assert all(opts2["discriminator"].state[p]["step"] == 4 for p in model2.encoder.parameters())


def test_the_reset_is_drawn_from_the_step_generator_not_the_global_rng():
    heads = []
    for global_seed in (1, 2):
        model = _model()
        obj = _objective("infogan_cr", model)
        torch.manual_seed(global_seed)
        with distributed.random_source(torch.Generator().manual_seed(11)):
            obj.reset_contrastive()
        heads.append(obj.contrastive.state_dict())
    assert all(torch.equal(heads[0][k], heads[1][k]) for k in heads[0])
    # a model.init=pytorch run redraws PyTorch's defaults (non-zero biases), from the step generator too
    model = VAE.from_backbone("infogan", image_shape=(1, 16, 16), latent_dim=3, init="pytorch", **SMALL)
    obj = _objective("infogan_cr", model)
    with distributed.random_source(torch.Generator().manual_seed(11)):
        obj.reset_contrastive()
    assert all(torch.count_nonzero(m.bias) > 0 for m in obj.contrastive.modules() if isinstance(m, (nn.Linear, nn.Conv2d)))


# ---------------------------------------------------------------------------- the step
@pytest.mark.parametrize("name", ["infogan", "infogan_cr"])
def test_the_optimizers_split_the_networks_and_g_is_updated_twice_per_step(name):
    model = _model()
    obj = _objective(name, model, **({"cr_weight_every": 1} if name == "infogan_cr" else {}))
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3, betas=(0.5, 0.999)))
    ids = {k: {id(p) for g in o.param_groups for p in g["params"]} for k, o in opts.items()}
    assert ids["model"] == {id(p) for p in model.decoder.parameters()}
    assert ids["discriminator"] == {id(p) for p in model.encoder.parameters()}
    assert opts["model"].param_groups[0]["lr"] == 1e-3 and opts["discriminator"].param_groups[0]["lr"] == 2e-3
    assert opts["discriminator"].param_groups[0]["betas"] == (0.5, 0.999)
    if name == "infogan_cr":
        assert ids["contrastive"] == {id(p) for p in obj.contrastive.parameters()}
        assert opts["contrastive"].param_groups[0]["lr"] == 2e-3
    else:
        assert set(opts) == {"model", "discriminator"}
    counts = dict.fromkeys(opts, 0)
    for key, opt in opts.items():
        opt.register_step_post_hook(lambda *_, key=key: counts.__setitem__(key, counts[key] + 1))
    for step in range(2):
        terms = _step(obj, model, opts, step)
    assert counts == {k: (4 if k == "model" else 2) for k in opts}
    assert all(torch.isfinite(v).all() for v in terms.values()), terms
    assert terms["mi_lower_bound"].item() == pytest.approx(3 * math.log(2) - terms["q_loss"].item(), abs=1e-5)


def test_the_generators_loss_adds_alpha_times_h_s_loss():
    model = _model()
    obj = _objective("infogan_cr", model)
    disc, gen = obj.networks(model)
    gen.eval()  # batch statistics aside, the same images each call
    with distributed.random_source(torch.Generator().manual_seed(3)):
        codes, noise, pairs = obj.draw(8, gen, "cpu", 0)
    plain = obj.generator_terms(disc, gen, codes, noise, pairs, alpha=0.0)
    with_cr = obj.generator_terms(disc, gen, codes, noise, pairs, alpha=2.0)
    cr = obj.contrastive_terms(gen, pairs, with_graph=True)["cr_loss"]
    assert with_cr["loss"].item() == pytest.approx(plain["loss"].item() + 2.0 * cr.item(), rel=1e-6)
    assert plain["loss"].item() == pytest.approx(plain["g_loss"].item() + 0.05 * plain["g_info_loss"].item(), rel=1e-6)


def test_fp16_steps_g_twice_with_one_gradscaler():
    model = _model()
    obj = _objective("infogan_cr", model, cr_weight_every=1)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    precision = Precision("fp16", "cpu")
    x = (torch.rand(8, 1, 16, 16) > 0.5).float()
    with distributed.random_source(torch.Generator().manual_seed(0)):
        for step in range(3):
            terms = obj.train_step(model, x, step=step, optimizers=opts, precision=precision)
            precision.update()
    assert all(torch.isfinite(v).all() for v in terms.values())


def test_another_backbone_is_refused_with_the_fix():
    mlp = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=3, hidden_sizes=[8])
    for name in ("infogan", "infogan_cr"):
        with pytest.raises(ConfigError, match="model.backbone=infogan"):
            OBJECTIVES.build(name).setup(model=mlp, dataset_size=10)


@pytest.mark.parametrize("step", [4, 5])  # the switch (H re-initialised) and a step with α > 0
def test_steps_around_the_switch_have_no_host_round_trip(step, tmp_path, tiny_overrides):
    cfg = load_config(None, tiny_overrides(tmp_path / "run", steps=8, **{"objective.name": "infogan_cr"}))
    trainer = Trainer(cfg)
    trainer.device = torch.device("cpu")
    trainer._build()
    trainer.train_step()  # warm-up: optimizer state
    trainer.step = step
    guard = StepGuard()
    handles = _unchecked_optimizer_steps(guard, trainer.optimizers)
    sample = trainer.objective.sample_batch
    trainer.objective.sample_batch = lambda *a, **k: _no_float64(guard, sample, *a, **k)
    try:
        with guard:
            terms = trainer.train_step()
    finally:
        for h in handles:
            h.remove()
    assert terms["alpha"].item() == 2.0
    assert not guard.findings, "\n".join(guard.findings)


def _no_float64(guard, sample, *args, **kwargs):
    with guard.pause_float64():
        return sample(*args, **kwargs)


# ---------------------------------------------------------------------------- the networks
def test_the_networks_are_the_references_for_64x64():
    disc, gen = BACKBONES.build("infogan", image_shape=(1, 64, 64), latent_dim=5)
    assert isinstance(disc, InfoGANDiscriminator) and isinstance(gen, InfoGANGenerator) and gen.noise_dim == 5
    convs = [m for m in disc.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding) for c in convs] == [
        (1, 32, (4, 4), (2, 2), (1, 1)), (32, 32, (4, 4), (2, 2), (1, 1)),
        (32, 64, (4, 4), (2, 2), (1, 1)), (64, 64, (4, 4), (2, 2), (1, 1))]
    linears = [(m.in_features, m.out_features) for m in disc.modules() if isinstance(m, nn.Linear)]
    assert linears == [(1024, 128), (128, 1), (128, 128), (128, 5)]  # trunk FC, D head, Q head
    # spectral norm on every layer of D and Q
    assert all(parametrize.is_parametrized(m, "weight") for m in disc.modules() if isinstance(m, (nn.Linear, nn.Conv2d)))
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in disc.modules())
    g_linears = [(m.in_features, m.out_features) for m in gen.modules() if isinstance(m, nn.Linear)]
    assert g_linears == [(10, 128), (128, 1024)]
    deconvs = [(m.in_channels, m.out_channels) for m in gen.modules() if isinstance(m, nn.ConvTranspose2d)]
    assert deconvs == [(64, 64), (64, 32), (32, 32), (32, 1)]
    norms = [type(m).__name__ for m in gen.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert norms == ["BatchNorm1d", "BatchNorm1d", "BatchNorm2d", "BatchNorm2d", "BatchNorm2d"]
    assert gen.generate(torch.zeros(2, 5), torch.zeros(2, 5)).shape == (2, 1, 64, 64)
    h = ContrastiveDiscriminator.like(disc)
    h_layers = [m for m in h.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    assert h_layers[0].in_channels == 2 and h.num_codes == 5 and h_layers[-1].out_features == 5
    assert [parametrize.is_parametrized(m, "weight") for m in h_layers] == [True] * 5 + [False]


def test_small_images_use_the_layers_nearest_the_image_and_bad_sizes_are_refused():
    disc, gen = BACKBONES.build("infogan", image_shape=(3, 16, 16), latent_dim=4)
    assert [m.out_channels for m in disc.modules() if isinstance(m, nn.Conv2d)] == [32, 32]
    assert gen.generate(torch.zeros(2, 4), torch.zeros(2, 5)).shape == (2, 3, 16, 16)
    for shape in [(1, 20, 20), (1, 16, 32), (1, 128, 128), (1, 4, 4)]:
        with pytest.raises(ConfigError, match="infogan"):
            BACKBONES.build("infogan", image_shape=shape, latent_dim=4)


def test_decode_is_g_with_the_noise_at_its_mean_and_the_init_refreshes_the_spectral_norms():
    model = _model(latent_dim=4).eval()
    c = torch.rand(3, 4) * 2 - 1
    torch.testing.assert_close(model.decode(c), model.decoder.generate(c, torch.zeros(3, 2)))
    assert 0 <= model.decode_mean(c).min() and model.decode_mean(c).max() <= 1
    for m in model.encoder.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            # after the (reference) init, the layer's weight has spectral norm 1 at once
            sigma = torch.linalg.matrix_norm(m.weight.detach().flatten(1), 2).item()
            assert sigma == pytest.approx(1.0, abs=0.05)


# ---------------------------------------------------------------------------- through the trainer
def _overrides(tiny_overrides, run, steps, **extra):
    return tiny_overrides(run, steps=steps, **{"objective.name": "infogan_cr", "train.checkpoint_every": 100, **extra})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_overrides):
    """An 8-step InfoGAN-CR run (α on at step 4) in one go, and one of 4 steps resumed to 8."""
    from disentangle.train import main

    base = tmp_path_factory.mktemp("infogan")
    torch.set_num_threads(1)
    whole = Trainer(load_config(None, _overrides(tiny_overrides, base / "whole", 8))).fit()
    Trainer(load_config(None, _overrides(tiny_overrides, base / "part", 4))).fit()
    assert main(["--resume", str(base / "part"), "train.steps=8"]) == 0
    return whole, base


def test_a_run_ends_with_finite_losses(runs):
    whole, _ = runs
    terms = whole.last_terms
    assert whole.step == 8 and terms["alpha"] == 2.0
    assert all(math.isfinite(v) for v in terms.values() if isinstance(v, float)), terms
    for key in ("loss", "g_loss", "d_loss", "q_loss", "cr_loss", "cr_accuracy", "d_real_accuracy"):
        assert key in terms


def test_resume_across_the_switch_is_bit_exact(runs):
    _, base = runs
    a = load_checkpoint(base / "whole" / "checkpoint.pt")
    b = load_checkpoint(base / "part" / "checkpoint.pt")
    assert a["step"] == b["step"] == 8
    for section in ("model", "objective"):
        assert a[section].keys() == b[section].keys()
        for key in a[section]:
            assert torch.equal(a[section][key], b[section][key]), f"{section}.{key} differs after resume"


def test_the_loaded_model_encodes_with_q_and_every_metric_works_on_it(runs, tiny_dataset):
    from disentangle.metrics import METRICS

    _, base = runs
    model = disentangle.load(base / "whole")
    x = tiny_dataset.sample_batch(6, torch.Generator().manual_seed(0)).float()
    mu, logvar = model.encode(x)
    enc = model.encoder
    torch.testing.assert_close(mu, enc.q_head(enc.trunk(x)))
    torch.testing.assert_close(mu, enc.discriminate(x)[1])
    assert torch.equal(logvar, torch.zeros_like(mu))
    torch.testing.assert_close(model.representation(x), mu)
    scores = METRICS.get("mig")(tiny_dataset, model, num_train=200)
    assert scores and all(math.isfinite(v) for v in scores.values()), scores


def test_the_trainer_refuses_another_backbone(tmp_path, tiny_overrides):
    cfg = load_config(None, tiny_overrides(tmp_path, steps=2, **{"objective.name": "infogan", "model.backbone": "mlp"}))
    with pytest.raises(ConfigError, match="model.backbone=infogan"):
        Trainer(cfg).fit()


@pytest.mark.parametrize("name", ["infogan", "infogan_cr"])
def test_a_multi_process_run_is_refused_with_the_reason(name, monkeypatch):
    from disentangle._core import distributed

    monkeypatch.setattr(distributed._STATE, "rank_info", distributed.RankInfo(rank=0, world_size=2, local_rank=0))
    with pytest.raises(ConfigError, match="one process only.*batch norm.*2 processes"):
        _objective(name, _model())


def test_a_posterior_metric_in_eval_metrics_is_refused_before_the_run_folder(tmp_path, tiny_overrides):
    """elbo on a GAN is refused at evaluation: named in train.eval_metrics, it would stop the run at its
    first evaluation; it is refused before anything is created. 'all' leaves it out, so it trains."""
    from disentangle.errors import ConfigError

    run = tmp_path / "run"
    extra = {"train.eval_every": 2, "train.eval_metrics": "[mig, elbo]"}
    with pytest.raises(ConfigError, match=r"elbo scores a VAE's posterior .* train.eval_metrics=\[mig\]"):
        Trainer(load_config(None, _overrides(tiny_overrides, run, 2, **extra))).fit()
    assert not run.exists()


def test_ds_q_loss_is_q_on_the_generated_rows():
    """Q predicts the codes G was given from G's images, the fake rows of D's pass (the real images
    carry no codes): recomputed with D and G in eval mode, where a row's output is its own."""
    model = _model().eval()
    obj = _objective("infogan", model)
    disc, gen = obj.networks(model)
    with distributed.random_source(torch.Generator().manual_seed(5)):
        codes, noise, _ = obj.draw(6, gen, "cpu", 0)
    x = torch.rand(6, 1, 16, 16)
    terms = obj.discriminator_terms(disc, gen, x, codes, noise)
    with torch.no_grad():
        fake = torch.sigmoid(gen.generate(codes, noise))
        _, q_mu, q_logvar = disc.discriminate(fake)
    assert terms["q_loss"].item() == pytest.approx(gaussian_nll(codes, q_mu, q_logvar).item(), rel=1e-5)
    _, q_real, q_real_logvar = disc.discriminate(x)
    assert abs(terms["q_loss"].item() - gaussian_nll(codes, q_real, q_real_logvar).item()) > 1e-4


def test_h_sees_g_in_eval_mode_until_alpha_and_g_keeps_its_mode():
    """The reference's ``train_with_crd``: before the contrastive weight α starts, H's pairs come from
    G in eval mode (its batch-norm statistics stay); from then on in training mode. G's own mode is
    restored either way."""
    model = _model()
    obj = _objective("infogan_cr", model, cr_weight_every=10)
    disc, gen = obj.networks(model)
    gen.train()
    optimizers = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    precision = Precision("fp32", torch.device("cpu"))

    def running_stats():
        return [b.clone() for name, b in gen.named_buffers() if "running" in name]

    assert obj.alpha(9) == 0 and obj.alpha(10) > 0
    for step, moves in ((9, False), (10, True)):
        with distributed.random_source(torch.Generator().manual_seed(7)):
            _, _, pairs = obj.draw(8, gen, "cpu", step)
        before = running_stats()
        assert before, "the generator has batch-norm statistics"
        obj.contrastive_step(gen, pairs, step, optimizers, precision)
        changed = any(not torch.equal(a, b) for a, b in zip(before, running_stats()))
        assert changed is moves and gen.training
