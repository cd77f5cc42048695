"""The grid of Locatello et al. 2019 as data, and disentanglement_lib's model numbers.

Locatello, Bauer, Lucic, Rätsch, Gelly, Schölkopf & Bachem, "Challenging Common Assumptions in
the Unsupervised Learning of Disentangled Representations", ICML 2019, trained 12,600 models:
7 datasets × 6 methods × 6 regularisation strengths × 50 seeds (10,800 of them were published).
This module holds that grid, the settings shared by every model, and the mapping both ways
between ``(dataset, method, strength, seed)`` and disentanglement_lib's model number
(the ``model_num`` of ``dlib_reproduce --study=unsupervised_study_v1``).

Settings shared by every model (disentanglement_lib ``config/unsupervised_study_v1/model_configs/
shared.gin``): conv encoder / deconv decoder (our ``conv64``), 10 latents, Bernoulli
reconstruction, batch 64, Adam lr 1e-4, betas (0.9, 0.999), eps 1e-8, 300,000 steps. Per method:

============  =================  ======================================  ==============================
our name      strength           values                                  fixed settings
============  =================  ======================================  ==============================
beta_vae      ``beta``           1, 2, 4, 6, 8, 16
factor_vae    ``gamma``          10, 20, 30, 40, 50, 100                 discriminator 6 × 1000
                                                                         LeakyReLU, Adam lr 1e-4,
                                                                         betas (0.5, 0.9)
dip_vae_i     ``lambda_od``      1, 2, 5, 10, 20, 50                     lambda_d = 10 · lambda_od
dip_vae_ii    ``lambda_od``      1, 2, 5, 10, 20, 50                     lambda_d = 1 · lambda_od
beta_tcvae    ``beta``           1, 2, 4, 6, 8, 10                       alpha = gamma = 1, ``mws``
annealed_vae  ``c_max``          5, 10, 25, 50, 75, 100                  gamma 1000,
                                                                         iteration_threshold 100,000
============  =================  ======================================  ==============================

β-TCVAE uses the minibatch-weighted-sampling estimator (``estimator="mws"``): disentanglement_lib's
``total_correlation`` is that estimator without its constant, which has the same gradient.

How the numbering is derived
----------------------------
disentanglement_lib's ``config/unsupervised_study_v1/sweep.py`` builds the list of all configs
with its ``utils/hyperparams`` helpers as ``product([datasets, architecture, models, seeds])``
and model ``n`` is item ``n`` of that list. ``product`` is an outer product whose *last* factor
varies fastest; the architecture factor has a single entry; ``models`` is ``chainit`` of the six
methods in the order β-VAE, FactorVAE, DIP-VAE-I, DIP-VAE-II, β-TCVAE, AnnealedVAE, each a
``zipit`` of its six strengths in the order listed above; the datasets are, in order, dSprites
(``dsprites_full``), Color-, Noisy-, Scream-dSprites, SmallNORB, Cars3D, Shapes3D; the seeds are
0, …, 49. Hence::

    n = ((dataset_index · 6 + method_index) · 6 + strength_index) · 50 + seed

so model 0 is β-VAE β = 1 seed 0 on dSprites, 50 is β = 2 seed 0, 300 is FactorVAE γ = 10,
1,800 is Color-dSprites β-VAE β = 1 and 12,599 is AnnealedVAE c_max = 100 seed 49 on Shapes3D.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._core.registry import did_you_mean
from ..errors import ConfigError

__all__ = [
    "DATASETS",
    "DISLIB_DATASET_NAMES",
    "METHODS",
    "MODEL_SETTINGS",
    "Method",
    "NUM_MODELS",
    "NUM_SEEDS",
    "GridPoint",
    "TRAIN_SETTINGS",
    "from_model_number",
    "grid_config",
    "model_number",
    "model_number_for_config",
    "strength_values",
]

#: The seven datasets of the study, in disentanglement_lib's sweep order (our dataset names).
DATASETS: tuple[str, ...] = (
    "dsprites",
    "color_dsprites",
    "noisy_dsprites",
    "scream_dsprites",
    "smallnorb",
    "cars3d",
    "shapes3d",
)

#: Our dataset name -> disentanglement_lib's ``dataset.name``.
DISLIB_DATASET_NAMES: dict[str, str] = {
    "dsprites": "dsprites_full",
    "color_dsprites": "color_dsprites",
    "noisy_dsprites": "noisy_dsprites",
    "scream_dsprites": "scream_dsprites",
    "smallnorb": "smallnorb",
    "cars3d": "cars3d",
    "shapes3d": "shapes3d",
}

NUM_SEEDS = 50

#: ``model`` section shared by every model of the study.
MODEL_SETTINGS: dict[str, Any] = {"backbone": "conv64", "latent_dim": 10, "init": "reference"}

#: ``train`` settings shared by every model of the study (shared.gin).
TRAIN_SETTINGS: dict[str, Any] = {
    "steps": 300_000,
    "batch_size": 64,
    "lr": 1.0e-4,
    "betas": (0.9, 0.999),
    "eps": 1.0e-8,
}

#: ``train`` settings added to the config after the study's runs were mapped, at the values that
#: train as the study did (plain Adam at a constant rate, nothing scheduled): a config without one
#: of them (written before the key existed) has that value
TRAIN_AS_THE_STUDY: dict[str, Any] = {
    "optimizer": "adam",
    "weight_decay": 0.0,
    "lr_schedule": "constant",
    "warmup_steps": 0,
    "schedules": {},
}


@dataclass(frozen=True)
class Method:
    """One method of the study: our objective name, its strength parameter and values, the
    objective parameters fixed by the study, and disentanglement_lib's ``model.name``."""

    name: str
    parameter: str
    values: tuple[float, ...]
    fixed: tuple[tuple[str, Any], ...]
    dislib_name: str

    def objective(self, strength: float) -> dict[str, Any]:
        """The ``objective`` section of a config for this method at ``strength``."""
        return {"name": self.name, self.parameter: float(strength), **dict(self.fixed)}


