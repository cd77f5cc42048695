"""When the trainer does what besides the step: the events of a step, by name.

After every optimisation step the trainer asks :meth:`Cadence.due` which events are due and runs
their handlers in the order of :data:`EVENTS`:

* ``log``: every ``train.log_every`` steps and at the last step (a ``log.jsonl`` record, the
  non-finite check, TensorBoard scalars);
* ``evaluate``: every ``train.eval_every`` steps and at the last, when ``train.eval_metrics`` names
  any;
* ``pictures``: every ``train.image_every`` steps, with ``train.tensorboard``;
* ``checkpoint``: every ``train.checkpoint_every`` steps and at the last.

A setting that asks for an event which never comes (metrics without ``train.eval_every``, an
``eval_every`` without metrics, ``image_every`` without TensorBoard) is named by
:func:`idle_settings`, which the trainer logs as warnings when a run starts.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import TrainConfig

EVENTS: tuple[str, ...] = ("log", "evaluate", "pictures", "checkpoint")
"""The events of a step, in the order their handlers run."""


@dataclass(frozen=True)
class Cadence:
    """Every how many steps each event comes (0: never), and the last step (every event but
    ``pictures`` comes then too)."""

    steps: int
    log: int
    evaluate: int
    pictures: int
    checkpoint: int

    @classmethod
    def from_config(cls, train: TrainConfig) -> Cadence:
        return cls(
            steps=train.steps,
            log=train.log_every,
            evaluate=train.eval_every if train.eval_metrics else 0,
            pictures=train.image_every if train.tensorboard else 0,
            checkpoint=train.checkpoint_every,
        )

    def due(self, step: int) -> tuple[str, ...]:
        """The events due after ``step`` steps, in the order of :data:`EVENTS`."""
        at_end = step == self.steps
        return tuple(
            event for event in EVENTS
            if (every := getattr(self, event)) and (step % every == 0 or (at_end and event != "pictures"))
        )


def idle_settings(train: TrainConfig) -> list[str]:
    """One warning for each setting of ``train`` that does nothing because another one is off: the
    metrics of ``eval_metrics`` with ``eval_every`` 0, an ``eval_every`` without ``eval_metrics``, an
    ``image_every`` without ``tensorboard`` (a config built or changed in Python; YAML refuses it).
    Empty when every setting takes effect."""
    found = []
    if train.eval_metrics and not train.eval_every:
        found.append(
            f"train.eval_metrics is [{', '.join(train.eval_metrics)}], but train.eval_every is 0, so they are never "
            "evaluated during training. Set train.eval_every=N to score them every N steps (and at the last step), "
            "or leave train.eval_metrics empty and score the finished run with python -m disentangle.evaluate RUN_DIR."
        )
    if train.eval_every and not train.eval_metrics:
        found.append(
            f"train.eval_every is {train.eval_every:,}, but train.eval_metrics is empty, so nothing is evaluated "
            "during training. Name the metrics to score, e.g. train.eval_metrics=[mig], or set train.eval_every=0."
        )
    if train.image_every and not train.tensorboard:
        found.append(
            f"train.image_every is {train.image_every:,}, but train.tensorboard is false, and the pictures go to "
            "TensorBoard only, so none are written during training. Set train.tensorboard=true, or "
            "train.image_every=0."
        )
    return found
