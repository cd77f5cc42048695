"""Drawing factors and the codes of their observations, and the cache that lets metrics drawing the same points share them."""
from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch

from ._representation import RepresentationFunction
from ._settings import check_dataset, is_sample


def sample_factors(dataset: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    sizes = check_dataset(dataset)
    factors = np.asarray(dataset.sample_factors(n, rng))
    if factors.shape != (n, len(sizes)):
        raise ValueError(
            f"dataset.sample_factors({n}, rng) returned shape {factors.shape}, expected {(n, len(sizes))}."
        )
    return factors.astype(np.int64, copy=False)


def draw_images(dataset: Any, n: int, rng: np.random.Generator, batch_size: int):
    """``n`` images drawn uniformly (with replacement) from ``dataset``, in float batches in [0, 1] of
    at most ``batch_size``: stored images by index on a sample (labelled or not), observations of
    uniform factor classes on a grid."""
    if is_sample(dataset):
        indices = rng.integers(len(dataset), size=int(n), dtype=np.int64)
        for start in range(0, n, batch_size):
            yield dataset.observe(torch.as_tensor(indices[start : start + batch_size], device=dataset.device))
        return
    factors = sample_factors(dataset, n, rng)
    for start in range(0, n, batch_size):
        obs = dataset.sample_observations_from_factors(factors[start : start + batch_size], rng)
        yield torch.as_tensor(obs)


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
    if is_sample(dataset):
        codes, factors = _sample_codes_and_labels(dataset, code_fn, n, rng)
    else:
        factors = sample_factors(dataset, n, rng)
        codes = codes_for_factors(dataset, code_fn, factors, rng)
    if cache is not None:
        cache.entries[key] = (codes.copy(), factors.copy(), rng.bit_generator.state)
    return codes, factors


def _sample_codes_and_labels(
    dataset: Any, code_fn: RepresentationFunction, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """On a labelled sample (no grid): ``n`` images drawn uniformly with replacement, their codes
    and labels (an unlabelled sample gives labels of shape ``(n, 0)``)."""
    if dataset.labelled:
        indices = dataset.sample_labelled_indices(n, rng)
    else:  # the scores that need no labels
        indices = rng.integers(len(dataset), size=int(n), dtype=np.int64)
    step = code_fn.batch_size
    parts = []
    for start in range(0, n, step):
        chunk = torch.as_tensor(indices[start : start + step], device=dataset.device)
        parts.append(code_fn(dataset.observe(chunk)))
    codes = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
    return codes, dataset.indices_to_factors(indices)


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
