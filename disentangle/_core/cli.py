"""What every command line of the package shares: a quiet exit when its output pipe closes.

``python -m disentangle.zoo info NAME | head`` closes the pipe after ten lines; the next write (or
the final flush at exit) raises ``BrokenPipeError``, which Python would print as a traceback, and
again as "Exception ignored" while flushing ``sys.stdout`` at exit. :func:`run_main` runs a CLI's
``main`` and, on a closed pipe, points ``sys.stdout`` at ``os.devnull`` (so the flush at exit has
nowhere to fail) and exits with status 141 (128 + SIGPIPE), the status of a command killed by a
closed pipe (``yes | head``): quietly, as the standard tools do.

Each CLI module ends with the one line ``if __name__ == "__main__": run_main(main)``.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

#: the exit status of a command whose output pipe was closed (128 + SIGPIPE)
BROKEN_PIPE_STATUS = 141


def run_main(main: Callable[..., int | None], *args: object) -> NoReturn:
    """``sys.exit(main(*args))``, exiting quietly with :data:`BROKEN_PIPE_STATUS` when stdout's
    reader went away (module docstring)."""
    try:
        code = main(*args)
        sys.stdout.flush()  # the last buffered output fails here, not at interpreter exit
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(BROKEN_PIPE_STATUS)
    sys.exit(code)


def _silence_stdout() -> None:
    """Point stdout's file descriptor at os.devnull: the flush at exit then has nowhere to fail."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
