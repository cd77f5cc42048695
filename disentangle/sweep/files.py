"""The files of a sweep folder, the states of its runs, atomic writes, the locks and ``results.csv``.

Layout of ``DIR``::

    sweep.json             the plan: every run of the sweep files run into DIR (id, seed, grid
                           values) and, per sweep file, its runs, metrics and metric settings
                           (under the key ``studies``, its name before 0.2, kept for compatibility)
    .plan.lock             held (fcntl.flock) while sweep.json is read, changed and rewritten
    results.csv            one row per finished run (rewritten atomically after every finished run;
                           its columns: :mod:`disentangle.metrics.results`)
    .results.lock          held while results.csv is built and rewritten
    runs/<id>/             an ordinary run folder (config.yaml, checkpoint.pt, log.jsonl, ...) plus
        metrics.json       the scores and the settings each was computed with, written atomically
                           and last: its presence means finished
        failed.json        the last failure (error type and message, its last line, when)
        traceback.txt      the full traceback of that failure
        .lock              held (fcntl.flock) by the process training the run; it holds its pid
    slurm/                 submitit's job files (Slurm backend only)

The names the results table reads (``sweep.json``, ``runs/``, ``metrics.json``, ``results.csv``)
are :mod:`disentangle.metrics.results`'s, re-exported here with the sweep's own.
"""
from __future__ import annotations

import errno
import os
import socket
import time
from enum import Enum
from pathlib import Path
from typing import Any

from .._core.atomic import atomic_write_json, atomic_write_text  # noqa: F401  (re-exported for the sweep modules)
from ..metrics.results import (  # noqa: F401  (re-exported for the sweep modules)
    METRICS_NAME,
    PLAN_NAME,
    RESULTS_NAME,
    RUNS_DIR,
    ResultsTable,
    read_json,
    write_table,
)
from ..metrics.results import build_table as _build_table
from .ids import EXCLUDED_KEYS

FAILED_NAME = "failed.json"
TRACEBACK_NAME = "traceback.txt"
LOCK_NAME = ".lock"
PLAN_LOCK_NAME = ".plan.lock"
RESULTS_LOCK_NAME = ".results.lock"
#: how long a process waits for the plan's or the results' lock before giving up (they are held
#: for the milliseconds of one read-modify-write)
FOLDER_LOCK_WAIT = 120.0


class RunState(str, Enum):
    """The state of a run of a sweep, or what :func:`~disentangle.sweep.runner.run_one` did with it.

    A ``str``: a state compares equal to its value (``RunState.FINISHED == "finished"``) and is
    printed, written to JSON and CSV as that value.

    States of a run folder (:func:`~disentangle.sweep.api.run_state`, ``status``): ``finished``
    (``metrics.json`` holds the requested metrics), ``running`` (another process holds its lock),
    ``partial`` (a checkpoint, or metrics still to compute), ``not started``, ``failed``
    (``failed.json``). Outcomes of a run (:class:`~disentangle.sweep.runner.RunOutcome`):
    ``finished``, ``skipped`` (finished before), ``failed``, ``busy`` (locked by another process),
    ``crashed`` (the worker died; set by the backends).
    """

    FINISHED = "finished"
    RUNNING = "running"
    PARTIAL = "partial"
    NOT_STARTED = "not started"
    FAILED = "failed"
    SKIPPED = "skipped"
    BUSY = "busy"
    CRASHED = "crashed"

    __str__ = str.__str__  # the value, on every Python version (3.12 changed Enum's str/format)
    __format__ = str.__format__


#: the states of a run folder, in the order ``status`` counts them
STATES = (RunState.FINISHED, RunState.RUNNING, RunState.PARTIAL, RunState.NOT_STARTED, RunState.FAILED)


class RunLock:
    """An exclusive ``fcntl.flock`` on ``<run folder>/.lock``.

    The kernel releases it when its holder exits, however it exits (``kill -9`` included), so a
    stale lock is impossible, and two processes (say, an orphaned worker of a killed sweep and the
    rerun) can never train the same run at once. The holder writes ``pid@host`` into the file for
    ``status``. POSIX only; on NFS it needs working ``flock`` (NFSv4, or ``local_lock=none``).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self, timeout: float = 0.0, poll: float = 0.2) -> bool:
        """Take the lock, waiting up to ``timeout`` seconds; False if another process holds it."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(poll)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}@{socket.gethostname()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class FolderLock(RunLock):
    """A :class:`RunLock` that waits (up to :data:`FOLDER_LOCK_WAIT` seconds) and raises when it
    cannot be taken: for the short read-modify-writes of a sweep folder's shared files."""

    def __init__(self, path: str | Path, what: str, timeout: float | None = None) -> None:
        super().__init__(path)
        self.what = what
        self.timeout = FOLDER_LOCK_WAIT if timeout is None else timeout

    def __enter__(self) -> FolderLock:
        if not self.acquire(timeout=self.timeout, poll=0.05):
            from ..errors import DisentangleError

            holder = ""
            try:
                holder = self.path.read_text().strip()
            except OSError:
                pass
            raise DisentangleError(
                f"Could not lock {self.path} to update {self.what} within {self.timeout:.0f} s: "
                f"{holder or 'another process'} holds it. If that process is stuck, stop it and run again."
            )
        return self


def lock_holder(run_dir: str | Path) -> str | None:
    """``pid@host`` of the process holding the run's lock, or None when nobody holds it."""
    import fcntl

    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return path.read_text().strip() or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- results.csv
def build_table(out_dir: str | Path) -> ResultsTable:
    """The results table of a sweep folder (:func:`disentangle.metrics.results.build_table`; the
    config keys that do not change a run id, :data:`~disentangle.sweep.ids.EXCLUDED_KEYS`, are
    never columns)."""
    return _build_table(out_dir, ignore=EXCLUDED_KEYS)


def write_results(out_dir: str | Path, output: str | Path | None = None) -> ResultsTable:
    """Build the table and write it (atomically) to ``output`` (default ``DIR/results.csv``).

    Writing the sweep's own ``results.csv``, the table is built and written under the folder's
    results lock, so the last writer always wrote the newest table."""
    out_dir = Path(out_dir)
    if output is not None:
        return write_table(build_table(out_dir), output)
    with FolderLock(out_dir / RESULTS_LOCK_NAME, "the results table"):
        return write_table(build_table(out_dir), out_dir / RESULTS_NAME)
