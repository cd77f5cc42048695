"""Where and how a run executes: the device, the seeds, the CUDA backend flags, the memory layout,
the transposed convolutions' kernels, a materialised dataset and ``torch.compile``.

Execution strategies change how fast a run trains, not the model it defines (none is part of a run
id). ``train.threads`` sets torch's CPU threads (``auto``: the CPUs this process may use,
:mod:`disentangle._core.threads`, which also says why OpenMP's threads sleep rather than spin while
they wait). Four more are chosen at start-up when set to ``auto`` (the defaults), by :func:`choose_execution`:

* ``train.channels_last``: on for a CPU whose capability (``torch.backends.cpu.get_cpu_capability()``)
  is AVX512, AMX or AVX2, where oneDNN's channels-last convolutions are faster; off elsewhere (GPUs
  and other CPUs: not measured, so left at PyTorch's layout).
* ``train.conv_transpose_via_conv``: on for the same CPUs. The transposed convolutions' gradients
  are computed by regular-convolution kernels (:mod:`disentangle.training.conv_transpose`): the
  same values, without oneDNN's slow deconvolution backward.
* ``train.flush_denormal``: on for a CPU run. Deep in training some weights, gradients and Adam
  moments fall below float32's normal range (1.2e-38), and a CPU computes with such denormal numbers
  many times slower; flushed to zero, a FactorVAE run at step 168,000 trained 1.8 times faster. The
  mode is per thread and inherited by the threads started after it, so the command-line tools set it
  before any work (:func:`disentangle._core.hardware.flush_denormals`); it changes values only below
  1.2e-38.
* ``data.materialize`` (datasets that can render their whole grid once, e.g. ``sprites``): on when
  the session trains at least :data:`MATERIALIZE_MIN_STEPS` steps (the render is paid once;
  per-batch rendering is paid at every step: ``benchmarks/bench_trainer_options.py`` measures both) and the grid takes at most a quarter of the memory
  available on the device.

On a CPU run, glibc's allocator is told to keep and reuse freed memory
(:func:`disentangle._core.hardware.keep_freed_memory`: thousands of page faults a step fewer).

The choice and its reason are written to the run folder (``execution.jsonl``, one record a session)
so a user can see what ran; results differ between the choices only by the rounding of the
convolutions (channels-last) or not at all (a materialised grid holds the same images; the
transposed convolutions' gradients by another kernel).
"""
from __future__ import annotations

import dataclasses
import enum
import math
import random
from collections.abc import Mapping

import numpy as np
import torch

from .._core.hardware import (  # noqa: F401  (choose_channels_last: re-exported, where it lived before)
    CHANNELS_LAST_CPU_CAPABILITIES,
    auto_precision,
    available_memory_bytes,
    choose_channels_last,
    choose_conv_transpose_via_conv,
    choose_flush_denormal,
    cpu_capability,
    cpu_description,
    flush_denormals,
    keep_freed_memory,
)
from .._core.threads import apply_threads, wait_policy
from ..config import Config, TrainConfig
from ..errors import ConfigError


def _mps_available() -> bool:
    return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda if available, else mps, else cpu; an explicit device this machine lacks (no CUDA,
    an index beyond its GPUs, no MPS) is one :class:`~disentangle.ConfigError` naming the devices it
    has (:func:`disentangle._core.devices.check_device`)."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    from .._core.devices import check_device

    return check_device(name, "train.device")


def flush_denormals_first(config: Config) -> None:
    """Flush denormal floats to zero now, before any other work of the process, where
    ``train.flush_denormal`` resolves on for the run's device: torch's intra-op threads inherit the
    mode only when they are started after it (:func:`disentangle._core.hardware.flush_denormals`).
    ``python -m disentangle.train`` and a sweep's workers call it; :func:`choose_execution` applies
    and records the setting in any case."""
    try:
        device = resolve_device(config.train.device)
    except ConfigError:
        return  # the trainer says what is wrong with the device
    if choose_flush_denormal(config.train.flush_denormal, device)[0]:
        flush_denormals(True)


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


