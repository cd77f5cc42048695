"""The parts the training loop is made of: the cadence of a step's events, the named random
streams, and the one place where older checkpoints are brought up to date."""
from __future__ import annotations

import pytest

from disentangle.config import TrainConfig
from disentangle.training.cadence import EVENTS, Cadence
from disentangle.training.checkpoint import upgrade_checkpoint
from disentangle.training.runtime import Stream, stream_seed


def test_events_come_at_their_intervals_and_all_but_pictures_at_the_end():
    c = Cadence(steps=10, log=3, evaluate=4, pictures=5, checkpoint=6)
    due = {step: c.due(step) for step in range(1, 11)}
    assert due[1] == due[2] == ()
    assert due[3] == ("log",) and due[4] == ("evaluate",) and due[5] == ("pictures",)
    assert due[6] == ("log", "checkpoint") and due[8] == ("evaluate",) and due[9] == ("log",)
    assert due[10] == ("log", "evaluate", "pictures", "checkpoint") == EVENTS
    assert Cadence(steps=7, log=3, evaluate=0, pictures=5, checkpoint=100).due(7) == ("log", "checkpoint")


def test_the_cadence_of_a_config_needs_metrics_to_evaluate_and_tensorboard_for_pictures():
    train = TrainConfig(steps=20, log_every=5, eval_every=10, image_every=10, checkpoint_every=20)
    assert Cadence.from_config(train).due(10) == ("log",)  # no eval_metrics, no tensorboard
    train = TrainConfig(steps=20, log_every=5, eval_every=10, eval_metrics=["mig"], checkpoint_every=20)
    assert Cadence.from_config(train).due(10) == ("log", "evaluate")


def test_each_stream_has_its_own_seed_and_they_are_the_historical_offsets():
    # the offsets of the runs trained before the streams had names: changing one changes every run
    assert [stream_seed(7, s) for s in (Stream.WEIGHTS, Stream.DATA, Stream.PICTURES, Stream.NOISE)] == [7, 8, 9, 10]
    assert len({int(s) for s in Stream}) == len(Stream)


def test_an_old_checkpoint_is_brought_to_the_current_layout():
    old = {
        "format": 1, "step": 40, "config": {"seed": 0, "model": {"backbone": "mlp", "latent_dim": 4}},
        "model": {}, "objective": {}, "optimizers": {}, "rng": {"torch": None},
    }
    new = upgrade_checkpoint(old)
    assert new["config"]["model"]["init"] == "pytorch"  # trained before model.init existed
    assert new["schedulers"] == {} and new["precision"] == {} and new["wall_time_s"] == 0.0
    assert new["rng"] == {"generators": {}, "torch": None}
    # a current checkpoint is unchanged
    current = {**new, "schedulers": {"model": {"x": 1}}, "wall_time_s": 3.5, "rng": {"generators": {"data": 1}}}
    assert upgrade_checkpoint(dict(current)) == current


@pytest.mark.parametrize("event", EVENTS)
def test_every_event_has_a_handler_or_is_the_checkpoint(event):
    from disentangle.training.trainer import Trainer

    handlers = Trainer._file_handlers.fget(Trainer.__new__(Trainer))  # type: ignore[attr-defined]
    assert event in handlers or event == "checkpoint"


def test_cpu_optimizers_are_fused_and_step_as_torchs_default_does():
    """Fused Adam/AdamW on the CPU (where torch has the kernel), the same updates as the default
    (foreach) implementation to float rounding over 50 steps; the run's log names the kernels."""
    import torch

    from disentangle.training.optim import optimizer_factory, optimizer_kernels

    for name in ("adam", "adamw"):
        train = TrainConfig(optimizer=name, lr=1e-3, weight_decay=0.01)
        torch.manual_seed(0)
        ours = [torch.randn(300, requires_grad=True), torch.randn(4, 5, requires_grad=True)]
        reference = [p.detach().clone().requires_grad_(True) for p in ours]
        opt = optimizer_factory(train, "cpu")(ours)
        assert opt.defaults["fused"] is True
        default = type(opt)(reference, lr=1e-3, weight_decay=0.01)
        assert not default.defaults.get("fused")
        for _ in range(50):
            for p, q in zip(ours, reference):
                g = torch.randn_like(p)
                p.grad, q.grad = g.clone(), g.clone()
            opt.step()
            default.step()
        for p, q in zip(ours, reference):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-5)
            assert not torch.equal(p, torch.zeros_like(p))
    assert optimizer_kernels({"model": opt}) == "fused"
    assert optimizer_kernels({"model": opt, "discriminator": default}) == "model fused, discriminator foreach"
