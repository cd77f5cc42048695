"""Recipes: every config of the zoo by name.

Four families of names:

* **shipped configs**, named by their path under ``configs/`` without ``.yaml``:
  ``quickstart``, ``dsprites/factor_vae``, ``datasets/cars3d``, …
* **generated recipes**, one regular scheme ``METHOD-DATASET-PARAMVALUE-sSEED``, e.g.
  ``beta_tcvae-dsprites-beta6-s0``, ``annealed_vae-cars3d-c_max25-s3``,
  ``dip_vae_i-shapes3d-lambda_od10-s49``: the objective name, the dataset name, the strength
  parameter (its objective parameter name, a trailing ``_`` dropped) immediately followed by its
  value (integers without a decimal point), and the seed. Any non-negative seed works; the
  listing shows ``-s0``.

  - the grid of Locatello et al. 2019 (:mod:`disentangle.zoo.locatello`): 6 methods × their 6
    strengths × 7 datasets, with the study's settings; seeds 0–49 are disentanglement_lib's
    model numbers (:func:`model_number_of`).
  - InfoVAE (``info_vae-DATASET-lambda1000-sN``, alpha 0, RBF kernel) and AAE
    (``aae-DATASET-adversarial_weight1-sN``, deterministic encoder) on the same 7 datasets with
    the same training settings; neither is part of the study, so there is one representative
    strength each (the values of ``configs/dsprites/info_vae.yaml`` and ``aae.yaml``).
  - the weakly-supervised models of Locatello et al. 2020 ("Weakly-Supervised Disentanglement
    Without Compromises", ICML 2020): Ada-GVAE and Ada-ML-VAE (``ada_gvae``, ``ada_ml_vae``) with
    β ∈ {1, 2, 4, 6, 8, 16} on dSprites, SmallNORB, Cars3D, Shapes3D and MPI3D (the ``real``
    variant), ``k = "random"`` (the number of factors changed within a pair drawn at random, the
    paper's main setting), conv64, 10 latents, batch 64, Adam 1e-4, 300,000 steps.
  - the semi-supervised models of Locatello et al. 2020 ("Disentangling Factors of Variation Using
    Few Labels", ICLR 2020): the five S² objectives (``s2_beta_vae-dsprites-gamma_sup4-s0``) on the
    7 datasets of the 2019 study, ``gamma_sup`` ∈ {1, 2, 4, 8, 16}, the ``xent`` regulariser with a
    fixed weight on 1,000 perfect labels (``data.labels``), the unsupervised strength fixed at the
    value of the shipped configs (β-VAE β 4, FactorVAE γ 30, β-TCVAE β 6, DIP-VAE λ_od 10) and the
    study's training settings. The paper's own grid also varies the labeller, the number of labels
    and the regulariser; those are one override away (``data.labels.labeller=bin``).

* **pretrained models** (:mod:`disentangle.zoo.manifest`): their recorded, resolved config.

:func:`config_dict` returns the raw nested dict (YAML layout) of a name; validation happens in
:meth:`disentangle.config.Config.from_dict`.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from .. import config as config_module
from .._core.registry import did_you_mean
from ..errors import ConfigError
from . import locatello

#: the study's training settings, shared by every generated recipe
_TRAIN = {k: (list(v) if isinstance(v, tuple) else v) for k, v in locatello.TRAIN_SETTINGS.items()}


@dataclass(frozen=True)
class Family:
    """A family of generated recipes: objectives × strengths × datasets."""

    key: str  #: "locatello2019", "extra", "weak2020"
    objectives: tuple[str, ...]
    datasets: tuple[str, ...]
    parameter: dict[str, str]  #: objective -> strength parameter
    values: dict[str, tuple[float, ...]]  #: objective -> strengths
    fixed: dict[str, dict[str, Any]]  #: objective -> fixed objective parameters
    description: str
    data: dict[str, Any] = field(default_factory=dict)  #: extra ``data`` keys of every recipe


LOCATELLO_2019 = Family(
    key="locatello2019",
    objectives=tuple(m.name for m in locatello.METHODS),
    datasets=locatello.DATASETS,
    parameter={m.name: m.parameter for m in locatello.METHODS},
    values={m.name: m.values for m in locatello.METHODS},
    fixed={m.name: dict(m.fixed) for m in locatello.METHODS},
    description="Locatello et al. 2019 grid (disentanglement_lib unsupervised_study_v1)",
)

EXTRA = Family(
    key="extra",
    objectives=("info_vae", "aae"),
    datasets=locatello.DATASETS,
    parameter={"info_vae": "lambda_", "aae": "adversarial_weight"},
    values={"info_vae": (1000.0,), "aae": (1.0,)},
    fixed={
        "info_vae": {"alpha": 0.0, "kernel": "rbf", "kernel_scale": None, "reconstruction": "bernoulli"},
        "aae": {
            "encoder": "deterministic",
            "discriminator_lr": 1.0e-4,
            "discriminator_betas": [0.5, 0.9],
            "discriminator_hidden": 1000,
            "discriminator_layers": 2,
            "reconstruction": "bernoulli",
        },
    },
    description="InfoVAE and AAE with the study's training settings (not part of the study)",
)

WEAK_2020 = Family(
    key="weak2020",
    objectives=("ada_gvae", "ada_ml_vae"),
    datasets=("dsprites", "smallnorb", "cars3d", "shapes3d", "mpi3d"),
    parameter={"ada_gvae": "beta", "ada_ml_vae": "beta"},
    values={"ada_gvae": (1.0, 2.0, 4.0, 6.0, 8.0, 16.0), "ada_ml_vae": (1.0, 2.0, 4.0, 6.0, 8.0, 16.0)},
    fixed={
        "ada_gvae": {"k": "random", "reconstruction": "bernoulli"},
        "ada_ml_vae": {"k": "random", "reconstruction": "bernoulli"},
    },
    description="Locatello et al. 2020 weakly-supervised grid (Ada-GVAE, Ada-ML-VAE)",
)

_S2_SUPERVISION = {"supervised_loss": "xent", "supervised_schedule": "fixed", "schedule_steps": 10_000}

FEW_LABELS_2020 = Family(
    key="few_labels2020",
    objectives=("s2_beta_vae", "s2_factor_vae", "s2_beta_tcvae", "s2_dip_vae_i", "s2_dip_vae_ii"),
    datasets=locatello.DATASETS,
    parameter=dict.fromkeys(("s2_beta_vae", "s2_factor_vae", "s2_beta_tcvae", "s2_dip_vae_i", "s2_dip_vae_ii"), "gamma_sup"),
    values=dict.fromkeys(("s2_beta_vae", "s2_factor_vae", "s2_beta_tcvae", "s2_dip_vae_i", "s2_dip_vae_ii"), (1.0, 2.0, 4.0, 8.0, 16.0)),
    fixed={
        "s2_beta_vae": {"beta": 4.0, "reconstruction": "bernoulli", **_S2_SUPERVISION},
        "s2_factor_vae": {
            "gamma": 30.0, "discriminator_lr": 1.0e-4, "discriminator_betas": [0.5, 0.9],
            "discriminator_hidden": 1000, "discriminator_layers": 6, "reconstruction": "bernoulli", **_S2_SUPERVISION,
        },
        "s2_beta_tcvae": {"beta": 6.0, "reconstruction": "bernoulli", **_S2_SUPERVISION},
        "s2_dip_vae_i": {"lambda_od": 10.0, "reconstruction": "bernoulli", **_S2_SUPERVISION},
        "s2_dip_vae_ii": {"lambda_od": 10.0, "reconstruction": "bernoulli", **_S2_SUPERVISION},
    },
    description="Locatello et al. 2020 semi-supervised models (S2), 1,000 perfect labels, gamma_sup swept",
    data={"labels": {"num_labelled": 1000, "labeller": "perfect", "train_fraction": 0.9, "seed": 0}},
)

FAMILIES: tuple[Family, ...] = (LOCATELLO_2019, EXTRA, WEAK_2020, FEW_LABELS_2020)

#: extra ``data`` parameters of a dataset in the generated recipes
_DATA_PARAMS: dict[str, dict[str, Any]] = {"mpi3d": {"variant": "real"}}

_NAME = re.compile(
    r"^(?P<objective>[a-z0-9_]+)-(?P<dataset>[a-z0-9_]+)-(?P<param>[a-z_]+?)(?P<value>\d+(?:\.\d+)?)-s(?P<seed>\d+)$"
)


# ---------------------------------------------------------------------- naming
def format_value(value: float) -> str:
    """``6.0 -> "6"``, ``0.5 -> "0.5"``: the value as written in recipe names."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _param_token(parameter: str) -> str:
    return parameter.rstrip("_")


