"""The metrics' settings: value checks run before anything is sampled, the factors a metric scores, seeds derived for classifiers, plain-float results."""
from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .._core import checks
from .._core.registry import did_you_mean


def check_n_jobs(n_jobs: Any) -> int | None:
    """``None`` (one worker per core), ``-1`` (all cores) or a positive integer."""
    if n_jobs is None:
        return None
    if not isinstance(n_jobs, bool) and isinstance(n_jobs, numbers.Integral) and (n_jobs == -1 or n_jobs >= 1):
        return int(n_jobs)
    raise checks.ParameterError(
        "n_jobs", f"n_jobs must be null/None (one worker per core), -1 (all cores) or a positive integer, got {n_jobs!r}."
    )


def check_factor_selection(factors: Any) -> list[str | int] | None:
    """The form of a ``factors=`` setting: ``None`` or a non-empty list of names or indices."""
    if factors is None:
        return None
    if isinstance(factors, (str, bytes)) or not isinstance(factors, Iterable):
        raise checks.ParameterError(
            "factors",
            f"factors must be a list of factor names or indices (e.g. ['scale', 'orientation']), got {factors!r}.",
        )
    items = list(factors)
    if not items:
        raise checks.ParameterError("factors", "factors must name at least one factor; leave it out to score them all.")
    for item in items:
        if not isinstance(item, str) and (isinstance(item, bool) or not isinstance(item, numbers.Integral)):
            raise checks.ParameterError(
                "factors", f"factors must hold factor names (strings) or indices (integers), got {item!r}."
            )
    return [item if isinstance(item, str) else int(item) for item in items]


def select_factors(dataset: Any, factors: Any = None) -> np.ndarray:
    """Indices of the factors a metric scores, in the order given (int64).

    ``None`` (the default of every metric): every factor with more than one value. A factor of
    size 1 has zero entropy, so no code can carry information about it; scoring it would only
    dilute (or, for DCI, distort) the score. Otherwise ``factors`` lists names (``"scale"``) or
    indices (``1``); an unknown name, an index out of range, a repeated factor or a factor with a
    single value is a :class:`~disentangle._core.checks.ParameterError`.
    """
    sizes = check_dataset(dataset)
    names = factor_names(dataset)
    chosen = check_factor_selection(factors)
    if chosen is None:
        return np.flatnonzero(np.asarray(sizes) > 1).astype(np.int64)
    indices = []
    for item in chosen:
        if isinstance(item, str):
            if item not in names:
                raise checks.ParameterError(
                    "factors",
                    f"factors lists '{item}', which is not a factor of this dataset.{did_you_mean(item, names)} "
                    f"Its factors: {', '.join(names)}.",
                )
            index = names.index(item)
        else:
            if not -len(sizes) <= item < len(sizes):
                raise checks.ParameterError(
                    "factors", f"factors holds the index {item}, but the dataset has {len(sizes)} factors ({', '.join(names)})."
                )
            index = item % len(sizes)
        if sizes[index] < 2:
            raise checks.ParameterError(
                "factors", f"factor '{names[index]}' has a single value (size 1): there is nothing to score for it."
            )
        if index in indices:
            raise checks.ParameterError("factors", f"factors lists '{names[index]}' twice.")
        indices.append(index)
    return np.asarray(indices, dtype=np.int64)


class SettingsChecks:
    """The value checks of one metric's settings, run before anything is sampled or encoded.

    ``checks`` maps a keyword to a function of its value returning the validated value (or
    raising :class:`~disentangle._core.checks.ParameterError`); ``together`` (optional) checks the
    whole validated dict for conditions between settings. Calling the object with keyword
    arguments returns them validated. :func:`disentangle.metrics.validate_settings` runs the same
    checks on settings given by name (the evaluate CLI's ``--set``), so a bad value is reported
    before a model is loaded.
    """

    def __init__(self, together: Callable[[dict[str, Any]], None] | None = None, **checks: Callable[[Any], Any]):
        self.checks = {**COMMON_CHECKS, **checks}
        self.together = together

    def __call__(self, **settings: Any) -> dict[str, Any]:
        out = {k: self.checks[k](v) if k in self.checks else v for k, v in settings.items()}
        if self.together is not None:
            self.together(out)
        return out


def _at_least(name: str, minimum: int) -> Callable[[Any], int]:
    return lambda value: checks.positive_int(name, value, minimum=minimum)


def count(name: str, minimum: int = 1) -> Callable[[Any], int]:
    """A check of an integer setting ``>= minimum`` (for :class:`SettingsChecks`)."""
    return _at_least(name, minimum)


def one_of(name: str, choices: Sequence[str]) -> Callable[[Any], str]:
    """A check of a choice setting (for :class:`SettingsChecks`)."""
    return lambda value: checks.choice(name, value, tuple(choices))


#: checks of the settings every metric shares
COMMON_CHECKS: dict[str, Callable[[Any], Any]] = {
    "seed": lambda value: checks.seed("seed", value),
    "n_jobs": check_n_jobs,
    "representation_batch_size": lambda value: None if value is None else checks.positive_int("representation_batch_size", value),
    "factors": check_factor_selection,
}


def is_sample(dataset: Any) -> bool:
    """Whether ``dataset`` is a sample of images without a factor grid
    (:class:`disentangle.data.SampleDataset`: ``is_grid`` False)."""
    return getattr(dataset, "is_grid", True) is False


def check_dataset(dataset: Any, labels: bool = True) -> tuple[int, ...]:
    """Check ``dataset`` has the ground-truth interface; return its factor sizes.

    A sample without a grid (:func:`is_sample`) passes when it is labelled, or when ``labels`` is
    False (a metric that needs none: its factor sizes are then ``()``)."""
    if is_sample(dataset):
        if not labels and not dataset.labelled:
            return ()
        dataset.require_labels("a metric that compares codes with factor labels")
    missing = [
        name
        for name in ("factor_sizes", "sample_factors", "sample_observations_from_factors")
        if not hasattr(dataset, name)
    ]
    if missing:
        raise TypeError(
            f"{type(dataset).__name__} lacks {', '.join(missing)}: a metric needs a dataset with "
            "the ground-truth interface (factor_names, factor_sizes, sample_factors(n, rng), "
            "sample_observations_from_factors(factors, rng)); see disentangle.data.GroundTruthDataset."
        )
    sizes = tuple(int(s) for s in dataset.factor_sizes)
    if not sizes or any(s < 1 for s in sizes):
        raise ValueError(f"dataset.factor_sizes must be positive integers, got {sizes}.")
    return sizes


def factor_names(dataset: Any) -> tuple[str, ...]:
    """The dataset's factor names, or ``factor_0, factor_1, ...`` where it has none."""
    sizes = check_dataset(dataset)
    names = getattr(dataset, "factor_names", None)
    if names is None or len(names) != len(sizes):
        return tuple(f"factor_{i}" for i in range(len(sizes)))
    return tuple(str(n) for n in names)


def derived_seed(seed: int, tag: int) -> int:
    """A 32-bit integer derived from ``(seed, tag)``, used as a classifier ``random_state``.

    Kept separate from the sampling generator so that the sampled data do not depend on how many
    classifiers a metric fits.
    """
    return int(np.random.SeedSequence([int(seed), int(tag)]).generate_state(1)[0])


def as_float_dict(scores: dict[str, Any]) -> dict[str, float]:
    """Every value as a plain Python float (the contract of a metric's return value)."""
    return {str(k): float(v) for k, v in scores.items()}
