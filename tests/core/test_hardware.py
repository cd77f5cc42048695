"""disentangle._core.hardware: the allocator tuning of CPU runs, and where bf16 is fast."""
from __future__ import annotations

import platform

import pytest
import torch

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


def _fake_cpu(monkeypatch, vendor: str, flags: str) -> None:
    """This process sees a CPU of ``vendor`` with ``flags`` (``/proc/cpuinfo`` and torch's probes)."""
    fields = {"vendor_id": vendor, "model name": "a CPU", "flags": flags}
    monkeypatch.setattr(hardware, "_cpuinfo", lambda cpuinfo="/proc/cpuinfo": dict(fields))
    flag_set = set(flags.split())
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: "avx512_bf16" in flag_set, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: "amx_tile" in flag_set, raising=False)
    monkeypatch.delenv(hardware.CPU_BF16_ENV, raising=False)
    monkeypatch.setattr(hardware, "accelerator_available", lambda: False)


@pytest.mark.parametrize("vendor, flags, native, fast", [
    # an Intel Xeon without AMX (family/model 6/207 in a VM): bf16 trained 0.62-0.71x as fast as fp32
    ("GenuineIntel", "avx2 avx512f avx512_bf16", True, False),
    # the same with AMX tiles: oneDNN's bf16 kernels are built for them
    ("GenuineIntel", "avx2 avx512f avx512_bf16 amx_tile amx_bf16", True, True),
    # the AMD EPYCs with AVX512-BF16: 1.6-1.9x faster than fp32
    ("AuthenticAMD", "avx2 avx512f avx512_bf16", True, True),
    # another vendor's AVX512-BF16 (or one /proc/cpuinfo does not name): not measured
    ("HygonGenuine", "avx2 avx512f avx512_bf16", True, False),
    # no native bf16: emulated, several times slower
    ("AuthenticAMD", "avx2", False, False),
    ("GenuineIntel", "avx2 avx512f", False, False),
])
def test_auto_precision_takes_bf16_only_where_it_was_measured_faster(monkeypatch, vendor, flags, native, fast):
    _fake_cpu(monkeypatch, vendor, flags)
    assert hardware.native_cpu_bf16() is native
    assert hardware.fast_cpu_bf16() is fast
    assert hardware.auto_precision("cpu") == ("bf16" if fast else "fp32")
    assert hardware.auto_precision("auto") == ("bf16" if fast else "fp32")
    monkeypatch.setattr(hardware, "accelerator_available", lambda: True)
    assert hardware.auto_precision("auto") == "fp32"  # a GPU: not measured


def test_the_environment_overrides_where_bf16_is_fast(monkeypatch):
    _fake_cpu(monkeypatch, "GenuineIntel", "avx2 avx512f avx512_bf16")
    monkeypatch.setenv(hardware.CPU_BF16_ENV, "1")  # what auto picks on an AMX or AMD machine
    assert hardware.fast_cpu_bf16() and hardware.auto_precision("cpu") == "bf16"
    _fake_cpu(monkeypatch, "AuthenticAMD", "avx2 avx512f avx512_bf16")
    monkeypatch.setenv(hardware.CPU_BF16_ENV, "0")
    assert not hardware.fast_cpu_bf16() and hardware.auto_precision("cpu") == "fp32"


def test_the_cpu_vendor_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2\n\nprocessor\t: 1\n")
    assert hardware.cpu_vendor(str(cpuinfo)) == "AuthenticAMD"
    assert hardware.cpu_vendor(str(tmp_path / "absent")) is None
