"""Unified scores: DCI's, MIG's, SAP's and modularity's aggregations of three code-factor matrices (disentanglement_lib)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np

from .._core import checks
from ._information import discrete_entropy, discrete_mutual_info, histogram_discretize
from ._parallel import parallel_map
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, factor_names, one_of, select_factors
from .dci import BOOSTERS, Booster, completeness_per_factor, dci_from_importance, disentanglement_per_code
from .mig import mig_from_mutual_info
from .registration import register_metric

UnifiedMatrix = Literal["importance_gbt_matrix", "mutual_information_matrix", "accuracy_svm_matrix"]
#: the code-factor matrices of disentanglement_lib's ``unified_scores.py``, by its function names
MATRICES: tuple[str, ...] = get_args(UnifiedMatrix)


def _check_matrices(matrices: Any) -> tuple[str, ...]:
    names = (matrices,) if isinstance(matrices, str) else matrices
    if not isinstance(names, Sequence) or not names:
        raise checks.ParameterError(
            "matrices", f"matrices must name at least one of {', '.join(MATRICES)}; got {matrices!r}."
        )
    out = tuple(checks.choice("matrices", m, MATRICES) for m in names)
    if len(set(out)) < len(out):
        raise checks.ParameterError("matrices", f"matrices names a matrix twice: {list(out)}.")
    return out


CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2),
    num_test=count("num_test"),
    matrices=_check_matrices,
    num_bins=count("num_bins"),
    booster=one_of("booster", BOOSTERS),
)


@register_metric(checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"] + settings["num_test"])
def unified_scores(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_test: int = 5_000,
    matrices: Sequence[UnifiedMatrix] = MATRICES,
    num_bins: int = 20,
    booster: Booster = "exact",
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """Every aggregation (DCI, MIG, SAP, modularity, precision curve) of every code-factor matrix.

    disentanglement_lib's ``compute_unified_scores`` (``evaluation/metrics/unified_scores.py``): DCI,
    MIG, SAP and modularity each relate codes and factors by a ``(d, K)`` matrix and aggregate it
    into a score; this metric computes each aggregation on each matrix, so that e.g. MIG's gap can
    be read on DCI's importances. On ``num_train`` training and ``num_test`` test points (the same
    draws as DCI, SAP and modularity with the same seed), the matrices (``matrices``; the reference
    has no default, we compute all three it defines):

    * ``importance_gbt_matrix``: DCI's importance matrix (gradient-boosted trees on the training
      points, ``booster``; the same matrix as :func:`~disentangle.metrics.dci` with the same seed);
    * ``mutual_information_matrix``: MIG's and modularity's histogram mutual information (nats,
      ``num_bins`` equal-width bins per code, training points);
    * ``accuracy_svm_matrix``: SAP's matrix, the test accuracy of a balanced ``LinearSVC(C=0.01)``
      predicting each factor from each single code (the same as :func:`~disentangle.metrics.sap_score`).

    and the aggregations of a matrix ``M`` (each score is ``<matrix>.<score>``):

    * ``dci_disentanglement``, ``dci_completeness``: DCI's weighted ``1 - entropy`` of rows and of
      columns (1e-11 added, as DCI), with ``dci_disentanglement.code_<j>`` per code and
      ``dci_completeness.<factor>`` per factor;
    * ``mig``: mean over factors of ``(top-1 - top-2 over codes) / H(v_k)``, ``H`` the entropy of
      the training factor classes (nats), with ``mig.<factor>``;
    * ``sap``: mean over factors of the top-two gap, with ``sap.<factor>``;
    * ``modularity``: mean over codes of ``1 - (sum_k M_jk^2 - max_k M_jk^2) / (max_k M_jk^2 (K - 1))``
      (0 for a row of zeros), with ``modularity.code_<j>``;
    * ``area_precision``, ``max_precision``: for each threshold ``t`` among the entries of ``M``
      (descending), ``precision(t)`` is the number of connected components with at least one edge
      in the bipartite code-factor graph whose edges are the nonzero entries ``>= t`` (how many
      independent groups of factors and codes the matrix shows at that threshold);
      ``max_precision`` is its maximum and ``area_precision`` the trapezoidal area under it against
      the thresholds (in the units of ``M``).

    ``factors`` (default: every factor with more than one value) are the ``K`` columns. The SVMs
    and the trees run on ``n_jobs`` workers (threads of the exact booster).

    Where we differ from the reference, and why: its per-factor keys ``dci_completeness.code_<k>``
    (a factor, misnamed), ``mig.factor_<k>`` and ``sap.factor_<k>`` are named by the factor here
    (``dci_completeness.<factor>``, ...); its ``dci`` key, a copy of ``dci_disentanglement``, is
    left out. With a single code dimension the second-largest entry is taken as 0 (the reference
    fails); with a single factor each code's DCI disentanglement and modularity are 1 when the
    code carries any of it (the reference divides by ``log 1`` and by ``K - 1 = 0``); a factor of
    zero entropy in the sample has no MIG (left out of the mean, 0 when none is left). The
    classifiers get a ``random_state`` derived from ``seed``. The reference's plots (heat maps,
    dendrograms, written to its artifact directory) are not made.
    """
    chosen = select_factors(dataset, factors)
    names = [factor_names(dataset)[k] for k in chosen]
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    x_train, y_train = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    x_test, y_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
    y_train, y_test = y_train[:, chosen], y_test[:, chosen]
    random_state = derived_seed(seed, 1)
    entropy = discrete_entropy(y_train)
    scores: dict[str, float] = {}
    for name in matrices:
        if name == "importance_gbt_matrix":
            from .dci import importance_matrix

            matrix = importance_matrix(
                x_train, y_train, x_test, y_test, booster=booster, random_state=random_state, n_jobs=n_jobs
            )[0]
        elif name == "mutual_information_matrix":
            matrix = discrete_mutual_info(histogram_discretize(x_train, num_bins), y_train)
        else:
            matrix = svm_accuracy_matrix(x_train, y_train, x_test, y_test, random_state=random_state, n_jobs=n_jobs)
        for key, value in aggregate_matrix(matrix, entropy, names).items():
            scores[f"{name}.{key}"] = value
    return as_float_dict(scores)


def svm_accuracy_matrix(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *,
    random_state: int = 0, n_jobs: int | None = None,
) -> np.ndarray:
    """SAP's ``(d, K)`` matrix: test accuracy of a balanced ``LinearSVC(C=0.01)`` per (code, factor)."""
    from .sap import _svm_accuracy

    d, num_factors = x_train.shape[1], y_train.shape[1]
    tasks = [
        (x_train[:, j], y_train[:, k], x_test[:, j], y_test[:, k], random_state)
        for j in range(d)
        for k in range(num_factors)
    ]
    costs = [len(np.unique(y_train[:, k])) for j in range(d) for k in range(num_factors)]
    return np.array(parallel_map(_svm_accuracy, tasks, n_jobs, costs)).reshape(d, num_factors)