_BERNOULLI = ("reconstruction", "bernoulli")
_DISCRIMINATOR = (
    ("discriminator_lr", 1.0e-4),
    ("discriminator_betas", (0.5, 0.9)),
    ("discriminator_hidden", 1000),
    ("discriminator_layers", 6),
)

#: The six methods, in disentanglement_lib's sweep order (``chainit`` in ``get_default_models``).
#: DIP-VAE's ``lambda_d = None`` means ``factor · lambda_od`` (10 for I, 1 for II), as in the study.
METHODS: tuple[Method, ...] = (
    Method("beta_vae", "beta", (1.0, 2.0, 4.0, 6.0, 8.0, 16.0), (_BERNOULLI,), "beta_vae"),
    Method("factor_vae", "gamma", (10.0, 20.0, 30.0, 40.0, 50.0, 100.0), (*_DISCRIMINATOR, _BERNOULLI), "factor_vae"),
    Method("dip_vae_i", "lambda_od", (1.0, 2.0, 5.0, 10.0, 20.0, 50.0), (("lambda_d", None), _BERNOULLI), "dip_vae_i"),
    Method("dip_vae_ii", "lambda_od", (1.0, 2.0, 5.0, 10.0, 20.0, 50.0), (("lambda_d", None), _BERNOULLI), "dip_vae_ii"),
    Method(
        "beta_tcvae",
        "beta",
        (1.0, 2.0, 4.0, 6.0, 8.0, 10.0),
        (("alpha", 1.0), ("gamma", 1.0), ("estimator", "mws"), _BERNOULLI),
        "beta_tc_vae",
    ),
    Method(
        "annealed_vae",
        "c_max",
        (5.0, 10.0, 25.0, 50.0, 75.0, 100.0),
        (("gamma", 1000.0), ("iteration_threshold", 100_000), _BERNOULLI),
        "annealed_vae",
    ),
)

_METHODS_BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}
_DIP_LAMBDA_D_FACTOR = {"dip_vae_i": 10.0, "dip_vae_ii": 1.0}
_STRENGTHS = len(METHODS[0].values)

