"""Whether a command can write where it was told to, asked before it does any work.

A command that trains, scores or analyses for minutes and only then finds its output folder
read-only (a read-only mount, another user's folder, a folder under a file) loses that work. Each
command line checks its destinations first with :func:`unwritable_reason` (which creates nothing
that stays: it makes and removes one empty file in the nearest existing folder) and refuses in one
paragraph with :func:`check_writable`.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import ConfigError


def nearest_existing(path: Path) -> Path | None:
    """``path`` itself or the nearest of its parents that exists (None when none can be looked at)."""
    for candidate in (path, *path.parents):
        try:
            if candidate.exists():
                return candidate
        except OSError:  # a folder this user may not look into
            return None
    return None


def file_in_the_way(path: Path) -> Path | None:
    """The file that keeps ``path`` from being (or being created as) a folder: ``path`` itself or the
    nearest of its existing parents when that is a file; None when ``path`` is, or can be made, a
    folder (or when no parent can be looked at: the command's own mkdir then says why)."""
    existing = nearest_existing(path)
    return None if existing is None or existing.is_dir() else existing


def unwritable_reason(folder: str | os.PathLike) -> str | None:
    """Why files cannot be written in ``folder`` (created when missing), or None when they can.

    Looks at ``folder`` or, when it does not exist yet, the nearest existing folder above it (where
    it would be created): a file there, or a folder in which an empty file cannot be created (read-only
    file system, no permission). The probe file is removed at once.
    """
    folder = Path(folder)
    existing = nearest_existing(folder)
    if existing is None:
        return None  # nothing to look at: the command's own mkdir reports what it finds
    if not existing.is_dir():
        return f"'{existing}' is a file" if existing != folder else "it is a file"
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=existing)
    except OSError as err:
        where = "" if existing == folder else f" (the folder it would be created in, '{existing}')"
        return f"no file can be created in '{existing}'{where}: {err.strerror or err}"
    os.close(fd)
    os.unlink(probe)
    return None


def check_writable(folder: str | os.PathLike, what: str, example: str) -> None:
    """Raise :class:`~disentangle.ConfigError` (one paragraph) when :func:`unwritable_reason` finds
    ``folder`` unwritable: ``what`` names the destination as the user gave it (``"--out 'x'"``) and
    ``example`` is a destination to give instead."""
    reason = unwritable_reason(folder)
    if reason is not None:
        raise ConfigError(
            f"{what} cannot be written: {reason}. Nothing was done. Give a place this user can write "
            f"(created when missing), e.g. {example}."
        )
