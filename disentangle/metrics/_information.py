"""Discretisation, discrete mutual information and entropy (nats), code normalisation."""
from __future__ import annotations

import math

import numpy as np

from .._core import checks


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