def aggregate_matrix(matrix: np.ndarray, factor_entropy: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    """Every aggregation of a non-negative ``(d, K)`` code-factor matrix (see :func:`unified_scores`),
    keyed without the matrix's name; ``factor_entropy`` ``(K,)`` (nats) normalises MIG's gaps."""
    matrix = np.asarray(matrix, dtype=np.float64)
    d, num_factors = matrix.shape
    if len(names) != num_factors:
        raise ValueError(f"{len(names)} factor names for a matrix of {num_factors} factors.")
    scores = precision_curve_scores(matrix)
    dci = dci_from_importance(matrix)
    scores["dci_disentanglement"] = dci["disentanglement"]
    scores["dci_completeness"] = dci["completeness"]
    for j, value in enumerate(disentanglement_per_code(matrix)):
        scores[f"dci_disentanglement.code_{j}"] = float(value)
    for name, value in zip(names, completeness_per_factor(matrix)):
        scores[f"dci_completeness.{name}"] = float(value)
    gaps = mig_from_mutual_info(matrix, factor_entropy)
    valid = ~np.isnan(gaps)
    scores["mig"] = float(gaps[valid].mean()) if valid.any() else 0.0
    for name, gap, ok in zip(names, gaps, valid):
        if ok:
            scores[f"mig.{name}"] = float(gap)
    ordered = np.sort(matrix, axis=0)
    sap = ordered[-1] - (ordered[-2] if d > 1 else 0.0)
    scores["sap"] = float(np.mean(sap))
    for name, value in zip(names, sap):
        scores[f"sap.{name}"] = float(value)
    modular = modularity_per_code(matrix)
    scores["modularity"] = float(np.mean(modular))
    for j, value in enumerate(modular):
        scores[f"modularity.code_{j}"] = float(value)
    return scores


def modularity_per_code(matrix: np.ndarray) -> np.ndarray:
    """``1 - (sum_k M_jk^2 - max_k M_jk^2) / (max_k M_jk^2 (K - 1))`` per code, 0 for a row of zeros
    (one factor: 1 for a row that is not zero); its mean is
    :func:`~disentangle.metrics.modularity.modularity_from_mutual_info`."""
    squared = np.asarray(matrix, dtype=np.float64) ** 2
    top = squared.max(axis=1)
    if squared.shape[1] < 2:
        return (top > 0).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = (squared.sum(axis=1) - top) / (top * (squared.shape[1] - 1))
    return np.where(top > 0, 1.0 - delta, 0.0)


def independent_groups(matrix: np.ndarray, threshold: float) -> int:
    """The reference's ``precision``: connected components with at least one edge of the bipartite
    graph of codes (rows) and factors (columns) whose edges are the nonzero entries ``>= threshold``."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    matrix = np.asarray(matrix, dtype=np.float64)
    d, num_factors = matrix.shape
    rows, columns = np.nonzero((matrix >= threshold) & (matrix != 0))
    if len(rows) == 0:
        return 0
    graph = coo_matrix((np.ones(len(rows)), (rows, d + columns)), shape=(d + num_factors,) * 2)
    _, labels = connected_components(graph, directed=False)
    return len(np.unique(labels[np.concatenate([rows, d + columns])]))


def precision_curve_scores(matrix: np.ndarray) -> dict[str, float]:
    """``{"area_precision", "max_precision"}``: :func:`independent_groups` at every entry of
    ``matrix`` as a threshold (descending), its trapezoidal area against the thresholds and its maximum."""
    thresholds = np.sort(np.asarray(matrix, dtype=np.float64).ravel())[::-1]
    counts = np.array([independent_groups(matrix, t) for t in thresholds], dtype=np.float64)
    area = float(np.sum((counts[:-1] + counts[1:]) * (thresholds[:-1] - thresholds[1:]) * 0.5))
    return {"area_precision": area, "max_precision": float(counts.max())}
