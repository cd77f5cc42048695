"""A SIGTERM and a SIGINT in either order are one request to stop after the step: a local sweep's
worker gets the terminal's Ctrl-C and the sweep's own SIGTERM, and the SIGTERM can come first. Only
a second SIGINT stops at once (the last periodic checkpoint stays valid)."""
from __future__ import annotations

import os
import signal

import pytest

from disentangle.config import load_config
from disentangle.training import fit
from disentangle.training.callbacks import Callback
from disentangle.training.interrupt import DeferredInterrupt

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name == "nt", reason="POSIX signals")]


class Signals(Callback):
    """Sends ``signals`` to this process at the end of step ``at``; records the checkpoints."""

    def __init__(self, at: int, signals: list[int]) -> None:
        self.at, self.signals, self.checkpoints = at, signals, []

    def on_step_end(self, trainer, step, terms) -> None:
        if step == self.at:
            for signum in self.signals:
                os.kill(os.getpid(), signum)  # each handled before os.kill returns

    def on_checkpoint(self, trainer, step, path) -> None:
        self.checkpoints.append(step)


@pytest.mark.parametrize("order", [[signal.SIGTERM, signal.SIGINT], [signal.SIGINT, signal.SIGTERM]],
                         ids=["SIGTERM-then-SIGINT", "SIGINT-then-SIGTERM"])
def test_a_sigterm_and_a_sigint_in_either_order_checkpoint_the_step(tmp_path, tiny_overrides, order):
    signals = Signals(at=3, signals=order)
    with pytest.raises(KeyboardInterrupt):
        fit(load_config(None, tiny_overrides(tmp_path / "run", steps=8)), callbacks=[signals])
    assert signals.checkpoints == [3]


def test_a_second_sigint_after_a_sigterm_stops_at_once_without_a_checkpoint(tmp_path, tiny_overrides):
    signals = Signals(at=3, signals=[signal.SIGTERM, signal.SIGINT, signal.SIGINT])
    with pytest.raises(KeyboardInterrupt):
        fit(load_config(None, tiny_overrides(tmp_path / "run", steps=8)), callbacks=[signals])
    assert signals.checkpoints == []


def test_the_handler_counts_sigints_not_signals():
    handler = DeferredInterrupt()
    handler._handle(signal.SIGTERM, None)
    handler._handle(signal.SIGTERM, None)  # a SIGTERM after a stop request changes nothing
    handler._handle(signal.SIGINT, None)   # the first Ctrl-C: still a request
    assert handler.requested
    with pytest.raises(KeyboardInterrupt):
        handler._handle(signal.SIGINT, None)
    fresh = DeferredInterrupt()
    fresh._handle(signal.SIGINT, None)
    fresh._handle(signal.SIGTERM, None)
    with pytest.raises(KeyboardInterrupt):
        fresh._handle(signal.SIGINT, None)
