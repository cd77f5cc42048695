"""Ctrl-C or SIGTERM during training: finish the step, checkpoint it, then stop.

The handler only sets a flag; the training loop reads it at the step boundary, so a step in
progress (including FactorVAE's discriminator update) is never saved half done.

* **SIGINT** (Ctrl-C): the first one asks the loop to stop after the step; a second one stops at
  once (the last periodic checkpoint stays valid).
* **SIGTERM** (``kill PID``, a process manager, a local sweep handing on its own Ctrl-C to its
  workers): the same request as the first Ctrl-C, and never more than that, so a process that is sent
  both (a terminal's Ctrl-C reaches a sweep's workers, and the sweep passes it on) still checkpoints
  its step. Only where SIGTERM would otherwise end the process (its default action), or where the
  handler in place says it yields to training (:func:`yields_to_training`): a handler someone else
  installed is left alone. submitit, for one, ignores SIGTERM on purpose and requeues a Slurm job on
  its own signal.
"""
from __future__ import annotations

import logging
import signal
import threading
from typing import Any

logger = logging.getLogger(__name__)

#: the signals :class:`DeferredInterrupt` turns into a stop at the next step boundary
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def yields_to_training(handler: Any) -> Any:
    """Mark a SIGTERM ``handler`` as one that training may replace while it runs (it is restored
    afterwards); returns the handler, so it can decorate a function."""
    handler.yields_to_training = True
    return handler


def _takes(signum: int, current: Any) -> bool:
    if signum == signal.SIGINT:
        return True
    return current in (signal.SIG_DFL, None) or getattr(current, "yields_to_training", False)


class DeferredInterrupt:
    """SIGINT and SIGTERM handler that asks the loop to stop at the next step boundary (SIGTERM
    only where the module docstring says).

    The first SIGINT or SIGTERM sets :attr:`requested` (the loop finishes the step, checkpoints it
    and raises ``KeyboardInterrupt``); a SIGINT after that raises ``KeyboardInterrupt`` at once, a
    SIGTERM after that changes nothing. Installed only in the main thread (Python delivers signals
    there); elsewhere the default behaviour is unchanged.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        self.requested = True
        if signum == signal.SIGINT:
            logger.warning(
                "interrupt: finishing the current step and checkpointing it "
                "(press Ctrl-C again to stop at once, keeping the last periodic checkpoint)"
            )
        else:
            logger.warning("%s: finishing the current step, checkpointing it and stopping",
                           signal.Signals(signum).name)

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED_SIGNALS:
                if _takes(signum, signal.getsignal(signum)):
                    self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            # None: the handler was not set from Python; the default is the closest we can restore
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        self._previous = {}
