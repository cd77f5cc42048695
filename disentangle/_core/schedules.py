"""Schedules of a numeric setting over training steps (``train.schedules``): pure functions of the step.

``train.schedules`` maps a setting to a schedule::

    train:
      schedules:
        objective.beta: {kind: linear, start: 0, end: 4, steps: 10000}
        objective.gamma: {kind: cyclical, start: 0, end: 1, steps: 40000, cycles: 4}
        train.lr: {kind: cosine, start: 1.0e-4, end: 1.0e-6, steps: 300000}

The value for the step about to be trained, ``t`` (0 for the first step), is:

* ``constant``: ``value``;
* ``linear``: ``start + (end - start) · min(1, t / steps)``;
* ``cosine``: ``start + (end - start) · (1 - cos(π · min(1, t / steps))) / 2``;
* ``step``: ``start · gamma ** (t // every)``;
* ``cyclical`` (Fu et al. 2019, "Cyclical annealing schedule: a simple approach to mitigating KL
  vanishing"): ``steps`` split into ``cycles`` equal cycles; within a cycle of length ``L``, the
  value rises linearly from ``start`` to ``end`` over the first ``ratio · L`` steps and stays at
  ``end`` for the rest (the paper's defaults: 4 cycles, ratio 0.5); after ``steps``, ``end``.

Every kind may start later with ``delay`` (steps at the first value, default 0). A schedule is a pure
function of the step, so a resumed run takes the same values as an uninterrupted one and nothing
but the step needs to be checkpointed.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

#: the parameters of each kind: required, then optional with defaults
KINDS: dict[str, tuple[tuple[str, ...], dict[str, float]]] = {
    "constant": (("value",), {}),
    "linear": (("start", "end", "steps"), {}),
    "cosine": (("start", "end", "steps"), {}),
    "step": (("start", "gamma", "every"), {}),
    "cyclical": (("start", "end", "steps"), {"cycles": 4, "ratio": 0.5}),
}
_COMMON = {"delay": 0}


@dataclass(frozen=True)
class Schedule:
    """One schedule: its ``kind`` and parameters (module docstring). :meth:`value` gives the value
    for the step about to be trained."""

    kind: str
    params: tuple[tuple[str, float], ...]

    @classmethod
    def from_dict(cls, where: str, spec: Any) -> Schedule:
        """A checked schedule from its config mapping (``{kind: linear, start: 0, ...}``); a bad one
        raises one :class:`~disentangle.ConfigError` naming ``where`` (the scheduled key)."""
        if not isinstance(spec, Mapping) or "kind" not in spec:
            raise ConfigError(
                f"train.schedules.{where} is {spec!r}; give a mapping with a 'kind' "
                f"({', '.join(KINDS)}) and its parameters, e.g. {{kind: linear, start: 0, end: 4, steps: 10000}}."
            )
        kind = spec["kind"]
        if kind not in KINDS:
            from .registry import did_you_mean

            raise ConfigError(f"train.schedules.{where}: unknown kind '{kind}'.{did_you_mean(str(kind), list(KINDS))} "
                              f"Valid kinds: {', '.join(KINDS)}.")
        required, optional = KINDS[kind]
        allowed = {*required, *optional, *_COMMON}
        given = {k: v for k, v in spec.items() if k != "kind"}
        unknown = sorted(set(given) - allowed)
        missing = [k for k in required if k not in given]
        if unknown or missing:
            raise ConfigError(
                f"train.schedules.{where} ({kind}): "
                + (f"unknown parameter(s) {', '.join(unknown)}; " if unknown else "")
                + (f"missing {', '.join(missing)}; " if missing else "")
                + f"a {kind} schedule takes {', '.join(required)}"
                + (f" and optionally {', '.join(f'{k} (default {v})' for k, v in {**optional, **_COMMON}.items())}.")
            )
        values = {**optional, **_COMMON}
        for key, value in given.items():
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f"train.schedules.{where}.{key} is {value!r}; give a number.") from None
            if not math.isfinite(values[key]):
                raise ConfigError(f"train.schedules.{where}.{key} is {value!r}; give a finite number.")
        for key in ("steps", "every", "cycles"):
            if key in values and (values[key] < 1 or not float(values[key]).is_integer()):
                raise ConfigError(f"train.schedules.{where}.{key} is {given.get(key)!r}; give a whole number >= 1.")
        if values["delay"] < 0 or not float(values["delay"]).is_integer():
            raise ConfigError(f"train.schedules.{where}.delay is {given.get('delay')!r}; give a whole number >= 0.")
        if kind == "cyclical" and not 0 < values["ratio"] <= 1:
            raise ConfigError(f"train.schedules.{where}.ratio is {given.get('ratio')!r}; give a number in (0, 1].")
        return cls(str(kind), tuple(sorted(values.items())))

    def value(self, step: int) -> float:
        """The value for the step about to be trained (``step`` steps already done)."""
        p = dict(self.params)
        t = max(int(step) - int(p["delay"]), 0)
        if self.kind == "constant":
            return p["value"]
        if self.kind == "step":
            return p["start"] * p["gamma"] ** (t // int(p["every"]))
        start, end, steps = p["start"], p["end"], int(p["steps"])
        if self.kind == "linear":
            return start + (end - start) * min(1.0, t / steps)
        if self.kind == "cosine":
            return start + (end - start) * (1 - math.cos(math.pi * min(1.0, t / steps))) / 2
        # cyclical
        if t >= steps:
            return end
        length = steps / p["cycles"]
        phase = (t % length) / length
        return start + (end - start) * min(1.0, phase / p["ratio"])


def parse_schedules(raw: Mapping[str, Any]) -> dict[str, Schedule]:
    """``train.schedules`` checked: ``{"objective.beta": Schedule, ...}``. Only the form is checked
    here; whether the key names a numeric setting is checked against the objective by the config."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"train.schedules is {raw!r}; give a mapping from a setting (objective.beta, train.lr) "
                          "to its schedule.")
    out = {}
    for key, spec in raw.items():
        section, _, name = str(key).partition(".")
        if section not in ("objective", "train") or not name or (section == "train" and name != "lr"):
            raise ConfigError(
                f"train.schedules has the key '{key}'; a schedule applies to a numeric parameter of the "
                "objective (objective.NAME, e.g. objective.beta) or to the learning rate (train.lr)."
            )
        out[str(key)] = Schedule.from_dict(str(key), spec)
    return out
