"""Disentanglement metrics: the Locatello et al. (2019) suite, fast and deterministic.

Every metric has the signature ``metric(dataset, representation, *, seed=0, **settings) ->
dict[str, float]``:

* ``dataset``: any object with the ground-truth interface (``factor_sizes``,
  ``sample_factors(n, rng)``, ``sample_observations_from_factors(factors, rng)``; see
  :class:`disentangle.data.GroundTruthDataset`);
* ``representation``: a trained model (its ``representation(x)``, the posterior means, is used)
  or any callable mapping a batch of observations to codes ``(n, d)`` (tensor or array);
* the same ``seed`` gives the same numbers; defaults are those of the Locatello et al. study.

============================  =========================================================
``beta_vae_score``            Higgins et al. 2017
``factor_vae_score``          Kim & Mnih 2018
``mig``                       Chen et al. 2018 (histogram estimator; ``estimator="chen"``)
``modularity_explicitness``   Ridgeway & Mozer 2018
``dci``                       Eastwood & Williams 2018
``sap_score``                 Kumar et al. 2018
``unsupervised_scores``       Locatello et al. 2019
``downstream_task``           Locatello et al. 2019
``elbo_decomposition``        Chen et al. 2018 (needs a model with ``encode``)
============================  =========================================================

``METRICS`` is the registry of all of them (``METRICS.get("mig")``); :func:`evaluate_metrics`
runs several at once, sharing the sampled codes between metrics that draw the same points.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..registry import Registry
from ._utils import (
    code_cache,
    discrete_entropy,
    discrete_mutual_info,
    histogram_discretize,
)
from .beta_vae import beta_vae_score
from .code_table import CodeTable, supports_code_table
from .dci import dci
from .downstream import downstream_task
from .elbo_decomposition import elbo_decomposition
from .factor_vae import factor_vae_score
from .mig import mig
from .modularity import modularity_explicitness
from .sap import sap_score
from .synthetic import FactorObservationDataset
from .unsupervised import unsupervised_scores

METRICS: Registry = Registry("metric")

for _fn in (
    beta_vae_score,
    factor_vae_score,
    mig,
    modularity_explicitness,
    dci,
    sap_score,
    unsupervised_scores,
    downstream_task,
    elbo_decomposition,
):
    METRICS.register(_fn.__name__, _fn)

elbo_decomposition.requires_encoder = True  # type: ignore[attr-defined]

#: the six supervised scores of the Locatello et al. study, in the paper's order
LOCATELLO_METRICS = (
    "beta_vae_score",
    "factor_vae_score",
    "mig",
    "modularity_explicitness",
    "dci",
    "sap_score",
)


def available_metrics(representation: Any = None) -> tuple[str, ...]:
    """Names of the registered metrics that apply to ``representation`` (all, for ``None``).

    Metrics marked ``requires_encoder`` (the ELBO decomposition) apply only to models with an
    ``encode`` method.
    """
    has_encoder = representation is None or callable(getattr(representation, "encode", None))
    return tuple(
        name
        for name in METRICS.names()
        if has_encoder or not getattr(METRICS.get(name), "requires_encoder", False)
    )


def resolve_metric_names(names: str | Iterable[str], representation: Any = None) -> list[str]:
    """Validate metric names (a list, or a comma-separated string); ``"all"`` expands.

    Raises :class:`disentangle.registry.UnknownNameError` (with a did-you-mean) for an unknown name.
    """
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    out: list[str] = []
    for name in names:
        expanded = list(available_metrics(representation)) if name == "all" else [name]
        for n in expanded:
            METRICS.get(n)  # raises with the valid names
            if n not in out:
                out.append(n)
    if not out:
        from ..registry import ConfigError

        raise ConfigError(f"no metric named; choose from: all, {', '.join(METRICS.names())}.")
    return out


def evaluate_metrics(
    dataset: Any,
    representation: Any,
    names: str | Iterable[str],
    *,
    seed: int = 0,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    callback: Callable[[str, dict[str, float], float], None] | None = None,
    code_table: bool = True,
) -> dict[str, dict[str, float]]:
    """Run several metrics on one representation: ``{metric name: {score name: value}}``.

    ``names`` are registered metric names (or ``"all"``), ``settings`` optional per-metric keyword
    arguments (``{"dci": {"booster": "hist"}}``), ``callback(name, scores, seconds)`` is called
    after each metric (for progress reporting). All names are checked before anything runs.
    Sampled ``(codes, factors)`` are shared between metrics that draw the same points with the same
    seed (see :func:`disentangle.metrics._utils.code_cache`), which changes no value.

    ``code_table`` (default on): when the dataset's observations are a function of the factors alone
    (``dataset.deterministic_observations``, e.g. dSprites, not its noisy or coloured variants),
    each grid point is encoded at most once and its code looked up afterwards
    (:class:`disentangle.metrics.code_table.CodeTable`), which makes the BetaVAE and FactorVAE
    scores 2-3x cheaper in representation calls. Metrics that need the model itself (the ELBO
    decomposition, ``mig(estimator="chen")``) get the model. The same points are drawn; an image's
    code may differ in the last bits when computed in another batch, which can move a classifier
    score slightly (BetaVAE train accuracy 0.830 vs 0.828 on the sprites benchmark, within its seed
    spread of 0.003). ``code_table=False`` reproduces separate metric calls exactly.
    """
    import time

    resolved = resolve_metric_names(names, representation)
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(METRICS.names()))
    if unknown:
        METRICS.get(unknown[0])
    results: dict[str, dict[str, float]] = {}
    table = CodeTable(dataset, representation) if code_table and supports_code_table(dataset) else None
    with code_cache():
        for name in resolved:
            metric, metric_settings = METRICS.get(name), dict(settings.get(name, {}))
            start = time.perf_counter()
            if table is None or _needs_model(metric, metric_settings):
                results[name] = metric(dataset, representation, seed=seed, **metric_settings)
            else:
                results[name] = metric(table, table.identity, seed=seed, **metric_settings)
            if callback is not None:
                callback(name, results[name], time.perf_counter() - start)
    return results


def _needs_model(metric: Callable, settings: Mapping[str, Any]) -> bool:
    """Whether a metric needs the model's ``encode``, not only codes of observations."""
    return bool(getattr(metric, "requires_encoder", False)) or settings.get("estimator") == "chen"


__all__ = [
    "LOCATELLO_METRICS",
    "METRICS",
    "CodeTable",
    "supports_code_table",
    "FactorObservationDataset",
    "available_metrics",
    "beta_vae_score",
    "dci",
    "discrete_entropy",
    "discrete_mutual_info",
    "downstream_task",
    "elbo_decomposition",
    "evaluate_metrics",
    "factor_vae_score",
    "histogram_discretize",
    "mig",
    "modularity_explicitness",
    "resolve_metric_names",
    "sap_score",
    "unsupervised_scores",
]
