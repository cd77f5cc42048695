"""Atomic file writes for the report: a temporary file in the same folder, fsync, ``os.replace``."""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .._core.atomic import atomic_write_bytes, atomic_write_text  # noqa: F401  (used by the report writers)


def format_cell(value: Any) -> str:
    """A CSV cell: floats with full precision (``repr``), NaN and None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if value != value else repr(value)
    return str(value)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(list(header))
    for row in rows:
        writer.writerow([format_cell(v) for v in row])
    return buffer.getvalue()


def write_csv(path: str | Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    atomic_write_text(path, csv_text(header, rows))
