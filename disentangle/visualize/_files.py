"""Atomic file writes for pictures (see :mod:`disentangle._core.atomic`)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .._core.atomic import atomic_write as _atomic_write


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(file)`` on a temporary file next to ``path`` and rename it over ``path``.

    The folder must exist (callers create it once all inputs are checked).
    """
    return _atomic_write(path, write, make_parents=False)
