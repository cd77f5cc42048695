import json
import math

import pytest
import torch
import yaml
from conftest import tiny_overrides

import disentangle
from disentangle.config import load_config
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_vae import BetaVAE
from disentangle.trainer import NonFiniteLossError, RunExistsError, train


def _records(path):
    return [json.loads(line) for line in (path / "log.jsonl").read_text().splitlines()]


def _loss_fields(records):
    return [{k: v for k, v in r.items() if k != "steps_per_s"} for r in records]


def test_resume_is_bit_exact(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    train(load_config(None, tiny_overrides(straight, steps=12)))
    # an interrupted run: stop at step 8 (a checkpoint step), then resume up to 12
    train(load_config(None, tiny_overrides(split, steps=8)))
    train(load_config(None, tiny_overrides(split, steps=12)), resume=True)
    a, b = _records(straight), _records(split)
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(2, 13, 2))
    assert _loss_fields(a) == _loss_fields(b)  # exact float equality of every logged term
    ca = torch.load(straight / "checkpoint.pt", weights_only=True)
    cb = torch.load(split / "checkpoint.pt", weights_only=True)
    for key, value in ca["model"].items():
        assert torch.equal(value, cb["model"][key]), key
    sa, sb = ca["optimizers"]["model"]["state"], cb["optimizers"]["model"]["state"]
    for idx in sa:
        assert torch.equal(sa[idx]["exp_avg_sq"], sb[idx]["exp_avg_sq"])


def test_resume_drops_log_records_written_after_the_checkpoint(tmp_path):
    run = tmp_path / "run"
    train(load_config(None, tiny_overrides(run, steps=8)))
    with (run / "log.jsonl").open("a") as f:  # what a crash after step 8 would have left
        f.write(json.dumps({"step": 10, "loss": 1.0}) + "\n" + '{"step": 12, "lo')
    train(load_config(None, tiny_overrides(run, steps=10)), resume=True)
    steps = [r["step"] for r in _records(run)]
    assert steps == [2, 4, 6, 8, 10]


def test_outputs_and_checkpoint_contents(tmp_path):
    run = tmp_path / "run"
    train(load_config(None, tiny_overrides(run, steps=6, **{"train.traversals": "true", "data.size": 64, "model.latent_dim": 3})))
    # steps=6 with checkpoint_every=4: checkpoints at 4 and 6, so the previous one is kept too
    assert {p.name for p in run.iterdir()} == {
        "config.yaml", "checkpoint.pt", "checkpoint.prev.pt", "log.jsonl", "traversals.png", "reconstructions.png"
    }
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == 6
    assert set(ckpt) >= {"model", "objective", "optimizers", "schedulers", "rng", "config", "step", "precision"}
    assert set(ckpt["rng"]) >= {"python", "numpy", "torch", "generators"}
    assert set(ckpt["rng"]["generators"]) == {"data", "noise"}
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["objective"] == {"name": "beta_vae", "beta": 1.0, "reconstruction": "bernoulli"}
    assert saved["train"]["steps"] == 6
    rec = _records(run)[-1]
    assert set(rec) >= {"step", "loss", "recon", "kl", "kl_per_dim", "elbo"}
    assert len(rec["kl_per_dim"]) == 3
    assert math.isclose(rec["kl"], sum(rec["kl_per_dim"]), rel_tol=1e-5)
    assert not list(run.glob("*.tmp")), "atomic save left a temporary file"


def test_refuses_to_overwrite_an_existing_run(tmp_path):
    run = tmp_path / "run"
    train(load_config(None, tiny_overrides(run, steps=4)))
    before = (run / "checkpoint.pt").read_bytes()
    with pytest.raises(RunExistsError, match="already holds a run"):
        train(load_config(None, tiny_overrides(run, steps=8)))
    assert (run / "checkpoint.pt").read_bytes() == before


def test_resume_without_checkpoint_and_with_changed_config(tmp_path):
    with pytest.raises(RunExistsError, match="no checkpoint"):
        train(load_config(None, tiny_overrides(tmp_path / "none")), resume=True)
    run = tmp_path / "run"
    train(load_config(None, tiny_overrides(run, steps=4)))
    with pytest.raises(disentangle.ConfigError, match="objective.beta"):
        train(load_config(None, tiny_overrides(run, steps=8, **{"objective.beta": 3})), resume=True)


class _ExplodingVAE(BetaVAE):
    """β-VAE whose loss turns NaN from step 5 on (steps are 0-based inside the objective)."""

    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        if step >= 5:
            terms["loss"] = terms["loss"] * float("nan")
        return terms


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    OBJECTIVES.register("_exploding", _ExplodingVAE, overwrite=True)
    run = tmp_path / "run"
    config = load_config(None, tiny_overrides(run, steps=12, **{"objective.name": "_exploding"}))
    with pytest.raises(NonFiniteLossError, match="NaN or infinite"):
        train(config)
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == 4  # the checkpoint at step 4 survives; nothing non-finite was saved
    assert all(torch.isfinite(v).all() for v in ckpt["model"].values())


def test_load_gives_eval_model_with_public_api(tmp_path):
    run = tmp_path / "run"
    train(load_config(None, tiny_overrides(run, steps=4)))
    for target in (run, run / "checkpoint.pt"):
        model = disentangle.load(target)
        assert not model.training
        x = torch.rand(5, 1, 16, 16)
        mu, logvar = model.encode(x)
        assert mu.shape == logvar.shape == (5, 4)
        assert model.decode(mu).shape == (5, 1, 16, 16)
        torch.testing.assert_close(model.representation(x), mu)
        assert model.config["data"]["name"] == "_tiny_test"
    with pytest.raises(disentangle.DisentangleError, match="neither checkpoint.pt nor checkpoint.prev.pt"):
        disentangle.load(tmp_path)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_runs_on_cpu(tmp_path, precision):
    result = train(load_config(None, tiny_overrides(tmp_path / precision, steps=4, **{"train.precision": precision})))
    assert math.isfinite(result.last_terms["loss"])


def test_metrics_during_training_are_logged_and_do_not_perturb_training(tmp_path):
    plain, evaluated = tmp_path / "plain", tmp_path / "eval"
    train(load_config(None, tiny_overrides(plain, steps=8)))
    train(load_config(None, tiny_overrides(evaluated, steps=8, **{"train.eval_every": 4, "train.eval_metrics": "[mig]"})))
    records = _records(evaluated)
    metric_records = [r for r in records if "metrics" in r]
    assert [r["step"] for r in metric_records] == [4, 8]
    assert 0.0 <= metric_records[-1]["metrics"]["mig"]["mig"] <= 1.0
    # evaluation draws no randomness from the training streams: the losses are identical
    assert _loss_fields(_records(plain)) == _loss_fields([r for r in records if "metrics" not in r])


def test_unknown_eval_metric_is_a_config_error(tmp_path):
    with pytest.raises(disentangle.ConfigError, match="Did you mean 'mig'"):
        load_config(None, tiny_overrides(tmp_path, **{"train.eval_metrics": "[mgi]"}))
