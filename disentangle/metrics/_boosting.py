"""Exact gradient-boosted trees for classification, compiled with numba.

This is scikit-learn's ``GradientBoostingClassifier()`` at its default settings, rewritten so that
the many small trees DCI needs can be grown fast. It is what ``dci(..., booster="exact")`` (the
default) uses; ``booster="sklearn"`` runs scikit-learn itself and is kept as the reference.

The algorithm, step for step as in scikit-learn 1.9 (``sklearn/ensemble/_gb.py`` and
``sklearn/tree``; earlier versions split by Friedman's MSE, which ranks every split of a node the
same way as the squared-error proxy below):

* Codes are cast to float32, as scikit-learn does before growing any tree.
* Initial raw predictions: class priors of the training labels, clipped to ``[eps, 1 - eps]``
  (float64 eps). For ``K >= 3`` classes they become the symmetric multinomial logit
  ``log p_k - mean_k log p_k``; for two classes a single logit ``log(p_1 / (1 - p_1))``.
* Each of ``n_stages`` stages (default 100) fits one regression tree per class (``K >= 3``), or one
  tree (two classes), to the negative gradient of the log-loss, ``r = y_k - p_k``. All trees of a
  stage see the gradient of the stage's start, so they are independent; they run in parallel.
* Trees are grown greedily to ``max_depth`` (default 3) with exact splits: every distinct value of
  every feature is a candidate, the split maximises ``S_L^2 / n_L + S_R^2 / n_R`` (the
  squared-error proxy, equivalent to Friedman's MSE), values within ``1e-7`` (float32) of each
  other are not separated, and the threshold is the midpoint of the two float32 values. A node is
  a leaf when it has fewer than 2 samples, its impurity (variance of ``r``) is ``<= 2.2e-16``, or
  no split exists. Exact ties between features go to a random feature order drawn from ``seed``
  (scikit-learn draws its own per node, also at random).
* Leaf values are one Newton step: ``(K - 1)/K * mean(r) / mean(p (1 - p))`` for ``K >= 3``,
  ``mean(r) / mean(p (1 - p))`` for two classes, and 0 when the denominator is below ``1e-150``.
  Raw predictions move by ``learning_rate`` (default 0.1) times the leaf value.
* Feature importance: over all split nodes of all trees, the decrease of squared error
  ``n * imp - n_L * imp_L - n_R * imp_R`` credited to the node's feature, normalised to sum 1
  (scikit-learn averages per-tree sums over the trees with at least one split and then normalises,
  which is the same thing since every tree sees the same ``n``).
* Prediction: the argmax of the raw predictions (two classes: class 1 when the logit is ``>= 0``).

The results agree with scikit-learn up to floating-point rounding (different summation orders) and
the tie-breaking order; ``tests/metrics/test_boosting.py`` compares trees, predictions and
importances with ``GradientBoostingClassifier``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

try:  # numba is a dependency; the import is guarded so that the error can say what to do
    import numba
    from numba import njit, prange
except ImportError as error:  # pragma: no cover - exercised only without numba
    numba = None
    _NUMBA_ERROR: ImportError | None = error
else:
    _NUMBA_ERROR = None

#: scikit-learn's tolerances (``sklearn/tree/_tree.pyx`` EPSILON, ``_partitioner.pxd``
#: FEATURE_THRESHOLD, ``_gb.py`` ``_safe_divide``)
IMPURITY_EPSILON = float(np.finfo(np.float64).eps)
FEATURE_THRESHOLD = np.float32(1e-7)
SAFE_DIVIDE_MIN = 1e-150


def numba_available() -> bool:
    return numba is not None


def _require_numba() -> None:
    if numba is None:
        raise ImportError(
            "the exact gradient-boosting booster needs numba, which could not be imported "
            f"({_NUMBA_ERROR}). Install it with  pip install numba  or use the reference "
            "implementation with booster='sklearn' (same values, several times slower)."
        )


# --------------------------------------------------------------------------- compiled kernels
if numba is not None:

    @njit(cache=True, nogil=True)
    def _scan_root(values, order, residual, count, total, f, best, best_feature, best_threshold):  # pragma: no cover
        """The best split of the root on feature ``f`` (see the level loop of :func:`_grow_tree`)."""
        left_sum = 0.0
        left_count = 0.0
        previous = values[0]
        for p in range(values.shape[0]):
            v = values[p]
            if left_count > 0 and v > previous + FEATURE_THRESHOLD:
                s_right = total - left_sum
                proxy = left_sum * left_sum / left_count + s_right * s_right / (count - left_count)
                if proxy > best[0]:
                    best[0] = proxy
                    best_feature[0] = f
                    t = np.float64(previous) / 2.0 + np.float64(v) / 2.0
                    if t == np.float64(v) or t == np.inf or t == -np.inf:
                        t = np.float64(previous)
                    best_threshold[0] = t
            left_sum += residual[order[p]]
            left_count += 1.0
            previous = v

    @njit(cache=True, nogil=True)
    def _grow_tree(
        sorted_values, order, x, residual, hessian, leaf_scale, max_depth, feature_order,
        split_feature, threshold, value, node_of, importance, update,
    ):  # pragma: no cover - compiled; covered through the Python entry points
        """Grow one tree in place. Nodes are stored as a heap: the children of ``j`` are
        ``2j + 1`` (``x <= threshold``) and ``2j + 2``; ``split_feature[j] = -1`` marks a leaf."""
        n = residual.shape[0]
        n_features = sorted_values.shape[0]
        n_nodes = split_feature.shape[0]
        count = np.zeros(n_nodes)
        total = np.zeros(n_nodes)
        total_sq = np.zeros(n_nodes)
        impurity = np.zeros(n_nodes)
        splittable = np.zeros(n_nodes, dtype=np.bool_)
        best = np.empty(n_nodes)
        best_feature = np.empty(n_nodes, dtype=np.int64)
        best_threshold = np.empty(n_nodes)
        left_sum = np.empty(n_nodes)
        left_count = np.empty(n_nodes)
        previous = np.empty(n_nodes, dtype=np.float32)
        split_feature[:] = -1
        threshold[:] = 0.0
        value[:] = 0.0
        importance[:] = 0.0

        for i in range(n):
            node_of[i] = 0
            total[0] += residual[i]
            total_sq[0] += residual[i] * residual[i]
        count[0] = n
        impurity[0] = total_sq[0] / n - (total[0] / n) ** 2

        for depth in range(max_depth):
            first = (1 << depth) - 1
            stop = (1 << (depth + 1)) - 1
            any_open = False
            for j in range(first, stop):
                splittable[j] = count[j] >= 2 and impurity[j] > IMPURITY_EPSILON
                any_open = any_open or splittable[j]
                best[j] = -np.inf
            if not any_open:
                break
            for rank in range(n_features):
                f = feature_order[depth, rank]
                if depth == 0:
                    # the root holds every sample: the same scan with the sums in registers
                    _scan_root(sorted_values[f], order[f], residual, count[0], total[0], f, best, best_feature, best_threshold)
                    continue
                for j in range(first, stop):
                    left_sum[j] = 0.0
                    left_count[j] = 0.0
                for p in range(n):
                    i = order[f, p]
                    j = node_of[i]
                    if j < first or not splittable[j]:
                        continue
                    v = sorted_values[f, p]
                    if left_count[j] > 0 and v > previous[j] + FEATURE_THRESHOLD:
                        n_left = left_count[j]
                        n_right = count[j] - n_left
                        s_left = left_sum[j]
                        s_right = total[j] - s_left
                        proxy = s_left * s_left / n_left + s_right * s_right / n_right
                        if proxy > best[j]:
                            best[j] = proxy
                            best_feature[j] = f
                            t = np.float64(previous[j]) / 2.0 + np.float64(v) / 2.0
                            if t == np.float64(v) or t == np.inf or t == -np.inf:
                                t = np.float64(previous[j])
                            best_threshold[j] = t
                    left_sum[j] += residual[i]
                    left_count[j] += 1.0
                    previous[j] = v
            any_split = False
            for j in range(first, stop):
                if splittable[j] and best[j] > -np.inf:
                    split_feature[j] = best_feature[j]
                    threshold[j] = best_threshold[j]
                    any_split = True
            if not any_split:
                break
            for i in range(n):
                j = node_of[i]
                if j < first or split_feature[j] < 0:
                    continue
                child = 2 * j + 1 if np.float64(x[i, split_feature[j]]) <= threshold[j] else 2 * j + 2
                node_of[i] = child
                count[child] += 1.0
                total[child] += residual[i]
                total_sq[child] += residual[i] * residual[i]
            for j in range(first, stop):
                if split_feature[j] < 0:
                    continue
                left = 2 * j + 1
                right = 2 * j + 2
                # the children's impurities as scikit-learn's children_impurity computes them (the
                # right side by subtraction from the parent), so that the "impurity <= EPSILON"
                # leaf test agrees with it in the rounding, on nodes whose residuals are constant
                if count[left] <= count[right]:
                    s_left = total[left]
                else:
                    s_left = total[j] - total[right]
                s_right = total[j] - s_left
                impurity[left] = total_sq[left] / count[left] - (s_left / count[left]) ** 2
                impurity[right] = (total_sq[j] - total_sq[left]) / count[right] - (s_right / count[right]) ** 2
                importance[split_feature[j]] += (
                    count[j] * impurity[j] - count[left] * impurity[left] - count[right] * impurity[right]
                )

        # leaf values: one Newton step per leaf, on the stage's gradient and hessian
        numerator = np.zeros(n_nodes)
        denominator = np.zeros(n_nodes)
        for i in range(n):
            numerator[node_of[i]] += residual[i]
            denominator[node_of[i]] += hessian[i]
        for j in range(n_nodes):
            if count[j] > 0 and split_feature[j] < 0:
                mean_hessian = denominator[j] / count[j]
                if abs(mean_hessian) >= SAFE_DIVIDE_MIN:
                    value[j] = leaf_scale * (numerator[j] / count[j]) / mean_hessian
        for i in range(n):
            update[i] = value[node_of[i]]

    @njit(cache=True, nogil=True, parallel=True)
    def _grow_stage(
        sorted_values, order, x, residuals, hessians, leaf_scales, max_depth, feature_orders,
        split_features, thresholds, values, importances, updates,
    ):  # pragma: no cover - compiled
        """Grow the independent trees of one stage (one per row of ``residuals``) in parallel."""
        n = residuals.shape[1]
        for t in prange(residuals.shape[0]):
            node_of = np.empty(n, dtype=np.int64)
            _grow_tree(
                sorted_values, order, x, residuals[t], hessians[t], leaf_scales[t], max_depth,
                feature_orders[t], split_features[t], thresholds[t], values[t], node_of,
                importances[t], updates[t],
            )

    @njit(cache=True, nogil=True, parallel=True)
    def _multinomial_gradient(codes, raw, residual, hessian):  # pragma: no cover - compiled
        """``residual[k] = y_k - softmax(raw)_k`` and ``hessian[k] = p_k (1 - p_k)`` per sample,
        with ``p_k`` recovered from the residual as scikit-learn does (``y - neg_gradient``)."""
        n, num_classes = raw.shape
        for i in prange(n):
            top = raw[i, 0]
            for k in range(1, num_classes):
                top = max(top, raw[i, k])
            norm = 0.0
            for k in range(num_classes):
                norm += np.exp(raw[i, k] - top)
            for k in range(num_classes):
                y = 1.0 if codes[i] == k else 0.0
                residual[k, i] = y - np.exp(raw[i, k] - top) / norm
                p = y - residual[k, i]
                hessian[k, i] = p * (1.0 - p)

    @njit(cache=True, nogil=True, parallel=True)
    def _predict_trees(x, initial, learning_rate, split_features, thresholds, values):  # pragma: no cover
        """Raw score of each tree sequence for ``x``, ``(n_trees_per_stage, n)``: its initial value
        plus ``learning_rate`` times each stage's leaf value, added stage by stage as scikit-learn's
        ``predict_stages`` does."""
        n_stages, n_trees = split_features.shape[0], split_features.shape[1]
        n = x.shape[0]
        out = np.zeros((n_trees, n))
        for t in prange(n_trees):
            for i in range(n):
                acc = initial[t]
                for s in range(n_stages):
                    j = 0
                    while split_features[s, t, j] >= 0:
                        if np.float64(x[i, split_features[s, t, j]]) <= thresholds[s, t, j]:
                            j = 2 * j + 1
                        else:
                            j = 2 * j + 2
                    acc += learning_rate * values[s, t, j]
                out[t, i] = acc
        return out


# --------------------------------------------------------------------------- Python driver
@dataclass
class BoostedTrees:
    """Fitted classifiers, one per target column, sharing their input features.

    ``classes[c]`` are the sorted training labels of target ``c``; ``importances`` is ``(d, C)``,
    each column summing to 1 (all zero when no tree of that target split); ``train_raw[c]`` are
    the raw scores of the training points after the last stage (what :meth:`raw_predictions` gives
    for them); ``split_feature``/``threshold``/``value`` are the heap-ordered trees, arrays of shape
    ``(stages, trees, nodes)``.
    """

    classes: list[np.ndarray]
    importances: np.ndarray
    learning_rate: float
    init_raw: list[np.ndarray]
    train_raw: list[np.ndarray]
    tree_slices: list[slice]
    split_feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray

    def raw_predictions(self, x: np.ndarray) -> list[np.ndarray]:
        """Per target, the ``(n, K)`` (or ``(n, 1)`` for two classes) raw scores for ``x``."""
        _require_numba()
        x32 = _as_float32_features(x, self.importances.shape[0])
        initial = np.concatenate(self.init_raw)
        raw = _predict_trees(x32, initial, self.learning_rate, self.split_feature, self.threshold, self.value)
        return [raw[trees].T for trees in self.tree_slices]

    def predict(self, x: np.ndarray | None = None) -> np.ndarray:
        """``(n, C)`` predicted labels, one column per target; ``x=None``: of the training points."""
        raws = self.train_raw if x is None else self.raw_predictions(x)
        columns = [classes[_encoded_prediction(raw)] for classes, raw in zip(self.classes, raws, strict=True)]
        return np.stack(columns, axis=1)


def fit_boosted_trees(
    x: np.ndarray,
    targets: np.ndarray,
    *,
    n_stages: int = 100,
    learning_rate: float = 0.1,
    max_depth: int = 3,
    seed: int = 0,
    n_threads: int | None = None,
) -> BoostedTrees:
    """Fit one gradient-boosted classifier per column of ``targets`` on the features ``x``.

    ``x`` is ``(n, d)``, ``targets`` ``(n, C)`` (or ``(n,)``) integer labels; every column needs at
    least two classes. All targets share one presorting of ``x`` and their trees are grown together,
    ``n_threads`` at a time (default: numba's default, one per core). Results do not depend on
    ``n_threads``. See the module docstring for the algorithm (scikit-learn's
    ``GradientBoostingClassifier()``).
    """
    _require_numba()
    x = np.asarray(x)
    targets = np.asarray(targets)
    if targets.ndim == 1:
        targets = targets[:, None]
    if x.ndim != 2 or targets.ndim != 2 or len(x) != len(targets):
        raise ValueError(f"x must be (n, d) and targets (n, C) with the same n; got {x.shape} and {targets.shape}.")
    if not np.isfinite(x).all():
        raise ValueError("the features contain NaN or infinite values.")
    if max_depth < 1 or max_depth > 16:
        raise ValueError(f"max_depth must be between 1 and 16, got {max_depth}.")
    if n_stages < 1 or not learning_rate > 0:
        raise ValueError(f"n_stages must be >= 1 and learning_rate > 0; got {n_stages} and {learning_rate}.")
    n, d = x.shape
    x32 = _as_float32_features(x, d)
    order = np.ascontiguousarray(np.argsort(x32, axis=0, kind="stable").T, dtype=np.int32)
    sorted_values = np.take_along_axis(x32, order.T, axis=0).T.copy()

    classes, encoded, init_raw, tree_slices, leaf_scales = [], [], [], [], []
    start = 0
    for column in targets.T:
        labels, codes = np.unique(column, return_inverse=True)
        if len(labels) < 2:
            raise ValueError("every target needs at least two classes to fit a classifier.")
        prior = np.bincount(codes, minlength=len(labels)) / n
        prior = np.clip(prior, np.finfo(np.float64).eps, 1 - np.finfo(np.float64).eps)
        if len(labels) == 2:
            init = np.array([np.log(prior[1] / (1 - prior[1]))])
            scale = [1.0]
        else:
            log_prior = np.log(prior)
            init = log_prior - log_prior.mean()
            scale = [(len(labels) - 1) / len(labels)] * len(labels)
        classes.append(labels)
        encoded.append(codes)
        init_raw.append(init)
        tree_slices.append(slice(start, start + len(init)))
        leaf_scales.extend(scale)
        start += len(init)
    n_trees = start
    n_nodes = 2 ** (max_depth + 1) - 1
    leaf_scales = np.asarray(leaf_scales)

    rng = np.random.default_rng(seed)
    split_feature = np.empty((n_stages, n_trees, n_nodes), dtype=np.int64)
    threshold = np.empty((n_stages, n_trees, n_nodes))
    value = np.empty((n_stages, n_trees, n_nodes))
    importance_sum = np.zeros((n_trees, d))
    importances = np.empty((n_trees, d))
    updates = np.empty((n_trees, n))
    residuals = np.empty((n_trees, n))
    hessians = np.empty((n_trees, n))
    raw = [np.repeat(init[None, :], n, axis=0) for init in init_raw]
    with _numba_threads(n_threads):
        for stage in range(n_stages):
            for codes, trees, scores in zip(encoded, tree_slices, raw):
                _negative_gradient(codes, scores, residuals[trees], hessians[trees])
            feature_orders = rng.permuted(np.tile(np.arange(d), (n_trees, max_depth, 1)), axis=2)
            _grow_stage(
                sorted_values, order, x32, residuals, hessians, leaf_scales, max_depth,
                feature_orders, split_feature[stage], threshold[stage], value[stage],
                importances, updates,
            )
            importance_sum += importances
            for trees, scores in zip(tree_slices, raw):
                scores += learning_rate * updates[trees].T
    per_target = np.stack([importance_sum[trees].sum(axis=0) for trees in tree_slices], axis=1)
    totals = per_target.sum(axis=0, keepdims=True)
    per_target = np.divide(per_target, totals, out=np.zeros_like(per_target), where=totals > 0)
    return BoostedTrees(
        classes=classes,
        importances=per_target,
        learning_rate=learning_rate,
        init_raw=init_raw,
        train_raw=raw,
        tree_slices=tree_slices,
        split_feature=split_feature,
        threshold=threshold,
        value=value,
    )


def _negative_gradient(codes: np.ndarray, raw: np.ndarray, residual: np.ndarray, hessian: np.ndarray) -> None:
    """Fill ``residual = y - p`` and ``hessian = p (1 - p)`` (rows: trees) for one target."""
    if raw.shape[1] == 1:  # two classes: one logit
        prob = expit(raw[:, 0])  # no overflow warning for very negative logits
        y = (codes == 1).astype(np.float64)
        residual[0] = y - prob
        p = y - residual[0]  # as scikit-learn: prob recovered from the negative gradient
        hessian[0] = p * (1 - p)
        return
    _multinomial_gradient(codes, raw, residual, hessian)


def _encoded_prediction(raw: np.ndarray) -> np.ndarray:
    if raw.shape[1] == 1:
        return (raw[:, 0] >= 0).astype(np.int64)
    return np.argmax(raw, axis=1)


def _as_float32_features(x: np.ndarray, d: int) -> np.ndarray:
    """``x`` cast to float32 (as scikit-learn casts it), refusing values the cast makes infinite."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"expected features of shape (n, {d}), got {x.shape}.")
    with np.errstate(over="ignore"):
        x32 = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x32).all():
        largest = float(np.max(np.abs(x[np.isfinite(x)]), initial=0.0))
        raise ValueError(
            "the codes contain values too large for float32 (largest magnitude "
            f"{largest:.3g} > {float(np.finfo(np.float32).max):.3g}), to which the gradient-boosted "
            "trees cast them, as scikit-learn does; rescale the representation's codes."
        )
    return x32


@contextlib.contextmanager
def _numba_threads(n_threads: int | None) -> Iterator[None]:
    if n_threads is None:
        yield
        return
    import torch

    # numba's OpenMP layer shares the process's OpenMP thread count with torch, and sets it when it
    # first starts (inside numba.get_num_threads): read torch's before, and restore it, or a metric
    # run during training (train.eval_metrics: [dci]) would change the run's threads
    torch_threads = torch.get_num_threads()
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(previous)
        torch.set_num_threads(torch_threads)


__all__ = ["BoostedTrees", "fit_boosted_trees", "numba_available"]
