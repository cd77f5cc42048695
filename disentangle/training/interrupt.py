"""Ctrl-C or SIGTERM during training: finish the step, checkpoint it, then stop.

The handler only sets a flag; the training loop reads it at the step boundary, so a step in
progress (including FactorVAE's discriminator update) is never saved half done. An evaluation
(``train.eval_metrics``) in progress, or due at that step, is cut short instead (:class:`CutShort`):
its scores are not logged, and the step is checkpointed at once rather than minutes later, which a
scheduler's grace period may not allow.

* **SIGINT** (Ctrl-C): the first one asks the loop to stop after the step; a second one stops at
  once (the last periodic checkpoint stays valid). Only a second SIGINT: one that follows a SIGTERM
  is the first Ctrl-C, and changes nothing.
* **SIGTERM** (``kill PID``, a process manager, a local sweep handing on its own Ctrl-C to its
  workers): the same request as the first Ctrl-C, and never more than that, so a process that is sent
  both (a terminal's Ctrl-C reaches a sweep's workers, and the sweep passes it on) still checkpoints
  its step, in either order: the sweep's SIGTERM can reach a worker before the terminal's SIGINT
  does (a 300k campaign run lost 1,000 steps to that order, 2026-12-08, when SIGINT after SIGTERM
  still stopped at once). Only where SIGTERM would otherwise end the process (its default action), or where the
  handler in place says it yields to training (:func:`yields_to_training`): a handler someone else
  installed is left alone. submitit, for one, ignores SIGTERM on purpose and requeues a Slurm job on
  its own signal (the Slurm sweep backend defers both, below).
* **A signal deferred to the step boundary** (:func:`deferred_to_step_boundary`): a handler someone
  else installed, run after the step is checkpointed instead of in the middle of it. The Slurm
  sweep backend defers submitit's preemption and time-limit signal (``SIGUSR2``) this way: submitit's
  handler requeues the job and exits the process, which without this loses every step since the last
  periodic checkpoint. If the handler returns instead, training goes on: the backend defers SIGTERM
  too, whose submitit handler only logs it, so a SIGTERM preemption checkpoints the step before the
  SIGKILL that follows it.
* **SIGCONT** (the end of a stop: ``kill -STOP``/``-CONT``, Ctrl-Z then ``fg``): the time the process
  was stopped is not training time (:class:`PauseClock`), so ``wall_time_s`` and ``steps_per_s`` leave
  it out and ``log.jsonl`` records it as ``paused_s``. A handler someone else installed for SIGCONT
  still runs.
"""
from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger(__name__)

#: the signals :class:`DeferredInterrupt` turns into a stop at the next step boundary
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


#: signals whose handler :func:`deferred_to_step_boundary` wrapped, and the wrappers
_deferred: dict[int, _DeferredHandler] = {}


class _DeferredHandler:
    """A signal handler that runs ``handler`` at once outside training and, inside
    :meth:`Trainer.fit <disentangle.training.Trainer.fit>`, after the step is checkpointed."""

    def __init__(self, handler: Callable[[int, Any], Any]) -> None:
        self.handler = handler

    def __call__(self, signum: int, frame: Any) -> Any:
        return self.handler(signum, frame)


