"""Disentanglement metrics: the Locatello et al. (2019) suite, fast and deterministic.

Every metric has the signature ``metric(dataset, representation, *, seed=0, **settings) ->
dict[str, float]``:

* ``dataset``: any object with the ground-truth interface (``factor_sizes``,
  ``sample_factors(n, rng)``, ``sample_observations_from_factors(factors, rng)``; see
  :class:`disentangle.data.GroundTruthDataset`);
* ``representation``: a trained model (its ``representation(x)``, the posterior means, is used)
  or any callable mapping a batch of observations to codes ``(n, d)`` (tensor or array); a
  :class:`torch.nn.Module` is put into eval mode for the metric and every submodule's mode is
  restored afterwards;
* the same ``seed`` gives the same numbers; defaults are those of the Locatello et al. study;
* every metric that scores factors takes ``factors=`` (names or indices; default: every factor
  with more than one value, so a single-valued factor never changes a score);
* settings are checked before anything is sampled: a bad value raises
  :class:`~disentangle._core.checks.ParameterError` (a :class:`~disentangle.ConfigError`), and
  :func:`validate_settings` runs the same checks without a run.

============================  ========================  ===================================================
metric                        alias                     paper
============================  ========================  ===================================================
``beta_vae_score``            ``beta_vae``              Higgins et al. 2017
``factor_vae_score``          ``factor_vae``            Kim & Mnih 2018
``mig``                                                 Chen et al. 2018 (histogram estimator; ``estimator="chen"``)
``modularity_explicitness``   ``modularity``            Ridgeway & Mozer 2018
``dci``                                                 Eastwood & Williams 2018
``sap_score``                 ``sap``                   Kumar et al. 2018
``unsupervised_scores``       ``unsupervised``          Locatello et al. 2019
``downstream_task``           ``downstream``            Locatello et al. 2019
``elbo_decomposition``                                  Chen et al. 2018 (needs a model with ``encode``)
``mig_sup``                                             Li et al. 2020 (as in Carbonneau et al.'s review)
``dcimig``                                              Sepliarskaia et al. 2019 (as in the review)
``jemmig``                                              Do & Tran 2020 (as in the review)
``irs``                                                 Suter et al. 2019 (disentanglement_lib's IRS)
``fairness``                                            Locatello et al. 2019b (unfairness of classifiers)
``reduced_downstream_task``   ``reduced_downstream``    disentanglement_lib (top code removed)
``strong_downstream_task``    ``strong_downstream``     disentanglement_lib (intervention shift)
``unified_scores``                                      disentanglement_lib (all matrices x aggregations)
``class_leakage``                                       class/content models: the class read from the content code
``swap_accuracy``                                       class/content models: swapped class codes, classified (needs the model)
============================  ========================  ===================================================

``METRICS`` is the registry of all of them (``METRICS.get("mig")``); :func:`evaluate_metrics`
runs several at once, sharing the sampled codes between metrics that draw the same points.

One name per metric, the same everywhere: ``disentangle.metrics.NAME`` is the metric registered as
``NAME`` (``from disentangle.metrics import sap_score``; ``--metrics sap_score`` on the evaluate
CLI; ``train.eval_metrics: [sap_score]``), and its scores are recorded under that name. An alias
(``METRICS.aliases()``) is the same function under a short name (``disentangle.metrics.sap is
sap_score``), accepted wherever a name is (``--metrics sap``) and recorded under the metric's name.
Each alias is the name of the module that implements its metric: the package attribute is the
metric, never the module. The modules still import by their paths for their building blocks
(``from disentangle.metrics.sap import sap_from_score_matrix``; ``importlib.import_module`` for
the module object itself: ``import disentangle.metrics.sap as m`` binds the attribute, the metric).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from .._core import checks
from .._core.discovery import import_submodules
from .._core.registry import did_you_mean
from ..errors import ConfigError, NotAGridError
from ._information import discrete_entropy, discrete_mutual_info, histogram_discretize
from ._representation import RepresentationFunction, as_representation_function
from ._sampling import code_cache, sample_codes_and_factors
from ._settings import is_sample, select_factors
from .beta_vae import beta_vae_score
from .class_leakage import class_leakage
from .code_table import CodeTable, supports_code_table
from .dci import dci
from .dci_es import dci_es
from .dcimig import dcimig
from .downstream import downstream_task
from .elbo import elbo
from .elbo_decomposition import elbo_decomposition
from .factor_vae import factor_vae_score
from .fairness import fairness
from .infomec import infomec
from .irs import irs
from .jemmig import jemmig
from .mig import mig
from .mig_sup import mig_sup
from .modularity import modularity_explicitness
from .names import LOCATELLO_METRICS, POSTERIOR_METRICS  # the six supervised scores of the Locatello et al. study
from .reduced_downstream import reduced_downstream_task
from .registration import DATA_NEEDS, METRICS, MetricSpec, metric_spec, register_metric
from .sap import sap_score
from .strong_downstream import strong_downstream_task
from .swap_accuracy import swap_accuracy
from .synthetic import FactorObservationDataset
from .unified_scores import unified_scores
from .unsupervised import unsupervised_scores

# every module of the package registers its metrics as it is imported (a new metric is one file)
import_submodules(__name__, __path__)

logger = logging.getLogger(__name__)

# The aliases of METRICS as package attributes: the metric, never its module. Importing a submodule
# sets the package attribute of its name to the module, so these come after every submodule is
# imported (above); later imports of a submodule find it in sys.modules and leave them alone.
beta_vae = beta_vae_score
downstream = downstream_task
factor_vae = factor_vae_score
modularity = modularity_explicitness
reduced_downstream = reduced_downstream_task
sap = sap_score
strong_downstream = strong_downstream_task
unsupervised = unsupervised_scores


def data_of(dataset: Any) -> str:
    """What ``dataset`` offers the metrics, one of :data:`~disentangle.metrics.registration.DATA_NEEDS`:
    ``"grid"`` (a complete factor grid), ``"labels"`` (a labelled sample) or ``"images"``."""
    if not is_sample(dataset):
        return "grid"
    return "labels" if dataset.labelled else "images"


def metric_applies(name: str, dataset: Any, settings: Mapping[str, Any] | None = None) -> bool:
    """Whether metric ``name`` with ``settings`` can run on ``dataset`` (what it needs of the data,
    :meth:`MetricSpec.data`, against what the dataset offers, :func:`data_of`)."""
    if dataset is None:
        return True
    offered = DATA_NEEDS.index(data_of(dataset))
    return DATA_NEEDS.index(metric_spec(name).data(settings or {})) >= offered


def check_metric_applies(name: str, dataset: Any, settings: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`~disentangle.errors.NotAGridError` (one paragraph: the metric, why, and the
    metrics that do apply) unless :func:`metric_applies`."""
    if metric_applies(name, dataset, settings):
        return
    need, offered = metric_spec(name).data(settings or {}), data_of(dataset)
    why = {
        "grid": "it fixes factors and draws the others, or encodes every point of the factor grid, and needs a "
                "complete grid",
        "labels": "it compares codes with factor labels",
    }[need]
    what = getattr(dataset, "name", type(dataset).__name__)
    has = "labelled images without a factor grid" if offered == "labels" else "images without labels"
    fitting = ", ".join(n for n in available_metrics(dataset=dataset))
    would_do = {
        "grid": "Evaluate it on a grid dataset (dsprites, shapes3d, ...; disentangle.data.from_arrays gives a grid "
                "when the labels cover every combination once)",
        "labels": "Evaluate it on labelled images (an npz dataset with factor_classes beside its images, or "
                  "disentangle.data.from_arrays(images, labels)) or on a grid dataset",
    }[need]
    raise NotAGridError(
        f"The metric '{name}' cannot run on {what}: {why}, and this dataset holds {has}. Metrics that apply to "
        f"it: {fitting or 'none'}. {would_do}."
    )


