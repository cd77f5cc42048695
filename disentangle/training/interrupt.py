"""Ctrl-C during training: finish the step, checkpoint it, then stop.

The handler only sets a flag; the training loop reads it at the step boundary, so a step in
progress (including FactorVAE's discriminator update) is never saved half done.
"""
from __future__ import annotations

import logging
import signal
import threading
from typing import Any

logger = logging.getLogger(__name__)

class DeferredInterrupt:
    """SIGINT handler that asks the loop to stop at the next step boundary.

    The first Ctrl-C sets :attr:`requested` (the loop finishes the step, checkpoints it and raises
    ``KeyboardInterrupt``); a second one raises ``KeyboardInterrupt`` at once. Installed only in the
    main thread (Python delivers signals there); elsewhere the default behaviour is unchanged.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        logger.warning(
            "interrupt: finishing the current step and checkpointing it "
            "(press Ctrl-C again to stop at once, keeping the last periodic checkpoint)"
        )

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