@contextlib.contextmanager
def deferred_to_step_boundary(*signums: int) -> Iterator[None]:
    """While inside, a signal in ``signums`` that arrives during training is handed to the handler
    installed now only at the next step boundary, once that step is checkpointed; outside training
    it is handed on at once. A signal without a Python handler (default or ignored) is left as is.

    For a job scheduler's "about to stop" signal whose handler exits the process: with submitit,
    ``with deferred_to_step_boundary(signal.SIGUSR2): trainer.fit()`` requeues the job with no step
    lost. An evaluation in progress or due at that step is cut short (module docstring), so the wait
    is at most the rest of one step, well inside the scheduler's warning (Slurm's, as submitit sets
    it: 90 s). Must be entered in the main thread; the previous handlers are restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("deferred_to_step_boundary installs signal handlers: enter it in the main thread")
    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            handler = signal.getsignal(signum)
            if callable(handler) and signum not in _deferred:
                wrapper = _DeferredHandler(handler)
                previous[signum] = signal.signal(signum, wrapper)
                _deferred[signum] = wrapper
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
            _deferred.pop(signum, None)


def yields_to_training(handler: Any) -> Any:
    """Mark a SIGTERM ``handler`` as one that training may replace while it runs (it is restored
    afterwards); returns the handler, so it can decorate a function."""
    handler.yields_to_training = True
    return handler


def _takes(signum: int, current: Any) -> bool:
    if signum == signal.SIGINT:
        return True
    return current in (signal.SIG_DFL, None) or getattr(current, "yields_to_training", False)


class CutShort(Exception):
    """Raised in work that a stop request ends at once (:meth:`DeferredInterrupt.cutting_short`):
    an evaluation, whose scores are then not logged. Its message names the signal."""


class DeferredInterrupt:
    """SIGINT and SIGTERM handler that asks the loop to stop at the next step boundary (SIGTERM
    only where the module docstring says).

    The first SIGINT or SIGTERM sets :attr:`requested` (the loop finishes the step, checkpoints it
    and calls :meth:`deliver`, which raises ``KeyboardInterrupt``); a second SIGINT raises
    ``KeyboardInterrupt`` at once; a SIGTERM after either, or the first SIGINT after a SIGTERM,
    changes nothing. A deferred signal
    (:func:`deferred_to_step_boundary`) sets :attr:`requested` too, and :meth:`deliver` hands it to
    its handler. Either, arriving inside :meth:`cutting_short`, also raises :class:`CutShort` there.
    Installed only in the main thread (Python delivers signals there); elsewhere the default
    behaviour is unchanged.
    """

    def __init__(self) -> None:
        self.requested = False
        self._stop = False  # SIGINT or SIGTERM: stop once the step is checkpointed
        self._interrupted = False  # a SIGINT came: the next one stops at once
        self._pending: list[tuple[int, _DeferredHandler]] = []
        self._previous: dict[int, Any] = {}
        self._cuttable = False  # inside cutting_short()

    @contextlib.contextmanager
    def cutting_short(self) -> Iterator[None]:
        """Work that a stop request ends at once with :class:`CutShort`: one that arrives inside, or
        one already made (the work is then not started). For work that changes no training state
        (an evaluation restores the random state it draws from)."""
        if self.requested:
            raise CutShort("a stop requested during the step")
        self._cuttable = True
        try:
            yield
        finally:
            self._cuttable = False

    def _cut_short(self, signum: int) -> None:
        if self._cuttable:
            self._cuttable = False
            raise CutShort(signal.Signals(signum).name)

    def _handle(self, signum: int, frame: Any) -> None:
        deferred = self._previous.get(signum)
        if isinstance(deferred, _DeferredHandler):
            if all(signum != pending for pending, _ in self._pending):
                self._pending.append((signum, deferred))
                logger.warning("%s: finishing the current step and checkpointing it before handling the signal",
                               signal.Signals(signum).name)
            self.requested = True
            self._cut_short(signum)
            return
        if self._stop:
            if signum == signal.SIGINT:
                if self._interrupted:
                    raise KeyboardInterrupt
                self._interrupted = True
                logger.warning("interrupt: the step in progress is being finished and checkpointed already "
                               "(press Ctrl-C again to stop at once, keeping the last periodic checkpoint)")
            return
        self.requested = self._stop = True
        if signum == signal.SIGINT:
            self._interrupted = True
            logger.warning(
                "interrupt: finishing the current step and checkpointing it "
                "(press Ctrl-C again to stop at once, keeping the last periodic checkpoint)"
            )
        else:
            logger.warning("%s: finishing the current step, checkpointing it and stopping",
                           signal.Signals(signum).name)
        self._cut_short(signum)

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED_SIGNALS:
                if signum not in _deferred and _takes(signum, signal.getsignal(signum)):
                    self._previous[signum] = signal.signal(signum, self._handle)
            for signum, wrapper in _deferred.items():
                if signal.getsignal(signum) is wrapper:
                    self._previous[signum] = signal.signal(signum, self._handle)

    def deliver(self) -> None:
        """Called once the step is checkpointed: hand each deferred signal to its handler (which may
        exit the process), then raise ``KeyboardInterrupt`` if SIGINT or SIGTERM asked to stop.
        Returns, with :attr:`requested` cleared, when neither stopped."""
        pending, self._pending = self._pending, []
        self.requested = self._stop
        for signum, deferred in pending:
            deferred.handler(signum, None)
        if self._stop:
            raise KeyboardInterrupt

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            # None: the handler was not set from Python; the default is the closest we can restore
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        self._previous = {}


class PauseClock:
    """The seconds a process spent stopped (SIGSTOP or SIGTSTP), learnt from the SIGCONT that ends
    the stop: a stopped process runs nothing, so the stop itself cannot be seen.

    The loop calls :meth:`mark` at every step boundary; on SIGCONT the pause is taken as the time
    since the last mark, so :attr:`seconds` is exact to within the work between two marks (a step,
    or a step and the evaluation due at it), counted as paused when the stop came in the middle of
    it. A SIGCONT sent to a process that was not stopped adds at most that much. The handler only
    adds to :attr:`seconds`, then calls the SIGCONT handler installed before it, if any. Installed
    only in the main thread (Python delivers signals there) and where SIGCONT exists; elsewhere
    :attr:`seconds` stays 0 and stops count as training time.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self._mark = time.perf_counter()
        self._previous: Any = None
        self._installed = False

    def mark(self) -> None:
        """The process is running now (a step boundary)."""
        self._mark = time.perf_counter()

    def _on_continue(self, signum: int, frame: Any) -> None:
        now = time.perf_counter()
        self.seconds += max(0.0, now - self._mark)
        self._mark = now
        if callable(self._previous):
            self._previous(signum, frame)

    def install(self) -> None:
        sigcont = getattr(signal, "SIGCONT", None)
        if sigcont is None or threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(sigcont, self._on_continue)
        self._installed = True
        self.mark()

    def uninstall(self) -> None:
        if self._installed:
            previous = self._previous
            signal.signal(signal.SIGCONT, signal.SIG_DFL if previous is None else previous)
            self._installed = False