def recipe_name(objective: str, dataset: str, strength: float, seed: int = 0) -> str:
    """The generated recipe name, e.g. ``recipe_name("beta_tcvae", "dsprites", 6, 0)`` →
    ``"beta_tcvae-dsprites-beta6-s0"``. The combination must be one of a family's."""
    family = _family_of(objective, dataset)
    if not any(locatello._same_number(strength, v) for v in family.values[objective]):
        raise ConfigError(
            f"{objective} strength {strength!r} is not one of the zoo's values "
            f"{', '.join(format_value(v) for v in family.values[objective])}."
        )
    index = locatello.as_index(seed)
    if index is None or index < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}.")
    seed = index
    return f"{objective}-{dataset}-{_param_token(family.parameter[objective])}{format_value(strength)}-s{seed}"


def _family_of(objective: str, dataset: str) -> Family:
    for family in FAMILIES:
        if objective in family.objectives:
            if dataset not in family.datasets:
                raise ConfigError(
                    f"The zoo has no {objective} recipe on '{dataset}'.{did_you_mean(dataset, family.datasets)} "
                    f"Its datasets for {objective}: {', '.join(family.datasets)}."
                )
            return family
    objectives = [o for f in FAMILIES for o in f.objectives]
    raise ConfigError(
        f"The zoo has no generated recipes for objective '{objective}'.{did_you_mean(objective, objectives)} "
        f"Objectives with generated recipes: {', '.join(objectives)}."
    )


