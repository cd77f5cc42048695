"""What the machine offers, as the defaults that depend on it need to know: native bf16 on the CPU,
an accelerator, the CPU's capability level.

``DISENTANGLE_CPU_BF16=0`` or ``=1`` in the environment overrides the bf16 detection (to reproduce on
one machine what ``train.precision: auto`` picks on another, or to keep a test suite's runs in fp32
on every machine).
"""
from __future__ import annotations

import os
import platform

import torch

#: the environment variable that overrides :func:`native_cpu_bf16`
CPU_BF16_ENV = "DISENTANGLE_CPU_BF16"


def _cpuinfo(cpuinfo: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``/proc/cpuinfo`` (every processor of these
    machines is the same model); empty where the file cannot be read (not Linux)."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if not sep:
                    if fields:
                        break  # the blank line after the first processor's block
                    continue
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def _cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    return set(_cpuinfo(cpuinfo).get("flags", "").split())


def cpu_bf16_flags() -> list[str]:
    """The CPU's native bf16 instruction sets (``avx512_bf16``, ``amx_bf16`` in ``/proc/cpuinfo``):
    where bf16 autocast is fast on a CPU. Empty when there are none or the flags cannot be read."""
    return sorted(_cpu_flags() & {"avx512_bf16", "amx_bf16"})


def cpu_name() -> str:
    """The CPU model (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_family_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The x86 CPU's ``family/model`` (``/proc/cpuinfo``: ``26/2`` for an AMD EPYC of the Zen 5
    generation), which a model name such as ``AMD EPYC`` in a virtual machine leaves out; None where
    it cannot be read. Two CPUs of one capability but different generations may round a convolution
    differently, and this tells them apart in a model's record."""
    fields = _cpuinfo(cpuinfo)
    if "cpu family" in fields and "model" in fields:
        return f"{fields['cpu family']}/{fields['model']}"
    return None


def cpu_description() -> str:
    """``AMD EPYC (family/model 26/2)``: :func:`cpu_name` with :func:`cpu_family_model` where known,
    as a training session records it (``execution.jsonl``'s ``cpu``)."""
    family_model = cpu_family_model()
    return cpu_name() + (f" (family/model {family_model})" if family_model else "")


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


def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's vendor (``/proc/cpuinfo``'s ``vendor_id``: ``GenuineIntel``, ``AuthenticAMD``), or None
    where it cannot be read."""
    return _cpuinfo(cpuinfo).get("vendor_id") or None


def amx_cpu() -> bool:
    """Whether the CPU has AMX tiles (``amx_tile``/``amx_bf16``), on which oneDNN's bf16 kernels run."""
    try:
        if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)():
            return True
    except Exception:  # a build without the probe: read the flags
        pass
    return bool({"amx_tile", "amx_bf16"} & _cpu_flags())


