"""disentangle._core.hardware: the allocator tuning of CPU runs."""
from __future__ import annotations

import platform

import pytest

from disentangle._core import hardware


def test_keep_freed_memory_can_be_turned_off_and_runs_once(monkeypatch):
    monkeypatch.setattr(hardware, "_tuned", None)
    monkeypatch.setenv(hardware.MALLOC_TUNING_ENV, "0")
    assert hardware.keep_freed_memory() == "unchanged (DISENTANGLE_MALLOC_TUNING=0)"
    monkeypatch.delenv(hardware.MALLOC_TUNING_ENV)
    assert hardware.keep_freed_memory() == "unchanged (DISENTANGLE_MALLOC_TUNING=0)"  # once per process


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_keep_freed_memory_sets_glibc_thresholds_that_glibc_accepts(monkeypatch):
    monkeypatch.setattr(hardware, "_tuned", None)
    monkeypatch.delenv(hardware.MALLOC_TUNING_ENV, raising=False)
    done = hardware.keep_freed_memory()
    assert done == "glibc: mmap threshold 32 MiB, trim threshold 1024 MiB"  # mallopt returned 1 for both
