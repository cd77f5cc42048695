"""examples/own_loop.py (a plain loop) and examples/lightning_module.py (Lightning, manual
optimization) train what ``disentangle.training.fit`` trains: on a CPU, the plain loop's loss at
every step and its final weights are bit for bit the trainer's; Lightning's losses agree to 1e-5.
β-VAE (one optimizer) and FactorVAE (the model's and the discriminator's), conv64 on 64×64 sprites."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from disentangle.config import load_config
from disentangle.training import fit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STEPS = 20


def _example(name: str):
    """``examples/<name>.py`` imported from its file (the examples are scripts, not a package),
    registered under ``name`` (its dataclasses need their module in ``sys.modules``)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _config(objective: dict[str, object], out_dir: Path):
    """The quickstart's model and data, small: conv64 on sprites, batch 16, a log record every step."""
    items = {
        "seed": 3, "data.name": "sprites", "model.backbone": "conv64", "model.latent_dim": 10,
        **{f"objective.{k}": v for k, v in objective.items()},
        "train.steps": STEPS, "train.batch_size": 16, "train.lr": 5e-4, "train.precision": "fp32",
        "train.device": "cpu", "train.threads": 1, "train.log_every": 1, "train.checkpoint_every": STEPS,
        "train.progress": "false", "train.traversals": "false", "train.out_dir": str(out_dir),
    }
    return load_config(None, [f"{k}={v}" for k, v in items.items()])


OBJECTIVES = {
    "beta_vae": {"name": "beta_vae", "beta": 4.0},
    "factor_vae": {"name": "factor_vae", "gamma": 10.0},  # two optimizers: "model" and "discriminator"
}


@pytest.fixture(scope="module", params=sorted(OBJECTIVES))
def reference(request, tmp_path_factory):
    """``fit(config)``'s run: the config, every step's logged loss and the final weights."""
    threads = torch.get_num_threads()
    out_dir = tmp_path_factory.mktemp(request.param) / "run"
    config = _config(OBJECTIVES[request.param], out_dir)
    try:
        fit(config)
    finally:
        torch.set_num_threads(threads)
    records = [json.loads(line) for line in (out_dir / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    weights = torch.load(out_dir / "checkpoint.pt", weights_only=True)["model"]
    return config, [r["loss"] for r in records], weights


def test_the_plain_loop_trains_the_trainers_bits(reference):
    config, losses, weights = reference
    threads = torch.get_num_threads()
    try:
        model, own_losses = _example("own_loop").train(config)
    finally:
        torch.set_num_threads(threads)
    assert own_losses == losses  # every step, exact float equality
    state = model.state_dict()
    assert state.keys() == weights.keys()
    for key, value in weights.items():
        assert torch.equal(state[key], value), key


def test_the_lightning_module_trains_the_trainers_losses(reference, monkeypatch):
    pytest.importorskip("lightning")
    monkeypatch.setattr(sys, "path", [*sys.path])  # the example puts its folder on the path
    config, losses, weights = reference
    threads = torch.get_num_threads()
    try:
        module, lightning_losses = _example("lightning_module").train(config)
    finally:
        torch.set_num_threads(threads)
    assert module.step_index == STEPS  # training steps, whatever the optimizer steps per step
    assert lightning_losses == pytest.approx(losses, rel=1e-5, abs=1e-5)
    state = module.model.state_dict()
    for key, value in weights.items():
        torch.testing.assert_close(state[key], value, rtol=1e-5, atol=1e-5, msg=key)


def test_a_batch_drawn_on_the_host_goes_to_the_training_device():
    """batch_to_device, for a loop over a streamed dataset: tensors, tuples and named tuples (pairs of
    the weak objectives) keep their structure and land on the device (here torch's meta device)."""
    from collections import namedtuple

    import torch

    from disentangle.training import batch_to_device

    Pair = namedtuple("Pair", "first second")
    meta = torch.device("meta")
    moved = batch_to_device(Pair(torch.zeros(2, 1, 4, 4), torch.ones(2, 1, 4, 4)), meta)
    assert isinstance(moved, Pair) and moved.first.device == meta and moved.second.shape == (2, 1, 4, 4)
    moved = batch_to_device((torch.zeros(3), torch.zeros(3, dtype=torch.long)), meta)
    assert type(moved) is tuple and [t.device for t in moved] == [meta, meta] and moved[1].dtype == torch.long
    same = torch.zeros(2)
    assert batch_to_device(same, torch.device("cpu")) is same
