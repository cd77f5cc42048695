"""Every objective of the zoo: its dSprites config, its constructor contract, a CLI run, bf16."""
from __future__ import annotations

import inspect
import json
import math
import typing
from pathlib import Path

import pytest
import torch

from disentangle.config import TrainConfig, load_config
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.train import main
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision

ROOT = Path(__file__).resolve().parents[2]
ZOO = ("annealed_vae", "factor_vae", "beta_tcvae", "dip_vae_i", "dip_vae_ii", "info_vae", "aae")
SMALL = {"factor_vae": {"discriminator_hidden": 16}, "aae": {"discriminator_hidden": 16}}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", ZOO)
def test_dsprites_config_uses_locatello_training_settings(name):
    cfg = load_config(ROOT / "configs" / "dsprites" / f"{name}.yaml")
    assert cfg.objective.name == name
    assert (cfg.data.name, cfg.model.backbone, cfg.model.latent_dim) == ("dsprites", "conv64", 10)
    t = cfg.train
    assert (t.steps, t.batch_size, t.lr, tuple(t.betas)) == (300_000, 64, 1e-4, (0.9, 0.999))
    assert t.out_dir == f"runs/dsprites_{name}"
    assert (ROOT / "configs" / "dsprites" / f"{name}.yaml").read_text().startswith("#")  # says which default


@pytest.mark.parametrize("name", ZOO)
def test_every_parameter_has_a_type_hint_and_a_default(name):
    target = OBJECTIVES.get(name)
    hints = typing.get_type_hints(target.__init__)
    for pname, param in OBJECTIVES.parameters(name).items():
        assert pname in hints, pname
        assert param.default is not inspect.Parameter.empty, pname
    OBJECTIVES.build(name)  # the defaults are valid


def test_no_objective_has_a_beta_its_paper_does_not_have():
    for name in ZOO:
        params = set(OBJECTIVES.parameters(name))
        assert ("beta" in params) == (name == "beta_tcvae"), name


@pytest.mark.parametrize("name", ZOO)
def test_cli_trains_every_objective_from_its_config(name, tmp_path, tiny_overrides):
    run = tmp_path / "run"
    extra = {f"objective.{k}": v for k, v in SMALL.get(name, {}).items()}
    code = main(["--config", str(ROOT / "configs" / "dsprites" / f"{name}.yaml"), *tiny_overrides(run, steps=4, **extra)])
    assert code == 0
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 4 and math.isfinite(records[-1]["loss"])
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["config"]["objective"]["name"] == name


@pytest.mark.parametrize("name", ZOO)
def test_bf16_autocast_step_is_finite(name):
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=4, hidden_sizes=[16])
    obj = OBJECTIVES.build(name, **SMALL.get(name, {}))
    obj.setup(model=model, dataset_size=1000)
    opts = build_optimizers(model, obj, TrainConfig(lr=1e-3))
    prec = Precision("bf16", "cpu")
    x = (torch.rand(16, 1, 8, 8) > 0.5).float()
    for step in range(2):
        terms = obj.train_step(model, x, step=step, optimizers=opts, precision=prec)
        prec.update()
    assert all(torch.isfinite(v).all() for v in terms.values()), terms
    assert all(v.dtype == torch.float32 for v in terms.values()), {k: v.dtype for k, v in terms.items()}