def available_metrics(representation: Any = None, dataset: Any = None) -> tuple[str, ...]:
    """Names of the registered metrics that apply to ``representation`` (all, for ``None``) and, when
    given, to ``dataset`` at their default settings (:func:`metric_applies`).

    Metrics marked ``requires_encoder`` (the ELBO decomposition) apply only to models with an
    ``encode`` method; on a sample of images without a grid, only the metrics that need no grid,
    and on unlabelled images only those that need no labels.
    """
    has_encoder = representation is None or callable(getattr(representation, "encode", None))
    has_posterior = representation is None or has_a_posterior(representation)
    return tuple(
        name for name in METRICS.names()
        if (has_encoder or not metric_spec(name).requires_encoder) and metric_applies(name, dataset)
        and (has_posterior or name not in POSTERIOR_METRICS)
    )


def has_a_posterior(model: Any) -> bool:
    """Whether ``model`` is a VAE with a posterior to score (:data:`~disentangle.metrics.names.POSTERIOR_METRICS`):
    not a GAN, whose decoder declares a uniform code prior (``decoder.code_prior = "uniform"``)."""
    return getattr(getattr(model, "decoder", None), "code_prior", None) != "uniform"


def refuse_without_a_posterior(metric: str, model: Any, fix: str | None = None) -> None:
    """Raise :class:`~disentangle.ConfigError` when ``metric`` (one of the posterior metrics, or a
    metric's estimator that samples the posterior) is asked of a GAN; ``fix`` replaces the advice."""
    if not has_a_posterior(model):
        default = f"Leave {metric} out; 'all' leaves it out for GANs."
        raise ConfigError(
            f"{metric} scores a VAE's posterior q(z|x), and this model is a GAN: its codes have a uniform prior "
            f"and no posterior (its encode is an inference network's guess, with a fixed unit variance), so the "
            f"numbers would mean nothing. {fix or default}"
        )


