"""Atomic writes keep the old file whole when a write fails, and leave no temporary file."""
from __future__ import annotations

import pytest
import torch

from disentangle._core.atomic import atomic_write, atomic_write_bytes
from disentangle.training.checkpoint import content_digest


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "record.json"
    atomic_write_bytes(path, b"old")

    def half_then_fail(f):
        f.write(b"new, half written")
        raise ZeroDivisionError("the writer failed")

    with pytest.raises(ZeroDivisionError, match="the writer failed"):
        atomic_write(path, half_then_fail)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_the_checkpoint_digest_covers_dtype_shape_and_bytes():
    zeros = torch.zeros(4, dtype=torch.float32)
    digest = content_digest({"w": zeros})
    assert content_digest({"w": torch.zeros(4, dtype=torch.int32)}) != digest  # the same 16 bytes
    assert content_digest({"w": zeros.reshape(2, 2)}) != digest
    assert content_digest({"w": zeros.clone()}) == digest
