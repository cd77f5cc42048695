"""Config values against type hints: coercion (``'1e-4'`` to a float, ``'3e5'`` to an int where
it is a whole number, lists to tuples), the type names in messages, and plain (YAML-safe) copies.
"""
from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Literal, Union

from .._core import checks
from ..errors import ConfigError


# ---------------------------------------------------------------------- type checks
def _type_name(hint: Any) -> str:
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(hint))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(hint))
    if origin in (list, tuple, dict):
        args = typing.get_args(hint)
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"{origin.__name__}[{inner}]" if inner else origin.__name__
    return getattr(hint, "__name__", str(hint))


class _Mismatch(Exception):
    """``value`` does not fit ``hint``; its message, when it has one, says why better than the types
    do (``'3.5e0'`` for an int: not a whole number)."""


def _coerce(value: Any, hint: Any) -> Any:
    """Return ``value`` converted to ``hint`` where that is lossless, else raise _Mismatch."""
    if hint is Any or hint is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        explained = None
        for arg in args:
            try:
                return _coerce(value, arg)
            except _Mismatch as err:
                explained = explained or (err if err.args else None)
        raise explained or _Mismatch()
    if origin is Literal:
        if value in args:
            return value
        raise _Mismatch
    if hint is type(None):
        if value is None:
            return None
        raise _Mismatch
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        number = checks.exponent_number(value)  # YAML 1.1 reads "3e5" as a string
        if isinstance(number, int):
            return number
        if number is not None:
            raise _Mismatch(f"{value!r} is not a whole number; {checks.whole_number_hint(value)}")
        raise _Mismatch
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-4" as a string
            try:
                return float(value)
            except ValueError:
                raise _Mismatch from None
        raise _Mismatch
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise _Mismatch
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise _Mismatch
            return tuple(_coerce(v, a) for v, a in zip(value, args))
        inner = args[0] if args else Any
        items = [_coerce(v, inner) for v in value]
        return tuple(items) if (origin is tuple or hint is tuple) else items
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _Mismatch
        return dict(value)
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        raise _Mismatch
    return value  # an annotation we do not understand: accept


def _literal_choices(hint: Any) -> tuple[Any, ...] | None:
    """The choices of ``Literal[...]`` (or ``Literal[...] | None``), else None."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType):
        choices: list[Any] = []
        for arg in typing.get_args(hint):
            if arg is type(None):
                choices.append(None)
            elif typing.get_origin(arg) is Literal:
                choices.extend(typing.get_args(arg))
            else:
                return None
        return tuple(choices)
    return None


def _check_value(key: str, value: Any, hint: Any) -> Any:
    try:
        return _coerce(value, hint)
    except _Mismatch as err:
        if err.args:
            raise ConfigError(f"Config key '{key}': {err.args[0]}") from None
        choices = _literal_choices(hint)
        if choices is not None:
            checks.choice(key, value, choices)
        raise ConfigError(
            f"Config key '{key}' has the wrong type: given {value!r} ({type(value).__name__}), "
            f"expected {_type_name(hint)}."
        ) from None


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def _plain(value: Any) -> Any:
    """Tuples to lists, recursively, so the config dumps as plain YAML."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
