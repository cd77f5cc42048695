"""The choices of the ``train`` keys that name one of a few options, each written once.

:class:`disentangle.config.TrainConfig` is annotated with these ``Literal`` types; the config's
validation, :mod:`disentangle.training.optim` and :class:`disentangle.training.precision.Precision` take their
tuples from them (``typing.get_args``). This module imports nothing of the package, so that the
low layers (``precision``, which the objectives use) can read the choices without importing
:mod:`disentangle.config`, which imports the registries of those layers to resolve names.
"""
from __future__ import annotations

import typing
from typing import Literal

OptimizerName = Literal["adam", "adamw"]
"""``train.optimizer``: the optimizer of the model and of the objective's own networks."""
LrScheduleName = Literal["constant", "linear", "cosine"]
"""``train.lr_schedule``: the factor on every optimizer's learning rate after the warm-up."""
PrecisionName = Literal["fp32", "bf16", "fp16"]
"""``train.precision``: the autocast dtype (fp16 adds a GradScaler)."""
PrecisionSetting = Literal["auto", PrecisionName]
"""``train.precision`` as written in a config: ``auto`` is resolved when the config is loaded
(:func:`disentangle._core.hardware.auto_precision`)."""

InitName = Literal["reference", "pytorch"]
"""``model.init``: disentanglement_lib's Glorot-uniform weights and zero biases, or PyTorch's defaults."""

OPTIMIZER_NAMES: tuple[str, ...] = typing.get_args(OptimizerName)
LR_SCHEDULES: tuple[str, ...] = typing.get_args(LrScheduleName)
PRECISIONS: tuple[str, ...] = typing.get_args(PrecisionName)
PRECISION_SETTINGS: tuple[str, ...] = typing.get_args(PrecisionSetting)
INITS: tuple[str, ...] = typing.get_args(InitName)
DEFAULT_INIT: InitName = "reference"
#: the value of ``model.init`` for configs written before the key existed (their runs used it)
LEGACY_INIT: InitName = "pytorch"

#: keys added to the config after runs were saved without them, with the value those runs used
#: (not the new default). :func:`disentangle.config.upgrade_saved_config` fills them into a saved
#: config; :func:`disentangle.sweep.ids.identity` leaves them out of a run id at that value, so the
#: runs from before the key keep their ids.
LEGACY_VALUES: dict[str, str] = {"model.init": LEGACY_INIT}