NUM_MODELS = len(DATASETS) * len(METHODS) * _STRENGTHS * NUM_SEEDS  # 12,600


class GridPoint(NamedTuple):
    """One model of the study."""

    dataset: str
    method: str
    strength: float
    seed: int


# ---------------------------------------------------------------------- lookups
def method(name: str) -> Method:
    """The :class:`Method` named ``name`` (our objective name), or a :class:`ConfigError`."""
    if name not in _METHODS_BY_NAME:
        names = [m.name for m in METHODS]
        raise ConfigError(
            f"'{name}' is not a method of Locatello et al. 2019's grid.{did_you_mean(name, names)} "
            f"The six methods are: {', '.join(names)}."
        )
    return _METHODS_BY_NAME[name]


def strength_values(method_name: str) -> tuple[float, ...]:
    """The six strengths of ``method_name`` in the study, in sweep order."""
    return method(method_name).values


def _dataset_index(dataset: str) -> int:
    if dataset not in DATASETS:
        hint = did_you_mean(dataset, DATASETS)
        if dataset in DISLIB_DATASET_NAMES.values() and dataset not in DATASETS:
            hint = " disentanglement_lib calls it 'dsprites_full'; our name is 'dsprites'."
        raise ConfigError(
            f"'{dataset}' is not a dataset of Locatello et al. 2019's grid.{hint} "
            f"The seven datasets are: {', '.join(DATASETS)}."
        )
    return DATASETS.index(dataset)


def _strength_index(m: Method, strength: float) -> int:
    for i, value in enumerate(m.values):
        if _same_number(strength, value):
            return i
    raise ConfigError(
        f"{m.name} strength {m.parameter}={strength!r} is not one of the study's values "
        f"{', '.join(_format_number(v) for v in m.values)}. Pick one of those."
    )


