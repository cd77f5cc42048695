"""Mixed precision for the training step: autocast, and a GradScaler for fp16.

One :class:`Precision` object is shared by every optimizer of a run (the trainer's and those an
objective owns), because PyTorch's GradScaler must see all ``step`` calls of an iteration before
its single ``update``. It knows nothing of processes: in a multi-process run the trainer gives it
``sync_gradients`` (:func:`disentangle._core.distributed.sync_optimizer_gradients`, which averages an
optimizer's gradients over the ranks), called between the backward pass and the step, before the
fp16 scaler looks for overflows, so that every rank takes the same decision and the same step.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import torch

from .._core.choices import PRECISIONS  # train.precision's choices, written once (a Literal)
from .._core.hardware import auto_precision, cpu_capability, cpu_vendor, fast_cpu_bf16, native_cpu_bf16

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
logger = logging.getLogger(__name__)


def emulated_bf16_warning(precision: str, device: torch.device) -> str | None:
    """The warning for bf16 autocast asked for on a CPU that emulates it, or None.

    Without AVX512-BF16 or AMX (:func:`~disentangle._core.hardware.native_cpu_bf16`) every bf16
    matrix product and convolution is computed through conversions, several times slower than fp32
    (``benchmarks/RESULTS-train-cpu.md``), where ``train.precision: auto`` would have chosen fp32.
    """
    if precision != "bf16" or device.type != "cpu" or native_cpu_bf16():
        return None
    return (
        f"train.precision is bf16 on a CPU without native bf16 ({cpu_capability()}, no AVX512-BF16 or AMX): "
        "autocast emulates bf16 there, several times slower than fp32. Use train.precision: auto (fp32 on "
        "this CPU) or fp32, unless the run must match a bf16 run in its numerics' kind (a zoo recipe trained "
        "in bf16). A bf16 run resumed here may continue in fp32 instead: --resume RUN_DIR --precision fp32 "
        "(Trainer.fit(resume=True, precision='fp32'))."
    )


def slow_bf16_note(precision: str, device: torch.device) -> str | None:
    """The note for bf16 autocast asked for on a CPU with native bf16 where it is still slower than
    fp32 (:func:`~disentangle._core.hardware.fast_cpu_bf16`: an Intel CPU with AVX512-BF16 but no AMX,
    where a training run measured 0.62-0.71 times as fast as in fp32), or None. A note, not a
    warning: bf16 is native there, and a run may name it to match a bf16 run's numerics."""
    if precision != "bf16" or device.type != "cpu" or not native_cpu_bf16() or fast_cpu_bf16():
        return None
    return (
        f"train.precision is bf16 on a CPU whose native bf16 (AVX512-BF16 without AMX, {cpu_vendor() or 'vendor unknown'}) "
        "trains slower than fp32: a conv64 run measured 0.62-0.71 times as fast in bf16 there. "
        "train.precision: auto picks fp32 on this CPU; keep bf16 only where the run must match a bf16 run's numerics."
    )


class Precision:
    """Autocast context and loss scaling for ``precision`` in ``fp32 | bf16 | fp16``."""

    def __init__(
        self,
        precision: str,
        device: torch.device,
        *,
        sync_gradients: Callable[[torch.optim.Optimizer], None] | None = None,
    ) -> None:
        """``sync_gradients(optimizer)``, if given, runs after every backward and before the step
        and its overflow check (the trainer passes
        :func:`disentangle._core.distributed.sync_optimizer_gradients` in a multi-process run)."""
        device = torch.device(device)
        if precision == "auto":  # a config loaded without resolving (configs resolve it when loaded)
            precision = auto_precision(device.type)
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS} or auto, got {precision!r}.")
        self.precision = precision
        self.device = device
        warning = emulated_bf16_warning(precision, device)
        if warning is not None:
            logger.warning(warning)
        note = slow_bf16_note(precision, device)
        if note is not None:
            logger.info(note)
        self.sync_gradients = sync_gradients
        self.scaler = (
            torch.amp.GradScaler(self.device.type) if precision == "fp16" else None
        )

    def autocast(self) -> contextlib.AbstractContextManager:
        """Autocast region for forward passes (a no-op for fp32)."""
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=_DTYPES[self.precision])

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """``loss.backward()``, scaled when training in fp16."""
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward(**kwargs)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``; with fp16 the scaler skips steps whose gradients overflowed."""
        if self.sync_gradients is not None:
            self.sync_gradients(optimizer)
        if self.scaler is not None:
            self.scaler.step(optimizer)
        else:
            optimizer.step()

    def minimize(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """Zero ``optimizer``'s gradients, back-propagate ``loss`` and step ``optimizer``."""
        optimizer.zero_grad(set_to_none=True)
        self.backward(loss)
        self.step(optimizer)

    def update(self) -> None:
        """End of an iteration: adjust the fp16 loss scale (no-op otherwise)."""
        if self.scaler is not None:
            self.scaler.update()

    def state_dict(self) -> dict:
        return self.scaler.state_dict() if self.scaler is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
