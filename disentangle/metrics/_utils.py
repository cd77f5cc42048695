"""Shared machinery of the metrics: representation calls, sampling, discretisation, information.

Conventions used by every metric in this package:

* codes are ``(n, d)`` float64 arrays (one row per observation) and factors ``(n, K)`` int64
  arrays of class indices. (disentanglement_lib stores both transposed; the maths is the same.)
* a metric draws all of its randomness from ``np.random.default_rng(seed)`` (sampling) and from
  integers derived from ``seed`` (classifier ``random_state``), never from global state, so the same
  seed gives the same numbers, whatever ``n_jobs`` is.
* the representation is called on batches of ``representation_batch_size`` observations (by
  default 64 on a CPU, 1,024 on an accelerator: :func:`default_representation_batch_size`) under
  :func:`torch.inference_mode`, observations moved to the model's device.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from .._core import checks
from .._core.registry import did_you_mean

#: observations per representation call on an accelerator unless a metric is told otherwise
DEFAULT_REPRESENTATION_BATCH_SIZE = 1024
#: ... and on a CPU, where small batches stay in cache: conv64 encodes 2-3x more images per second
#: in batches of 64 than of 1,024 (benchmarks/RESULTS-metrics.md)
CPU_REPRESENTATION_BATCH_SIZE = 64


def default_representation_batch_size(device: torch.device | str | None) -> int:
    """Observations per representation call when a metric is not told (``representation_batch_size``
    null): :data:`CPU_REPRESENTATION_BATCH_SIZE` on a CPU (or for a plain function), else
    :data:`DEFAULT_REPRESENTATION_BATCH_SIZE`."""
    if device is None or torch.device(device).type == "cpu":
        return CPU_REPRESENTATION_BATCH_SIZE
    return DEFAULT_REPRESENTATION_BATCH_SIZE


# --------------------------------------------------------------------------- argument checks
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


def check_dataset(dataset: Any) -> tuple[int, ...]:
    """Check ``dataset`` has the ground-truth interface; return its factor sizes."""
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


# --------------------------------------------------------------------------- representations
def modules_of(representation: Any) -> list[torch.nn.Module]:
    """The :class:`torch.nn.Module` behind a representation: the module itself, the module of a
    bound method (``model.representation``), or the target of a :class:`RepresentationFunction`."""
    if isinstance(representation, RepresentationFunction):
        representation = representation.target
    if isinstance(representation, torch.nn.Module):
        return [representation]
    owner = getattr(representation, "__self__", None)
    return [owner] if isinstance(owner, torch.nn.Module) else []


@contextlib.contextmanager
def eval_mode(representation: Any):
    """Within this context the representation's modules are in eval mode; afterwards every
    submodule has its own previous mode back (a model with mixed modes comes back unchanged).

    A metric reads codes, it does not train: BatchNorm must use (and not update) its running
    statistics and dropout must be off, whatever mode the caller left the model in.
    """
    roots = modules_of(representation)
    saved = [(m, m.training) for root in roots for m in root.modules()]
    for root in roots:
        root.eval()
    try:
        yield
    finally:
        for module, training in saved:
            module.training = training


class RepresentationFunction:
    """Batched, gradient-free calls of a representation, returning float64 ``(n, d)`` arrays.

    ``representation`` is either a model (anything with a ``representation(x)`` method, such as
    a trained VAE, whose posterior means are the codes) or any callable mapping a batch of
    observations to codes ``(n, d)`` as a tensor or array. When the model (or the callable) is a
    :class:`torch.nn.Module`, observations are moved to the device of its first parameter, and
    every call runs in eval mode (see :func:`eval_mode`).
    """

    def __init__(self, representation: Any, batch_size: int | None = None):
        if isinstance(representation, RepresentationFunction):
            representation = representation.target
        self.target = representation
        method = getattr(representation, "representation", None)
        if callable(method):
            self._fn: Callable[[Any], Any] = method
        elif callable(representation):
            self._fn = representation
        else:
            raise TypeError(
                "representation must be a model with a representation(x) method or a callable "
                f"mapping a batch of observations to codes (n, d); got {type(representation).__name__}."
            )
        owners = modules_of(representation)
        module = owners[0] if owners else None
        self.device: torch.device | None = None
        if module is not None:
            first = next(module.parameters(), None)
            if first is None:
                first = next(module.buffers(), None)
            self.device = first.device if first is not None else None
        if batch_size is None:
            batch_size = default_representation_batch_size(self.device)
        self.batch_size = checks.positive_int("representation_batch_size", batch_size)

    def _call(self, observations: Any) -> np.ndarray:
        if self.device is not None:
            if isinstance(observations, np.ndarray):
                observations = torch.as_tensor(observations)
            if isinstance(observations, torch.Tensor) and observations.device != self.device:
                observations = observations.to(self.device)
        with torch.inference_mode(), eval_mode(self.target):
            out = self._fn(observations)
        if isinstance(out, tuple):
            raise TypeError(
                "the representation returned a tuple; it must return one array of codes (n, d). "
                "(A model's encode() returns (mu, logvar): pass the model itself, whose "
                "representation() gives the posterior means.)"
            )
        if isinstance(out, torch.Tensor):
            out = out.detach().to("cpu", torch.float64).numpy()
        out = np.asarray(out, dtype=np.float64)
        return out

    def __call__(self, observations: Any) -> np.ndarray:
        """Codes ``(n, d)`` float64 for a batch of observations, called in chunks."""
        n = len(observations)
        parts = [
            self._call(observations[start : start + self.batch_size])
            for start in range(0, n, self.batch_size)
        ]
        codes = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        return check_codes(codes, n)


def check_codes(codes: np.ndarray, n: int | None = None) -> np.ndarray:
    """Validate the codes a representation returned: finite, 2-D, one row per observation."""
    if codes.ndim == 1 and n is not None and codes.shape[0] == n:
        raise ValueError(
            f"the representation returned a 1-D array of shape {codes.shape}; codes must have "
            "shape (n, d) (use codes[:, None] for a one-dimensional code)."
        )
    if codes.ndim != 2:
        raise ValueError(
            f"the representation must return codes of shape (n, d), got shape {codes.shape}."
        )
    if n is not None and codes.shape[0] != n:
        raise ValueError(
            f"the representation returned {codes.shape[0]} rows for {n} observations; it must "
            "return one code per observation."
        )
    if codes.shape[1] < 1:
        raise ValueError("the representation returned codes with zero dimensions.")
    if not np.isfinite(codes).all():
        raise ValueError("the representation returned non-finite values (NaN or inf).")
    return codes


def as_representation_function(representation: Any, batch_size: int | None = None) -> RepresentationFunction:
    if isinstance(representation, RepresentationFunction) and (
        batch_size is None or batch_size == representation.batch_size
    ):
        return representation
    return RepresentationFunction(representation, batch_size)


# --------------------------------------------------------------------------- sampling
def sample_factors(dataset: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    sizes = check_dataset(dataset)
    factors = np.asarray(dataset.sample_factors(n, rng))
    if factors.shape != (n, len(sizes)):
        raise ValueError(
            f"dataset.sample_factors({n}, rng) returned shape {factors.shape}, expected {(n, len(sizes))}."
        )
    return factors.astype(np.int64, copy=False)


def codes_for_factors(
    dataset: Any, code_fn: RepresentationFunction, factors: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Codes of observations drawn for ``factors``, in chunks of ``code_fn.batch_size``."""
    step = code_fn.batch_size
    parts = []
    for start in range(0, len(factors), step):
        chunk = factors[start : start + step]
        parts.append(code_fn(dataset.sample_observations_from_factors(chunk, rng)))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


