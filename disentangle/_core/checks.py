"""Value checks shared by configs, objectives, backbones, datasets and metrics.

Every check returns the validated (converted) value or raises :class:`~disentangle.ConfigError`
with one paragraph: which parameter, what was given, what is valid and, for choices, a
did-you-mean. ``name`` is the parameter as the user wrote it (``"beta"``, ``"num_train"``); the
config layer prefixes its section (``objective.beta``) when it re-raises, so the same check gives a
good message from Python and from YAML.

Because ``ConfigError`` subclasses ``ValueError``, callers that catch ``ValueError`` keep working.
"""
from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, TypeVar

import numpy as np

from ..errors import ParameterError
from .registry import did_you_mean

T = TypeVar("T")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _number(name: str, value: Any, what: str) -> float:
    if exponent_number(value) is not None:  # "1e-3": YAML 1.1 reads exponent forms without a dot as text
        value = exponent_number(value)
    if not _is_number(value) or math.isnan(float(value)):
        raise ParameterError(name, f"{name} must be {what}, got {value!r}.")
    return float(value)


def positive(name: str, value: Any) -> float:
    """``value > 0`` (finite or infinite), as a float."""
    v = _number(name, value, "a positive number")
    if not v > 0:
        raise ParameterError(name, f"{name} must be a positive number (> 0), got {value!r}.")
    return v


def non_negative(name: str, value: Any) -> float:
    """``value >= 0``, as a float."""
    v = _number(name, value, "a non-negative number")
    if not v >= 0:
        raise ParameterError(name, f"{name} must be a non-negative number (>= 0), got {value!r}.")
    return v


def in_range(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    hint: str = "",
) -> float:
    """``low <= value <= high`` (``<`` where ``*_open``), either bound optional (an absent bound is an
    open infinity: ``(0, inf)`` refuses ``inf``); as a float."""
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    interval = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"
    v = _number(name, value, f"a number in {interval}")
    bad = (low is not None and (v < low or (low_open and v == low))) or (
        high is not None and (v > high or (high_open and v == high))
    ) or math.isinf(v)  # an infinite bound is never reached
    if bad:
        extra = f" {hint}" if hint else ""
        raise ParameterError(name, f"{name} must be in {interval}, got {value!r}.{extra}")
    return v


#: a number in exponent form (``3e5``, ``2.5E+4``), which YAML 1.1 reads as text unless it has a dot
#: and a signed exponent (``3.0e+5``)
_EXPONENT_FORM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d{1,3}")


def exponent_number(text: Any) -> int | float | None:
    """``text`` written in exponent form (``"3e5"``, ``"2.5e4"``: what YAML 1.1 leaves as a string) as
    the number it writes: an int when it is a whole number (exactly: ``"1e23"`` is ``10**23``), else
    a float (``"3.5e0"``); None for anything else (other text, a number that is not text)."""
    if not isinstance(text, str) or not _EXPONENT_FORM.fullmatch(text.strip()):
        return None
    exact = Decimal(text.strip())
    if exact.adjusted() > 308:  # beyond float64: inf, which the range checks refuse (not an int of 10**400)
        return float(exact)
    return int(exact) if exact == exact.to_integral_value() else float(exact)


def whole_number_hint(text: str) -> str:
    """The fix for a number in exponent form that is not whole (``"3.5e0"``): the integers around it."""
    exact = Decimal(text.strip())
    if exact.adjusted() > 18:  # no integer setting is that large
        return "give an integer (3e5 is read as 300000)."
    return f"give an integer (e.g. {math.floor(exact)} or {math.ceil(exact)}; 3e5 is read as 300000)."


def integer(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (bools refused) within the optional bounds; a whole number in exponent form, as
    text (``"3e5"``, which YAML 1.1 reads as a string) or as a float (``3.0e+5``), is taken as the
    integer it writes."""
    if isinstance(value, str) and exponent_number(value) is not None:
        number = exponent_number(value)
        if not isinstance(number, int):
            raise ParameterError(name, f"{name} is {value!r}, which is not a whole number; {whole_number_hint(value)}")
        value = number
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ParameterError(name, f"{name} must be an integer, got {value!r}.")
    v = int(value)
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        bounds = (
            f">= {minimum}" if maximum is None else f"<= {maximum}" if minimum is None
            else f"between {minimum} and {maximum}"
        )
        raise ParameterError(name, f"{name} must be an integer {bounds}, got {value!r}.")
    return v


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """An integer ``>= minimum`` (1 by default)."""
    return integer(name, value, minimum=minimum)


def choice(name: str, value: Any, choices: Sequence[T]) -> T:
    """``value`` if it is one of ``choices``; else an error listing them with a did-you-mean."""
    if value in choices:
        return value
    listing = ", ".join(repr(c) for c in choices)
    suggestion = did_you_mean(str(value), [str(c) for c in choices])
    raise ParameterError(name, f"{name} is {value!r}, which is not a valid choice.{suggestion} Valid choices: {listing}.")


def adam_betas(name: str, value: Any) -> tuple[float, float]:
    """Adam's ``(β1, β2)``: two numbers, each in [0, 1)."""
    try:
        values = tuple(value)
    except TypeError:
        values = ()
    if len(values) != 2 or not all(_is_number(b) and 0.0 <= float(b) < 1.0 for b in values):
        raise ParameterError(
            name, f"{name} must be two numbers in [0, 1) (Adam's β1, β2, e.g. [0.9, 0.999]), got {value!r}."
        )
    return float(values[0]), float(values[1])


def finite(name: str, value: Any) -> float:
    """A finite number."""
    v = _number(name, value, "a finite number")
    if not math.isfinite(v):
        raise ParameterError(name, f"{name} must be a finite number, got {value!r}.")
    return v


def boolean(name: str, value: Any) -> bool:
    """``True`` or ``False`` (numpy booleans accepted; 0/1 and strings refused)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ParameterError(name, f"{name} must be true or false, got {value!r}.")


def seed(name: str, value: Any) -> int:
    """A random seed: a non-negative integer."""
    return integer(name, value, minimum=0)


def not_text_message(path: Any, err: UnicodeDecodeError, what: str) -> str:
    """One paragraph saying that ``path``, given as ``what`` ("a config file"), is not text (a
    checkpoint, weight file or archive given where a text file goes): where the bytes stop being
    UTF-8, and what such a file looks like."""
    head = ""
    try:
        with open(path, "rb") as f:
            start = f.read(4)
        if start.startswith(b"PK"):
            head = " (it starts as a zip archive: a checkpoint.pt or a .npz is one)"
    except OSError:
        pass
    return (f"'{path}' is not a text file{head}: byte {err.start} is not UTF-8 text. It was given as {what}; "
            f"pass the text file itself.")