def match_state_layout(optimizers: Mapping[str, torch.optim.Optimizer]) -> int:
    """Give each optimizer state tensor of a parameter's shape its parameter's memory layout, in
    place; returns how many were changed.

    A resumed run restores Adam's moments in the layout of the session that saved them, and its
    parameters take this session's (``train.channels_last``, chosen anew on resume: on by default on
    CPUs, off on GPUs). The fused Adam step assumes the two agree: on a CPU it then computes a wrong
    update without an error (1e-3 off at lr 1e-3, measured), on CUDA it raises. Values are unchanged."""
    changed = 0
    for optimizer in optimizers.values():
        for group in optimizer.param_groups:
            for param in group["params"]:
                state = optimizer.state.get(param)
                for key, value in (state or {}).items():
                    if (isinstance(value, torch.Tensor) and value.shape == param.shape
                            and value.stride() != param.stride()):
                        state[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)
                        changed += 1
    return changed


def compile_networks(model: torch.nn.Module, objective: torch.nn.Module, mode: bool | str) -> None:
    """``torch.compile`` the encoder, the decoder and the objective's networks in place
    (``nn.Module.compile``: the state-dict keys do not change). ``mode``: True (default mode) or
    ``"reduce-overhead"`` (CUDA graphs on GPU)."""
    if not mode:
        return
    compile_mode = None if mode is True else str(mode)
    for module in (model.encoder, model.decoder, *objective.children()):
        module.compile(mode=compile_mode)


# ---------------------------------------------------------------------------- execution choices
#: a session this long (in steps) or longer materialises a dataset whose ``materialize`` is ``auto``
MATERIALIZE_MIN_STEPS = 2_000


@dataclasses.dataclass(frozen=True)
class Execution:
    """The execution strategies of one training session and why each was chosen."""

    device: str
    cpu_capability: str
    precision: str  # train.precision as trained (auto resolved: disentangle._core.hardware.auto_precision)
    channels_last: bool
    channels_last_reason: str
    materialize: bool | None  # None: the dataset has no such choice
    materialize_reason: str
    allocator: str = "unchanged"  # disentangle._core.hardware.keep_freed_memory
    conv_transpose_via_conv: bool = False
    conv_transpose_reason: str = "not chosen"
    optimizer: str = "not built"  # the optimizers' kernels (disentangle.training.optim.optimizer_kernels)
    threads: int = 0  # torch's intra-op CPU threads (train.threads: disentangle._core.threads.choose_threads)
    threads_reason: str = "not chosen"
    wait_policy: str = "unknown"  # OpenMP's, as read when torch was imported (disentangle._core.threads)
    wait_policy_reason: str = "not read"
    placement: str = "device"  # data.placement: the images on the training device, or streamed from the host
    placement_reason: str = "not chosen"
    precision_reason: str = "train.precision"  # or why this session trains in another (Trainer.fit's precision)
    cpu: str = "unknown"  # the CPU's model and x86 family/model: two generations of one capability round apart
    flush_denormal: str = "not chosen"  # train.flush_denormal as applied (disentangle._core.hardware.flush_denormals)
    flush_denormal_reason: str = "not chosen"

    def describe(self) -> str:
        """One line for the terminal: ``execution: cpu (AVX512), channels-last on (...), ...``."""
        parts = [f"{self.device} ({self.cpu_capability})" if self.device == "cpu" else self.device,
                 f"{self.threads} CPU threads ({self.threads_reason})",
                 f"OpenMP wait policy {self.wait_policy} ({self.wait_policy_reason})",
                 self.precision if self.precision_reason == "train.precision"
                 else f"{self.precision} ({self.precision_reason})",
                 f"channels-last {'on' if self.channels_last else 'off'} ({self.channels_last_reason})",
                 f"transposed-convolution gradients by "
                 f"{'convolution kernels' if self.conv_transpose_via_conv else 'PyTorch'} ({self.conv_transpose_reason})"]
        if self.materialize is not None:
            parts.append(f"dataset {'materialised' if self.materialize else 'rendered per batch'} "
                         f"({self.materialize_reason})")
        if self.placement == "stream":
            parts.append(f"images streamed from the host ({self.placement_reason})")
        if self.flush_denormal != "not chosen":
            parts.append(f"denormal floats flushed to zero {self.flush_denormal} ({self.flush_denormal_reason})"
                         if self.flush_denormal.startswith("on") else
                         f"denormal floats kept ({self.flush_denormal}; {self.flush_denormal_reason})")
        parts.append(f"optimizer {self.optimizer}")
        parts.append(f"allocator {self.allocator}")
        return "execution: " + ", ".join(parts)


