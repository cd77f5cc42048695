"""DCI-ES (Eastwood et al., 2023): DCI's disentanglement and completeness plus explicitness and size."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg

from .._core import checks
from ._information import normalize_codes
from ._representation import as_representation_function
from ._sampling import sample_codes_and_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, one_of, select_factors
from .dci import BOOSTERS, Booster, dci_from_importance, importance_matrix
from .registration import register_metric

#: the smallest random-feature probe after the linear one; widths double from here to ``max_features``
FIRST_WIDTH = 16
#: ridge added to the diagonal of the probes' normal equations, relative to its mean (numerical safety only)
RIDGE = 1e-6


def _even_width(value: Any) -> int:
    width = checks.positive_int("max_features", value, minimum=2)
    if width % 2:
        raise checks.ParameterError("max_features", f"max_features must be even (cosine and sine pairs), got {value!r}.")
    return width


CHECK_SETTINGS = SettingsChecks(
    num_train=count("num_train", 2),
    num_test=count("num_test"),
    booster=one_of("booster", BOOSTERS),
    max_features=_even_width,
    frequency_scale=lambda value: checks.finite("frequency_scale", checks.positive("frequency_scale", value)),
)


@register_metric(checks=CHECK_SETTINGS, draws=lambda settings: settings["num_train"] + settings["num_test"])
def dci_es(
    dataset: Any,
    representation: Any,
    *,
    seed: int = 0,
    num_train: int = 10_000,
    num_test: int = 5_000,
    booster: Booster = "exact",
    max_features: int = 512,
    frequency_scale: float = 0.08,
    factors: Sequence[str | int] | None = None,
    n_jobs: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """DCI-ES: DCI's disentanglement, completeness and informativeness, plus explicitness and size.

    Eastwood, Nicolicioiu, von Kügelgen, Kekić, Träuble, Dittadi & Schölkopf, "DCI-ES: An Extended
    Disentanglement Framework with Connections to Identifiability", ICLR 2023. ``num_train``
    training and ``num_test`` test points are drawn as for :func:`~disentangle.metrics.dci.dci`
    (same seed, same points).

    * ``disentanglement``, ``completeness``, ``informativeness``: our :func:`~disentangle.metrics.dci.dci`
      on those points, unchanged (the same importance matrix of gradient-boosted trees, ``booster``
      and ``n_jobs`` as there; ``informativeness`` is DCI's ``informativeness_test``, the mean test
      accuracy). The same seed gives DCI's very numbers. (The authors' code takes D and C from the
      random-forest probe of best test score among its capacities; we keep the library's DCI.)
    * ``explicitness`` E, the paper's definition: for each factor ``k`` a family of probes of
      increasing capacity ``c`` predicts the factor from the codes, giving a loss-capacity curve
      ``l_k(c)``; ``E_k = 1 - AULCC_k / Z_k`` with ``AULCC_k`` the area under the curve above the
      lowest possible loss ``l* = 0`` between the smallest and the largest capacity, and ``Z_k =
      (c_max - c_min)(b_k - l*)`` the rectangle under the baseline loss ``b_k`` of the best
      constant prediction; ``E = mean_k E_k``. 1 when a linear read-out already predicts every
      factor exactly, 0 when no probe does better than the constant. As in the authors' code, the
      curve is the running minimum (the best loss reached up to each capacity) and the area is
      the trapezoidal rule over the probes' capacities; we also cap each loss at the baseline
      (every probe contains the constant predictor; an over-fitted probe's test loss above it would
      make E negative).

      Probes (our cheap choice on a CPU, after the authors' random-Fourier-feature probes): ridge
      regression of the factor's class index on ``[1, z, cos(2π B z), sin(2π B z)]``, ``z`` the
      codes standardised with the training statistics, ``B`` ``(w/2, d)`` Gaussian frequencies of
      standard deviation ``frequency_scale`` (0.08, the authors' RFF setting), ``w`` random features
      for ``w`` in ``0`` (a linear probe), ``16, 32, ...`` doubling up to ``max_features`` (512), the
      smaller probes' frequencies a prefix of the larger ones'. Each is solved in closed form on the
      training points (a ridge of ``1e-6`` times the mean diagonal, for numerical safety only), and
      its loss is ``1 - R²`` on the test points (the authors' loss for a factor they treat as
      continuous), so ``b_k = 1``. The capacity axis is the natural log of the number of fitted
      weights per factor, ``log(1 + d + w)``, as the authors' axis for their MLP probes (log of
      the number of parameters). The default curves are closed-form ridge fits, cheap beside DCI's
      trees (``python benchmarks/bench_metrics.py --metrics dci,dci_es`` times both).

      Against the authors' code (andreinicolicioiu/DCI-ES, ``metrics/explitcitness.py``): it sweeps
      random forests (100 trees, depths 1 to 32, capacity axis the depth), MLPs trained by SGD or
      RFF probes, and scores the factors it marks categorical by classification error (baseline
      ``1 - 1/C``), the others by ``1 - R²``. Our datasets do not mark categorical factors, so
      every factor is regressed on its class index (a categorical factor's arbitrary order makes
      its E conservative). Its ``compute_explitcitness`` integrates ``l(c) - min_c l(c)`` rather
      than ``l(c) - l*`` and doubles the area (``E = 1 - 2 AULCC / Z``); we follow the paper's
      definition (with the code's running minimum): the code's version gives a flat curve, e.g.
      that of pure noise, ``E = 1``. Trees are invariant to monotone warps of single code
      dimensions, so a tree capacity axis would not see what E is for (a non-linearly encoded
      factor); our probes start linear.
    * ``size`` S ``= K / d``: the number of scored factors over the number of code dimensions, the
      paper's measure of how compact the representation is (1 for one dimension per factor, below
      1 for a larger code). It does not depend on the codes' values.

    ``factors`` (default: every factor with more than one value) are the ``K`` factors, by name or
    index. ``n_jobs`` parallelises DCI's trees only (results do not depend on it).

    Returns ``{"disentanglement", "completeness", "informativeness", "explicitness", "size"}``.
    """
    chosen = select_factors(dataset, factors)
    code_fn = as_representation_function(representation, representation_batch_size)
    rng = np.random.default_rng(seed)
    codes_train, factors_train = sample_codes_and_factors(dataset, code_fn, num_train, rng)
    codes_test, factors_test = sample_codes_and_factors(dataset, code_fn, num_test, rng)
    return dci_es_from_codes(
        codes_train, factors_train[:, chosen], codes_test, factors_test[:, chosen],
        booster=booster, max_features=max_features, frequency_scale=frequency_scale, seed=seed, n_jobs=n_jobs,
    )


def dci_es_from_codes(
    codes_train: np.ndarray,
    factors_train: np.ndarray,
    codes_test: np.ndarray,
    factors_test: np.ndarray,
    *,
    booster: Booster = "exact",
    max_features: int = 512,
    frequency_scale: float = 0.08,
    seed: int = 0,
    n_jobs: int | None = None,
) -> dict[str, float]:
    """DCI-ES of training and test codes ``(n, d)`` against integer factors ``(n, K)``, as
    :func:`dci_es` scores them (the same ``seed`` gives the same numbers, and DCI's)."""
    importance, _, test_accuracy = importance_matrix(
        codes_train, factors_train, codes_test, factors_test,
        booster=booster, random_state=derived_seed(seed, 1), n_jobs=n_jobs,  # dci's seed: dci's numbers
    )
    scores = dci_from_importance(importance)
    scores["informativeness"] = float(np.mean(test_accuracy))
    capacities, losses = loss_capacity_curves(
        codes_train, factors_train, codes_test, factors_test,
        max_features=max_features, frequency_scale=frequency_scale, seed=derived_seed(seed, 2),
    )
    scores["explicitness"] = float(np.mean(explicitness_from_curves(capacities, losses)))
    scores["size"] = size_score(np.shape(codes_train)[1], np.shape(factors_train)[1])
    return as_float_dict(scores)


def probe_widths(max_features: int = 512) -> list[int]:
    """The random-feature counts of the probes: ``0`` (linear), ``16, 32, ...`` doubling below
    ``max_features``, and ``max_features``."""
    widths = [0]
    width = FIRST_WIDTH
    while width < max_features:
        widths.append(width)
        width *= 2
    return [*widths, max_features]


def loss_capacity_curves(
    codes_train: np.ndarray,
    factors_train: np.ndarray,
    codes_test: np.ndarray,
    factors_test: np.ndarray,
    *,
    max_features: int = 512,
    frequency_scale: float = 0.08,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(capacities (W,), losses (W, K))``: each probe's capacity ``log(1 + d + w)`` and its test
    loss ``1 - R²`` for each factor (see :func:`dci_es`; ``seed`` draws the frequencies).

    A factor constant on the test points has loss 0 where the probe predicts it exactly, 1 otherwise.
    """
    x_train = np.asarray(codes_train, dtype=np.float64)
    x_test = np.asarray(codes_test, dtype=np.float64)
    y_train = np.asarray(factors_train, dtype=np.float64)
    y_test = np.asarray(factors_test, dtype=np.float64)
    if x_train.ndim != 2 or y_train.ndim != 2 or len(x_train) != len(y_train) or len(x_test) != len(y_test):
        raise ValueError(
            f"codes (n, d) and factors (n, K) must have the same number of rows; got {x_train.shape}, "
            f"{y_train.shape}, {x_test.shape}, {y_test.shape}."
        )
    if not (np.isfinite(x_train).all() and np.isfinite(x_test).all()):
        raise ValueError("codes must be finite.")
    widths = probe_widths(max_features)
    x_train, x_test = normalize_codes(x_train, x_test)
    d = x_train.shape[1]
    frequencies = np.random.default_rng(seed).normal(0.0, frequency_scale, size=(d, max_features // 2))

    def features(x: np.ndarray) -> np.ndarray:
        # [1, z, cos_1, sin_1, cos_2, sin_2, ...]: every probe's features are a prefix of the largest's
        phase = (2 * np.pi) * (x @ frequencies)
        out = np.empty((len(x), 1 + d + max_features))
        out[:, 0] = 1.0
        out[:, 1 : 1 + d] = x
        out[:, 1 + d :: 2] = np.cos(phase)
        out[:, 2 + d :: 2] = np.sin(phase)
        return out

    f_train, f_test = features(x_train), features(x_test)
    gram, moment = f_train.T @ f_train, f_train.T @ y_train
    residual_total = ((y_test - y_test.mean(axis=0)) ** 2).sum(axis=0)
    losses = np.empty((len(widths), y_train.shape[1]))
    for i, width in enumerate(widths):
        p = 1 + d + width
        system = gram[:p, :p].copy()
        system[np.diag_indices(p)] += RIDGE * np.trace(system) / p
        weights = scipy.linalg.solve(system, moment[:p], assume_a="pos")
        error = ((y_test - f_test[:, :p] @ weights) ** 2).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            losses[i] = np.where(residual_total > 0, error / residual_total, np.where(error > 1e-12, 1.0, 0.0))
    return np.log(1.0 + d + np.asarray(widths, dtype=np.float64)), losses


def explicitness_from_curves(
    capacities: np.ndarray, losses: np.ndarray, baseline: float | np.ndarray = 1.0, lowest: float = 0.0
) -> np.ndarray:
    """``(K,)`` explicitness ``1 - AULCC / Z`` of loss-capacity curves ``losses (W, K)`` at increasing
    ``capacities (W,)``: the running minimum of each curve, capped at ``baseline``, integrated
    above ``lowest`` by the trapezoidal rule, over ``Z = (c_max - c_min)(baseline - lowest)``."""
    capacities = np.asarray(capacities, dtype=np.float64)
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim == 1:
        losses = losses[:, None]
    if capacities.ndim != 1 or len(capacities) < 2 or losses.shape[0] != len(capacities):
        raise ValueError(f"need at least two capacities and one loss per capacity; got {capacities.shape}, {losses.shape}.")
    if np.any(np.diff(capacities) <= 0):
        raise ValueError("capacities must increase.")
    baseline = np.broadcast_to(np.asarray(baseline, dtype=np.float64), losses.shape[1:])
    if np.any(baseline <= lowest):
        raise ValueError("the baseline loss must be above the lowest loss.")
    curve = np.minimum(np.minimum.accumulate(losses, axis=0), baseline) - lowest
    area = (0.5 * (curve[1:] + curve[:-1]) * np.diff(capacities)[:, None]).sum(axis=0)
    # in [0, 1] by construction (the curve lies between 0 and the baseline's gap); the clip takes off
    # rounding (-2e-16 for a curve at the baseline throughout, shown as "-0.0")
    return np.clip(1.0 - area / ((capacities[-1] - capacities[0]) * (baseline - lowest)), 0.0, 1.0)


def size_score(num_codes: int, num_factors: int) -> float:
    """DCI-ES's size ``S = K / d``: factors per code dimension."""
    if num_codes < 1 or num_factors < 1:
        raise ValueError(f"need at least one code and one factor, got {num_codes} and {num_factors}.")
    return float(num_factors) / float(num_codes)
