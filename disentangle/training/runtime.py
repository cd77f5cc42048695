"""Where and how a run executes: the device, the seeds, the CUDA backend flags, the memory layout and ``torch.compile``."""
from __future__ import annotations

import enum
import random

import numpy as np
import torch

from ..config import TrainConfig
from ..errors import ConfigError


def _mps_available() -> bool:
    return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda if available, else mps, else cpu; an unavailable explicit device is an error."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device is '{name}' but CUDA is not available here. Use train.device=auto or cpu.")
    if name == "mps" and not _mps_available():
        raise ConfigError("train.device is 'mps' but MPS is not available here. Use train.device=auto or cpu.")
    return torch.device(name)


class Stream(enum.IntEnum):
    """The random streams of a run, each seeded with ``config.seed + stream`` so that none of them
    shifts another: drawing more pictures or evaluating more often never changes the training."""

    WEIGHTS = 0
    """The global RNGs at construction: the layers' initial weights (and the dataset's build)."""
    DATA = 1
    """The trainer's data generator: the batches' indices and per-sample draws."""
    PICTURES = 2
    """The images of TensorBoard's pictures (the same at every picture step)."""
    NOISE = 3
    """The trainer's per-step generator: the objectives' draws (reparameterisation noise, prior
    samples, permutations), made for the global batch."""


def stream_seed(seed: int, stream: Stream) -> int:
    """The seed of ``stream`` in a run with ``config.seed = seed``."""
    return int(seed) + int(stream)


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global random number generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def configure_cuda_backends(train: TrainConfig) -> None:
    """``train.tf32`` and ``train.cudnn_benchmark`` into ``torch.backends`` (for a CUDA run).

    ``tf32`` true or false turns TF32 on or off for both matmuls and cuDNN convolutions; unset
    (``None``) leaves PyTorch's defaults alone (TF32 convolutions on, matmuls off), which a
    ``false`` used to override, slowing convolutions on Ampere and later GPUs.
    """
    if train.tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = train.tf32
        torch.backends.cudnn.allow_tf32 = train.tf32
    torch.backends.cudnn.benchmark = train.cudnn_benchmark


def to_channels_last(model: torch.nn.Module, objective: torch.nn.Module) -> None:
    """Put the 4-D parameters and buffers of the model and the objective's networks in
    ``torch.channels_last`` layout, in place (``train.channels_last``).

    ``Module.to(memory_format=...)`` replaces each tensor's data but keeps the ``Parameter``
    objects, so an optimizer built before (and its restored state) still owns them; the values and
    the state-dict keys do not change, so checkpoints load either way. Convolutions on such weights
    return channels-last outputs whatever the input layout, so the batches are left as they are.
    """
    model.to(memory_format=torch.channels_last)
    objective.to(memory_format=torch.channels_last)


def compile_networks(model: torch.nn.Module, objective: torch.nn.Module, mode: bool | str) -> None:
    """``torch.compile`` the encoder, the decoder and the objective's networks in place
    (``nn.Module.compile``: the state-dict keys do not change). ``mode``: True (default mode) or
    ``"reduce-overhead"`` (CUDA graphs on GPU)."""
    if not mode:
        return
    compile_mode = None if mode is True else str(mode)
    for module in (model.encoder, model.decoder, *objective.children()):
        module.compile(mode=compile_mode)
