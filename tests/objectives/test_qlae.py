"""QLAE (disentangle.objectives.qlae): the quantiser against numpy's argmin, the straight-through
gradient, the gradients of the codebook and of the encoder by value, the loss recomputed from its
definition, the optimizers' split, config errors, training, resume and the codes of a trained run."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import disentangle
from disentangle.config import TrainConfig, load_config
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.qlae import QLAE, initial_codebook, load_codebook, quantize, quantized_codes
from disentangle.train import main
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------------------- the quantiser
def test_the_initial_codebook_is_evenly_spaced_in_the_range():
    book = initial_codebook(3, 5, 0.5)
    expected = np.array([-0.5, -0.25, 0.0, 0.25, 0.5])
    assert book.shape == (3, 5)
    for row in book.numpy():
        np.testing.assert_allclose(row, expected, atol=1e-7)
    np.testing.assert_allclose(initial_codebook(1, 3, 2.0).numpy(), [[-2.0, 0.0, 2.0]], atol=1e-7)


def test_forward_is_the_nearest_value_of_each_dimension_as_numpy_argmin():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 1.5, size=(200, 4)).astype(np.float32)
    book = rng.uniform(-2, 2, size=(4, 7)).astype(np.float32)  # unsorted, a different set per dimension
    q = quantize(torch.from_numpy(z), torch.from_numpy(book))
    idx = np.abs(z[:, :, None] - book[None, :, :]).argmin(2)
    np.testing.assert_array_equal(q.indices.numpy(), idx)
    expected = np.take_along_axis(np.broadcast_to(book, (200, 4, 7)), idx[:, :, None], 2)[:, :, 0]
    np.testing.assert_array_equal(q.values.numpy(), expected)
    torch.testing.assert_close(q.straight_through, torch.from_numpy(expected), rtol=0, atol=1e-6)
    # a planted case: values 0, 1, 3; 1.9 is nearer 1, 2.1 nearer 3, 0.5 a tie (the lower index)
    q = quantize(torch.tensor([[1.9], [2.1], [0.5], [-7.0], [9.0]]), torch.tensor([[0.0, 1.0, 3.0]]))
    assert q.values.flatten().tolist() == [1.0, 3.0, 0.0, 0.0, 3.0]
    assert q.indices.flatten().tolist() == [1, 2, 0, 0, 2]


def test_the_quantised_value_is_monotone_in_the_code():
    book = torch.tensor([[0.7, -0.4, 0.1, 1.5]])  # unsorted
    z = torch.linspace(-3, 3, 1001).unsqueeze(1)
    values = quantize(z, book).values.flatten()
    assert (values[1:] >= values[:-1]).all()
    assert set(values.unique().tolist()) == set(book.flatten().tolist())


def test_the_straight_through_gradient_is_the_upstream_gradient_and_skips_the_codebook():
    torch.manual_seed(0)
    z = torch.randn(6, 3, requires_grad=True)
    book = torch.randn(3, 4, requires_grad=True)
    upstream = torch.randn(6, 3)
    (quantize(z, book).straight_through * upstream).sum().backward()
    assert torch.equal(z.grad, upstream)
    assert book.grad is None or torch.count_nonzero(book.grad) == 0


# ---------------------------------------------------------------------------- the loss and its gradients
class _Stub(torch.nn.Module):
    """A model whose encoder returns a leaf ``mu`` and whose decoder is a fixed linear map."""

    latent_dim = 3

    def __init__(self, mu: torch.Tensor) -> None:
        super().__init__()
        self.mu = mu
        self.weight = torch.nn.Parameter(torch.randn(3, 16, generator=torch.Generator().manual_seed(2)))

    def encode(self, x):
        return self.mu, torch.zeros_like(self.mu)

    def decode(self, z):
        return (z @ self.weight).view(-1, 1, 4, 4)


def _stub_and_objective(quantization_weight=0.3, commitment_weight=0.7):
    mu = (torch.randn(5, 3, generator=torch.Generator().manual_seed(1)) * 0.6).requires_grad_(True)
    model = _Stub(mu)
    obj = QLAE(num_values=4, quantization_weight=quantization_weight, commitment_weight=commitment_weight)
    obj.setup(model=model, dataset_size=10)
    with torch.no_grad():  # an unsorted, uneven codebook
        obj.codebook.copy_(torch.tensor([[-0.9, 0.2, -0.1, 0.8], [0.5, -0.5, 0.05, 1.2], [0.0, -1.0, 1.0, 0.3]]))
    x = (torch.rand(5, 1, 4, 4, generator=torch.Generator().manual_seed(3)) > 0.5).float()
    return model, obj, x


def test_the_loss_recomputed_from_its_definition():
    model, obj, x = _stub_and_objective()
    terms = obj(model, x, step=0)
    z = model.mu.detach().numpy().astype(np.float64)
    book = obj.codebook.detach().numpy().astype(np.float64)
    zq = np.array([[book[j, np.abs(z[b, j] - book[j]).argmin()] for j in range(3)] for b in range(5)])
    logits = zq @ model.weight.detach().numpy().astype(np.float64)
    xs = x.numpy().reshape(5, 16)
    bce = np.maximum(logits, 0) - logits * xs + np.log1p(np.exp(-np.abs(logits)))
    recon = bce.sum(1).mean()
    sq = ((z - zq) ** 2).mean(1).mean()
    assert terms["recon"].item() == pytest.approx(recon, rel=1e-5)
    assert terms["quantization_loss"].item() == pytest.approx(sq, rel=1e-5)
    assert terms["commitment_loss"].item() == pytest.approx(sq, rel=1e-5)
    assert terms["quantization_error"].item() == pytest.approx(np.abs(z - zq).mean(), rel=1e-5)
    # the reference's loss (BCE averaged over the 16 pixels) times the 16 pixels
    assert terms["loss"].item() == pytest.approx(16 * (recon / 16 + 0.3 * sq + 0.7 * sq), rel=1e-5)


def test_the_codebook_gets_the_quantization_gradient_and_the_encoder_the_commitment_gradient():
    model, obj, x = _stub_and_objective(quantization_weight=0.3, commitment_weight=0.7)
    terms = obj(model, x, step=0)
    terms["loss"].backward()
    z = model.mu.detach().double()
    book = obj.codebook.detach().double()
    q = quantize(z, book)
    b, d, pixels = 5, 3, 16
    # codebook: only d/dv of P·λ_q·mean_b mean_j (sg(z) − v_{j,k})², i.e. −2·P·λ_q/(B·D) Σ_{b: k=that} (z − v)
    expected_book = torch.zeros(3, 4, dtype=torch.float64)
    for i in range(b):
        for j in range(d):
            expected_book[j, q.indices[i, j]] += -2 * pixels * 0.3 / (b * d) * (z[i, j] - book[j, q.indices[i, j]])
    torch.testing.assert_close(obj.codebook.grad.double(), expected_book, rtol=1e-5, atol=1e-7)
    assert torch.count_nonzero(obj.codebook.grad) > 0
    # encoder: the reconstruction's gradient at ẑ (straight through) + 2·P·λ_c/(B·D)·(z − ẑ)
    zq = q.values.float().requires_grad_(True)
    F.binary_cross_entropy_with_logits(model.decode(zq), x, reduction="none").flatten(1).sum(1).mean().backward()
    expected_mu = zq.grad.double() + 2 * pixels * 0.7 / (b * d) * (z - q.values)
    torch.testing.assert_close(model.mu.grad.double(), expected_mu, rtol=1e-5, atol=1e-6)
    # with λ_c = 0 the encoder gets the reconstruction's gradient alone
    model, obj, x = _stub_and_objective(commitment_weight=0.0)
    obj(model, x, step=0)["loss"].backward()
    torch.testing.assert_close(model.mu.grad, zq.grad, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- optimizers and a step
def _mlp(seed=0) -> VAE:
    torch.manual_seed(seed)
    return VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=4, hidden_sizes=[16])


def test_weight_decay_is_on_the_weights_and_not_on_biases_or_codebook():
    model = _mlp()
    obj = OBJECTIVES.build("qlae")
    obj.setup(model=model, dataset_size=24)
    opts = build_optimizers(model, obj, TrainConfig(optimizer="adamw", lr=1e-3, weight_decay=0.1))
    assert set(opts) == {"model", "unregularized"}
    ids = {k: [id(p) for g in o.param_groups for p in g["params"]] for k, o in opts.items()}
    weights = [id(p) for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [id(p) for n, p in model.named_parameters() if n.endswith("bias")]
    assert ids["model"] == weights
    assert ids["unregularized"] == biases + [id(obj.codebook)]
    assert isinstance(opts["model"], torch.optim.AdamW) and opts["model"].param_groups[0]["weight_decay"] == 0.1
    assert opts["unregularized"].param_groups[0]["weight_decay"] == 0.0
    # one step moves the weights, the biases and the codebook, each by its own optimizer
    before = {n: p.detach().clone() for n, p in [*model.named_parameters(), ("codebook", obj.codebook)]}
    x = (torch.rand(8, 1, 16, 16, generator=torch.Generator().manual_seed(0)) > 0.5).float()
    terms = obj.train_step(model, x, step=0, optimizers=opts, precision=Precision("fp32", "cpu"))
    assert all(torch.isfinite(v).all() for v in terms.values())
    assert not torch.equal(before["codebook"], obj.codebook.detach())
    moved = {n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())}
    assert any(n.endswith("bias") for n in moved) and any(n.endswith("weight") for n in moved)
    assert all(opts[k].state[p]["step"] == 1 for k in ("model", "unregularized") for g in opts[k].param_groups
               for p in g["params"] if p in opts[k].state)


def test_bad_parameters_are_config_errors(tmp_path, tiny_overrides):
    for params, name in [
        ({"num_values": 1}, "num_values"), ({"num_values": 2.5}, "num_values"),
        ({"quantization_weight": -0.1}, "quantization_weight"), ({"commitment_weight": float("nan")}, "commitment_weight"),
        ({"codebook_range": 0.0}, "codebook_range"), ({"reconstruction": "l1"}, "reconstruction"),
    ]:
        with pytest.raises(ConfigError, match=name):
            OBJECTIVES.build("qlae", **params)
    with pytest.raises(ConfigError, match="num_values"):
        load_config(None, tiny_overrides(tmp_path, **{"objective.name": "qlae", "objective.num_values": 1}))
    with pytest.raises(ConfigError, match="codebook_range"):
        load_config(None, tiny_overrides(tmp_path, **{"objective.name": "qlae", "objective.codebook_range": -1}))


# ---------------------------------------------------------------------------- through the trainer
EXTRA = {"objective.name": "qlae", "train.optimizer": "adamw", "train.weight_decay": 0.1, "train.lr": 1e-3}


def test_training_gives_finite_terms_and_the_run_s_codes(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    result = Trainer(load_config(None, tiny_overrides(run, steps=6, **EXTRA))).fit()
    assert result.step == 6
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if '"loss"' in line]
    assert records
    for record in records:
        for key in ("loss", "recon", "quantization_loss", "commitment_loss", "quantization_error"):
            assert math.isfinite(record[key]), (key, record)
    # the codebook is the objective's state in the checkpoint, trained away from its start
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    book = load_codebook(run)
    assert torch.equal(book, ckpt["objective"]["codebook"]) and book.shape == (4, 10)
    assert not torch.equal(book, initial_codebook(4, 10, 0.5))
    model = disentangle.load(run)
    assert torch.equal(load_codebook(model), book)
    x = torch.rand(5, 1, 16, 16)
    codes = quantized_codes(model, x)
    z = model.representation(x)
    torch.testing.assert_close(codes.values, quantize(z, book).values)
    assert torch.equal(codes.indices, (z.unsqueeze(2) - book.unsqueeze(0)).abs().argmin(2))


def test_resume_is_bit_exact(tmp_path, tiny_overrides):
    full = tmp_path / "full"
    Trainer(load_config(None, tiny_overrides(full, steps=8, **EXTRA))).fit()
    part = tmp_path / "part"
    Trainer(load_config(None, tiny_overrides(part, steps=4, **EXTRA))).fit()
    assert main(["--resume", str(part), "train.steps=8"]) == 0
    a = torch.load(full / "checkpoint.pt", weights_only=True)
    b = torch.load(part / "checkpoint.pt", weights_only=True)
    for section in ("model", "objective"):
        assert a[section].keys() == b[section].keys()
        for key in a[section]:
            assert torch.equal(a[section][key], b[section][key]), f"{section}.{key}"
    for name in ("model", "unregularized"):
        sa, sb = a["optimizers"][name]["state"], b["optimizers"][name]["state"]
        assert sa.keys() == sb.keys() and sa
        for k in sa:
            assert torch.equal(sa[k]["exp_avg"], sb[k]["exp_avg"]), (name, k)


def test_a_published_model_carries_its_codebook_and_others_carry_nothing(tmp_path, tiny_overrides, monkeypatch):
    """zoo publish stores the codebook as objective.codebook; loading the weight file (or zoo:NAME)
    gives it back as model.objective_state, so quantized_codes works on a pretrained model. A
    FactorVAE's discriminator, objective state used only in training, is never published."""
    from safetensors import safe_open

    from disentangle import zoo

    run = tmp_path / "q"
    Trainer(load_config(None, tiny_overrides(run, steps=4, **EXTRA))).fit()
    manifest = tmp_path / "zoo" / "manifest.json"
    zoo.publish(run, "q-test", manifest=manifest, metrics=["mig"])
    weights = tmp_path / "zoo" / "weights" / "q-test.safetensors"
    book = torch.load(run / "checkpoint.pt", weights_only=True)["objective"]["codebook"]
    with safe_open(str(weights), "pt") as f:
        assert torch.equal(f.get_tensor("objective.codebook"), book)
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(manifest))
    for source in (weights, "zoo:q-test"):
        model = disentangle.load(source)
        assert torch.equal(load_codebook(model), book)
        x = torch.rand(3, 1, 16, 16)
        assert torch.equal(quantized_codes(model, x).values, quantize(model.representation(x), book).values)

    other = tmp_path / "f"
    Trainer(load_config(None, tiny_overrides(other, steps=2, **{"objective.name": "factor_vae", "train.checkpoint_every": 2}))).fit()
    assert "discriminator" in "".join(torch.load(other / "checkpoint.pt", weights_only=True)["objective"])
    zoo.publish(other, "f-test", manifest=manifest, metrics=["mig"])
    with safe_open(str(tmp_path / "zoo" / "weights" / "f-test.safetensors"), "pt") as f:
        assert all(k.startswith(("encoder.", "decoder.")) for k in f.keys())
    model = disentangle.load(other)
    assert model.objective_state == {}
    with pytest.raises(ValueError, match="factor_vae"):
        load_codebook(model)