def resolve_metric_names(names: str | Iterable[str], representation: Any = None, dataset: Any = None) -> list[str]:
    """Validate metric names (a list, or a comma-separated string); ``"all"`` expands, an alias
    becomes its metric's name (``"sap"`` is ``"sap_score"``), each metric is named once.

    With a ``dataset``, ``"all"`` expands to the metrics that apply to it (:func:`available_metrics`)
    and the ones it leaves out are logged; a metric named explicitly is not checked here
    (:func:`check_metric_applies` is).

    Raises :class:`disentangle._core.registry.UnknownNameError` (with a did-you-mean) for an unknown name.
    """
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    out: list[str] = []
    for name in names:
        if name == "all" and dataset is not None:
            skipped = sorted(set(available_metrics(representation)) - set(available_metrics(representation, dataset)))
            if skipped:
                logger.info("'all' leaves out the metrics that do not apply to %s (%s): %s",
                            getattr(dataset, "name", type(dataset).__name__), data_of(dataset), ", ".join(skipped))
        expanded = list(available_metrics(representation, dataset)) if name == "all" else [name]
        for n in expanded:
            n = METRICS.canonical(n)  # raises with the valid names
            if n not in out:
                out.append(n)
    if not out:
        raise ConfigError(f"no metric named; choose from: all, {', '.join(METRICS.names())}.")
    return out


def validate_settings(name: str, settings: Mapping[str, Any], dataset: Any = None) -> dict[str, Any]:
    """Check one metric's settings without running it; return them validated (converted).

    ``settings`` are keyword arguments of metric ``name`` (a name or an alias; as the evaluate CLI's
    ``--set`` gives them). An unknown metric or setting raises :class:`~disentangle.ConfigError` with a
    did-you-mean; a bad value raises :class:`~disentangle._core.checks.ParameterError` with the message
    the metric itself would give, checked together with the metric's defaults for the settings
    not given. ``factors`` names are checked against ``dataset`` when one is given (their form
    only, otherwise). Nothing is sampled or encoded.
    """
    spec = metric_spec(name)
    parameters = spec.defaults()
    for key in settings:
        if key not in parameters:
            raise ConfigError(
                f"{name} has no setting '{key}'.{did_you_mean(key, list(parameters))} "
                f"Its settings: {', '.join(parameters)}."
            )
    if spec.check is None:
        return dict(settings)
    checked = spec.settings(**settings)  # the frozen settings dataclass: every value checked
    if dataset is not None and getattr(checked, "factors", None) is not None:
        select_factors(dataset, checked.factors)
    return {key: getattr(checked, key) for key in settings}


