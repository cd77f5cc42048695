"""The class/content code split shared by the class/content objectives.

Mathieu et al. 2016, DrNet (Denton & Birodkar 2017), LORD (Gabbay & Hoshen 2020) and the
F-statistic loss (Ridgeway & Mozer 2018) learn from which images share a *class* (an identity, an
object, a video; :mod:`disentangle.data.classes` says how classes are drawn from a grid's factors or a
sample's labels). Their models split an image's ``D`` latent dimensions into

* the **content code**, the first ``D − C`` dimensions: what varies within a class (Mathieu et al.'s
  unspecified ``z``, DrNet's *pose*, LORD's content code);
* the **class code**, the last ``C = class_dim`` dimensions: what a class shares (Mathieu et al.'s
  specified ``s``, DrNet's *content*, LORD's class embedding).

(DrNet calls the shared part "content": here, in every objective of the family, "class code" is the
shared part and "content code" the rest.) ``model.encode(x)`` returns the posterior of all ``D``
dimensions, so every metric, the study and the pictures see the concatenation ``[content, class]``;
:func:`split_codes` and :func:`class_content_codes` give the two parts of any model trained by one of
these objectives (the split is read from the run's config).

:class:`ClassContentObjective` is the base of the four: it holds ``class_factors``, ``class_dim`` and
``group_size``, resolves them against the model and the dataset, and draws each step's batch of
groups of one class (:func:`~disentangle.data.classes.sample_class_groups`).
"""
from __future__ import annotations

from typing import Any

import torch

from .._core import checks, distributed
from ..data.classes import (
    ClassBatch,
    check_class_factors,
    num_classes,
    resolve_class_factors,
    sample_class_groups,
)
from ..errors import ConfigError
from .base import Objective

__all__ = ["ClassContentObjective", "class_content_codes", "class_content_settings", "class_dim_of", "split_codes"]


