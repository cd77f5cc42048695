"""The callbacks' lifecycle at a run's edges: Ctrl-C ends the run with ``on_fit_end`` once it is
checkpointed; a user's ``on_fit_start`` that raises leaves none of our writers open; a hook set on
the object (not its class) is called; early stopping's saved state goes back only into the same
quantity's early stopping."""
from __future__ import annotations

import logging
import os
import signal
import types

import pytest
import torch

from disentangle.config import load_config
from disentangle.training import fit
from disentangle.training.callbacks import Callback, EarlyStopping

pytestmark = pytest.mark.usefixtures("one_thread")


class Recorder(Callback):
    def __init__(self, interrupt_at: int | None = None) -> None:
        self.interrupt_at, self.ended, self.checkpoints = interrupt_at, [], []

    def on_step_end(self, trainer, step, terms) -> None:
        if step == self.interrupt_at:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered once the step is checkpointed

    def on_checkpoint(self, trainer, step, path) -> None:
        self.checkpoints.append(step)

    def on_fit_end(self, trainer, result) -> None:
        self.ended.append((result.step, result.stop_reason))


def test_ctrl_c_ends_the_run_with_on_fit_end_after_its_checkpoint(tmp_path, tiny_overrides):
    recorder = Recorder(interrupt_at=3)
    with pytest.raises(KeyboardInterrupt):
        fit(load_config(None, tiny_overrides(tmp_path / "run", steps=8)), callbacks=[recorder])
    assert recorder.checkpoints == [3]
    assert recorder.ended == [(3, "interrupted (Ctrl-C or a termination signal)")]


def test_a_user_on_fit_start_that_raises_leaves_no_writer_open(tmp_path, tiny_overrides):
    pytest.importorskip("tensorboard")

    class Fails(Callback):
        def on_fit_start(self, trainer) -> None:
            self.trainer = trainer
            raise RuntimeError("the user's bug")

    fails = Fails()
    with pytest.raises(RuntimeError, match="the user's bug"):
        fit(load_config(None, tiny_overrides(tmp_path / "run", steps=4, **{"train.tensorboard": "true"})),
            callbacks=[fails])
    from disentangle.training.callbacks import TensorBoardLogger

    (board,) = [c for c in fails.trainer.callbacks if isinstance(c, TensorBoardLogger)]
    assert board.writer is None  # closed


def test_a_hook_set_on_the_object_is_called(tmp_path, tiny_overrides):
    seen = {"step_end": [], "log": []}
    callback = types.SimpleNamespace(on_step_end=lambda trainer, step, terms: seen["step_end"].append(step),
                                     on_log=lambda trainer, step, scalars: seen["log"].append(step))
    fit(load_config(None, tiny_overrides(tmp_path / "run", steps=4)), callbacks=[callback])
    assert seen == {"step_end": [1, 2, 3, 4], "log": [2, 4]}


def test_early_stopping_state_goes_back_only_into_the_same_quantity(tmp_path, tiny_overrides, caplog):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)), callbacks=[EarlyStopping(monitor="kl", patience=50)])
    saved = torch.load(run / "checkpoint.pt", weights_only=True)["callbacks"]["EarlyStopping"]
    assert saved["monitor"] == "kl" and saved["mode"] == "min"
    caplog.set_level(logging.WARNING, logger="disentangle")
    other = EarlyStopping(monitor="recon", patience=50)
    fit(load_config(None, tiny_overrides(run, steps=6)), resume=True, callbacks=[other])
    assert any("early_stopping monitors recon (min) in this session and kl (min) in the checkpoint's state"
               in r.getMessage() for r in caplog.records)
    assert other.bad_checks <= 1 and other.best is not None and other.best != saved["best"]
    same = EarlyStopping(monitor="recon", patience=50)  # saved by the session above: taken back
    fit(load_config(None, tiny_overrides(run, steps=8)), resume=True, callbacks=[same])
    assert same.best is not None


def test_mlflow_after_a_crash_holds_each_step_once_and_says_how_the_run_ended(tmp_path, tiny_overrides):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    class Crash(Callback):
        def on_step_end(self, trainer, step, terms) -> None:
            if step == 7:
                raise RuntimeError("crashed")

    run = tmp_path / "run"
    overrides = tiny_overrides(run, steps=8, **{"train.callbacks": "[{name: mlflow, experiment: tests}]"})
    with pytest.raises(RuntimeError, match="crashed"):
        fit(load_config(None, overrides), callbacks=[Crash()])  # logged 2, 4, 6; checkpoint at 4
    client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
    (found,) = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert found.info.status == "FAILED"  # not left RUNNING
    fit(load_config(None, overrides), resume=True)
    (found,) = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert found.info.status == "FINISHED"
    steps = sorted(m.step for m in client.get_metric_history(found.info.run_id, "train/loss"))
    assert steps == [2, 4, 6, 8]
