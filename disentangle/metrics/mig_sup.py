"""MIG-sup (Li et al., 2020): the Mutual Information Gap taken per code dimension, a modularity score."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._information import discrete_entropy, discrete_mutual_info, histogram_discretize
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, one_of, select_factors
from .registration import register_metric

#: the two conventions: Carbonneau et al.'s reference ("review") and Li et al.'s own code ("paper")
CONVENTIONS = ("review", "paper")
#: "paper": a code dimension is active when its variance over the drawn points exceeds this (Li et
#: al.'s code, after Chen et al.'s active units)
ACTIVE_VARIANCE = 1e-2

CHECK_SETTINGS = SettingsChecks(num_train=count("num_train", 2), num_bins=count("num_bins"),
                                convention=one_of("convention", CONVENTIONS))


@register_metric(checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"])
def mig_sup(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_bins: int = 20,
    factors: Sequence[str | int] | None = None,
    convention: str = "review",
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """MIG-sup: per code dimension, the normalised gap between the two factors it informs most about.

    ``MIG-sup = mean_j (I(z_j; v_a) - I(z_j; v_b)) / H(z_j)`` where ``v_a`` and ``v_b`` are the
    factors with the largest and second-largest mutual information with code dimension ``z_j``
    (Li, Murkute, Gyawali & Wang, "Progressive learning and disentanglement of hierarchical
    representations", ICLR 2020; reviewed by Carbonneau et al. 2022). It is MIG with the roles of
    codes and factors swapped: MIG asks that each factor live in one code (compactness), MIG-sup
    that each code hold one factor (modularity). A code copied twice keeps MIG-sup at 1 (that
    factor's MIG gap drops to 0); a code mixing two factors lowers it.

    The estimator is the one of the review's reference implementation
    (ubisoft-laforge-disentanglement-metrics, ``mig_sup.py``), with the library's discretisation:
    ``num_train`` points are drawn as for :func:`~disentangle.metrics.mig.mig` (same seed, same
    points: :func:`~disentangle.metrics.evaluate_metrics` encodes them once for both), each code
    dimension is cut into ``num_bins`` equal-width bins over its [min, max]
    (:func:`~disentangle.metrics._information.histogram_discretize`, the reference's rule: min-max
    scaling then equal bins, the maximum in the last bin), and the plug-in mutual information of the
    binned codes with the factor classes is normalised by the plug-in entropy ``H(z_j)`` of the
    binned *code* (the reference's ``information_mutual_normalised(factor, code)`` normalises by its
    second argument), in nats. Choices against the reference:

    * ``num_bins=20`` as for the library's MIG (the reference defaults to 10 bins; pass
      ``num_bins=10`` for its number); the factors are the dataset's classes, not binned again
      (the reference's ``continuous_factors=False``);
    * the mean runs over *every* code dimension, as in the reference (not Li et al.'s code: see
      ``convention`` below), so a
      dimension that carries no factor (noise, a collapsed unit) counts 0: a perfect code of K
      factors in d dimensions scores K / d. A constant dimension counts 0 (the reference divides 0
      by 0 and returns NaN for the whole score);
    * with a single scored factor the second-largest information is taken as 0 (the reference
      fails).

    ``convention="paper"`` computes it as Li et al.'s own code does (``metric_MIG.py`` of their
    proVLAE repository), which the review's reference does not follow: each ``I(z_j; v_k)`` is
    normalised by the factor's entropy ``H(v_k)`` *before* the two largest are taken (the plug-in
    entropy of the drawn classes; Li et al. use ``log`` of the number of classes, the same for the
    uniform grids), and the mean runs over the *active* code dimensions only (variance over the
    drawn points above :data:`ACTIVE_VARIANCE`; 0 when none is). A VAE's collapsed units then do
    not pull the score down: on a perfect code of dSprites' five factors padded with five collapsed
    units, about 0.9 against the review's 0.5. Compare with Li et al.'s tables in ``paper``, with
    the review's in ``review`` (the default, and ``num_bins=10``).

    ``factors`` (default: every factor with more than one value) lists the factors, by name or
    index, among which each code's best two are sought.

    Returns ``{"mig_sup", "mig_sup_<j>" for each code dimension j}``.
    """
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes, sampled = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    return mig_sup_from_codes(codes, sampled[:, chosen], num_bins, convention=convention)


def mig_sup_from_codes(
    codes: np.ndarray, factors: np.ndarray, num_bins: int = 20, convention: str = "review",
) -> dict[str, float]:
    """MIG-sup of ``codes (n, d)`` against integer ``factors (n, K)``, as :func:`mig_sup` scores them.

    Codes are discretised with :func:`~disentangle.metrics._information.histogram_discretize`;
    returns ``{"mig_sup", "mig_sup_<j>"}`` (see :func:`mig_sup`; with ``convention="paper"`` an
    inactive dimension's entry is 0 and it is left out of the mean).
    """
    codes, factors = np.asarray(codes), np.asarray(factors)
    binned = histogram_discretize(codes, num_bins)
    mutual_info = discrete_mutual_info(binned, factors)
    if convention == "paper":
        gaps, active = mig_sup_paper(mutual_info, discrete_entropy(factors), codes.var(axis=0) > ACTIVE_VARIANCE)
        mean = float(gaps[active].mean()) if active.any() else 0.0
    else:
        gaps = mig_sup_from_mutual_info(mutual_info, discrete_entropy(binned))
        mean = float(gaps.mean())
    scores = {"mig_sup": mean}
    scores.update({f"mig_sup_{j}": float(gap) for j, gap in enumerate(gaps)})
    return as_float_dict(scores)


def mig_sup_paper(
    mutual_info: np.ndarray, factor_entropy: np.ndarray, active: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Li et al.'s per-code gaps: ``I(z_j; v_k) / H(v_k)`` sorted over the factors, the top two's
    difference (0 for an inactive dimension, and a constant factor's column counts 0); returns the
    gaps and ``active`` as an array."""
    mutual_info = np.asarray(mutual_info, dtype=np.float64)
    entropy = np.asarray(factor_entropy, dtype=np.float64).reshape(1, -1)
    normed = np.divide(mutual_info, entropy, out=np.zeros_like(mutual_info), where=entropy > 0)
    ordered = -np.sort(-normed, axis=1)
    second = ordered[:, 1] if ordered.shape[1] > 1 else np.zeros(len(ordered))
    active = np.asarray(active, dtype=bool)
    return np.where(active, ordered[:, 0] - second, 0.0), active


def mig_sup_from_mutual_info(mutual_info: np.ndarray, code_entropy: np.ndarray) -> np.ndarray:
    """Per-code normalised gaps from a ``(d, K)`` mutual-information matrix and ``(d,)`` code entropies.

    ``gap_j = (top1_j - top2_j) / H(z_j)`` over the factor axis (``top2 = 0`` with one factor);
    0 where ``H(z_j) == 0`` (a constant code informs about nothing). MIG-sup is their mean.
    """
    mutual_info = np.asarray(mutual_info, dtype=np.float64)
    code_entropy = np.asarray(code_entropy, dtype=np.float64)
    if mutual_info.ndim != 2 or code_entropy.shape != (mutual_info.shape[0],):
        raise ValueError(
            f"mutual_info must be (d, K) and code_entropy (d,); got {mutual_info.shape} and {code_entropy.shape}."
        )
    ordered = -np.sort(-mutual_info, axis=1)
    second = ordered[:, 1] if ordered.shape[1] > 1 else np.zeros(len(ordered))
    live = code_entropy > 0
    gaps = np.zeros(len(ordered))
    gaps[live] = (ordered[live, 0] - second[live]) / code_entropy[live]
    return gaps