def parse_generated(name: str) -> tuple[Family, str, str, float, int] | None:
    """``(family, objective, dataset, strength, seed)`` of a generated recipe name, or None if the
    name is not of that form or not in any family."""
    match = _NAME.match(name)
    if match is None:
        return None
    objective, dataset = match["objective"], match["dataset"]
    for family in FAMILIES:
        if objective in family.objectives and dataset in family.datasets:
            if match["param"] != _param_token(family.parameter[objective]):
                return None
            value = float(match["value"])
            if not any(locatello._same_number(value, v) for v in family.values[objective]):
                return None
            if format_value(value) != match["value"]:  # one spelling per recipe ("6", not "6.0")
                return None
            if str(int(match["seed"])) != match["seed"]:  # nor "-s007" for seed 7
                return None
            return family, objective, dataset, value, int(match["seed"])
    return None


def generated_names(seed: int = 0) -> list[str]:
    """Every generated recipe name with the given seed suffix, family by family."""
    return [
        recipe_name(objective, dataset, value, seed)
        for family in FAMILIES
        for objective in family.objectives
        for dataset in family.datasets
        for value in family.values[objective]
    ]


def generated_config(objective: str, dataset: str, strength: float, seed: int = 0) -> dict[str, Any]:
    """The raw nested config of a generated recipe."""
    name = recipe_name(objective, dataset, strength, seed)
    family = _family_of(objective, dataset)
    if family is LOCATELLO_2019:
        raw = locatello.grid_config(dataset, objective, strength, seed)
    else:
        raw = {
            "seed": seed,
            "data": {"name": dataset},
            "model": dict(locatello.MODEL_SETTINGS),
            "objective": {"name": objective, family.parameter[objective]: float(strength), **copy.deepcopy(family.fixed[objective])},
            "train": dict(_TRAIN),
        }
    raw["data"].update(_DATA_PARAMS.get(dataset, {}))
    raw["data"].update(copy.deepcopy(family.data))
    raw["train"]["out_dir"] = f"runs/{name}"
    return raw


def model_number_of(name: str) -> int | None:
    """disentanglement_lib's model number of a Locatello et al. 2019 recipe name (seeds 0–49),
    else None."""
    parsed = parse_generated(name)
    if parsed is None or parsed[0] is not LOCATELLO_2019 or parsed[4] >= locatello.NUM_SEEDS:
        return None
    _, objective, dataset, value, seed = parsed
    return locatello.model_number(dataset, objective, value, seed)


def name_of_model_number(number: int) -> str:
    """The recipe name of disentanglement_lib's model ``number``."""
    point = locatello.from_model_number(number)
    return recipe_name(point.method, point.dataset, point.strength, point.seed)


# ---------------------------------------------------------------------- shipped configs
def shipped_names() -> list[str]:
    """Names of the shipped configs (``quickstart``, ``dsprites/factor_vae``, …)."""
    try:
        return list(config_module.shipped_config_names())
    except ConfigError:  # an installation without its configs: no shipped recipes
        return []


def shipped_config(name: str) -> dict[str, Any]:
    """The raw nested config of the shipped config ``name`` (its file's content)."""
    return config_module.read_yaml_config(config_module.shipped_config_path(name), what=f"The shipped config '{name}'")


def describe_unknown(name: str, candidates: list[str]) -> str:
    """One paragraph for a name that is no recipe: what is wrong, a did-you-mean, the scheme."""
    detail = ""
    match = _NAME.match(name)
    if match is not None:
        objective, dataset = match["objective"], match["dataset"]
        try:
            family = _family_of(objective, dataset)
        except ConfigError as err:
            detail = f" {err}"
        else:
            token = _param_token(family.parameter[objective])
            values = ", ".join(format_value(v) for v in family.values[objective])
            if match["param"] != token:
                detail = f" {objective} recipes name their strength '{token}' ({token}{values.split(', ')[0]})."
            else:
                detail = f" {objective}'s {token} in the zoo is one of {values} (written without a decimal point when whole)."
    else:
        seedless = re.match(r"^([a-z0-9_]+-[a-z0-9_]+-[a-z_]+\d+(?:\.\d+)?)$", name)
        if seedless:
            detail = f" Generated recipes end in a seed suffix: '{name}-s0' (any -sN)."
    closest = did_you_mean(name, candidates)
    return (
        f"'{name}' is not a zoo recipe.{closest}{detail} Names are shipped configs (e.g. quickstart, "
        f"dsprites/factor_vae), generated recipes METHOD-DATASET-PARAMVALUE-sSEED (e.g. "
        f"beta_tcvae-dsprites-beta6-s0), or pretrained models; list them with "
        f"python -m disentangle.zoo list (add --pretrained for the trained ones)."
    )
