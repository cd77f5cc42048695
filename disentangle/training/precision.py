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
from collections.abc import Callable
from typing import Any

import torch

from .._core.choices import PRECISIONS  # train.precision's choices, written once (a Literal)
from .._core.hardware import auto_precision

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


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
