"""Robustness of the training loop found by review (2026-12-07): early stopping across a stop between
log steps, a checkpoint rotation cut by a kill, NaN before an evaluation, a resume to fewer steps than
trained, an out_dir under a file, ``--resume KEY=VALUE``, a callback's learning rate, atomic rewrites."""
from __future__ import annotations

import os

import pytest
import torch

from disentangle.config import load_config
from disentangle.errors import ConfigError, NonFiniteLossError
from disentangle.training import Callback, fit
from disentangle.training import checkpoint as checkpoint_module
from disentangle.training.checkpoint import load_checkpoint, load_latest

pytestmark = pytest.mark.usefixtures("one_thread")


class StopAt(Callback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, trainer, step, terms):
        if step == self.at:
            trainer.request_stop("stopped by the test")


def test_a_stop_between_log_steps_does_not_change_when_early_stopping_fires(tmp_path, tiny_overrides):
    # loss in mode max: the loss falls, so every check after the first is a bad one
    early = {"train.callbacks": "[{name: early_stopping, monitor: loss, mode: max, patience: 4}]", "train.steps": 20}
    straight = fit(load_config(None, tiny_overrides(tmp_path / "straight", **early)))
    fit(load_config(None, tiny_overrides(tmp_path / "stopped", **early)), callbacks=[StopAt(7)])
    resumed = fit(load_config(None, tiny_overrides(tmp_path / "stopped", **early)), resume=True)
    assert straight.step == resumed.step == 10 and "early stopping" in resumed.stop_reason
    a = load_checkpoint(tmp_path / "straight" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "stopped" / "checkpoint.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_kill_between_the_rotations_renames_loses_nothing(tmp_path, tiny_overrides, monkeypatch):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=8)))
    real = os.replace

    class Killed(BaseException):
        pass

    def killed_between(src, dst):  # the newest became the previous one; the new file has not moved yet
        if str(src).endswith(".next"):
            raise Killed
        real(src, dst)

    monkeypatch.setattr(checkpoint_module.os, "replace", killed_between)
    monkeypatch.setattr(checkpoint_module.Path, "unlink", lambda self, missing_ok=False: None)  # killed: no cleanup
    with pytest.raises(Killed):
        fit(load_config(None, tiny_overrides(run, steps=12)), resume=True)
    monkeypatch.undo()
    assert not (run / "checkpoint.pt").exists() and len(list(run.glob(".checkpoint.pt.*.next"))) == 1
    ckpt, used = load_latest(run)  # the complete new file is the newest: step 12, not the previous 8
    assert int(ckpt["step"]) == 12 and used.name.endswith(".next")
    assert fit(load_config(None, tiny_overrides(run, steps=16)), resume=True).step == 16
    assert sorted(p.name for p in run.glob("*checkpoint*")) == ["checkpoint.prev.pt", "checkpoint.pt"]
    assert int(load_checkpoint(run / "checkpoint.prev.pt")["step"]) == 12


def test_after_a_fallback_the_unreadable_newest_never_replaces_the_good_previous(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=8)))
    data = bytearray((run / "checkpoint.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (run / "checkpoint.pt").write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="Falling back to the previous checkpoint"):
        fit(load_config(None, tiny_overrides(run, steps=8)), resume=True)  # steps 4 to 8 again: one rotation
    assert (run / "checkpoint.unreadable.pt").read_bytes() == bytes(data)  # kept aside, never loaded
    assert int(load_checkpoint(run / "checkpoint.prev.pt")["step"]) == 4  # the good one the fallback used
    assert int(load_checkpoint(run / "checkpoint.pt")["step"]) == 8


def test_a_nan_model_is_a_non_finite_error_before_an_evaluation(tmp_path, tiny_overrides):
    class Poison(Callback):
        def on_step_end(self, trainer, step, terms):
            if step == 2:
                with torch.no_grad():
                    for p in trainer.model.parameters():
                        p.fill_(float("nan"))

    config = load_config(None, tiny_overrides(tmp_path / "run", **{
        "train.log_every": 4, "train.eval_every": 3, "train.eval_metrics": "[mig]"}))
    with pytest.raises(NonFiniteLossError):
        fit(config, callbacks=[Poison()])


def test_a_resume_to_fewer_steps_than_trained_is_refused(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    before = (run / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"train.steps=2: its checkpoint is at step 4"):
        fit(load_config(None, tiny_overrides(run, steps=2)), resume=True)
    assert (run / "config.yaml").read_text() == before


def test_an_out_dir_under_a_file_is_one_paragraph_before_anything_is_built(tmp_path, tiny_overrides):
    (tmp_path / "notes.txt").write_text("a file")
    with pytest.raises(ConfigError, match=r"is inside '.*notes.txt', which is a file") as err:
        fit(load_config(None, tiny_overrides(tmp_path / "notes.txt" / "run", steps=2)))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="which is a file"):
        fit(load_config(None, tiny_overrides(tmp_path / "notes.txt", steps=2)))


def test_resume_followed_by_an_override_takes_it_as_an_override(tmp_path, tiny_overrides, capsys):
    from disentangle.train import main

    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    assert main(["--config", str(run / "config.yaml"), f"train.out_dir={run}", "--resume", "train.steps=6"]) == 0
    assert int(load_checkpoint(run / "checkpoint.pt")["step"]) == 6


def test_a_callbacks_learning_rate_lasts_and_resumes_bit_exactly(tmp_path, tiny_overrides):
    class Halve(Callback):
        def __init__(self):
            self.seen = {}

        def on_step_end(self, trainer, step, terms):
            if step == 3:
                trainer.set_learning_rate(trainer.schedulers["model"].base_lrs[0] / 2)
            self.seen[step] = trainer.optimizers["model"].param_groups[0]["lr"]

    cosine = {"train.lr_schedule": "cosine", "train.steps": 12}
    watch = Halve()
    fit(load_config(None, tiny_overrides(tmp_path / "straight", **cosine)), callbacks=[watch])
    lr = load_config(None, tiny_overrides(tmp_path / "x", **cosine)).train.lr
    from disentangle.training.optim import lr_factor

    for step, value in watch.seen.items():  # the rate for step `step` + 1: halved from step 4 on, cosine throughout
        expected = (lr / 2 if step >= 3 else lr) * lr_factor(step, schedule="cosine", warmup_steps=0, total_steps=12)
        assert value == pytest.approx(expected, rel=1e-12), step
    fit(load_config(None, tiny_overrides(tmp_path / "resumed", **cosine)), callbacks=[Halve(), StopAt(6)])
    fit(load_config(None, tiny_overrides(tmp_path / "resumed", **cosine)), resume=True)  # no callback now
    a = load_checkpoint(tmp_path / "straight" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    from disentangle.training.trainer import Trainer

    trainer = Trainer(load_config(None, tiny_overrides(tmp_path / "other", steps=2)))
    trainer.fit()
    with pytest.raises(ConfigError, match="no optimizer 'discriminator'; this run has model"):
        trainer.set_learning_rate(0.1, "discriminator")
    with pytest.raises(ConfigError, match="give a finite number >= 0"):
        trainer.set_learning_rate(float("nan"))


def test_an_old_sessions_leftover_rotation_file_does_not_roll_the_run_back(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    leftover = run / ".checkpoint.pt.99999.next"  # a kill left it at step 4, before this library read them
    leftover.write_bytes((run / "checkpoint.pt").read_bytes())
    fit(load_config(None, tiny_overrides(run, steps=8)), resume=True)  # the newest is past it: read, not it
    assert not leftover.exists()
    leftover.write_bytes((run / "checkpoint.prev.pt").read_bytes())  # step 4 again, older than both
    ckpt, used = load_latest(run)
    assert int(ckpt["step"]) == 8 and used.name == "checkpoint.pt"


def test_optimizer_state_of_another_shape_is_refused_on_resume(tmp_path, tiny_overrides):
    from disentangle.training.checkpoint import atomic_save

    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    ckpt = load_checkpoint(run / "checkpoint.pt")
    state = ckpt["optimizers"]["model"]["state"]
    first = next(iter(state))
    state[first]["exp_avg"] = state[first]["exp_avg"].reshape(-1)[:1].reshape(())  # a parameter that was a scalar
    atomic_save(ckpt, run / "checkpoint.pt")
    with pytest.raises(ConfigError, match=r"optimizer state 'exp_avg' has shape \(\), and its parameter now has shape"):
        fit(load_config(None, tiny_overrides(run, steps=8)), resume=True)


def test_overrides_may_follow_an_option(tmp_path, tiny_overrides, capsys):
    """``--config X a=1 -q b=2`` (an option between overrides, as users type them) failed with
    "unrecognized arguments"; overrides are read before and after options."""
    from disentangle.train import main

    run = tmp_path / "run"
    overrides = tiny_overrides(run, steps=2)
    assert main(["--config", "quickstart", *overrides[:3], "--quiet", *overrides[3:]]) == 0
    assert torch.load(run / "checkpoint.pt", weights_only=True)["step"] == 2
