"""Optimizers and learning-rate schedules of a run.

The trainer owns the model's optimizer (``"model"``: ``train.optimizer``, ``lr``, ``betas``,
``eps``, ``weight_decay``; fused where torch has the kernel); objectives add theirs through
:meth:`~disentangle.objectives.Objective.extra_optimizers`, built with the same factory.
``train.lr_schedule`` (after ``train.warmup_steps`` of linear warm-up) multiplies the learning rate
of every optimizer; each schedule's state is checkpointed.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import torch

from .._core.choices import LR_SCHEDULES
from ..config import TrainConfig
from ..errors import DisentangleError
from ..objectives.base import OptimizerFactory

#: ``train.optimizer`` -> class; every optimizer of a run (the model's and the objective's) is one.
#: Its keys are the choices of :data:`disentangle._core.choices.OptimizerName` (tests/architecture/test_layers.py
#: keeps them equal).
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


#: devices whose optimizers use torch's fused kernels
FUSED_DEVICE_TYPES = ("cuda", "cpu")


def optimizer_kernels(optimizers: dict[str, torch.optim.Optimizer]) -> str:
    """How the run's optimizers step, for the run's log: ``"fused"``, ``"foreach"`` or e.g.
    ``"model fused, discriminator foreach"``."""
    kinds = {name: "fused" if opt.defaults.get("fused") else "foreach" for name, opt in optimizers.items()}
    if len(set(kinds.values())) == 1:
        return next(iter(kinds.values()))
    return ", ".join(f"{name} {kind}" for name, kind in kinds.items())


def optimizer_factory(train: TrainConfig, device: torch.device | str = "cpu") -> OptimizerFactory:
    """``make_optimizer(params, *, lr=None, betas=None, eps=None, weight_decay=None)``: an optimizer
    of kind ``train.optimizer`` with ``train``'s values for what is not given.

    The fused implementation (one kernel for all parameters) is used on CUDA and on the CPU, where
    torch offers it for the parameters' device and dtype; elsewhere torch's default (``foreach``).
    Fused and ``foreach`` Adam compute the same update to float rounding (about one unit in the last
    place a step); on a CPU the fused step is the faster one (measured in ``benchmarks/RESULTS-train-cpu.md``).
    """
    cls = OPTIMIZERS[train.optimizer]
    fusable = torch.device(device).type in FUSED_DEVICE_TYPES

    def make_optimizer(
        params: Any, *, lr: float | None = None, betas: Any = None, eps: float | None = None,
        weight_decay: float | None = None,
    ) -> torch.optim.Optimizer:
        params = list(params)
        kwargs: dict[str, Any] = {
            "lr": train.lr if lr is None else lr,
            "betas": tuple(train.betas if betas is None else betas),
            "eps": train.eps if eps is None else eps,
            "weight_decay": train.weight_decay if weight_decay is None else weight_decay,
        }
        if fusable and params and all(p.device.type in FUSED_DEVICE_TYPES and p.is_floating_point() for p in params):
            try:
                return cls(params, fused=True, **kwargs)
            except (RuntimeError, TypeError, ValueError):  # no fused kernel for this build/dtype
                pass
        return cls(params, **kwargs)

    return make_optimizer


def build_optimizers(
    model: torch.nn.Module, objective: Any, train: TrainConfig, device: torch.device | str = "cpu"
) -> dict[str, torch.optim.Optimizer]:
    """Every optimizer of a run by name: ``"model"`` (the VAE's parameters that
    :meth:`~disentangle.objectives.Objective.model_parameters` names, all of them by default), built
    here, and the objective's own from :meth:`~disentangle.objectives.Objective.extra_optimizers`.
    These names are the checkpoint's ``optimizers`` keys."""
    make_optimizer = optimizer_factory(train, device)
    model_parameters = getattr(objective, "model_parameters", None)
    optimizers = {"model": make_optimizer(model.parameters() if model_parameters is None else model_parameters(model))}
    extra = objective.extra_optimizers(model, make_optimizer)
    if "model" in extra:
        raise DisentangleError(
            f"{type(objective).__name__}.extra_optimizers returned an optimizer named 'model'; that name "
            f"is the trainer's optimizer of the VAE. Name the objective's own optimizers otherwise."
        )
    optimizers.update(extra)
    return optimizers


def lr_factor(step: int, *, schedule: str, warmup_steps: int, total_steps: int) -> float:
    """The learning-rate multiplier of optimisation step ``step`` (0-based).

    Linear warm-up ``(step + 1) / warmup_steps`` over the first ``warmup_steps`` steps, then, with
    ``p = (step − warmup_steps) / (total_steps − warmup_steps)`` the progress through the rest:
    ``constant`` 1, ``linear`` ``1 − p``, ``cosine`` ``½ (1 + cos π p)`` (Loshchilov & Hutter 2017,
    without restarts), both reaching 0 at ``total_steps``.
    """
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"schedule must be one of {LR_SCHEDULES}, got {schedule!r}.")
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = min(max(step - warmup_steps, 0) / max(total_steps - warmup_steps, 1), 1.0)
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def build_schedulers(
    optimizers: dict[str, torch.optim.Optimizer], train: TrainConfig
) -> dict[str, torch.optim.lr_scheduler.LambdaLR]:
    """A ``LambdaLR`` per optimizer with :func:`lr_factor` of ``train`` (its state is checkpointed)."""
    factor = functools.partial(
        lr_factor, schedule=train.lr_schedule, warmup_steps=train.warmup_steps, total_steps=train.steps
    )
    return {name: torch.optim.lr_scheduler.LambdaLR(opt, factor) for name, opt in optimizers.items()}