def evaluate_metrics(
    dataset: Any,
    representation: Any,
    names: str | Iterable[str],
    *,
    seed: int = 0,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    callback: Callable[[str, dict[str, float], float], None] | None = None,
    code_table: bool | Literal["auto"] = "auto",
    on_encode: Callable[[int, int], None] | None = None,
    channels_last: bool | Literal["auto"] = "auto",
) -> dict[str, dict[str, float]]:
    """Run several metrics on one representation: ``{metric name: {score name: value}}``.

    ``names`` are registered metric names or aliases (or ``"all"``), ``settings`` optional
    per-metric keyword arguments (``{"dci": {"booster": "hist"}}``; keyed by name or alias),
    ``callback(name, scores, seconds)`` is called after each metric (for progress reporting). The
    results and callbacks name each metric by its registered name (an alias's metric too). All
    names and settings are checked (see :func:`validate_settings`) before anything runs. Sampled ``(codes, factors)`` are shared
    between metrics that draw the same points with the same seed (see
    :func:`disentangle.metrics._sampling.code_cache`), which changes no value.

    ``code_table``: whether each grid point is encoded at most once and its code looked up
    afterwards (:class:`disentangle.metrics.code_table.CodeTable`), which makes the BetaVAE and
    FactorVAE scores several times cheaper in representation calls. That is only right when both

    * the dataset declares ``deterministic_observations`` (an observation is a function of its
      factors alone: dSprites, not its noisy or coloured variants, not SmallNORB with its hidden
      instance), and
    * the representation is deterministic: a table freezes one draw per grid point, so a
      representation that samples its codes would be scored on frozen noise.

    ``"auto"`` (default) uses the table when the dataset declares it, the representation is a
    :class:`disentangle.models.vae.VAE` (or its ``representation`` method), whose codes are the posterior
    means, and it pays: the metrics that would use it draw, together, at least a fifth of the grid's
    size in observations (:data:`CODE_TABLE_MIN_DRAWS_PER_POINT`, from each metric's declared
    ``draws``; a metric that declares none counts as drawing enough). Below that, few draws repeat a
    grid point and the table costs more than it saves: MIG, SAP or DCI alone on dSprites (15,000
    draws from 737,280 points) are encoded draw by draw, while the BetaVAE and FactorVAE scores
    (about 1.9 and 1.0 million draws) or MIG on Cars3D (17,568 points) use it. ``True`` states that
    the representation is deterministic (e.g. a plain function of the observation) and uses the
    table wherever the dataset allows it; ``False`` never does, and
    reproduces separate metric calls exactly. Metrics that need the model itself (the ELBO
    decomposition, ``mig(estimator="chen")``) always get the model. With the table, the same
    points are drawn; an image's code may differ in the last bits when computed in another batch,
    which can move a classifier score slightly. ``on_encode(newly_encoded, grid_size)`` reports the
    table's encoding as it goes (the first metric that samples heavily encodes most of the grid:
    737,280 images for dSprites).

    ``channels_last``: whether a :class:`~disentangle.models.vae.VAE` (or its ``representation``
    method) encodes with its convolution weights in ``torch.channels_last`` layout, where oneDNN's
    convolutions are faster. The user's model is left as it is: a copy in that layout encodes.
    ``"auto"`` (default) is on for a CPU with an AVX512, AMX or AVX2 capability, as ``train.channels_last``
    (:func:`disentangle._core.hardware.choose_channels_last`); the codes differ from the default
    layout's by rounding only (about 1e-6), like codes computed in another batch. Metrics that need
    the model itself get the user's model.

    glibc's allocator is told to keep freed memory for the rest of the process
    (:func:`disentangle._core.hardware.keep_freed_memory`): otherwise a metric that runs after
    another one faults its buffers in again, up to 2× slower.
    """
    import time

    from .._core.hardware import keep_freed_memory

    keep_freed_memory()
    channels_last = _auto_or_boolean("channels_last", channels_last)
    code_table = _auto_or_boolean("code_table", code_table)
    seed = checks.seed("seed", seed)
    resolved = resolve_metric_names(names, representation, dataset)
    settings = _settings_by_metric_name(settings or {})
    for name in resolved:
        validate_settings(name, settings.get(name, {}), dataset)
        check_metric_applies(name, dataset, settings.get(name, {}))
    results: dict[str, dict[str, float]] = {}
    use_table = supports_code_table(dataset) and (
        code_table is True
        or (code_table == "auto" and is_deterministic_representation(representation)
            and code_table_pays(dataset, {name: settings.get(name, {}) for name in resolved}))
    )
    encoding = encoding_representation(representation, channels_last)
    table = CodeTable(dataset, encoding, on_encode=on_encode) if use_table else None
    with code_cache():
        for name in resolved:
            metric, metric_settings = METRICS.get(name), dict(settings.get(name, {}))
            start = time.perf_counter()
            if metric_spec(name).needs_model(metric_settings):
                results[name] = metric(dataset, representation, seed=seed, **metric_settings)
            elif table is None:
                results[name] = metric(dataset, encoding, seed=seed, **metric_settings)
            else:
                results[name] = metric(table, table.identity, seed=seed, **metric_settings)
            if callback is not None:
                callback(name, results[name], time.perf_counter() - start)
    return results


