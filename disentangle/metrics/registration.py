"""How a metric joins the library: one decorator on its function, in its own module.

    @register_metric(checks=CHECK_SETTINGS)
    def mig(dataset, representation, *, seed=0, num_train=10_000, ...): ...

registers the function in :data:`METRICS` under its name and records a :class:`MetricSpec`: the
value checks of its settings, their frozen dataclass (:attr:`MetricSpec.settings_type`, built from
the signature, validated at construction), whether it needs the model's ``encode`` rather than codes, always or
for some settings. A setting is declared once, as a keyword-only parameter of the function with
its default; the registered function checks every setting (the defaults too) before its body
runs, so the body reads its parameters as validated, converted values. Code that runs metrics asks
the spec (:func:`metric_spec`) and never a metric's internals. Every module of
``disentangle/metrics/`` is imported with the package, so a new metric is one file.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._core.registry import Registry

METRICS: Registry = Registry("metric")
"""The metric registry: metric names (``train.eval_metrics``, ``python -m disentangle.evaluate
--metrics``) to the metric functions; their keyword-only parameters are the metric's settings."""

Settings = Mapping[str, Any]


def _never(settings: Settings) -> bool:
    return False


@dataclass(frozen=True)
class MetricSpec:
    """What the library knows of a registered metric."""

    name: str
    function: Callable[..., dict[str, float]]
    check: Callable[..., dict[str, Any]] | None = None
    """Validates keyword settings and returns them converted (``SettingsChecks``); None: no checks."""
    requires_encoder: bool = False
    """Whether it needs a model with ``encode`` (it does not apply to a plain function of images)."""
    needs_model_for: Callable[[Settings], bool] = _never
    """Whether, with these settings, it needs the model itself rather than codes of observations
    (MIG with Chen et al.'s estimator): such a call never goes through a code table."""
    draws_for: Callable[[Settings], int] | None = None
    """How many observations it draws with these settings (every setting given), e.g.
    ``num_train + num_test``; None: not declared. ``evaluate_metrics`` weighs it against the size of
    the factor grid to decide whether a code table pays."""

    def defaults(self) -> dict[str, Any]:
        """Every setting with its default (the function's keyword-only parameters)."""
        return {
            p.name: p.default
            for p in inspect.signature(self.function).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }

    def needs_model(self, settings: Settings) -> bool:
        """Whether a call with ``settings`` (given ones; the rest default) needs the model."""
        return self.requires_encoder or self.needs_model_for({**self.defaults(), **settings})

    def draws(self, settings: Settings) -> int | None:
        """Observations a call with ``settings`` (given ones; the rest default) draws; None if undeclared."""
        if self.draws_for is None:
            return None
        return int(self.draws_for({**self.defaults(), **settings}))

    @functools.cached_property
    def settings_type(self) -> type:
        """The metric's settings as a frozen dataclass (``MigSettings`` for ``mig``): one field per
        keyword-only parameter of the function, with its annotation and default. Constructing one
        runs the metric's checks on every field, so an instance holds validated, converted values."""
        fields = []
        for p in inspect.signature(self.function).parameters.values():
            if p.kind is not inspect.Parameter.KEYWORD_ONLY:
                continue
            annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
            default = p.default
            if isinstance(default, (list, dict, set)):  # a dataclass field needs a factory for these
                value = field(default_factory=functools.partial(copy.deepcopy, default))
            else:
                value = field(default=default)
            fields.append((p.name, annotation, value))
        check = self.check

        def __post_init__(settings: Any) -> None:
            if check is not None:
                for key, value in check(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}).items():
                    object.__setattr__(settings, key, value)  # the checked, converted value

        name = "".join(part.capitalize() for part in self.name.split("_")) + "Settings"
        doc = f"The settings of the metric ``{self.name}`` (validated at construction)."
        return dataclasses.make_dataclass(
            name, fields, frozen=True, namespace={"__post_init__": __post_init__, "__doc__": doc}
        )

    def settings(self, **given: Any) -> Any:
        """A validated :attr:`settings_type` instance: the ``given`` settings, the rest at their
        defaults; an unknown setting raises ``TypeError`` naming it, a bad value the metric's own
        ``ParameterError``."""
        return self.settings_type(**given)


_SPECS: dict[str, MetricSpec] = {}


def register_metric(
    name: str | None = None,
    *,
    checks: Callable[..., dict[str, Any]] | None = None,
    requires_encoder: bool = False,
    needs_model: Callable[[Settings], bool] = _never,
    draws: Callable[[Settings], int] | None = None,
) -> Callable[[Callable[..., dict[str, float]]], Callable[..., dict[str, float]]]:
    """Register the decorated metric function under ``name`` (default: its own name) with its spec
    (:class:`MetricSpec`: ``needs_model`` is its ``needs_model_for``, ``draws`` its ``draws_for``)."""

    def decorate(function: Callable[..., dict[str, float]]) -> Callable[..., dict[str, float]]:
        key = name or function.__name__
        checked = function if checks is None else _checked(function, checks)
        METRICS.register(key, checked)
        _SPECS[key] = MetricSpec(key, checked, checks, requires_encoder, needs_model, draws)
        return checked

    return decorate


def _checked(function: Callable[..., dict[str, float]], checks: Callable[..., dict[str, Any]]):
    """``function`` called with its keyword settings (given and default) run through ``checks``."""
    signature = inspect.signature(function)
    keyword = [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]

    @functools.wraps(function)
    def metric(*args: Any, **kwargs: Any) -> dict[str, float]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        settings = checks(**{k: bound.arguments[k] for k in keyword})
        return function(*bound.args, **{**bound.kwargs, **settings})

    return metric


def metric_spec(name: str) -> MetricSpec:
    """The spec of the registered metric ``name`` (an unknown name raises, listing the valid ones)."""
    function = METRICS.get(name)
    spec = _SPECS.get(name)
    if spec is None or spec.function is not function:  # registered directly with METRICS.register
        spec = MetricSpec(name, function)
    return spec
