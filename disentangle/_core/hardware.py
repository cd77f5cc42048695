"""What the machine offers, as the defaults that depend on it need to know: native bf16 on the CPU,
an accelerator, the CPU's capability level.

``DISENTANGLE_CPU_BF16=0`` or ``=1`` in the environment overrides the bf16 detection (to reproduce on
one machine what ``train.precision: auto`` picks on another, or to keep a test suite's runs in fp32
on every machine).
"""
from __future__ import annotations

import os

import torch

#: the environment variable that overrides :func:`native_cpu_bf16`
CPU_BF16_ENV = "DISENTANGLE_CPU_BF16"


def _cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return set()


def native_cpu_bf16() -> bool:
    """Whether the CPU computes bf16 natively (AVX512-BF16 or AMX), where bf16 autocast is fast;
    elsewhere it is emulated and slower than fp32. :data:`CPU_BF16_ENV` overrides the answer."""
    forced = os.environ.get(CPU_BF16_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    try:
        if any(getattr(torch.cpu, name)() for name in probes if hasattr(torch.cpu, name)):
            return True
    except Exception:  # a build without the probes: read the flags
        pass
    return bool({"avx512_bf16", "amx_bf16"} & _cpu_flags())


def accelerator_available() -> bool:
    """Whether ``train.device: auto`` would pick an accelerator (CUDA or MPS) over the CPU."""
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or (mps is not None and mps.is_available())


def cpu_capability() -> str:
    """``torch.backends.cpu.get_cpu_capability()`` (``AVX512``, ``AVX2``, ...), or ``unknown``."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # older builds or exotic platforms
        return "unknown"


def auto_precision(device: str) -> str:
    """``train.precision: auto`` for a run on ``device`` (``train.device``): ``bf16`` when it trains on
    a CPU with native bf16, ``fp32`` otherwise (GPUs and other CPUs: not measured)."""
    on_cpu = device == "cpu" or (device == "auto" and not accelerator_available())
    return "bf16" if on_cpu and native_cpu_bf16() else "fp32"