def _settings_by_metric_name(settings: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """``settings`` keyed by metric names, an alias's under its metric's name; an unknown name raises
    (with a did-you-mean), and so does a metric given settings under two names (``sap`` and ``sap_score``)."""
    out: dict[str, Mapping[str, Any]] = {}
    given: dict[str, str] = {}
    for key, value in settings.items():
        name = METRICS.canonical(key)
        if name in out:
            raise ConfigError(
                f"settings for the metric '{name}' are given both as '{given[name]}' and as '{key}'; give them once."
            )
        out[name], given[name] = value, key
    return out


def _auto_or_boolean(name: str, value: Any) -> bool | Literal["auto"]:
    """``value`` checked as ``"auto"``, True or False (a :class:`ParameterError` naming ``name`` otherwise)."""
    if isinstance(value, str):
        if value == "auto":
            return value
        raise checks.ParameterError(name, f"{name} must be 'auto', True or False, got {value!r}.")
    return checks.boolean(name, value)


def _vae_behind(representation: Any) -> Any:
    """The :class:`~disentangle.models.vae.VAE` whose posterior means ``representation`` gives (the
    VAE itself, its ``representation`` method, or either wrapped in a :class:`RepresentationFunction`);
    None for anything else."""
    from ..models.vae import VAE

    if isinstance(representation, RepresentationFunction):
        representation = representation.target
    if isinstance(representation, VAE):
        return representation
    owner = getattr(representation, "__self__", None)
    if isinstance(owner, VAE) and getattr(representation, "__func__", None) is VAE.representation:
        return owner
    return None


def encoding_representation(representation: Any, channels_last: bool | Literal["auto"] = "auto") -> Any:
    """The representation that encodes for :func:`evaluate_metrics`: ``representation`` itself, or,
    when ``channels_last`` resolves to on for its device (a :class:`~disentangle.models.vae.VAE` or
    its ``representation`` method with 4-D weights not in that layout yet), a copy of the VAE with
    its 4-D parameters and buffers in ``torch.channels_last`` layout (the original is not touched)."""
    import copy

    import torch

    from .._core.hardware import choose_channels_last

    model = _vae_behind(representation)
    if model is None:
        return representation
    weights = [p for p in model.parameters() if p.dim() == 4]
    if not weights or all(p.is_contiguous(memory_format=torch.channels_last) for p in weights):
        return representation
    if not choose_channels_last(channels_last, weights[0].device)[0]:
        return representation
    return copy.deepcopy(model).to(memory_format=torch.channels_last)


#: ``code_table="auto"`` uses a table when the metrics that would use it draw at least this many
#: observations per grid point in all (then about a tenth or more of the draws repeat a point)
CODE_TABLE_MIN_DRAWS_PER_POINT = 0.2


def code_table_pays(dataset: Any, settings: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the metrics ``settings`` names (metric name to its given settings) draw enough
    observations from ``dataset`` for a code table to pay: in all at least
    :data:`CODE_TABLE_MIN_DRAWS_PER_POINT` times its number of grid points, counting only the metrics
    that would use the table; a metric that does not declare its draws counts as enough."""
    draws = 0
    for name, given in settings.items():
        spec = metric_spec(name)
        if spec.needs_model(given):
            continue
        count = spec.draws(given)
        if count is None:
            return True
        draws += count
    return draws >= CODE_TABLE_MIN_DRAWS_PER_POINT * len(dataset)


def is_deterministic_representation(representation: Any) -> bool:
    """Whether ``representation`` is known to give the same code for the same observation:
    a :class:`disentangle.models.vae.VAE` (its codes are the posterior means) or its ``representation``
    method. Any other callable might sample its codes, so it is not assumed to be deterministic."""
    return _vae_behind(representation) is not None


__all__ = [
    "CODE_TABLE_MIN_DRAWS_PER_POINT",
    "DATA_NEEDS",
    "check_metric_applies",
    "data_of",
    "metric_applies",
    "LOCATELLO_METRICS",
    "METRICS",
    "MetricSpec",
    "CodeTable",
    "supports_code_table",
    "FactorObservationDataset",
    "as_representation_function",
    "available_metrics",
    "beta_vae_score",
    "class_leakage",
    "code_table_pays",
    "dci",
    "dci_es",
    "dcimig",
    "discrete_entropy",
    "encoding_representation",
    "discrete_mutual_info",
    "downstream_task",
    "elbo",
    "elbo_decomposition",
    "evaluate_metrics",
    "factor_vae_score",
    "fairness",
    "histogram_discretize",
    "infomec",
    "irs",
    "is_deterministic_representation",
    "jemmig",
    "metric_spec",
    "mig",
    "mig_sup",
    "modularity_explicitness",
    "reduced_downstream_task",
    "register_metric",
    "resolve_metric_names",
    "sample_codes_and_factors",
    "sap_score",
    "select_factors",
    "strong_downstream_task",
    "swap_accuracy",
    "unified_scores",
    "unsupervised_scores",
    "validate_settings",
]