class _CodeCache:
    """Memo of :func:`sample_codes_and_factors` keyed on the generator state (see :func:`code_cache`)."""

    def __init__(self) -> None:
        self.entries: dict[tuple, tuple[np.ndarray, np.ndarray, dict]] = {}
        self.hits = 0


_ACTIVE_CACHE: list[_CodeCache] = []


@contextlib.contextmanager
def code_cache():
    """Within this context, identical draws of (codes, factors) are computed once.

    Most metrics start with ``rng = default_rng(seed)`` and draw ``num_train`` then ``num_test``
    points, so with the same seed MIG, DCI, SAP, modularity and the unsupervised scores use the same
    samples (as in disentanglement_lib, where each metric re-seeds its RandomState). A draw is keyed
    on (dataset, representation, generator state, n); a hit returns the stored arrays *and* advances
    the generator to the state the draw left it in, so results are identical with or without the
    cache. :func:`disentangle.metrics.evaluate_metrics` uses it.
    """
    cache = _CodeCache()
    _ACTIVE_CACHE.append(cache)
    try:
        yield cache
    finally:
        _ACTIVE_CACHE.remove(cache)


def sample_codes_and_factors(
    dataset: Any, code_fn: RepresentationFunction, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniformly drawn factor vectors and the codes of observations drawn for them.

    Returns ``(codes (n, d) float64, factors (n, K) int64)``.
    """
    cache = _ACTIVE_CACHE[-1] if _ACTIVE_CACHE else None
    key = None
    if cache is not None:
        key = (id(dataset), id(code_fn.target), code_fn.batch_size, repr(rng.bit_generator.state), n)
        hit = cache.entries.get(key)
        if hit is not None:
            codes, factors, state_after = hit
            rng.bit_generator.state = state_after
            cache.hits += 1
            return codes.copy(), factors.copy()
    factors = sample_factors(dataset, n, rng)
    codes = codes_for_factors(dataset, code_fn, factors, rng)
    if cache is not None:
        cache.entries[key] = (codes.copy(), factors.copy(), rng.bit_generator.state)
    return codes, factors


def sample_fixed_factor_groups(
    dataset: Any, num_groups: int, group_size: int, rng: np.random.Generator, chosen: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Groups of factor vectors sharing the value of one random factor (others uniform).

    Returns ``(factor_index (num_groups,), factors (num_groups, group_size, K))``: in group ``g``
    every row has factor ``factor_index[g]`` (drawn uniformly from ``chosen``, default all) equal
    to that of the group's first row (the sampling step of the FactorVAE score, vectorised over
    groups).
    """
    sizes = check_dataset(dataset)
    chosen = np.arange(len(sizes)) if chosen is None else np.asarray(chosen, dtype=np.int64)
    index = chosen[rng.integers(len(chosen), size=num_groups)]
    factors = sample_factors(dataset, num_groups * group_size, rng).reshape(
        num_groups, group_size, len(sizes)
    )
    rows = np.arange(num_groups)
    factors[rows, :, index] = factors[rows, 0, index][:, None]
    return index, factors


# --------------------------------------------------------------------------- discretisation
def histogram_discretize(codes: np.ndarray, num_bins: int = 20) -> np.ndarray:
    """Per code dimension, the bin index (0-based) in ``num_bins`` equal-width bins.

    Bit-for-bit the reference rule ``np.digitize(x, np.histogram(x, num_bins)[1][:-1]) - 1``
    applied to each column ``x``: the bin edges span ``[min, max]`` of that column (``[x-0.5,
    x+0.5]`` for a constant column, as in :func:`np.histogram`), the maximum falls into the last bin.
    Vectorised over columns: the bin is computed arithmetically and corrected against the exact
    ``np.linspace`` edges, so no per-column loop is needed. Returns int64 ``(n, d)``.
    """
    num_bins = checks.positive_int("num_bins", num_bins)
    codes = np.asarray(codes, dtype=np.float64)
    if codes.ndim != 2:
        raise ValueError(f"codes must have shape (n, d), got {codes.shape}.")
    if not np.isfinite(codes).all():
        raise ValueError("codes must be finite to be discretised.")
    lo = codes.min(axis=0)
    hi = codes.max(axis=0)
    const = lo == hi
    lo = np.where(const, lo - 0.5, lo)
    hi = np.where(const, hi + 0.5, hi)
    edges = np.linspace(lo, hi, num_bins + 1, axis=0)  # (num_bins + 1, d), as np.histogram
    with np.errstate(invalid="ignore", divide="ignore"):
        guess = np.floor((codes - lo) / (hi - lo) * num_bins)
    bins = np.clip(np.nan_to_num(guess), 0, num_bins - 1).astype(np.int64)
    cols = np.broadcast_to(np.arange(codes.shape[1]), codes.shape)
    for _ in range(4):  # the arithmetic guess is off by at most one edge; fix against the edges
        down = (codes < edges[bins, cols]) & (bins > 0)
        up = (bins < num_bins - 1) & (codes >= edges[np.minimum(bins + 1, num_bins), cols])
        if not (down.any() or up.any()):
            break
        bins = bins - down + up
    return bins


# --------------------------------------------------------------------------- information
def _compact_columns(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column relabelled to ``0..c_j-1`` ``(n, k)`` int64, and the number of values ``c_j`` per column."""
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"labels must have shape (n, k), got {labels.shape}.")
    if not (np.issubdtype(labels.dtype, np.integer) or np.issubdtype(labels.dtype, np.bool_)):
        raise ValueError(f"labels must be integers (discretise codes first), got {labels.dtype}.")
    compact = np.empty(labels.shape, dtype=np.int64)
    sizes = np.zeros(labels.shape[1], dtype=np.int64)
    for j in range(labels.shape[1]):  # one pass per column (not per pair)
        uniq, inverse = np.unique(labels[:, j], return_inverse=True)
        compact[:, j] = inverse.ravel()
        sizes[j] = len(uniq)
    return compact, sizes


def _compact_labels(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compact labels offset into one joint index over all columns, and the offsets."""
    compact, sizes = _compact_columns(labels)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return compact + offsets, offsets


#: elements of the largest array built at once by :func:`discrete_mutual_info` (8 MiB of int64)
MI_BLOCK_ELEMENTS = 1 << 20


def discrete_mutual_info(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mutual information in nats between every column of ``a`` and every column of ``b``.

    ``a`` is ``(n, p)`` and ``b`` is ``(n, q)``, both integer labels; returns ``(p, q)`` with entry
    ``[i, j] = sklearn.metrics.mutual_info_score(a[:, i], b[:, j])``: the plug-in estimate from the
    joint histogram, natural log, clipped at 0, and exactly 0 where either column has a single
    value (a constant code carries no information, not a rounding crumb of it).

    The contingency tables of many pairs are counted with one ``bincount`` over pair-offset
    labels, in blocks of pairs sized so that no array exceeds :data:`MI_BLOCK_ELEMENTS` elements:
    the memory stays bounded for wide codes (``unsupervised_scores`` compares every pair of
    ``d`` codes) and the work is ``n p q`` rather than the ``n (20 p) (20 q)`` of a one-hot product
    (half of it when ``b is a``, whose result is symmetric).
    """
    a_lab, a_sizes = _compact_columns(a)
    b_lab, b_sizes = _compact_columns(b)
    if a_lab.shape[0] != b_lab.shape[0]:
        raise ValueError(f"a and b must have the same number of rows, got {a.shape[0]} and {b.shape[0]}.")
    n, p = a_lab.shape
    q = b_lab.shape[1]
    if n == 0:
        raise ValueError("mutual information needs at least one sample.")
    ca, cb = int(a_sizes.max(initial=1)), int(b_sizes.max(initial=1))
    # I(A; B) = log n + (sum_ab c_ab log c_ab - sum_a c_a log c_a - sum_b c_b log c_b) / n, with
    # c log c looked up in a table of the n + 1 possible counts (0 log 0 = 0)
    counts = np.arange(n + 1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        c_log_c = np.where(counts > 0, counts * np.log(counts), 0.0)
    a_term = c_log_c[_value_counts(a_lab, ca)].sum(axis=1)  # (p,)
    b_term = c_log_c[_value_counts(b_lab, cb)].sum(axis=1)  # (q,)
    pairs_per_block = max(1, MI_BLOCK_ELEMENTS // max(n, ca * cb))
    b_step = min(q, pairs_per_block)
    a_step = max(1, pairs_per_block // b_step)
    symmetric = a is b  # the MI of every pair of codes: count the upper triangle only
    joint_term = np.zeros((p, q))
    for i0 in range(0, p, a_step):
        i1 = min(p, i0 + a_step)
        for j0 in range(0, q, b_step):
            j1 = min(q, j0 + b_step)
            if symmetric and j1 <= i0:
                continue
            pa, qb = i1 - i0, j1 - j0
            pair = np.arange(pa * qb, dtype=np.int64).reshape(pa, qb) * (ca * cb)
            index = a_lab[:, i0:i1, None] * cb + b_lab[:, None, j0:j1]
            index += pair
            joint = np.bincount(index.ravel(), minlength=pa * qb * ca * cb).reshape(pa * qb, ca * cb)
            joint_term[i0:i1, j0:j1] = c_log_c[joint].sum(axis=1).reshape(pa, qb)
    mi = math.log(n) + (joint_term - a_term[:, None] - b_term[None, :]) / n
    if symmetric:
        lower = np.tril_indices(p, -1)
        mi[lower] = mi.T[lower]
    mi[a_sizes < 2, :] = 0.0
    mi[:, b_sizes < 2] = 0.0
    return np.maximum(mi, 0.0)


def _value_counts(labels: np.ndarray, width: int) -> np.ndarray:
    """``(k, width)`` count of each value per column of compact labels (0 for absent values)."""
    k = labels.shape[1]
    flat = (labels + np.arange(k) * width).ravel()
    return np.bincount(flat, minlength=k * width).reshape(k, width)


def discrete_entropy(labels: np.ndarray) -> np.ndarray:
    """Plug-in entropy in nats of each column of integer ``labels`` ``(n, k)``; returns ``(k,)``."""
    joint_labels, offsets = _compact_labels(labels)
    n = joint_labels.shape[0]
    if n == 0:
        raise ValueError("entropy needs at least one sample.")
    counts = np.bincount(joint_labels.ravel(), minlength=int(joint_labels.max()) + 1).astype(np.float64)
    p = counts / n
    terms = -p * np.log(p)
    return np.maximum(np.add.reduceat(terms, offsets), 0.0)


def normalize_codes(
    train: np.ndarray, test: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Standardise with the training mean and standard deviation (a constant column is only centred)."""
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (train - mean) / std, None if test is None else (test - mean) / std


# --------------------------------------------------------------------------- parallel fits
def resolve_n_jobs(n_jobs: int | None, num_tasks: int) -> int:
    """``None`` means one worker per available core (at most one per task); ``-1`` all cores."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    n_jobs = check_n_jobs(n_jobs)
    if n_jobs is None or n_jobs == -1:
        n_jobs = cores
    return max(1, min(int(n_jobs), num_tasks))


_CONTROLLER: list = []


def _thread_limit():
    """A context limiting BLAS/OpenMP to one thread (the controller is built once per process)."""
    if not _CONTROLLER:
        # load the native libraries of the estimators first, so that the controller sees them
        import sklearn.ensemble
        import sklearn.linear_model
        import sklearn.svm  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1)


def _run_task(fn: Callable, args: tuple, parent_pid: int) -> Any:
    if os.getpid() != parent_pid:  # a worker process (joblib's loky backend): same limits as here
        from sklearn.exceptions import ConvergenceWarning

        with _thread_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return fn(*args)
    return fn(*args)


def parallel_map(
    fn: Callable,
    tasks: Iterable[tuple],
    n_jobs: int | None,
    costs: Sequence[float] | None = None,
    prefer: str = "threads",
) -> list:
    """``[fn(*t) for t in tasks]``, run on ``n_jobs`` joblib workers when there is more than one.

    ``costs`` (optional, one per task) schedules the most expensive tasks first, which balances
    uneven tasks (e.g. one boosted-trees fit per factor with 3 vs 40 classes) across the workers.
    Results are returned in task order and do not depend on ``n_jobs``.

    ``prefer`` is joblib's hint: ``"threads"`` where the fits release the GIL (liblinear's SVMs:
    threads start instantly and copy nothing), ``"processes"`` where they hold it for long
    (lbfgs logistic regression, the Python loops of the boosters); worker processes start once per
    session (a few seconds) and are reused. ``joblib.parallel_config(backend=...)`` overrides it.
    BLAS/OpenMP are limited to one thread per task: the fits are small, oversubscribing the cores
    slows them down severalfold, and a fixed thread count keeps the floating-point results
    identical for any ``n_jobs``. Solver convergence warnings are silenced (the reference
    settings, e.g. 100 lbfgs iterations, are kept on purpose).
    """
    tasks = list(tasks)
    workers = resolve_n_jobs(n_jobs, len(tasks))
    order = list(range(len(tasks)))
    if costs is not None:
        order.sort(key=lambda i: -costs[i])
    from sklearn.exceptions import ConvergenceWarning

    pid = os.getpid()
    with _thread_limit(), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if workers == 1:
            results = {i: fn(*tasks[i]) for i in order}
        else:
            from joblib import Parallel, delayed

            out = Parallel(n_jobs=workers, batch_size=1, prefer=prefer)(
                delayed(_run_task)(fn, tasks[i], pid) for i in order
            )
            results = dict(zip(order, out))
    return [results[i] for i in range(len(tasks))]


def as_float_dict(scores: dict[str, Any]) -> dict[str, float]:
    """Every value as a plain Python float (the contract of a metric's return value)."""
    return {str(k): float(v) for k, v in scores.items()}
