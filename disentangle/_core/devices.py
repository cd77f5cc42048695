"""The devices of this machine, and one check of a device the user named.

torch accepts any device name it knows (``"cuda"`` on a build without CUDA, ``"cuda:3"`` on a
machine with one GPU) and fails only when a tensor is put there, with ``AssertionError: Torch not
compiled with CUDA enabled`` or ``invalid device ordinal``; a name it does not know (``"gpu"``) is a
list of every device type it was built for. :func:`check_device` says what is wrong in one
paragraph before anything is read or built: the device asked for, why it cannot be used, the
devices this machine has, and what to pass instead.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import ConfigError


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and bool(mps.is_available())


def available_devices() -> list[str]:
    """The devices tensors can be put on here: ``cpu``, then ``cuda:0``, ``cuda:1``, ... when CUDA is
    available, then ``mps`` on an Apple GPU."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_available():
        devices.append("mps")
    return devices


def _other_backend_available(kind: str) -> bool:
    """Whether a device type other than cpu, cuda and mps (``xpu``, ...) is usable here: its torch
    module says it is available."""
    module = getattr(torch, kind, None)
    is_available = getattr(module, "is_available", None)
    if not callable(is_available):
        return False
    try:
        return bool(is_available())
    except Exception:  # a backend that cannot even say: not usable
        return False


def check_device(device: Any, name: str = "device") -> torch.device:
    """``device`` (a name such as ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, a
    :class:`torch.device`, or a CUDA index) as a :class:`torch.device`, once it is known to be a
    device of this machine.

    Raises :class:`~disentangle.ConfigError` (one paragraph: what is wrong, the devices this machine
    has (:func:`available_devices`), how to fix it) for a name torch does not know (``"gpu"``), CUDA
    asked for where it is not available (a torch built without it, or no GPU), a CUDA index beyond
    the GPUs present, ``mps`` off an Apple GPU, or another device type that is not available here.
    ``name`` is what the message calls the value (``"map_location"``, ``"device"``, ``"--device"``).
    """
    def fix() -> str:  # the machine's devices are listed only for a message: a CPU run asks torch nothing
        here = ", ".join(available_devices())
        # a command line's option, a config key (train.device=cpu, as an override is written), or a keyword
        example = f"{name} cpu" if name.startswith("--") else f"{name}=cpu" if "." in name else f"{name}='cpu'"
        return f"Use one of the devices of this machine ({here}), e.g. {example}"

    if isinstance(device, torch.device):
        parsed = device
    else:
        try:
            if isinstance(device, bool) or not isinstance(device, (str, int)):
                raise TypeError
            parsed = torch.device(device)
        except (RuntimeError, TypeError, ValueError):
            raise ConfigError(
                f"{name} is {device!r}, which is not a device name: devices are named cpu, cuda (a CUDA GPU; "
                f"cuda:N for the N-th) and mps (an Apple GPU). {fix()}."
            ) from None
    if parsed.type == "cpu":
        return parsed
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            why = (f"this torch ({torch.__version__}) is built without CUDA" if torch.version.cuda is None
                   else "no CUDA GPU is visible (none present, its driver not loaded, or CUDA_VISIBLE_DEVICES hides it)")
            raise ConfigError(
                f"{name} is '{device}', but CUDA is not available on this machine: {why}. {fix()}, or run on a "
                f"machine with a CUDA GPU and a torch built for it."
            )
        count = torch.cuda.device_count()
        if parsed.index is not None and parsed.index >= count:
            raise ConfigError(
                f"{name} is '{device}', but this machine has {count} CUDA device{'s' if count != 1 else ''} "
                f"(cuda:0{f' to cuda:{count - 1}' if count > 1 else ''}). {fix()}."
            )
        return parsed
    if parsed.type == "mps":
        if not _mps_available():
            raise ConfigError(f"{name} is '{device}', but MPS (an Apple GPU) is not available on this machine. {fix()}.")
        return parsed
    if not _other_backend_available(parsed.type):
        raise ConfigError(
            f"{name} is '{device}', but torch has no usable '{parsed.type}' device on this machine. {fix()}."
        )
    return parsed
