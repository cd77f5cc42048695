"""When the trainer does what besides the step: the events of a step, by name.

After every optimisation step the trainer asks :meth:`Cadence.due` which events are due and runs
their handlers in the order of :data:`EVENTS`:

* ``log``: every ``train.log_every`` steps and at the last step (a ``log.jsonl`` record, the
  non-finite check, TensorBoard scalars);
* ``evaluate``: every ``train.eval_every`` steps and at the last, when ``train.eval_metrics`` names
  any;
* ``pictures``: every ``train.image_every`` steps, with ``train.tensorboard``;
* ``checkpoint``: every ``train.checkpoint_every`` steps and at the last.
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
