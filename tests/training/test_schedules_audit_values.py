"""Mutation-audit value tests of ``train.schedules`` and the step cadence: values at and past the
boundaries computed by hand, and the checks' boundaries (ratio 1, delay 0, whole numbers)."""
from __future__ import annotations

import math

import pytest

from disentangle._core.schedules import Schedule, parse_schedules
from disentangle.errors import ConfigError
from disentangle.training.cadence import Cadence


def _schedule(**spec):
    return Schedule.from_dict("objective.beta", spec)


def test_cosine_stays_at_its_end_after_its_steps():
    cosine = _schedule(kind="cosine", start=1, end=3, steps=10)
    # past the end the value is clamped: cos(π · 2) would bring an unclamped one back to the start
    assert [cosine.value(t) for t in (10, 15, 20, 1000)] == pytest.approx([3.0, 3.0, 3.0, 3.0])
    assert cosine.value(7) == pytest.approx(1 + 2 * (1 - math.cos(0.7 * math.pi)) / 2)


def test_a_delayed_schedule_holds_its_first_value_for_every_kind():
    step = _schedule(kind="step", start=8, gamma=0.5, every=10, delay=20)
    assert [step.value(t) for t in (0, 19, 20, 29, 30)] == [8, 8, 8, 8, 4]
    cosine = _schedule(kind="cosine", start=2, end=0, steps=4, delay=3)
    assert [cosine.value(t) for t in (0, 3, 5, 7)] == pytest.approx([2.0, 2.0, 1.0, 0.0])
    cyc = _schedule(kind="cyclical", start=0, end=1, steps=8, cycles=2, delay=2)
    assert [cyc.value(t) for t in (0, 1, 2, 3, 4)] == pytest.approx([0.0, 0.0, 0.0, 0.5, 1.0])


def test_cyclical_with_ratio_one_rises_over_the_whole_cycle():
    cyc = _schedule(kind="cyclical", start=0, end=2, steps=20, cycles=2, ratio=1)
    assert [cyc.value(t) for t in (0, 5, 9, 10, 15, 19, 20)] == pytest.approx([0, 1, 1.8, 0, 1, 1.8, 2])


def test_cyclical_defaults_are_fu_et_als_four_cycles_and_ratio_one_half():
    cyc = _schedule(kind="cyclical", start=0, end=1, steps=40)
    assert dict(cyc.params)["cycles"] == 4 and dict(cyc.params)["ratio"] == 0.5
    # cycles of 10 steps: rising over 5, flat for 5
    assert [cyc.value(t) for t in (0, 1, 4, 5, 9, 10, 11, 39, 40)] == pytest.approx(
        [0, 0.2, 0.8, 1, 1, 0, 0.2, 1, 1])


def test_cyclical_cycles_of_a_fractional_length():
    # 10 steps in 4 cycles: each 2.5 steps long, rising over its first 1.25
    cyc = _schedule(kind="cyclical", start=0, end=1, steps=10, cycles=4)
    assert cyc.value(3) == pytest.approx(0.4)  # 0.5 into the second cycle (2.5..5): phase 0.2
    assert cyc.value(5) == pytest.approx(0.0)  # the third cycle starts at 5.0
    assert cyc.value(8) == pytest.approx(0.4)  # 0.5 into the fourth (7.5..10)
    assert cyc.value(9) == 1.0  # 1.5 into the fourth: phase 0.6, past the rise


def test_cyclical_at_exactly_its_steps_is_end():
    cyc = _schedule(kind="cyclical", start=0.5, end=3, steps=12, cycles=3)
    assert cyc.value(12) == 3 and cyc.value(11) == pytest.approx(3.0) and cyc.value(8) == 0.5


@pytest.mark.parametrize("spec", [
    {"kind": "cyclical", "start": 0, "end": 1, "steps": 8, "ratio": 0},
    {"kind": "cyclical", "start": 0, "end": 1, "steps": 8, "ratio": -0.5},
    {"kind": "linear", "start": 0, "end": 1, "steps": 8, "delay": -1},
    {"kind": "linear", "start": 0, "end": 1, "steps": 8, "delay": 2.5},
    {"kind": "linear", "start": 0, "end": 1, "steps": 2.5},
    {"kind": "step", "start": 1, "gamma": 0.5, "every": 1.5},
    {"kind": "cyclical", "start": 0, "end": 1, "steps": 8, "cycles": 1.5},
    {"kind": "linear", "start": 0, "end": float("inf"), "steps": 8},
    {"kind": "constant", "value": float("nan")},
])
def test_a_schedule_outside_its_domain_is_refused(spec):
    with pytest.raises(ConfigError):
        parse_schedules({"objective.beta": spec})


def test_the_boundaries_of_the_domain_are_accepted():
    parse_schedules({"objective.beta": {"kind": "cyclical", "start": 0, "end": 1, "steps": 1, "ratio": 1, "cycles": 1}})
    parse_schedules({"objective.beta": {"kind": "linear", "start": 0, "end": 1, "steps": 1, "delay": 0}})
    assert _schedule(kind="linear", start=0, end=1, steps=1).value(0) == 0.0


@pytest.mark.parametrize("key", ["train.batch_size", "train.steps", "train", "objective", "model.beta"])
def test_only_the_learning_rate_and_objective_parameters_can_be_scheduled(key):
    with pytest.raises(ConfigError, match="applies to a numeric parameter"):
        parse_schedules({key: {"kind": "constant", "value": 1}})


def test_cadence_at_the_first_and_last_steps():
    c = Cadence(steps=12, log=5, evaluate=0, pictures=4, checkpoint=0)
    assert c.due(0) == ("log", "pictures")  # 0 % every == 0: a resumed session's step 0 is never asked
    assert c.due(1) == ()
    assert c.due(12) == ("log", "pictures")  # 12 % 4: pictures at a multiple, not because it is the end
    c = Cadence(steps=13, log=5, evaluate=0, pictures=4, checkpoint=0)
    assert c.due(13) == ("log",)  # the last step logs; pictures only at their multiples; nothing else is on
    assert Cadence(steps=13, log=5, evaluate=6, pictures=0, checkpoint=7).due(13) == ("log", "evaluate", "checkpoint")
