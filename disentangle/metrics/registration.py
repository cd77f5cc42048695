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

A metric has one name, its function's: ``sap_score`` in ``METRICS``, in ``python -m
disentangle.evaluate --metrics``, in ``train.eval_metrics``, as ``disentangle.metrics.sap_score`` and
as the key of its scores. ``register_metric(aliases=("sap",))`` adds short names that are accepted
wherever a metric name is (``METRICS.get("sap")``, ``--metrics sap``) and stand for that name: they
resolve to it (:meth:`MetricRegistry.canonical`), so scores are always recorded under the metric's
name. An alias may not take a metric's name, another metric's alias, or ``all``.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._core.registry import Registry, did_you_mean
from ..errors import UnknownNameError

#: names a metric alias may not take: ``all`` means every metric wherever names are read
RESERVED_NAMES: tuple[str, ...] = ("all",)


class MetricRegistry(Registry):
    """The registry of metrics: a :class:`~disentangle._core.registry.Registry` whose entries may
    also be reached by aliases (``sap`` for ``sap_score``).

    :meth:`get`, ``in`` and :meth:`canonical` accept a name or an alias; :meth:`names` (and
    iteration, ``len``) are the metrics' names only, so ``"all"`` runs each metric once, under its
    name. An unknown name raises :class:`~disentangle.errors.UnknownNameError` with a did-you-mean
    over names and aliases.
    """

    def __init__(self, kind: str = "metric") -> None:
        super().__init__(kind)
        self._aliases: dict[str, str] = {}

    def register(self, name: str, obj: Callable[..., Any] | None = None, *, overwrite: bool = False):
        """Register ``obj`` under ``name`` (see :meth:`Registry.register`); ``name`` may not be an alias."""
        if name in self._aliases:
            raise ValueError(
                f"'{name}' is an alias of the {self.kind} '{self._aliases[name]}'; a {self.kind} cannot take its name."
            )
        return super().register(name, obj, overwrite=overwrite)

    def alias_conflict(self, alias: str, name: str) -> str | None:
        """Why ``alias`` cannot stand for the metric ``name`` (it would shadow another name); None if it can."""
        if not isinstance(alias, str) or not alias.isidentifier():
            return f"the {self.kind} alias {alias!r} is not a Python identifier."
        if alias in RESERVED_NAMES:
            return f"the {self.kind} alias '{alias}' is reserved ('{alias}' means every {self.kind})."
        if alias in self._entries and alias != name:
            return f"the {self.kind} alias '{alias}' for '{name}' would shadow the {self.kind} '{alias}'."
        if self._aliases.get(alias, name) != name:
            return f"'{alias}' is already an alias of the {self.kind} '{self._aliases[alias]}', not of '{name}'."
        return None

    def register_alias(self, alias: str, name: str) -> None:
        """Make ``alias`` stand for the registered metric ``name``; refused (``ValueError``) where it
        would shadow another name (see :meth:`alias_conflict`)."""
        name = self.canonical(name)
        conflict = self.alias_conflict(alias, name)
        if conflict is not None:
            raise ValueError(conflict)
        if alias != name:
            self._aliases[alias] = name

    def aliases(self) -> dict[str, str]:
        """Every alias with the name of the metric it stands for, sorted by alias."""
        return dict(sorted(self._aliases.items()))

    def canonical(self, name: str) -> str:
        """The metric's name for ``name``, a metric name or an alias (an unknown name raises)."""
        if name in self._aliases:
            return self._aliases[name]
        if name not in self._entries:
            known = [*self.names(), *self._aliases]
            aliases = ", ".join(f"{a} ({n})" for a, n in self.aliases().items())
            raise UnknownNameError(
                f"Unknown {self.kind} '{name}'.{did_you_mean(name, known)} "
                f"Valid {self.kind} names: {', '.join(self.names()) or '(none registered)'}"
                + (f"; aliases: {aliases}." if aliases else ".")
            )
        return name

    def get(self, name: str) -> Callable[..., Any]:
        """The metric registered as ``name`` or aliased ``name``."""
        return self._entries[self.canonical(name)]

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def __repr__(self) -> str:
        return f"MetricRegistry({self.kind!r}, names={list(self.names())}, aliases={self.aliases()})"


METRICS: MetricRegistry = MetricRegistry("metric")
"""The metric registry: metric names (``train.eval_metrics``, ``python -m disentangle.evaluate
--metrics``) to the metric functions; their keyword-only parameters are the metric's settings. Its
aliases (``sap`` for ``sap_score``) are accepted wherever a name is and resolve to that name."""

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
    data_for: Callable[[Settings], str] = lambda settings: "labels"
    """What data it needs with these settings (every setting given), one of :data:`DATA_NEEDS`:
    ``"grid"`` (it fixes factors and draws the rest, or encodes every grid point), ``"labels"`` (it
    compares codes with factor labels: a labelled sample will do) or ``"images"`` (no labels)."""

    def data(self, settings: Settings) -> str:
        """What data a call with ``settings`` (given ones; the rest default) needs (:attr:`data_for`)."""
        return self.data_for({**self.defaults(), **settings})

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

#: what a metric may need of the data, from most to least (``MetricSpec.data``)
DATA_NEEDS: tuple[str, ...] = ("grid", "labels", "images")


def register_metric(
    name: str | None = None,
    *,
    checks: Callable[..., dict[str, Any]] | None = None,
    requires_encoder: bool = False,
    needs_model: Callable[[Settings], bool] = _never,
    draws: Callable[[Settings], int] | None = None,
    data: str | Callable[[Settings], str] = "labels",
    aliases: tuple[str, ...] = (),
) -> Callable[[Callable[..., dict[str, float]]], Callable[..., dict[str, float]]]:
    """Register the decorated metric function under ``name`` (default: its own name) with its spec
    (:class:`MetricSpec`: ``needs_model`` is its ``needs_model_for``, ``draws`` its ``draws_for``,
    ``data`` (one of :data:`DATA_NEEDS`, or a function of the settings giving one) its ``data_for``),
    and ``aliases``, short names that stand for it (:meth:`MetricRegistry.register_alias`). Every
    name is checked first: a name or alias that would shadow another raises ``ValueError`` and
    registers nothing."""
    if isinstance(aliases, str):
        aliases = (aliases,)
    if isinstance(data, str):
        if data not in DATA_NEEDS:
            raise ValueError(f"data must be one of {', '.join(DATA_NEEDS)}, got {data!r}.")
        data_for: Callable[[Settings], str] = lambda settings, _need=data: _need
    else:
        data_for = data

    def decorate(function: Callable[..., dict[str, float]]) -> Callable[..., dict[str, float]]:
        key = name or function.__name__
        for alias in aliases:
            conflict = METRICS.alias_conflict(alias, key) or (
                f"the metric alias '{alias}' is given twice." if list(aliases).count(alias) > 1 else None)
            if conflict is not None:
                raise ValueError(conflict)
        checked = function if checks is None else _checked(function, checks)
        METRICS.register(key, checked)
        for alias in aliases:
            METRICS.register_alias(alias, key)
        _SPECS[key] = MetricSpec(key, checked, checks, requires_encoder, needs_model, draws, data_for)
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
    """The spec of the registered metric ``name``, or of the metric an alias stands for (an
    unknown name raises, listing the valid ones)."""
    name = METRICS.canonical(name)
    function = METRICS.get(name)
    spec = _SPECS.get(name)
    if spec is None or spec.function is not function:  # registered directly with METRICS.register
        spec = MetricSpec(name, function)
    return spec
