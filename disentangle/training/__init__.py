"""Training: the :class:`~disentangle.training.trainer.Trainer` and what it is made of (optimizers
and schedules, precision, the device and runtime settings, checkpoints, resume, Ctrl-C handling).

``python -m disentangle.train --config X.yaml`` is its command line; :func:`fit` its Python entry;
:class:`Callback` (and the registry ``CALLBACKS`` of ``train.callbacks``) its hooks for your code.
For a loop of your own (``examples/own_loop.py``): :func:`random_source` (the generator an
objective's per-step draws come from), :class:`Stream`, :func:`stream_seed` and
:func:`seed_everything` (the trainer's seeds), :func:`batch_to_device` (a batch drawn on the host, from
a streamed dataset, onto the training device). For a scheduler's stop signal:
:func:`deferred_to_step_boundary`.
"""
from __future__ import annotations

from .._core.distributed import random_source
from .callbacks import CALLBACKS, Callback
from .interrupt import deferred_to_step_boundary
from .runtime import Stream, seed_everything, stream_seed
from .trainer import Trainer, TrainResult, batch_to_device, fit

__all__ = ["CALLBACKS", "Callback", "Stream", "Trainer", "TrainResult", "batch_to_device", "deferred_to_step_boundary",
           "fit", "random_source", "seed_everything", "stream_seed"]
