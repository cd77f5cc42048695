"""Training: the :class:`~disentangle.training.trainer.Trainer` and what it is made of (optimizers
and schedules, precision, the device and runtime settings, checkpoints, resume, Ctrl-C handling).

``python -m disentangle.train --config X.yaml`` is its command line; :func:`fit` its Python entry.
"""
from __future__ import annotations

from .trainer import Trainer, TrainResult, fit

__all__ = ["Trainer", "TrainResult", "fit"]
