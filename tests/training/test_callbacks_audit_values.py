"""Mutation-audit value tests of the built-in callbacks, driven check by check with a stand-in
trainer (no training): early stopping's comparison, min_delta, mode, patience boundary, reset, defaults,
what it records when it stops; the state keys, the log truncation and the kept checkpoint steps."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from disentangle.config import TrainConfig
from disentangle.errors import ConfigError
from disentangle.training.callbacks import EarlyStopping, KeepCheckpoints, state_keys, truncate_jsonl


class _Trainer:
    def __init__(self, steps: int = 1000, log_every: int = 1):
        self.config = SimpleNamespace(train=TrainConfig(steps=steps, log_every=log_every, checkpoint_every=steps))
        self.stops: list[str] = []

    def request_stop(self, reason: str) -> None:
        self.stops.append(reason)


def _feed(stopper: EarlyStopping, values, log_every: int = 1):
    """Log ``values`` at the log steps; the 1-based check at which a stop was first asked (or None)."""
    trainer = _Trainer(log_every=log_every)
    first = None
    for i, value in enumerate(values, 1):
        stopper.on_log(trainer, i * log_every, {"loss": value})
        if trainer.stops and first is None:
            first = i
    return trainer, first


def test_an_equal_value_is_no_improvement():
    stopper = EarlyStopping(patience=2)
    trainer, first = _feed(stopper, [1.0, 1.0, 1.0])
    assert first == 3 and stopper.best == 1.0 and stopper.bad_checks == 2


@pytest.mark.parametrize("values, stops, best", [
    ([1.0, 0.6], True, 1.0),  # better by 0.4 < min_delta
    ([1.0, 0.5], True, 1.0),  # better by exactly min_delta: not beyond it
    ([1.0, 0.4], False, 0.4),
    ([1.0, 1.2], True, 1.0),  # worse
])
def test_min_mode_needs_a_decrease_beyond_min_delta(values, stops, best):
    stopper = EarlyStopping(patience=1, min_delta=0.5)
    trainer, first = _feed(stopper, values)
    assert (first == 2) is stops and stopper.best == best


@pytest.mark.parametrize("values, stops, best", [
    ([1.0, 1.4], True, 1.0),
    ([1.0, 1.5], True, 1.0),
    ([1.0, 1.6], False, 1.6),
    ([1.0, 0.2], True, 1.0),  # a decrease is no improvement in max mode
])
def test_max_mode_needs_an_increase_beyond_min_delta(values, stops, best):
    stopper = EarlyStopping(patience=1, mode="max", min_delta=0.5)
    trainer, first = _feed(stopper, values)
    assert (first == 2) is stops and stopper.best == best


def test_the_run_stops_at_exactly_the_patience_th_check_without_improvement_and_says_so():
    stopper = EarlyStopping(patience=3)
    trainer, first = _feed(stopper, [1.0, 2.0, 2.0, 2.0, 2.0], log_every=5)
    assert first == 4  # checks 2, 3, 4 without improvement
    assert trainer.stops[0] == ("early stopping: loss has not improved on 1 for 3 checks "
                                "(patience 3, mode min) at step 20")


def test_an_improvement_resets_the_count():
    stopper = EarlyStopping(patience=2)
    trainer, first = _feed(stopper, [1.0, 2.0, 0.5, 2.0])
    assert first is None and stopper.best == 0.5 and stopper.bad_checks == 1
    assert stopper.state_dict() == {"best": 0.5, "bad_checks": 1, "monitor": "loss", "mode": "min"}


def test_the_defaults_are_loss_min_patience_ten():
    stopper = EarlyStopping()
    assert (stopper.monitor, stopper.mode, stopper.patience, stopper.min_delta) == ("loss", "min", 10, 0.0)
    _, first = _feed(stopper, [1.0] + [2.0] * 9)
    assert first is None
    _, first = _feed(EarlyStopping(), [1.0] + [2.0] * 10)
    assert first == 11
    _, first = _feed(EarlyStopping(), [3.0, 2.0, 1.0] + [0.5] * 9)  # decreasing is improving in min mode
    assert first is None


def test_a_log_record_between_log_steps_is_not_a_check():
    stopper = EarlyStopping(patience=1)
    trainer = _Trainer(steps=100, log_every=5)
    stopper.on_log(trainer, 5, {"loss": 1.0})
    stopper.on_log(trainer, 7, {"loss": 0.1})  # a session stopped at step 7 logs it: not a check
    assert (stopper.best, stopper.bad_checks) == (1.0, 0)
    stopper.on_log(trainer, 7, {"loss": 9.0})
    assert trainer.stops == []
    stopper.on_log(trainer, 100, {"loss": 9.0})  # the last step is a log step
    assert stopper.bad_checks == 1 and len(trainer.stops) == 1


def test_a_first_check_that_is_not_a_number_counts_without_improvement():
    stopper = EarlyStopping(patience=1)
    trainer, first = _feed(stopper, [math.nan])
    assert first == 1 and stopper.best is None
    assert "has not been a finite number for 1 checks" in trainer.stops[0]


@pytest.mark.parametrize("kwargs", [{"patience": 0}, {"patience": -1}, {"min_delta": -0.1}, {"mode": "MIN"},
                                    {"patience": 2.0}])
def test_bad_early_stopping_settings_are_refused(kwargs):
    with pytest.raises(ConfigError):
        EarlyStopping(**kwargs)


def test_the_smallest_settings_are_accepted():
    stopper = EarlyStopping(patience=1, min_delta=0)
    _, first = _feed(stopper, [1.0, 0.999])
    assert first is None  # min_delta 0: any decrease improves


def test_state_keys_number_the_repeats_of_a_class_from_one():
    a, b, c, d = EarlyStopping(), EarlyStopping(), KeepCheckpoints(every=5), EarlyStopping()
    assert state_keys([a, c, b, d]) == ["EarlyStopping", "KeepCheckpoints", "EarlyStopping#1", "EarlyStopping#2"]


def test_truncating_the_log_keeps_the_checkpointed_step_itself(tmp_path):
    path = tmp_path / "log.jsonl"
    records = [{"step": 5, "loss": 1}, {"step": 10, "loss": 2}, {"step": 10, "metrics": {}}, {"step": 15, "loss": 3}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 20, "lo')
    truncate_jsonl(path, 10)
    assert [json.loads(line) for line in path.read_text().splitlines()] == records[:3]


def test_keep_checkpoints_wants_the_multiples_of_every_or_the_listed_steps():
    every = KeepCheckpoints(every=5)
    assert [s for s in range(1, 21) if every.wanted(s)] == [5, 10, 15, 20]
    listed = KeepCheckpoints(steps=[20, 5, 5])
    assert listed.steps == [5, 20] and [s for s in range(1, 21) if listed.wanted(s)] == [5, 20]


def test_the_first_stop_request_is_the_reason_recorded():
    from disentangle.training.trainer import Trainer

    trainer = SimpleNamespace(stop_reason=None)
    Trainer.request_stop(trainer, "early stopping: first")
    Trainer.request_stop(trainer, "another callback, later")
    assert trainer.stop_reason == "early stopping: first"
    trainer = SimpleNamespace(stop_reason=None)
    Trainer.request_stop(trainer)
    assert trainer.stop_reason == "stopped by a callback"