def choose_materialize(
    setting: bool | str, grid_bytes: int, session_steps: int, available_bytes: int | None
) -> tuple[bool, str]:
    """``data.materialize`` resolved: ``(on, reason)``. ``auto`` materialises when the session trains at
    least :data:`MATERIALIZE_MIN_STEPS` steps and the grid (``grid_bytes``) takes at most a quarter
    of ``available_bytes``."""
    if setting != "auto":
        return bool(setting), "set"
    gib = grid_bytes / 2**30
    if session_steps < MATERIALIZE_MIN_STEPS:
        return False, f"auto: {session_steps:,} steps < {MATERIALIZE_MIN_STEPS:,}"
    if available_bytes is None:
        return False, "auto: free memory unknown"
    if 4 * grid_bytes > available_bytes:
        return False, f"auto: {gib:.1f} GiB grid > a quarter of {available_bytes / 2**30:.1f} GiB free"
    return True, f"auto: {session_steps:,} steps, {gib:.1f} GiB of {available_bytes / 2**30:.1f} GiB free"


def grid_bytes(image_shape: tuple[int, ...], num_images: int) -> int:
    """Bytes of a materialised grid: ``num_images`` uint8 images of ``image_shape``."""
    return math.prod(int(side) for side in image_shape) * int(num_images)


def choose_execution(
    config: Config, device: torch.device, *, session_steps: int, dataset_size: int | None = None,
    image_shape: tuple[int, ...] | None = None, materializable: bool = False,
) -> Execution:
    """Resolve the ``auto`` execution strategies of a session of ``session_steps`` steps on ``device``,
    and set torch's CPU threads to ``train.threads`` (:func:`~disentangle._core.threads.apply_threads`).

    ``materializable``: the dataset can render its grid once (it has ``materialize()``, as the
    sprites family); ``dataset_size``/``image_shape`` then size its grid.
    """
    capability = cpu_capability()
    threads = apply_threads(config.train.threads)
    policy, policy_reason = wait_policy()
    channels_last, cl_reason = choose_channels_last(config.train.channels_last, device, capability)
    via_conv, via_conv_reason = choose_conv_transpose_via_conv(
        config.train.conv_transpose_via_conv, device, capability
    )
    materialize, m_reason = None, "not applicable"
    setting = config.data.params.get("materialize")
    if materializable and setting is not None and dataset_size is not None and image_shape is not None:
        materialize, m_reason = choose_materialize(
            setting, grid_bytes(image_shape, dataset_size), session_steps, available_memory_bytes(device)
        )
    precision = config.train.precision
    if precision == "auto":  # a config built without resolving
        precision = auto_precision(device.type)
    allocator = keep_freed_memory() if device.type == "cpu" else "unchanged (not a CPU run)"
    flush, flush_reason = choose_flush_denormal(config.train.flush_denormal, device)
    flushed = flush_denormals(flush, threads.threads) if device.type == "cpu" or flush else "off"
    return Execution(str(device), capability, precision, channels_last, cl_reason, materialize, m_reason, allocator,
                     via_conv, via_conv_reason, threads=threads.threads, threads_reason=threads.reason,
                     wait_policy=policy, wait_policy_reason=policy_reason, cpu=cpu_description(),
                     flush_denormal=flushed, flush_denormal_reason=flush_reason)
