"""What every command line of the package shares: a quiet exit when its output pipe closes.

``python -m disentangle.zoo info NAME | head`` closes the pipe after ten lines; the next write (or
the final flush at exit) raises ``BrokenPipeError``, which Python would print as a traceback, and
again as "Exception ignored" while flushing ``sys.stdout`` at exit. :func:`run_main` runs a CLI's
``main`` and, on a closed pipe, points ``sys.stdout`` at ``os.devnull`` (so the flush at exit has
nowhere to fail) and exits with status 141 (128 + SIGPIPE), the status of a command killed by a
closed pipe (``yes | head``): quietly, as the standard tools do.

Each CLI module ends with the one line ``if __name__ == "__main__": run_main(main)``, and reports
the errors meant for the user with :func:`report` (one paragraph on stderr, the exit status of the
error's kind: :data:`disentangle.errors.EXIT_CODES`).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import NoReturn

from ..errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, DisentangleError

#: the exit status of a command whose output pipe was closed (128 + SIGPIPE)
BROKEN_PIPE_STATUS = 141

#: what :func:`report` catches: the package's own errors, and a path the user gave that does not exist
REPORTED = (DisentangleError, FileNotFoundError)


def exit_status(error: BaseException) -> int:
    """The exit status of an error (:data:`disentangle.errors.EXIT_CODES`): its class's
    ``exit_code``; a missing path is bad input; Ctrl-C is 130."""
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(error, DisentangleError):
        return error.exit_code
    if isinstance(error, FileNotFoundError):
        return EXIT_BAD_INPUT
    return EXIT_INTERNAL


def report(error: BaseException, interrupted: str = "interrupted.") -> int:
    """Print ``error`` for the user (``error: MESSAGE``, or ``interrupted`` for Ctrl-C) on stderr,
    under torchrun on rank 0 only, and return its exit status."""
    if os.environ.get("RANK", "0") == "0":
        message = interrupted if isinstance(error, KeyboardInterrupt) else f"error: {error}"
        print(message, file=sys.stderr)
    return exit_status(error)


def run_main(main: Callable[..., int | None], *args: object) -> NoReturn:
    """``sys.exit(main(*args))``, exiting quietly with :data:`BROKEN_PIPE_STATUS` when stdout's
    reader went away (module docstring). The package's own warnings (a checkpoint that fell back
    to the previous one, a deprecated spelling the command was given, ...) print as
    ``warning: MESSAGE``, without a file and line."""
    warnings.formatwarning = _format_warning
    try:
        code = main(*args)
        sys.stdout.flush()  # the last buffered output fails here, not at interpreter exit
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(BROKEN_PIPE_STATUS)
    sys.exit(code)


_PLAIN_FORMAT = warnings.formatwarning


def _format_warning(message, category, filename, lineno, line=None) -> str:
    if f"{os.sep}disentangle{os.sep}" in str(filename) and issubclass(category, (UserWarning, DeprecationWarning)):
        return f"warning: {message}\n"
    return _PLAIN_FORMAT(message, category, filename, lineno, line)


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


THREADS_HELP = ("CPU threads: auto (default; the CPUs this process may use, from its affinity mask and cgroup "
                "quota, or OMP_NUM_THREADS when set) or a number; 1 on a CPU shared with other jobs")


def add_threads_option(parser) -> None:
    """``--threads N|auto`` on a command line (:func:`apply_threads_option` applies it)."""
    parser.add_argument("--threads", default="auto", metavar="N|auto", help=THREADS_HELP)


def apply_threads_option(value: str) -> str:
    """Check and apply ``--threads`` (a ``ConfigError`` for a bad value) and return the line that
    says what was chosen and why, OpenMP's wait policy included."""
    from .threads import apply_threads, check_threads_setting, wait_policy

    choice = apply_threads(check_threads_setting("--threads", value))
    policy, reason = wait_policy()
    return f"{choice.threads} CPU threads ({choice.reason}), OpenMP wait policy {policy} ({reason})"


IMPORT_HELP = ("a module of yours that registers backbones, objectives, datasets or metrics: a dotted module "
               "name or a .py file (repeatable; not a folder: name a package that has an __init__.py, or a "
               "file in it), imported before the config or the model is read")


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable) on a command line (:func:`apply_import_option` imports them)."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=IMPORT_HELP)


def apply_import_option(imports: list[str]) -> None:
    """Import the modules of ``--import`` (:func:`disentangle._core.plugins.import_plugins`)."""
    from .plugins import import_plugins

    import_plugins(list(imports), where="--import")


# ---------------------------------------------------------------------------- logging
class _StderrHandler(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a record is emitted (a test's
    capture, a notebook's redirect), not the one of the moment it was made."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler sets it at construction
        pass


class _Format(logging.Formatter):
    """``MESSAGE`` for information, ``warning: MESSAGE`` and ``error: MESSAGE`` above, ``debug:
    MESSAGE (logger)`` below: what the command lines print."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            return f"error: {message}"
        if record.levelno >= logging.WARNING:
            return f"warning: {message}"
        if record.levelno < logging.INFO:
            return f"debug: {message} ({record.name})"
        return message


def add_logging_options(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` (warnings and errors only) and ``--verbose`` (debug messages too) on a command
    line, or on each of its subcommands (:func:`setup_logging` applies them)."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    targets = list(subcommands[0].choices.values()) if subcommands else [parser]
    for target in targets:
        group = target.add_mutually_exclusive_group()
        group.add_argument("--quiet", "-q", action="store_true", help="log warnings and errors only, and no progress bars; the command's result (scores, the run folder) still goes to stdout")
        group.add_argument("--verbose", "-v", action="store_true", help="print debug messages too")


def show_progress(args: argparse.Namespace) -> bool:
    """Whether a command draws its progress bars: not with ``--no-progress``, nor with ``--quiet``
    (warnings and errors only)."""
    return not (getattr(args, "no_progress", False) or getattr(args, "quiet", False))


def setup_logging(args: argparse.Namespace | None = None) -> None:
    """Show the package's log messages (``logging.getLogger("disentangle")``) on stderr: information
    and above by default, warnings and above with ``--quiet``, everything with ``--verbose``. A
    handler already installed on that logger (by a previous call) is replaced."""
    level = logging.INFO
    if args is not None and getattr(args, "quiet", False):
        level = logging.WARNING
    elif args is not None and getattr(args, "verbose", False):
        level = logging.DEBUG
    package = logging.getLogger("disentangle")
    for handler in list(package.handlers):
        if isinstance(handler, _StderrHandler):
            package.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(_Format())
    package.addHandler(handler)
    package.setLevel(level)
