"""Training: the :class:`~disentangle.training.trainer.Trainer` and what it is made of (optimizers
and schedules, precision, the device and runtime settings, checkpoints, resume, Ctrl-C handling).

``python -m disentangle.train --config X.yaml`` is its command line; :func:`fit` its Python entry;
:class:`Callback` (and the registry ``CALLBACKS`` of ``train.callbacks``) its hooks for your code.
"""
from __future__ import annotations

from .callbacks import CALLBACKS, Callback
from .trainer import Trainer, TrainResult, fit

__all__ = ["CALLBACKS", "Callback", "Trainer", "TrainResult", "fit"]
