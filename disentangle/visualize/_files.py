"""Atomic file writes for pictures: a temporary file in the same folder, fsync, then rename."""
from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import BinaryIO, Callable


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(file)`` on a temporary file next to ``path`` and rename it over ``path``.

    A crash or kill leaves the old file or the new one, never a torn picture; rerunning rewrites
    the same file. The folder must exist (callers create it once all inputs are checked).
    """
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    # os.open with mode 0o666 honours the umask (mkstemp would make the picture owner-only)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
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
    return path
