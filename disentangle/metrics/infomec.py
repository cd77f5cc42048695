"""InfoM, InfoE and InfoC (Hsu, Dorrell, Whittington, Wu & Finn, 2023): information-based modularity, explicitness and compactness."""
from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np
import scipy.sparse

from .._core import checks
from ._information import (
    _compact_columns,
    discrete_entropy,
    discrete_mutual_info,
    histogram_discretize,
    normalize_codes,
)
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, one_of, select_factors
from .registration import register_metric

logger = logging.getLogger(__name__)

Estimator = Literal["ksg", "discrete", "histogram"]
ESTIMATORS: tuple[str, ...] = get_args(Estimator)

#: L-BFGS iterations of the logistic regressions of InfoE (the reference's ``max_iter=100``)
LOGISTIC_MAX_ITER = 100

CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2),
    estimator=one_of("estimator", ESTIMATORS),
    n_neighbors=count("n_neighbors"),
    num_bins=count("num_bins"),
    active_threshold=lambda value: checks.in_range("active_threshold", value, 0.0, 1.0, high_open=True),
)


@register_metric(checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"])
def infomec(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    estimator: Estimator = "ksg",
    n_neighbors: int = 10,
    num_bins: int = 20,
    active_threshold: float = 0.05,
    factors: Sequence[str | int] | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """InfoMEC: information-based modularity (InfoM), explicitness (InfoE) and compactness (InfoC).

    Hsu, Dorrell, Whittington, Wu & Finn, "Disentanglement via Latent Quantization", NeurIPS 2023;
    the estimator of the authors' standalone ``disentangle/metrics/infomec.py``
    (kylehkhsu/latent_quantization), reimplemented. On ``num_train`` sampled points (drawn as for
    :func:`~disentangle.metrics.mig.mig`: same seed, same points):

    * **Normalised mutual information** ``NMI[j, k] = I(z_j; v_k) / H(v_k)`` for every code
      dimension ``z_j`` and scored factor ``v_k`` (a ``(d, K)`` matrix: the transpose of the paper's),
      ``H(v_k)`` the plug-in entropy of the sampled factor classes (nats). ``I`` by ``estimator``:

      - ``"ksg"`` (default; the reference's estimator for continuous latents): each code dimension
        standardised, then scikit-learn's ``mutual_info_classif`` (the Kraskov-Stögbauer-Grassberger
        nearest-neighbour estimator of Ross 2014) with ``n_neighbors=10`` neighbours; its tie-breaking
        jitter is seeded from ``seed`` (the reference leaves it unseeded);
      - ``"discrete"`` (the reference's ``discrete_latents=True``, for quantised codes): every
        distinct value of a code dimension is a class and ``I`` is the plug-in estimate;
      - ``"histogram"`` (not the reference's recommendation; the reference logs it to show how much
        binning moves the scores): ``num_bins`` equal-width bins per dimension
        (:func:`~disentangle.metrics._information.histogram_discretize`, as our MIG) and the
        plug-in estimate.

    * **Pruning** (the reference's): a code dimension is *active* when its range ``max - min`` over
      the sample exceeds ``active_threshold`` (default ``1/20``, the reference's) times the largest
      range of any dimension; for ``"discrete"`` when it takes more than one value. Let ``L`` be
      the number of active dimensions and ``P`` the active rows of ``NMI``.
    * **InfoM** ``= (mean_j max_k P[j, k] / sum_k P[j, k] - 1/K) / (1 - 1/K)``: 1 when every
      active code informs about one factor only, 0 when each informs equally about all.
    * **InfoC** ``= (mean_k max_j P[j, k] / sum_j P[j, k] - 1/L) / (1 - 1/L)``: 1 when every
      factor is held by one active code only.
    * **InfoE** ``= mean_k (H_0 - H_k) / H_0``: ``H_k`` is the training-set log loss of an
      unregularised multinomial logistic regression of factor ``k`` on all the codes (each dimension
      standardised; one-hot encoded for ``"discrete"``), scikit-learn's L-BFGS, ``tol=1e-4``,
      ``max_iter=100``, ``class_weight="balanced"`` (the reference's; it stops before convergence
      more often than not on many classes, and the score is what those 100 iterations reach).
      ``H_0`` is the log loss of the same regression on all-zero inputs; with balanced class
      weights that model predicts the uniform distribution, so ``H_0 = log C_k`` (``C_k`` the
      number of classes in the sample), which we use directly: the reference's quirk that the
      baseline is ``log C_k`` rather than the factor's entropy is kept (they agree for uniform
      factors). 1 for codes from which a linear read-out predicts the factor with certainty, 0
      for codes with no linearly available information (in-sample, so noise scores slightly
      above 0).

    Where the normalisation is 0/0 we give NaN, as the reference does: InfoM with one scored
    factor, InfoC with one active code (a code collapsed to one dimension would otherwise be
    perfectly compact whatever it holds); a warning says which. Our choices where the reference
    gives NaN: a factor the sample holds at one value is not scored; with no active code InfoM and
    InfoC are 0; a code with no information about any factor (a row of zeros) counts as spreading it
    uniformly (ratio ``1/K``, a modularity of 0), and so does a factor no active code informs about
    for InfoC. (The authors' earlier version, ``compute_mutual_information_ratio``, instead leaves
    such rows out of the mean.)

    Caveat of the reference's ``"ksg"`` estimator: for codes with almost no information (pure
    noise) the entries of ``NMI`` are small positive numbers or exactly 0 (the estimate is clipped),
    and their ratios are not small: InfoM and InfoC of noise are not near 0, and with few codes or
    factors they can reach 1 (one noise code whose other entries are clipped to 0 has max/sum 1).
    Read them beside InfoE. InfoE, and the ``NMI`` entries themselves, are near 0 for noise. ``"histogram"`` scores
    noise near 0 (its bias is spread evenly over the factors).

    ``factors`` (default: every factor with more than one value) lists the factors, by name or
    index, that make up the ``K`` columns.

    Returns ``{"infom", "infoe", "infoc"}``.
    """
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes, sampled = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    return infomec_from_codes(
        codes, sampled[:, chosen], estimator=estimator, n_neighbors=n_neighbors, num_bins=num_bins,
        active_threshold=active_threshold, seed=seed,
    )


def infomec_from_codes(
    codes: np.ndarray,
    factors: np.ndarray,
    *,
    estimator: Estimator = "ksg",
    n_neighbors: int = 10,
    num_bins: int = 20,
    active_threshold: float = 0.05,
    seed: int = 0,
) -> dict[str, float]:
    """``{"infom", "infoe", "infoc"}`` of ``codes (n, d)`` against integer ``factors (n, K)``, as
    :func:`infomec` scores them (the same ``seed`` gives the same numbers)."""
    codes, factors = _check_arrays(codes, factors)
    factors = factors[:, discrete_entropy(factors) > 0]  # a factor held at one value is not scored
    if factors.shape[1] == 0:
        return {"infom": 0.0, "infoe": 0.0, "infoc": 0.0}
    nmi = normalized_mutual_info(
        codes, factors, estimator=estimator, n_neighbors=n_neighbors, num_bins=num_bins, seed=seed
    )
    infom, infoc = infom_infoc_from_nmi(nmi, active_codes(codes, estimator=estimator, threshold=active_threshold))
    explicitness = infoe_per_factor(codes, factors, discrete=estimator == "discrete")
    return as_float_dict({"infom": infom, "infoe": float(np.mean(explicitness)), "infoc": infoc})


def normalized_mutual_info(
    codes: np.ndarray,
    factors: np.ndarray,
    *,
    estimator: Estimator = "ksg",
    n_neighbors: int = 10,
    num_bins: int = 20,
    seed: int = 0,
) -> np.ndarray:
    """``NMI[j, k] = I(z_j; v_k) / H(v_k)``, ``(d, K)``, with the estimator of :func:`infomec`
    (0 in the column of a factor with zero entropy)."""
    one_of("estimator", ESTIMATORS)(estimator)
    codes, factors = _check_arrays(codes, factors)
    if estimator == "ksg":
        mutual_info = _ksg_mutual_info(codes, factors, n_neighbors, derived_seed(seed, 1))
    elif estimator == "discrete":
        mutual_info = discrete_mutual_info(_value_classes(codes)[0], factors)
    else:
        mutual_info = discrete_mutual_info(histogram_discretize(codes, num_bins), factors)
    entropy = discrete_entropy(factors)
    with np.errstate(divide="ignore", invalid="ignore"):
        nmi = mutual_info / entropy[None, :]
    nmi[:, entropy <= 0] = 0.0
    return nmi


def _ksg_mutual_info(codes: np.ndarray, factors: np.ndarray, n_neighbors: int, random_state: int) -> np.ndarray:
    """``(d, K)`` KSG estimates (nats) of standardised codes against factor classes."""
    from sklearn.feature_selection import mutual_info_classif

    standardised, _ = normalize_codes(codes)
    mutual_info = np.zeros((codes.shape[1], factors.shape[1]))
    for k in range(factors.shape[1]):
        if len(np.unique(factors[:, k])) < 2:
            continue
        mutual_info[:, k] = mutual_info_classif(
            standardised, factors[:, k], discrete_features=False, n_neighbors=n_neighbors,
            random_state=random_state,
        )
    return mutual_info


def active_codes(codes: np.ndarray, *, estimator: Estimator = "ksg", threshold: float = 0.05) -> np.ndarray:
    """The reference's pruning: ``(d,)`` bool, a code's range ``max - min`` above ``threshold`` times
    the largest range (``"ksg"``, ``"histogram"``), or above 0 (``"discrete"``)."""
    codes = np.asarray(codes, dtype=np.float64)
    ranges = codes.max(axis=0) - codes.min(axis=0)
    if estimator == "discrete":
        return ranges > 0
    return ranges > threshold * ranges.max(initial=0.0)


def infom_infoc_from_nmi(nmi: np.ndarray, active: np.ndarray | None = None) -> tuple[float, float]:
    """``(InfoM, InfoC)`` from a ``(d, K)`` normalised mutual-information matrix and the ``(d,)``
    mask of active codes (default: all); see :func:`infomec` for the formulas and edge cases."""
    nmi = np.asarray(nmi, dtype=np.float64)
    if nmi.ndim != 2 or nmi.shape[1] == 0 or (nmi < 0).any() or not np.isfinite(nmi).all():
        raise ValueError(f"nmi must be a finite, non-negative (codes, factors) matrix, got shape {nmi.shape}.")
    active = np.ones(nmi.shape[0], dtype=bool) if active is None else np.asarray(active, dtype=bool)
    pruned = nmi[active]
    num_active, num_factors = pruned.shape
    if num_active == 0:
        return 0.0, 0.0
    for name, size, what in [("InfoM", num_factors, "factor is scored"), ("InfoC", num_active, "code is active")]:
        if size == 1:
            logger.warning(f"{name} is NaN: one {what}, and its normalisation (1 - 1/1) is 0 (the reference's 0/0).")
    return (
        _normalised_sparsity(pruned, axis=1, count=num_factors),
        _normalised_sparsity(pruned, axis=0, count=num_active),
    )


def _normalised_sparsity(matrix: np.ndarray, axis: int, count: int) -> float:
    """``(mean max/sum - 1/count) / (1 - 1/count)`` along ``axis``; an all-zero line counts as
    ``1/count``; NaN for ``count == 1`` (0/0)."""
    if count == 1:
        return float("nan")
    total = matrix.sum(axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(total > 0, matrix.max(axis=axis) / total, 1.0 / count)
    return float((ratio.mean() - 1.0 / count) / (1.0 - 1.0 / count))


def infoe_per_factor(codes: np.ndarray, factors: np.ndarray, *, discrete: bool = False) -> np.ndarray:
    """``(K,)`` normalised predictive information ``(log C_k - H_k) / log C_k`` of each factor from a
    logistic regression on the codes (one-hot codes where ``discrete``); see :func:`infomec`.
    A factor with one class in the sample gets 0."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss

    codes, factors = _check_arrays(codes, factors)
    inputs = _one_hot(codes) if discrete else normalize_codes(codes)[0]
    labels, classes = _compact_columns(factors)
    scores = np.zeros(factors.shape[1])
    for k in range(factors.shape[1]):
        if classes[k] < 2:
            continue
        model = LogisticRegression(
            C=np.inf, tol=1e-4, fit_intercept=True, class_weight="balanced", solver="lbfgs",
            max_iter=LOGISTIC_MAX_ITER,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(inputs, labels[:, k])
        loss = log_loss(labels[:, k], model.predict_proba(inputs), labels=np.arange(classes[k]))
        baseline = np.log(classes[k])
        scores[k] = (baseline - loss) / baseline
    return scores


def _value_classes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct value of a code dimension as a class: ``(n, d)`` int64 labels and the number per dimension."""
    labels = np.empty(codes.shape, dtype=np.int64)
    sizes = np.zeros(codes.shape[1], dtype=np.int64)
    for j in range(codes.shape[1]):
        values, labels[:, j] = np.unique(codes[:, j], return_inverse=True)
        sizes[j] = len(values)
    return labels, sizes


def _one_hot(codes: np.ndarray) -> scipy.sparse.csr_matrix:
    """Every distinct value of every code dimension as a 0/1 column, sparse (scikit-learn's
    ``OneHotEncoder``): a code that is not fully quantised has as many values as rows, and a dense
    matrix of ``n x (n d)`` would not fit in memory."""
    labels, sizes = _value_classes(codes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    n, d = codes.shape
    columns = (labels + offsets).ravel()
    rows = np.repeat(np.arange(n), d)
    return scipy.sparse.csr_matrix((np.ones(n * d), (rows, columns)), shape=(n, int(sizes.sum())))


def _check_arrays(codes: np.ndarray, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes = np.asarray(codes, dtype=np.float64)
    factors = np.asarray(factors)
    if codes.ndim != 2 or factors.ndim != 2 or len(codes) != len(factors) or len(codes) == 0:
        raise ValueError(
            f"codes (n, d) and factors (n, K) must have the same, non-zero number of rows; got "
            f"{codes.shape} and {factors.shape}."
        )
    if not np.issubdtype(factors.dtype, np.integer):
        raise ValueError(f"factors must be integer classes, got {factors.dtype}.")
    if not np.isfinite(codes).all():
        raise ValueError("codes must be finite.")
    return codes, factors