def test_the_end_of_training_traversals_step_through_the_run_s_codebook(tmp_path, tiny_overrides):
    """The trainer's traversals.png of a QLAE run has a column per codebook value (3 here, not the
    pictures' default 10) and decodes what disentangle.load's model draws."""
    from PIL import Image

    from disentangle.data import build_dataset
    from disentangle.visualize import write_pictures

    run = tmp_path / "q"
    extra = {**EXTRA, "objective.num_values": 3, "train.traversals": "true"}
    Trainer(load_config(None, tiny_overrides(run, steps=4, **extra))).fit()
    png = np.asarray(Image.open(run / "traversals.png"))
    assert png.shape[:2] == (4 * (16 + 2) + 2, 96 + 3 * (1 + 3) * (16 + 2) + 2)
    model = disentangle.load(run)
    again = write_pictures(model, build_dataset(model.config["data"]), tmp_path / "again", ["traversals"], seed=0)
    assert np.array_equal(np.asarray(Image.open(again["traversals"])), png)


def test_load_codebook_refuses_a_run_of_another_objective(tmp_path, tiny_overrides):
    run = tmp_path / "beta"
    Trainer(load_config(None, tiny_overrides(run, steps=2, **{"objective.name": "beta_vae", "train.checkpoint_every": 2}))).fit()
    with pytest.raises(ValueError, match="beta_vae"):
        load_codebook(run)


@pytest.mark.parametrize("dataset", ["sprites", "dsprites"])
def test_the_shipped_configs_train(dataset, tmp_path, tiny_overrides):
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "configs" / dataset / "qlae.yaml"
    cfg = load_config(path)
    assert (cfg.objective.name, cfg.model.backbone, cfg.model.latent_dim) == ("qlae", "conv64", 10)
    assert (cfg.train.optimizer, cfg.train.weight_decay, cfg.train.lr) == ("adamw", 0.1, 1e-3)
    assert cfg.train.steps == {"sprites": 20_000, "dsprites": 300_000}[dataset]
    assert cfg.objective.params["quantization_weight"] == {"sprites": 0.01, "dsprites": 0.001}[dataset]
    run = tmp_path / "run"
    assert main(["--config", str(path), *tiny_overrides(run, steps=2, **{"train.checkpoint_every": 2})]) == 0
    assert torch.load(run / "checkpoint.pt", weights_only=True)["objective"]["codebook"].shape == (4, 10)