def _same_number(a: Any, b: float) -> bool:
    if isinstance(a, bool) or not isinstance(a, (int, float)):
        return False
    return math.isclose(float(a), b, rel_tol=1e-9, abs_tol=0.0)


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# ---------------------------------------------------------------------- numbering
def as_index(value: Any) -> int | None:
    """``value`` as a Python int when it is an integer of any kind (``int``, ``numpy.int64``,
    a 0-d integer tensor: whatever ``operator.index`` accepts), else None; bools are not integers
    here."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def model_number(dataset: str, method_name: str, strength: float, seed: int) -> int:
    """disentanglement_lib's model number of ``(dataset, method, strength, seed)``.

    ``n = ((dataset_index · 6 + method_index) · 6 + strength_index) · 50 + seed``, see the
    module docstring for how the order follows disentanglement_lib's sweep definition.

    >>> model_number("dsprites", "beta_vae", 1.0, 0)
    0
    >>> model_number("shapes3d", "annealed_vae", 100, 49)
    12599
    """
    d = _dataset_index(dataset)
    m = method(method_name)
    s = _strength_index(m, strength)
    index = as_index(seed)
    if index is None or not 0 <= index < NUM_SEEDS:
        raise ConfigError(
            f"seed {seed!r} is not one of the study's seeds: disentanglement_lib numbers the integer "
            f"seeds 0 to {NUM_SEEDS - 1} only."
        )
    return ((d * len(METHODS) + METHODS.index(m)) * _STRENGTHS + s) * NUM_SEEDS + index


def from_model_number(number: int) -> GridPoint:
    """The ``(dataset, method, strength, seed)`` of disentanglement_lib's model ``number``.

    >>> from_model_number(12599)
    GridPoint(dataset='shapes3d', method='annealed_vae', strength=100.0, seed=49)
    """
    index = as_index(number)
    if index is None or not 0 <= index < NUM_MODELS:
        what = "is outside Locatello et al. 2019's grid" if index is not None else "is not an integer"
        raise ConfigError(
            f"Model number {number!r} {what}: the study numbers its models 0 to {NUM_MODELS - 1} "
            f"(an int or a numpy integer)."
        )
    rest, seed = divmod(index, NUM_SEEDS)
    rest, s = divmod(rest, _STRENGTHS)
    d, m = divmod(rest, len(METHODS))
    return GridPoint(DATASETS[d], METHODS[m].name, METHODS[m].values[s], seed)


# ---------------------------------------------------------------------- configs
def grid_config(dataset: str, method_name: str, strength: float, seed: int = 0) -> dict[str, Any]:
    """The raw nested config dict (YAML layout) of one model of the study.

    Any non-negative integer seed is accepted (seeds 0–49 are the published ones); run-time
    settings (device, precision, output folder, logging) are left at their defaults except
    ``out_dir``, which is named after the model.
    """
    _dataset_index(dataset)
    m = method(method_name)
    _strength_index(m, strength)
    if as_index(seed) is None or as_index(seed) < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}.")
    seed = as_index(seed)
    train = {k: (list(v) if isinstance(v, tuple) else v) for k, v in TRAIN_SETTINGS.items()}
    objective = {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.objective(strength).items()}
    return {
        "seed": seed,
        "data": {"name": dataset},
        "model": dict(MODEL_SETTINGS),
        "objective": objective,
        "train": {**train, "out_dir": f"runs/{method_name}-{dataset}-{m.parameter}{_format_number(strength)}-s{seed}"},
    }


def _as_nested_dict(config: Any) -> dict[str, Any]:
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"model_number_for_config expects a disentangle Config or a nested config dict, got {type(config).__name__}."
        )
    from ..config import Config

    return Config.from_dict(dict(config)).to_dict()


def _matches(value: Any, expected: Any) -> bool:
    if expected is None:
        return value is None
    if isinstance(expected, (tuple, list)):
        return (
            isinstance(value, (tuple, list))
            and len(value) == len(expected)
            and all(_matches(v, e) for v, e in zip(value, expected))
        )
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return _same_number(value, float(expected))
    return value == expected


def model_number_for_config(config: Any) -> int | None:
    """disentanglement_lib's model number of a config, or None if it is not a model of the study.

    ``config`` is a :class:`~disentangle.config.Config` or a nested dict (validated, defaults
    filled in). Compared: the dataset, the method and all its parameters (strength and the fixed
    settings above; DIP-VAE's ``lambda_d`` may be null or the study's ``factor · lambda_od``), the
    backbone and code size, the optimiser (Adam, its rate, betas and epsilon, no weight decay, no
    warm-up or rate schedule), no ``train.schedules``, batch size, step count and the seed (0–49). Ignored:
    run-time choices that do not define the model (device, precision, data path, output folder,
    logging, checkpointing, evaluation).
    """
    raw = _as_nested_dict(config)
    data, model, objective, train = (raw.get(k) or {} for k in ("data", "model", "objective", "train"))
    dataset = data.get("name")
    m = _METHODS_BY_NAME.get(objective.get("name"))
    if dataset not in DATASETS or m is None:
        return None
    if any(not _matches(model.get(k), v) for k, v in MODEL_SETTINGS.items()):
        return None
    if set(model) - set(MODEL_SETTINGS):
        return None
    if any(not _matches(train.get(k), v) for k, v in TRAIN_SETTINGS.items()):
        return None
    if any(train.get(k, v) != v for k, v in TRAIN_AS_THE_STUDY.items()):  # AdamW, a warm-up, a β schedule
        return None
    strength = objective.get(m.parameter)
    index = next((i for i, v in enumerate(m.values) if _same_number(strength, v)), None)
    if index is None:
        return None
    expected = dict(m.fixed)
    given = {k: v for k, v in objective.items() if k not in ("name", m.parameter)}
    if set(given) != set(expected):
        return None
    for key, value in expected.items():
        if key == "lambda_d" and given[key] is not None:
            if not _same_number(given[key], _DIP_LAMBDA_D_FACTOR[m.name] * float(strength)):
                return None
        elif not _matches(given[key], value):
            return None
    seed = as_index(raw.get("seed", 0))
    if seed is None or not 0 <= seed < NUM_SEEDS:
        return None
    return model_number(dataset, m.name, m.values[index], seed)
