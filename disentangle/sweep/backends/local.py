"""The local backend: a pool of ``workers`` spawned processes (``concurrent.futures``), each with
``threads_per_run`` torch threads, running runs one after another.

* Runs are submitted grouped by dataset, so a worker mostly reuses the dataset it built.
* Thread counts are set in the environment of the spawned workers (``OMP_NUM_THREADS``,
  ``MKL_NUM_THREADS``, ``NUMBA_NUM_THREADS``) before they start, and with ``torch.set_num_threads``.
* Workers die with the parent: on Linux each worker asks the kernel for ``SIGKILL`` when its parent
  dies (``prctl(PR_SET_PDEATHSIG)``), so a ``kill -9`` of the sweep stops its training at once (the
  runs lose the steps since their last checkpoint). Elsewhere an orphaned worker finishes its run;
  the run's lock keeps a rerun from training it meanwhile.
* A worker that dies (killed, out of memory) breaks the pool; the runs without an outcome are given
  to a new pool, at most ``max_retries`` times; their ``run_one`` resumes them from checkpoints.
* Ctrl-C reaches every process of the group: each worker's trainer finishes its step, checkpoints
  and stops; a shared stop flag, set by the parent and by every interrupted worker, keeps the
  workers from starting any queued run (the pool hands a worker its next run before the current
  one ends), so the sweep stops as soon as the runs in progress are checkpointed. A second Ctrl-C
  stops at once: the workers are killed (their last periodic checkpoints stay valid).
* A signal sent to the sweep's process alone does the same: SIGINT (``kill -INT PID``) or SIGTERM
  (``kill PID``, a process manager) makes the parent set the stop flag and send each worker SIGTERM,
  which its trainer takes as the first Ctrl-C (:mod:`disentangle.training.interrupt`): the runs in
  progress are checkpointed at the step they reached. A worker between runs starts no other; one
  building a dataset or computing metrics stops there (the run resumes from its checkpoint).
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ...training.interrupt import yields_to_training
from ..files import LOCK_NAME, RunState
from ..runner import RunOutcome, RunTask, configure_worker, run_one

CRASH_MESSAGE = (
    "its worker process died repeatedly (killed, out of memory, or unable to start: workers are spawned, so "
    "a script that calls disentangle.sweep.run must do it under if __name__ == '__main__':)"
)
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")



logger = logging.getLogger(__name__)

def available_cores() -> int:
    """The CPUs the workers share (:func:`disentangle._core.threads.usable_cpus`: the affinity mask and
    the cgroup's CPU quota, so a container limited to 2 CPUs on a larger host gives each of 2 workers
    one thread, not half the host's)."""
    from ..._core.threads import usable_cpus

    return usable_cpus()[0]


@contextlib.contextmanager
def thread_environment(threads: int) -> Iterator[None]:
    """Set the thread-count variables while worker processes are spawned (they copy the environment)."""
    saved = {k: os.environ.get(k) for k in _THREAD_VARIABLES}
    os.environ.update({k: str(threads) for k in _THREAD_VARIABLES})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except OSError:  # no libc.so.6 (e.g. musl): fall back to the run locks
            return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


_STOP = None  # in a worker: the pool's stop flag (a multiprocessing Event)
_BUSY = False  # in a worker: whether it is running a task


def _init_worker(threads: int, parent_pid: int, stop) -> None:
    global _STOP
    die_with_parent(parent_pid)
    # Ctrl-C reaches the whole process group; the trainer checkpoints on it and the parent stops.
    # SIGTERM comes from the parent (or from whoever stops the sweep): while training, the
    # trainer's own handler takes it; otherwise _terminate_worker does.
    signal.signal(signal.SIGTERM, _terminate_worker)
    configure_worker(threads)
    _STOP = stop


@yields_to_training  # while a run trains, its trainer takes SIGTERM (checkpoint, then stop)
def _terminate_worker(signum, frame) -> None:
    """SIGTERM in a worker outside training: start no other run, and stop the one being set up or
    evaluated (its checkpoint stays; a rerun finishes it)."""
    if _STOP is not None:
        _STOP.set()
    if _BUSY:
        raise KeyboardInterrupt


def _run_unless_stopped(task: RunTask) -> RunOutcome:
    """``run_one(task)`` in a worker, unless the sweep is stopping: a run handed to the worker
    after Ctrl-C is not started."""
    global _BUSY
    if _STOP is not None and _STOP.is_set():
        raise KeyboardInterrupt
    _BUSY = True
    try:
        return run_one(task)
    except KeyboardInterrupt:
        if _STOP is not None:
            _STOP.set()  # this worker saw Ctrl-C: no worker starts another run
        raise
    finally:
        _BUSY = False


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """In the main thread, make the first SIGTERM raise ``KeyboardInterrupt`` (a later one is
    ignored), so ``kill PID`` stops the sweep as Ctrl-C does, and take SIGINT where it is ignored
    (a sweep started with ``&`` from a script: the shell ignores SIGINT there, Python keeps it
    ignored), as the trainer does, so ``kill -INT PID`` stops the sweep and not only its runs; the
    previous handlers are restored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def handle(signum, frame) -> None:
        nonlocal fired
        if not fired:
            fired = True
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handle)
    previous_sigint = signal.getsignal(signal.SIGINT)
    takes_sigint = previous_sigint in (signal.SIG_IGN, None)
    if takes_sigint:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if takes_sigint:
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous_sigint is None else previous_sigint)


def run_local(tasks: list[RunTask], options, report, folder=None) -> None:
    """Run ``tasks`` on a pool of ``options.workers`` processes; ``report`` each outcome."""
    workers = min(options.workers or 1, max(1, len(tasks)))
    threads = options.threads_per_run or max(1, available_cores() // workers)
    pending = {t.run_id: t for t in tasks}
    with terminate_as_interrupt():
        _run_with_retries(options, workers, threads, pending, report)


class _PoolBroke(Exception):
    """The pool broke (a worker died); ``pids`` are the workers it had."""

    def __init__(self, pids: set[int]) -> None:
        super().__init__(f"a worker of {sorted(pids)} died")
        self.pids = pids


def _running_when_it_broke(pending: dict, pids: set[int]) -> list:
    """The runs a dead pool's workers were training: each run folder's ``.lock`` holds the pid of the
    process that took it (:class:`~disentangle.sweep.files.RunLock`)."""
    found = []
    for task in pending.values():
        try:
            holder = (Path(task.run_dir) / LOCK_NAME).read_text().split("@", 1)[0].strip()
        except OSError:
            continue
        if holder.isdigit() and int(holder) in pids:
            found.append(task)
    return found


def _run_with_retries(options, workers: int, threads: int, pending: dict, report) -> None:
    """Run ``pending`` until each has an outcome. When a worker dies (killed, out of memory) the pool
    breaks and every run without an outcome is started again in a new pool; only the runs that were
    training when it broke are charged an attempt, and one charged more than ``max_retries`` times
    is reported crashed, so one run that kills its worker does not take the others with it. Workers
    that die before any run starts (they cannot start) charge every run."""
    attempts: dict[str, int] = {}
    while pending:
        try:
            _run_pool(list(pending.values()), workers, threads, pending, report)
        except _PoolBroke as broke:
            culprits = _running_when_it_broke(pending, broke.pids) or list(pending.values())
            for task in culprits:
                attempts[task.run_id] = attempts.get(task.run_id, 0) + 1
                if attempts[task.run_id] > options.max_retries:
                    pending.pop(task.run_id, None)
                    report(RunOutcome(task.run_id, RunState.CRASHED, 0.0, CRASH_MESSAGE, task.describe()))
            if pending:
                named = ", ".join(t.run_id for t in culprits[:4]) + (" ..." if len(culprits) > 4 else "")
                logger.warning(
                    f"a worker process died while training {named}; restarting the pool for the {len(pending)} "
                    f"runs without an outcome (each run is tried {options.max_retries + 1} times at most)"
                )


def _run_pool(tasks: list[RunTask], workers: int, threads: int, pending: dict, report) -> None:
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    with thread_environment(threads):
        executor = ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_init_worker,
            initargs=(threads, os.getpid(), stop),
        )
        # spawned workers start during submit, inside the thread environment
        futures = {executor.submit(_run_unless_stopped, task): task for task in tasks}
    pids = set(getattr(executor, "_processes", None) or {})  # the workers, started by the submits
    try:
        for future in as_completed(futures):
            try:
                outcome = future.result()
            except BrokenProcessPool:  # the caller restarts the pool
                raise _PoolBroke(pids) from None
            pending.pop(outcome.run_id, None)
            report(outcome)
    except KeyboardInterrupt:
        stop.set()
        # a terminal's Ctrl-C reached the workers too; a signal sent to this process alone did not
        _signal_workers(executor, signal.SIGTERM)
        try:  # the workers checkpoint the runs in progress and start no other
            executor.shutdown(wait=True, cancel_futures=True)
        except KeyboardInterrupt:  # a second Ctrl-C: stop now
            _kill_workers(executor)
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _signal_workers(executor: ProcessPoolExecutor, signum: int) -> None:
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        with contextlib.suppress(ProcessLookupError, TypeError):  # exited, or not started (pid None)
            os.kill(process.pid, signum)


def _kill_workers(executor: ProcessPoolExecutor) -> None:
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            process.kill()
