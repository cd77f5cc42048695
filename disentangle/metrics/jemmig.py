"""JEMMIG (Do & Tran, 2020): joint entropy minus the mutual information gap, per factor."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._information import discrete_entropy, discrete_mutual_info, histogram_discretize
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, factor_names, select_factors
from .registration import register_metric

CHECK_SETTINGS = SettingsChecks(num_train=count("num_train", 2), num_bins=count("num_bins"))


@register_metric(checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"])
def jemmig(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_bins: int = 20,
    factors: Sequence[str | int] | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """JEMMIG, as the review reports it: 1 minus the normalised joint-entropy-minus-MI-gap, per factor.

    With ``z_a`` and ``z_b`` the code dimensions of largest and second-largest mutual information
    with factor ``v_k``, Do & Tran ("Theory and evaluation metrics for learning disentangled
    representations", ICLR 2020) define

    ``JEMMIG(v_k) = H(v_k, z_a) - I(v_k; z_a) + I(v_k; z_b)``

    (lower is better; ``= H(v_k | z_a) + H(z_a | v_k) + I(v_k; z_b)``: 0 when ``z_a`` and ``v_k``
    determine each other and no other code informs about ``v_k``), bounded by ``H(v_k) +
    log(num_bins)`` for a code cut into ``num_bins`` bins. The score is the reference's
    (Carbonneau et al. 2022, ubisoft-laforge-disentanglement-metrics, ``jemmig.py``), higher is
    better:

    ``jemmig = mean_k [1 - JEMMIG(v_k) / (H(v_k) + log(num_bins))]``.

    Unlike MIG it also punishes a code that holds the factor with extra content (``H(z_a | v_k)``):
    a factor of 8 equally likely values copied into a code cut into 4 bins scores
    ``1 - log 2 / log 32 = 0.8``, not 1; a factor copied into a code with at least as many bins
    as values, with no other code informing about it, scores 1; codes of noise filling their bins
    uniformly score about 0.

    The estimator is the reference's, with the library's discretisation: ``num_train`` points are
    drawn as for :func:`~disentangle.metrics.mig.mig` (same seed, same points), each code dimension
    is cut into ``num_bins`` equal-width bins over its [min, max]
    (:func:`~disentangle.metrics._information.histogram_discretize`, the reference's rule), and
    ``H`` and ``I`` are the plug-in estimates of the binned codes and the factor classes, in nats
    (the normaliser's ``log(num_bins)`` too: the reference adds ``log2(nb_bins)`` to entropies in
    bits, the same ratio). ``H(v_k, z_a)`` is ``H(v_k) + H(z_a) - I(v_k; z_a)``, which is the
    plug-in joint entropy exactly. Kept from the reference: the normaliser uses the number of bins
    asked for, not the number a code occupies, so a code with fewer distinct values than bins
    cannot reach 0 even when it is noise. Choices against it: ``num_bins=20`` as for the library's
    MIG (the reference defaults to 10; pass ``num_bins=10`` for its number); the factors are the
    dataset's classes, not binned again (the reference's ``continuous_factors=False``); with a
    single code dimension the second-largest information is 0 (the reference fails); a tie for the
    most informative code is broken by the lowest code index (the reference's unstable ``argsort``
    leaves it unspecified); a factor that the sample holds at one value is not scored, as in
    :func:`~disentangle.metrics.mig.mig`.

    ``factors`` (default: every factor with more than one value) lists the factors, by name or
    index, that are scored.

    Returns ``{"jemmig", "jemmig_<factor name>" for each scored factor}``.
    """
    chosen = select_factors(dataset, factors)
    names = [factor_names(dataset)[k] for k in chosen]
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes, sampled = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    return jemmig_from_codes(codes, sampled[:, chosen], num_bins, names)


def jemmig_from_codes(
    codes: np.ndarray, factors: np.ndarray, num_bins: int = 20, names: Sequence[str] | None = None
) -> dict[str, float]:
    """JEMMIG of ``codes (n, d)`` against integer ``factors (n, K)``, as :func:`jemmig` scores them.

    Codes are discretised with :func:`~disentangle.metrics._information.histogram_discretize`;
    ``names`` name the factors' parts (default ``factor_<k>``). Returns ``{"jemmig",
    "jemmig_<name>"}`` (see :func:`jemmig`).
    """
    factors = np.asarray(factors)
    names = [f"factor_{k}" for k in range(factors.shape[1])] if names is None else list(names)
    binned = histogram_discretize(codes, num_bins)
    per_factor = jemmig_from_mutual_info(
        discrete_mutual_info(binned, factors), discrete_entropy(binned), discrete_entropy(factors), num_bins
    )
    valid = ~np.isnan(per_factor)
    scores = {"jemmig": float(per_factor[valid].mean()) if valid.any() else 0.0}
    for name, value, ok in zip(names, per_factor, valid):
        if ok:
            scores[f"jemmig_{name}"] = float(value)
    return as_float_dict(scores)


def jemmig_from_mutual_info(
    mutual_info: np.ndarray, code_entropy: np.ndarray, factor_entropy: np.ndarray, num_bins: int
) -> np.ndarray:
    """Per-factor scores ``1 - JEMMIG(v_k) / (H(v_k) + log num_bins)`` from plug-in estimates.

    ``mutual_info`` is ``(d, K)``, ``code_entropy`` ``(d,)`` (of the binned codes),
    ``factor_entropy`` ``(K,)``; ``JEMMIG(v_k) = H(v_k) + H(z_a) - 2 I(z_a; v_k) + I(z_b; v_k)``
    with ``a`` the first code of largest and ``I(z_b; v_k)`` the second-largest entry of column
    ``k`` (0 with one code). NaN where ``H(v_k) == 0`` (nothing to score).
    """
    mutual_info = np.asarray(mutual_info, dtype=np.float64)
    code_entropy = np.asarray(code_entropy, dtype=np.float64)
    factor_entropy = np.asarray(factor_entropy, dtype=np.float64)
    if mutual_info.ndim != 2 or code_entropy.shape != (mutual_info.shape[0],) or factor_entropy.shape != (
        mutual_info.shape[1],
    ):
        raise ValueError(
            f"mutual_info must be (d, K), code_entropy (d,) and factor_entropy (K,); got {mutual_info.shape}, "
            f"{code_entropy.shape} and {factor_entropy.shape}."
        )
    if num_bins < 1:
        raise ValueError(f"num_bins must be positive, got {num_bins}.")
    columns = np.arange(mutual_info.shape[1])
    best = np.argmax(mutual_info, axis=0)
    top = mutual_info[best, columns]
    ordered = -np.sort(-mutual_info, axis=0)
    second = ordered[1] if len(ordered) > 1 else np.zeros(len(columns))
    joint = factor_entropy + code_entropy[best] - top  # H(v_k, z_a)
    unnormalised = joint - top + second
    scores = 1.0 - unnormalised / (factor_entropy + math.log(num_bins))
    scores[factor_entropy <= 0] = np.nan
    return scores