def fast_cpu_bf16() -> bool:
    """Whether bf16 autocast trains faster than fp32 on this CPU, as ``train.precision: auto`` needs to
    know. Native bf16 (:func:`native_cpu_bf16`) is not enough:

    - AMX: yes (oneDNN's bf16 convolutions and matrix products are built for its tiles);
    - AVX512-BF16 on an AMD CPU: yes, a conv64 training step measured 1.6-1.9 times faster than fp32
      (the AMD EPYCs of ``benchmarks/RESULTS-train-cpu.md``);
    - AVX512-BF16 without AMX on an Intel CPU: no, a training run measured 0.62-0.71 times as fast as
      in fp32 (an Intel Xeon of family/model 6/207 in a VM without AMX, ``benchmarks/RESULTS-train-cpu.md``);
    - no native bf16: no (emulated, several times slower);
    - AVX512-BF16 from another vendor, or one that cannot be read: no (not measured).

    :data:`CPU_BF16_ENV` overrides the answer as it does :func:`native_cpu_bf16`'s.
    """
    forced = os.environ.get(CPU_BF16_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    if not native_cpu_bf16():
        return False
    return amx_cpu() or cpu_vendor() == "AuthenticAMD"


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


#: CPU capabilities (``torch.backends.cpu.get_cpu_capability()``) on which channels-last is chosen
CHANNELS_LAST_CPU_CAPABILITIES = ("AVX512", "AMX", "AVX2")


def _on_for_onednn_cpus(setting: bool | str, device: torch.device, capability: str | None) -> tuple[bool, str]:
    """An ``auto``-or-boolean execution setting resolved: ``(on, reason)``; ``auto`` is on for a CPU
    whose capability is in :data:`CHANNELS_LAST_CPU_CAPABILITIES` (oneDNN measured there: AVX512,
    AMX and AVX2), off on other CPUs and other devices (not measured)."""
    if setting != "auto":
        return bool(setting), "set"
    if device.type != "cpu":
        return False, f"auto: not measured on {device.type}"
    capability = cpu_capability() if capability is None else capability
    if capability.startswith(CHANNELS_LAST_CPU_CAPABILITIES):
        return True, f"auto: oneDNN on {capability}"
    return False, f"auto: {capability} CPU, not measured"


def choose_channels_last(setting: bool | str, device: torch.device, capability: str | None = None) -> tuple[bool, str]:
    """A ``channels_last`` setting (``train.channels_last``, ``evaluate --channels-last``,
    ``evaluate_metrics(channels_last=...)``) resolved: ``(on, reason)``. ``auto`` is on for a CPU with
    an AVX512, AMX or AVX2 capability, where oneDNN's convolutions are faster on channels-last weights
    (the conv64 training step and encoding both measured faster: ``benchmarks/RESULTS-train-cpu.md``,
    ``benchmarks/RESULTS-peers-metrics.md``), off elsewhere (GPUs and other CPUs: not measured)."""
    return _on_for_onednn_cpus(setting, device, capability)


def choose_conv_transpose_via_conv(
    setting: bool | str, device: torch.device, capability: str | None = None
) -> tuple[bool, str]:
    """``train.conv_transpose_via_conv`` resolved: ``(on, reason)``. ``auto`` is on for a CPU with an
    AVX512, AMX or AVX2 capability, where oneDNN's deconvolution backward is slower than its
    convolution kernels (on AVX512 the conv64 training step measured faster in bf16 either layout and
    in fp32 with channels-last, as fast in fp32 with PyTorch's layout; on AVX2, in fp32 with
    channels-last: ``benchmarks/RESULTS-train-cpu.md``), off elsewhere (GPUs and other CPUs: not
    measured)."""
    return _on_for_onednn_cpus(setting, device, capability)


def _autocast_device_types() -> frozenset[str]:
    names = ("cpu", "cuda", "mps", "xpu", "hpu", "xla", "mtia")
    return frozenset(n for n in names if torch.amp.is_autocast_available(n))


#: the device types autocast knows in this torch, read once at import
AUTOCAST_DEVICE_TYPES = _autocast_device_types()


def autocast_enabled(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` here; False for a device type autocast does not
    know (``meta``, on which ``torch.is_autocast_enabled`` raises). Safe inside a ``torch.compile``d
    forward: ``torch.amp.is_autocast_available`` there is a graph break on some torch versions
    (2.11 warned of it on a GPU), so the known types are read once, at import."""
    return device_type in AUTOCAST_DEVICE_TYPES and torch.is_autocast_enabled(device_type)


def auto_precision(device: str) -> str:
    """``train.precision: auto`` for a run on ``device`` (``train.device``): ``bf16`` when it trains on
    a CPU where bf16 was measured faster than fp32 (:func:`fast_cpu_bf16`: AMX, or AVX512-BF16 on an
    AMD CPU), ``fp32`` otherwise (other CPUs: slower in bf16; GPUs: not measured)."""
    on_cpu = device == "cpu" or (device == "auto" and not accelerator_available())
    return "bf16" if on_cpu and fast_cpu_bf16() else "fp32"


# ---------------------------------------------------------------------------- denormal floats
def denormals_flushed(elements: int = 0, anywhere: bool = False) -> bool:
    """Whether CPU arithmetic flushes denormal floats (below 1.2e-38 in float32) to zero now: on this
    thread (``elements`` 0), or on every thread of an element-wise operation over ``elements`` values
    (torch splits one of 2**17 values or more over its intra-op threads); with ``anywhere``, on at
    least one of them."""
    # the largest denormal float32, written as its bits: a conversion from 1e-39 would itself be flushed
    x = torch.full((max(1, elements),), 0x007FFFFF, dtype=torch.int32).view(torch.float32)
    zeros = (x * 1.0) == 0
    return bool(zeros.any() if anywhere else zeros.all())


def choose_flush_denormal(setting: bool | str, device: torch.device) -> tuple[bool, str]:
    """``train.flush_denormal`` resolved: ``(on, reason)``. ``auto`` is on for a CPU run: deep in
    training some weights, gradients and Adam moments fall below float32's normal range, and a CPU
    computes with such denormal numbers many times slower (a FactorVAE run at step 168,000 trained
    1.8 times faster with them flushed to zero: ``benchmarks/RESULTS-train-cpu.md``); values that
    small are zero for training's purposes. Off elsewhere (GPUs: not measured)."""
    if setting != "auto":
        return bool(setting), "set"
    if device.type != "cpu":
        return False, f"auto: not measured on {device.type}"
    return True, "auto: a CPU computes with denormal floats many times slower"


def flush_denormals(on: bool, threads: int = 1) -> str:
    """Turn the flushing of denormal floats to zero (x86's FTZ/DAZ, AArch64's FZ) on or off for this
    thread and the intra-op threads torch starts from now on; returns what holds, as recorded.

    ``torch.set_flush_denormal`` sets the calling thread's mode, and threads inherit it when they are
    created: torch's intra-op threads started before (by an earlier multi-threaded operation of the
    process) keep theirs. So the command-line tools call this before any other work; with
    ``threads`` above 1 it checks every thread and says where only some flush, or, turning it off,
    where some still do (threads started while it was on: a process that trained with it before)."""
    if not torch.set_flush_denormal(on):
        return "unsupported on this CPU"
    if not on:
        if threads > 1 and denormals_flushed(1 << 18, anywhere=True):
            return "off on this thread only (torch's other threads were started while it was on, and flush)"
        return "off"
    if threads > 1 and not denormals_flushed(1 << 18):
        return "on this thread only (torch's other threads were started before; set it before any work)"
    return "on"


# ---------------------------------------------------------------------------- the memory allocator
#: the environment variable that turns :func:`keep_freed_memory` off (``0``)
MALLOC_TUNING_ENV = "DISENTANGLE_MALLOC_TUNING"
#: glibc mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: blocks up to this size come from the heap (glibc's largest mmap threshold on 64-bit systems)
MMAP_THRESHOLD_BYTES = 32 << 20
#: freed heap memory is returned to the system only above this much
TRIM_THRESHOLD_BYTES = 1 << 30
_tuned: str | None = None


def keep_freed_memory() -> str:
    """Make glibc's allocator keep and reuse freed memory, once per process; returns what was done.

    A training step on a CPU allocates and frees the same tensors of a few MB every step. With
    glibc's defaults such blocks are mapped from the system and unmapped when freed (or the heap is
    trimmed), so every step faults its memory in again: thousands of page faults a step, a large and
    history-dependent share of a conv64 step (measured with ``benchmarks/peers.py``). Serving blocks
    up to :data:`MMAP_THRESHOLD_BYTES` from the heap and trimming it only above
    :data:`TRIM_THRESHOLD_BYTES` keeps them mapped; the cost is memory the process holds at its peak
    instead of returning. Linux with glibc only; elsewhere, or with ``DISENTANGLE_MALLOC_TUNING=0``,
    nothing changes. The same effect as ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` in
    the environment, applied from inside the process.
    """
    global _tuned
    if _tuned is not None:
        return _tuned
    if os.environ.get(MALLOC_TUNING_ENV, "").strip() == "0":
        _tuned = f"unchanged ({MALLOC_TUNING_ENV}=0)"
        return _tuned
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        _tuned = "unchanged (not glibc)"
        return _tuned
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) and libc.mallopt(
            _M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES
        )
    except (OSError, AttributeError):
        ok = 0
    _tuned = (
        f"glibc: mmap threshold {MMAP_THRESHOLD_BYTES >> 20} MiB, trim threshold {TRIM_THRESHOLD_BYTES >> 20} MiB"
        if ok else "unchanged (mallopt refused)"
    )
    return _tuned


def available_memory_bytes(device: torch.device) -> int | None:
    """Free memory where a dataset on ``device`` would live: CUDA's free memory, else the host's
    available memory (Linux ``MemAvailable``, else free pages); None where it cannot be read."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None
