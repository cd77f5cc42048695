"""Atomic file writes: every file that marks progress or completion is written through here.

The content goes to a temporary file in the same folder, which is flushed and fsynced, then renamed
over the target with ``os.replace`` (atomic on POSIX and Windows), and the folder is fsynced so the
rename survives a power cut. A crash or a ``kill -9`` at any point leaves the old file or the new
one, never a torn one; the temporary file is removed when the write fails.

Files get the usual ``0o666 & ~umask`` mode: ``tempfile.mkstemp`` would leave them owner-only,
which is surprising for shared reports and wrong for files shipped in a wheel.
"""
from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


def fsync_dir(folder: str | Path) -> None:
    """fsync a folder (its entries: a rename into it), where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # not supported on every platform/filesystem
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None], *, make_parents: bool = True) -> Path:
    """Call ``write(file)`` on a temporary binary file next to ``path``, then rename it over ``path``."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # honours the umask
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, value: Any, *, indent: int = 2) -> Path:
    """Write ``value`` as JSON (with a final newline) to ``path`` atomically."""
    return atomic_write_text(path, json.dumps(value, indent=indent) + "\n")
