"""LORD (disentangle.objectives.lord): both stages' losses against independent computations, the
tables indexed by the batch, what each stage trains, the amortisation reaching planted codes, the
perceptual hook, training, resume across the stage switch and config errors."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from disentangle._core import distributed
from disentangle.config import TrainConfig, load_config
from disentangle.data.classes import ClassBatch
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.lord import INIT_RANGE, LORD, perceptual_distance
from disentangle.train import main
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import Trainer, fit

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

LATENT, CLASS = 5, 2
CONTENT = LATENT - CLASS
PIXELS = 256  # the tiny dataset's 1 × 16 × 16 images


def _setup(dataset, seed: int = 0, **params):
    torch.manual_seed(seed)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=LATENT, hidden_sizes=[32])
    obj = OBJECTIVES.build("lord", **{"class_factors": ["b"], "class_dim": CLASS, "stage1_steps": 3, **params})
    obj.setup(model=model, dataset_size=len(dataset))
    obj.check_dataset(dataset)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    return model, obj, opts


def _batch(obj, dataset, size: int = 12, seed: int = 4) -> ClassBatch:
    return obj.sample_batch(dataset, size, torch.Generator().manual_seed(seed))


def _recon(logits, x, kind):
    if kind == "bernoulli":
        return F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / len(x)
    return ((torch.sigmoid(logits) - x) ** 2).sum() / len(x)


# ---------------------------------------------------------------------------- the tables
def test_tables_defaults_and_optimizers(tiny_dataset):
    obj = LORD()
    assert (obj.stage1_steps, obj.noise_std, obj.content_decay, obj.regression_weight) == (10_000, 1.0, 1e-3, 10.0)
    assert (obj.latent_lr, obj.latent_betas, obj.reconstruction, obj.perceptual, obj.group_size) == (3e-3, None, "bernoulli", None, 2)
    model, obj, opts = _setup(tiny_dataset)
    # 24 images of a 2×3×4 grid; class factor b has 3 values
    assert tuple(obj.content_codes.shape) == (24, CONTENT) and tuple(obj.class_codes.shape) == (3, CLASS)
    for table in (obj.content_codes, obj.class_codes):
        assert table.abs().max() <= INIT_RANGE and table.std() > INIT_RANGE / 4  # uniform in [−0.05, 0.05]
    assert set(opts) == {"model", "latent"}
    latent = opts["latent"]
    assert latent.defaults["lr"] == 3e-3 and tuple(latent.defaults["betas"]) == (0.9, 0.999)  # null: the run's betas
    assert latent.defaults["weight_decay"] == 0.0
    ids = {id(p) for g in latent.param_groups for p in g["params"]}
    assert ids == {id(obj.content_codes), id(obj.class_codes)}
    assert not ids & {id(p) for g in opts["model"].param_groups for p in g["params"]}
    assert {"content_codes", "class_codes"} <= set(obj.state_dict())
    # a second check_dataset keeps the (trained, restored) class table
    table = obj.class_codes
    obj.check_dataset(tiny_dataset)
    assert obj.class_codes is table


def test_the_class_table_needs_the_dataset():
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=LATENT, hidden_sizes=[16])
    obj = LORD(class_factors=["b"])
    obj.setup(model=model, dataset_size=24)
    with pytest.raises(RuntimeError, match="check_dataset"):
        build_optimizers(model, obj, TrainConfig(lr=1e-4))


# ---------------------------------------------------------------------------- stage 1
@pytest.mark.parametrize("reconstruction", ["bernoulli", "gaussian"])
def test_the_stage1_loss_matches_an_independent_computation(reconstruction, tiny_dataset):
    sigma, lam = 0.7, 0.02
    model, obj, _ = _setup(tiny_dataset, noise_std=sigma, content_decay=lam, reconstruction=reconstruction)
    with torch.no_grad():  # tables away from their small initial values
        obj.content_codes.normal_(generator=torch.Generator().manual_seed(1))
        obj.class_codes.normal_(generator=torch.Generator().manual_seed(2))
    batch = _batch(obj, tiny_dataset)
    with distributed.random_source(torch.Generator().manual_seed(9)):
        terms = obj(model, batch, step=2)
    table_c, table_y = obj.content_codes.detach().double(), obj.class_codes.detach().double()
    content = torch.stack([table_c[int(i)] for i in batch.indices])  # the image's own row
    cls = torch.stack([table_y[int(y)] for y in batch.labels])
    noise = torch.randn((len(content), CONTENT), generator=torch.Generator().manual_seed(9)).double()
    with torch.no_grad():
        logits = model.decode(torch.cat([content + sigma * noise, cls], 1).float()).double()
    recon = _recon(logits, batch.x.double(), reconstruction)
    penalty = (content**2).sum() / len(content)
    expected = {"recon": recon, "content_penalty": penalty, "loss": recon + PIXELS * lam * penalty, "stage": 1.0}
    for key, value in expected.items():
        assert terms[key].item() == pytest.approx(float(value), rel=1e-5), key
    assert set(terms) == {"loss", "recon", "content_penalty", "stage"}


def test_without_noise_the_decoder_sees_the_tables_rows(tiny_dataset, monkeypatch):
    model, obj, _ = _setup(tiny_dataset, noise_std=0.0)
    batch = _batch(obj, tiny_dataset)
    seen = {}
    decode = model.decode

    def capture(z):
        seen["z"] = z
        return decode(z)

    monkeypatch.setattr(model, "decode", capture)
    obj(model, batch, step=0)
    z = seen["z"].detach()
    assert torch.equal(z[:, :CONTENT], obj.content_codes.detach()[batch.indices])
    assert torch.equal(z[:, CONTENT:], obj.class_codes.detach()[batch.labels])
    # members of a group share the class row, and the grid index is the image's own
    assert (batch.labels.view(-1, 2) == batch.labels.view(-1, 2)[:, :1]).all()


def test_a_row_gets_gradient_only_when_its_image_or_class_is_in_the_batch(tiny_dataset):
    model, obj, _ = _setup(tiny_dataset)
    batch = _batch(obj, tiny_dataset, size=6)
    with distributed.random_source(torch.Generator().manual_seed(0)):
        loss = obj(model, batch, step=0)["loss"]
    grad_c, grad_y = torch.autograd.grad(loss, [obj.content_codes, obj.class_codes])
    in_batch = torch.zeros(24, dtype=torch.bool)
    in_batch[batch.indices] = True
    assert in_batch.sum() < 24  # some images are left out
    assert (grad_c[in_batch].abs().sum(1) > 0).all()
    assert torch.equal(grad_c[~in_batch], torch.zeros_like(grad_c[~in_batch]))
    classes = torch.zeros(3, dtype=torch.bool)
    classes[batch.labels] = True
    assert (grad_y[classes].abs().sum(1) > 0).all()
    assert torch.equal(grad_y[~classes], torch.zeros_like(grad_y[~classes]))
    # and the encoder is not part of stage 1
    assert all(g is None for g in torch.autograd.grad(loss, list(model.encoder.parameters()), allow_unused=True))


def test_a_stage1_step_moves_the_tables_and_the_decoder_not_the_encoder(tiny_dataset):
    model, obj, opts = _setup(tiny_dataset)
    batch = _batch(obj, tiny_dataset, size=6)
    enc, dec = copy.deepcopy(model.encoder.state_dict()), copy.deepcopy(model.decoder.state_dict())
    tables = copy.deepcopy(obj.state_dict())
    with distributed.random_source(torch.Generator().manual_seed(0)):
        terms = obj.train_step(model, batch, step=2, optimizers=opts, precision=Precision("fp32", "cpu"))
    assert terms["stage"].item() == 1.0
    assert all(torch.equal(v, enc[k]) for k, v in model.encoder.state_dict().items())
    assert all(not torch.equal(v, dec[k]) for k, v in model.decoder.state_dict().items())
    moved = (obj.content_codes.detach() != tables["content_codes"]).any(1)
    assert moved.tolist() == [i in set(batch.indices.tolist()) for i in range(24)]  # Adam's first step: batch rows only
    assert not torch.equal(obj.class_codes.detach(), tables["class_codes"])


# ---------------------------------------------------------------------------- stage 2
def test_the_stage2_loss_matches_an_independent_computation(tiny_dataset):
    w = 0.3
    model, obj, _ = _setup(tiny_dataset, regression_weight=w, reconstruction="gaussian")
    batch = _batch(obj, tiny_dataset)
    terms = obj(model, batch, step=3)  # stage1_steps = 3: step 3 is the first of stage 2
    with torch.no_grad():
        mu = model.encode(batch.x)[0].double()
        logits = model.decode(mu.float()).double()
    target_c = obj.content_codes.detach().double()[batch.indices]
    target_y = obj.class_codes.detach().double()[batch.labels]
    content_regression = ((mu[:, :CONTENT] - target_c) ** 2).sum() / (len(mu) * CONTENT)
    class_regression = ((mu[:, CONTENT:] - target_y) ** 2).sum() / (len(mu) * CLASS)
    recon = _recon(logits, batch.x.double(), "gaussian")
    expected = {
        "recon": recon, "content_regression": content_regression, "class_regression": class_regression,
        "loss": recon + PIXELS * w * (content_regression + class_regression), "stage": 2.0,
    }
    for key, value in expected.items():
        assert terms[key].item() == pytest.approx(float(value), rel=1e-5), key
    assert set(terms) == set(expected)


def test_a_stage2_step_trains_the_model_and_leaves_the_tables(tiny_dataset):
    model, obj, opts = _setup(tiny_dataset)
    batch = _batch(obj, tiny_dataset, size=6)
    prec = Precision("fp32", "cpu")
    with distributed.random_source(torch.Generator().manual_seed(0)):
        obj.train_step(model, batch, step=0, optimizers=opts, precision=prec)  # a stage-1 step first
    before = copy.deepcopy(model.state_dict())
    tables = copy.deepcopy(obj.state_dict())
    latent_state = copy.deepcopy(opts["latent"].state_dict())
    terms = obj.train_step(model, batch, step=3, optimizers=opts, precision=prec)
    assert terms["stage"].item() == 2.0
    for k, v in obj.state_dict().items():
        assert torch.equal(v, tables[k]), k
    assert torch.equal(opts["latent"].state_dict()["state"][0]["exp_avg"], latent_state["state"][0]["exp_avg"])
    assert obj.content_codes.grad is None and obj.class_codes.grad is None
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert {"encoder.head.mean.weight", "encoder.body.1.0.weight", "decoder.body.1.weight"} <= changed
    assert not {"encoder.head.logvar.weight", "encoder.head.logvar.bias"} & changed  # log-variances untrained


def test_the_amortisation_reaches_planted_stage1_codes(tiny_dataset):
    """Fixed tables (a content code per image, an embedding per class, of unit scale): the encoder
    trained on the regression terms alone reaches them on the 24 images."""
    model, obj, _ = _setup(tiny_dataset, seed=1)
    with torch.no_grad():
        obj.content_codes.normal_(generator=torch.Generator().manual_seed(3))
        obj.class_codes.normal_(generator=torch.Generator().manual_seed(4))
    planted = copy.deepcopy(obj.state_dict())
    opt = torch.optim.Adam(model.encoder.parameters(), lr=1e-2)
    everything = torch.arange(24)
    x = tiny_dataset.observe(everything, None)
    labels = (everything // 4) % 3  # factor b of the 2×3×4 grid index
    batch = ClassBatch(x, labels, everything)

    def error():
        terms = obj(model, batch, step=10)
        return terms["content_regression"] + terms["class_regression"]

    with torch.no_grad():
        start = error().item()
    for _ in range(300):
        loss = error()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        end = error().item()
        mu = model.encode(x)[0]
    assert start > 0.5 and end < 0.01 * start, (start, end)
    assert torch.allclose(mu[:, :CONTENT], obj.content_codes[everything], atol=0.15)
    assert torch.allclose(mu[:, CONTENT:], obj.class_codes[labels], atol=0.15)
    for k, v in obj.state_dict().items():  # the targets are fixed
        assert torch.equal(v, planted[k]), k


# ---------------------------------------------------------------------------- perceptual hook
def _features(images):
    """A stand-in feature network: two 'layers'."""
    return [torch.tanh(images), F.avg_pool2d(images, 4)]


def test_the_perceptual_distance_is_the_references_times_the_pixels(tiny_dataset):
    model, obj, _ = _setup(tiny_dataset, perceptual="tests.objectives.test_lord:_features")
    batch = _batch(obj, tiny_dataset)
    with distributed.random_source(torch.Generator().manual_seed(0)):
        terms = obj(model, batch, step=0)
    content = obj.content_codes.detach()[batch.indices]
    noise = torch.randn(content.shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x_hat = model.decode_mean(torch.cat([content + noise, obj.class_codes.detach()[batch.labels]], 1)).double()
    x = batch.x.double()
    per_image = (x_hat - x).abs().mean((1, 2, 3))
    per_image = per_image + (torch.tanh(x_hat) - torch.tanh(x)).abs().mean((1, 2, 3))
    per_image = per_image + (F.avg_pool2d(x_hat, 4) - F.avg_pool2d(x, 4)).abs().mean((1, 2, 3))
    assert terms["recon"].item() == pytest.approx(PIXELS * per_image.mean().item(), rel=1e-5)
    # a bare tensor of features works too
    logits = torch.randn(3, 1, 4, 4)
    target = torch.rand(3, 1, 4, 4)
    expected = 16 * ((torch.sigmoid(logits) - target).abs().mean() + (torch.sigmoid(logits) ** 2 - target**2).abs().mean())
    assert perceptual_distance(logits, target, torch.square).item() == pytest.approx(expected.item(), rel=1e-5)


# ---------------------------------------------------------------------------- training
def _records(path):
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("steps_per_s", "wall_time_s")}
        for line in (path / "log.jsonl").read_text().splitlines()
    ]


EXTRA = {"objective.name": "lord", "objective.class_factors": "[a]", "objective.stage1_steps": 4}


def test_training_gives_finite_terms_in_both_stages(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    trainer = Trainer(load_config(None, tiny_overrides(run, steps=6, **{**EXTRA, "objective.stage1_steps": 3})))
    trainer.fit()
    records = [r for r in _records(run) if "loss" in r]
    assert [(r["step"], r["stage"]) for r in records] == [(2, 1.0), (4, 2.0), (6, 2.0)]
    assert all(math.isfinite(records[0][k]) for k in ("loss", "recon", "content_penalty"))
    for record in records[1:]:
        assert all(math.isfinite(record[k]) for k in ("loss", "recon", "content_regression", "class_regression"))
    objective = trainer.objective
    assert tuple(objective.content_codes.shape) == (24, 2) and tuple(objective.class_codes.shape) == (2, 2)
    assert set(trainer.optimizers) == {"model", "latent"}


@pytest.mark.parametrize("split_at", [3, 5])
def test_resume_is_bit_exact_across_the_stage_switch(split_at, tmp_path, tiny_overrides):
    """Stage 2 starts at step 4: a run split before or after the switch ends as the straight run."""
    straight, split = tmp_path / "straight", tmp_path / "split"
    fit(load_config(None, tiny_overrides(straight, steps=8, **EXTRA)))
    fit(load_config(None, tiny_overrides(split, steps=split_at, **{**EXTRA, "train.checkpoint_every": split_at})))
    fit(load_config(None, tiny_overrides(split, steps=8, **EXTRA)), resume=True)
    # the first session also logged its last step (3 or 5): the records of the straight run's steps
    assert _records(straight) == [r for r in _records(split) if r["step"] % 2 == 0]
    a = torch.load(straight / "checkpoint.pt", weights_only=True)
    b = torch.load(split / "checkpoint.pt", weights_only=True)
    for part in ("model", "objective"):
        assert a[part].keys() == b[part].keys()
        for k, v in a[part].items():
            assert torch.equal(v, b[part][k]), (part, k)
    assert {"content_codes", "class_codes"} <= set(a["objective"])
    for name in ("model", "latent"):
        sa, sb = a["optimizers"][name]["state"], b["optimizers"][name]["state"]
        assert sa.keys() == sb.keys() and sa
        for idx in sa:
            assert all(torch.equal(sa[idx][key], sb[idx][key]) for key in ("exp_avg", "exp_avg_sq", "step"))


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("stage1_steps", 0, "stage1_steps"),
        ("stage1_steps", 2.5, "stage1_steps"),
        ("noise_std", -1, "noise_std"),
        ("content_decay", -1e-3, "content_decay"),
        ("regression_weight", -1, "regression_weight"),
        ("latent_lr", 0, "latent_lr"),
        ("latent_betas", "[0.5]", "latent_betas"),
        ("reconstruction", "l1", "reconstruction"),
        ("perceptual", "no_such_module_here:features", "cannot be imported"),
        ("perceptual", "torch:no_such_function", "has no 'no_such_function'"),
        ("perceptual", "torch.nn.functional", "module:function"),
        ("perceptual", "math:pi", "not callable"),
        ("group_size", 1, "group_size"),
        ("class_dim", 0, "class_dim"),
    ],
)
def test_bad_parameters_are_config_errors(key, value, match, tmp_path, tiny_overrides):
    with pytest.raises(ConfigError, match=match):
        load_config(None, tiny_overrides(tmp_path, **{**EXTRA, f"objective.{key}": value}))


def test_class_dim_must_leave_content_dimensions(tiny_dataset):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=4, hidden_sizes=[16])
    with pytest.raises(ConfigError, match="class_dim between 1 and 3"):
        LORD(class_dim=4).setup(model=model, dataset_size=24)
    with pytest.raises(TypeError, match="ClassBatch"):
        _setup(tiny_dataset)[1](model, torch.zeros(2, 1, 16, 16), step=0)


# ---------------------------------------------------------------------------- shipped configs
@pytest.mark.parametrize(("data", "steps"), [("sprites", 20_000), ("dsprites", 300_000)])
def test_shipped_configs(data, steps):
    path = CONFIGS / data / "lord.yaml"
    text = path.read_text()
    assert text.startswith("#") and f"--config {data}/lord" in text
    cfg = load_config(path)
    assert (cfg.data.name, cfg.model.backbone, cfg.model.latent_dim) == (data, "conv64", 10)
    assert cfg.objective.name == "lord"
    params = cfg.objective.params
    assert (params["class_factors"], params["class_dim"], params["stage1_steps"]) == (["shape"], 5, steps // 2)
    assert (cfg.train.steps, cfg.train.batch_size, cfg.train.lr) == (steps, 64, 1e-4)
    assert cfg.train.out_dir == f"runs/{data}_lord"
    if data == "sprites":  # a sub-grid small enough that stage 1 draws each image's code often
        from disentangle.data import build_dataset

        dataset = build_dataset(cfg.data)
        assert len(dataset) == 3 * 6 * 10 * 8 * 8 == 11_520
        assert steps // 2 * cfg.train.batch_size / len(dataset) > 50
        assert dataset.kept[2].tolist() == list(range(0, 40, 4))  # every fourth orientation: no 0° and 351° twins


def test_the_cli_trains_from_the_dsprites_config(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    extra = {"objective.class_factors": "[a]", "objective.class_dim": 2, "objective.stage1_steps": 2}
    assert main(["--config", str(CONFIGS / "dsprites" / "lord.yaml"), *tiny_overrides(run, steps=4, **extra)]) == 0
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 4 and records[-1]["stage"] == 2.0 and math.isfinite(records[-1]["loss"])


def test_a_run_that_ends_in_the_first_stage_is_warned_of(tmp_path, tiny_overrides, caplog):
    """Its encoders never train (model.encode gives the initial ones): said before training, not an
    error, as a resumed run may go on into stage 2."""
    fit(load_config(None, tiny_overrides(tmp_path / "stage1", steps=4, **EXTRA)))
    assert "train.steps is 4: this run ends in the first stage, with encoders as initialised" in caplog.text
    caplog.clear()
    fit(load_config(None, tiny_overrides(tmp_path / "both", steps=5, **EXTRA)))
    assert "ends in the first stage" not in caplog.text


@pytest.mark.parametrize("objective", ["lord", "mathieu2016", "drnet", "f_statistic"])
def test_a_batch_of_partial_groups_is_refused_before_the_run_folder(objective, tmp_path, tiny_overrides):
    run = tmp_path / "run"
    extra = {**EXTRA, "objective.name": objective, "train.batch_size": 7}
    if objective != "lord":
        del extra["objective.stage1_steps"]
    with pytest.raises(ConfigError, match="train.batch_size=7 is not a multiple of"):
        fit(load_config(None, tiny_overrides(run, steps=4, **extra)))
    assert not run.exists()