def split_codes(codes: torch.Tensor, class_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(content, class)`` parts of codes ``(B, D)``: the first ``D − class_dim`` columns and the last
    ``class_dim``."""
    class_dim = int(class_dim)
    if not 1 <= class_dim < codes.shape[-1]:
        raise ValueError(f"class_dim must be between 1 and {codes.shape[-1] - 1} for {codes.shape[-1]}-dimensional codes, got {class_dim}.")
    return codes[..., :-class_dim], codes[..., -class_dim:]


def class_dim_of(model: Any) -> int:
    """The class code's size of a model trained by a class/content objective, from its config
    (``objective.class_dim``, or its default, half the latent dimensions rounded down); a
    :class:`ValueError` naming the objective for any other model."""
    config = getattr(model, "config", None) or {}
    objective = config.get("objective", {}) if isinstance(config, dict) else {}
    from . import OBJECTIVES

    name = objective.get("name")
    cls = OBJECTIVES.get(name) if name in OBJECTIVES else None
    if cls is None or not issubclass(cls, ClassContentObjective):
        raise ValueError(
            f"the model was trained by objective {name!r}, which has no class/content split; class and content "
            "codes come from models of the class/content objectives (mathieu2016, drnet, lord, f_statistic). "
            "For another model, split its codes yourself with split_codes(codes, class_dim)."
        )
    class_dim = objective.get("class_dim")
    return int(class_dim) if class_dim is not None else int(model.latent_dim) // 2


@torch.no_grad()
def class_content_codes(model: Any, x, class_dim: int | None = None) -> dict[str, torch.Tensor]:
    """The representation of ``x`` (any size; float, uint8 or numpy images) by a class/content model:
    ``{"content": (n, D − C), "class": (n, C), "both": (n, D)}``, posterior means
    (:meth:`~disentangle.models.vae.VAE.representation`). ``class_dim`` defaults to the model's
    (:func:`class_dim_of`)."""
    both = model.representation(x)
    content, cls = split_codes(both, class_dim if class_dim is not None else class_dim_of(model))
    return {"content": content, "class": cls, "both": both}


class ClassContentObjective(Objective):
    """Base of the class/content objectives (module docstring).

    Parameters (config keys of every subclass): ``class_factors``, the factors (names or indices) or
    label columns whose values make an image's class (no default: the recipes set ``[shape]``);
    ``class_dim``, ``C``, the last ``C`` latent dimensions are the class code (default ``null``: half
    the latent dimensions, rounded down); ``group_size``, ``N``, the images of one class per group
    (default 2; ``train.batch_size`` counts images and must be a multiple of it).

    After :meth:`setup` and :meth:`check_dataset`: :attr:`latent_dim`, :attr:`class_dim`,
    :attr:`class_factors` (resolved indices) and :attr:`num_classes`.
    """

    #: what the objective trains on: groups of one class, from a grid or a labelled sample
    training_data = "labels"

    def __init__(self, class_factors=None, class_dim: int | None = None, group_size: int = 2) -> None:
        super().__init__()
        self.requested_class_factors = check_class_factors(class_factors)
        self.requested_class_dim = None if class_dim is None else checks.integer("class_dim", class_dim, minimum=1)
        self.group_size = checks.integer("group_size", group_size, minimum=2)
        self.class_dim: int | None = self.requested_class_dim
        self.latent_dim: int | None = None
        self.class_factors: tuple[int, ...] | None = None
        self.num_classes: int | None = None

    def _name(self) -> str:
        return getattr(self, "registry_name", type(self).__name__)

    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        latent_dim = int(model.latent_dim)
        class_dim = self.requested_class_dim if self.requested_class_dim is not None else latent_dim // 2
        if not 1 <= class_dim < latent_dim:
            given = (
                f"objective.class_dim is {class_dim}" if self.requested_class_dim is not None
                else f"the default objective.class_dim (half the latent dimensions) is {class_dim}"
            )
            raise ConfigError(
                f"objective '{self._name()}' splits the latent code into a content code (the first dimensions) "
                f"and a class code (the last class_dim), and needs at least one of each; {given} but "
                f"model.latent_dim is {latent_dim}. Set objective.class_dim between 1 and {latent_dim - 1}"
                + ("." if latent_dim >= 2 else ", which needs model.latent_dim >= 2.")
            )
        self.latent_dim, self.class_dim = latent_dim, class_dim

    def check_dataset(self, dataset) -> None:
        """Resolve ``class_factors`` against ``dataset`` (a grid's factors or a labelled sample's label
        columns) and count its classes; one paragraph if they name nothing there. Subclasses that size
        networks by the number of classes build them here (the trainer calls this before building the
        optimizers)."""
        self.class_factors = resolve_class_factors(
            self.requested_class_factors, dataset, who=f"objective '{self._name()}'"
        )
        self.num_classes = num_classes(dataset, self.class_factors)
        if self.num_classes < 2:
            raise ConfigError(
                f"objective '{self._name()}' learns what tells classes apart, and class_factors "
                f"{list(self.requested_class_factors)} give {self.num_classes} class on this dataset. Name "
                "factors with more than one value."
            )

    def metric_settings(self) -> dict[str, Any]:
        """The settings under which ``class_leakage`` and ``swap_accuracy`` read this model: the class
        factors it was trained on and its class code's size (resolved: call after :meth:`setup` and
        :meth:`check_dataset`)."""
        if self.class_factors is None or self.class_dim is None:
            raise RuntimeError(f"{type(self).__name__}.metric_settings() before setup() and check_dataset()")
        return {"class_factors": list(self.class_factors), "class_dim": int(self.class_dim)}

    def num_groups(self, batch_size: int) -> int:
        """The groups of a batch of ``batch_size`` images; a :class:`~disentangle.ConfigError` unless
        they split into whole groups (per process in a multi-process run)."""
        batch_size = checks.integer("batch_size", batch_size, minimum=1)
        world = distributed.rank_info().world_size
        if batch_size % self.group_size or (batch_size // self.group_size) % world:
            per = f" on each of the {world} processes" if world > 1 else ""
            good = max(1, round(batch_size / (self.group_size * world))) * self.group_size * world
            raise ConfigError(
                f"objective '{self._name()}' trains on groups of group_size={self.group_size} images of one class, "
                f"and train.batch_size counts images, so it must be a multiple of group_size{per}: "
                f"train.batch_size={batch_size} is not a multiple of {self.group_size * world}. Use e.g. "
                f"train.batch_size={good}."
            )
        return batch_size // self.group_size

    def sample_batch(self, dataset, batch_size: int, generator: torch.Generator) -> ClassBatch:
        """``batch_size // group_size`` groups of ``group_size`` images of one class, group-major
        (:func:`~disentangle.data.classes.sample_class_groups`)."""
        if self.class_factors is None:
            self.check_dataset(dataset)
        return sample_class_groups(dataset, self.num_groups(batch_size), self.group_size, generator, self.class_factors)

    def split(self, codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(content, class)`` parts of codes ``(B, D)`` (:func:`split_codes` with this ``class_dim``)."""
        if self.class_dim is None:
            raise RuntimeError(f"call {type(self).__name__}.setup(model=..., dataset_size=...) first (the trainer does).")
        return split_codes(codes, self.class_dim)

    @staticmethod
    def check_batch(x: Any, name: str) -> ClassBatch:
        if not isinstance(x, ClassBatch):
            raise TypeError(
                f"{name} trains on groups of one class: pass the ClassBatch of its sample_batch(dataset, "
                f"batch_size, generator), not {type(x).__name__} (the trainer does this)."
            )
        return x


def class_content_settings(
    config: dict[str, Any], names: list[str], settings: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``settings`` with ``class_factors`` and ``class_dim`` of the :data:`~disentangle.metrics.names.CLASS_CONTENT_METRICS`
    among ``names`` taken from the run's ``objective`` section, where the model was trained by a
    class/content objective (:class:`~disentangle.objectives.class_content.ClassContentObjective`)
    and the settings did not give them (``disentangle evaluate``'s ``--set``, ``zoo publish``'s): its scores then read the class and the code split the model
    learnt. Other models keep the metrics' defaults."""
    from ..metrics import validate_settings
    from ..metrics.names import CLASS_CONTENT_METRICS
    from . import OBJECTIVES

    objective = config.get("objective") or {}
    name = objective.get("name") if isinstance(objective, dict) else None
    if not (isinstance(name, str) and name in OBJECTIVES and issubclass(OBJECTIVES.get(name), ClassContentObjective)):
        return settings
    out = dict(settings)
    for metric in CLASS_CONTENT_METRICS:
        if metric not in names:
            continue
        given = dict(out.get(metric, {}))
        for key in ("class_factors", "class_dim"):
            if objective.get(key) is not None:
                given.setdefault(key, objective[key])
        out[metric] = validate_settings(metric, given)
    return out
