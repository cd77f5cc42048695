"""A few labelled observations: the data of semi-supervised disentanglement and of U/S model selection.

Locatello, Tschannen, Bauer, Rätsch, Schölkopf & Bachem, "Disentangling Factors of Variation Using
Few Labels", ICLR 2020; the reference is disentanglement_lib's
``methods/semi_supervised/semi_supervised_utils.py`` and ``train_semi_supervised_lib.py``.

A labelled set is drawn once, from its own seed (``seed``, the reference's ``supervised_seed``),
independent of the run's seed, so that every run of a sweep sees the same labelled images and the
same validation images (on one kind of device: a per-image nuisance, as the colour and noise
variants draw, comes from a torch generator on the dataset's device, and CUDA's draws other numbers
than the CPU's):

1. ``num_labelled`` factor vectors, each factor uniform over its classes, and their observations
   (any per-image nuisance drawn from the same seed);
2. a *labeller* turns the true factor classes into the labels the user would have written
   (:data:`LABELLERS`);
3. the first ``ceil(train_fraction · num_labelled)`` are the training labels, the rest the
   validation labels (the draw is random, so this split is too).

During training every step takes an unlabelled batch (the objective's usual batch) and a labelled
batch of the same size, which walks through the training labels in order and wraps around, as the
reference's ``Dataset.from_tensor_slices(...).repeat()`` does: labelled image ``i`` of step ``t``
is number ``(t · B + i) mod n_train``.

Labellers (each returns the labels and the number of values of each labelled factor):

==============  =====================================================================================
``perfect``     the true classes
``bin``         factors with more than ``num_bins`` classes binned into ``num_bins`` equal bins:
                ``min(⌊c / (n / num_bins)⌋, num_bins − 1)`` (32 x positions: 31 → 4)
``noisy``       each label, with probability ``noise``, replaced by a class drawn uniformly from all
                classes (so it may keep its value)
``partial``     only ``num_observed`` factors, drawn without replacement, are labelled
``permuted``    each factor's classes relabelled by a random permutation (the value order is lost)
==============  =====================================================================================

The draws of the labellers differ from the reference's ``numpy.random.RandomState`` calls (we use a
``numpy.random.Generator``), so the same seed gives another labelled set than disentanglement_lib,
drawn from the same distribution.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, NamedTuple

import numpy as np
import torch

from .._core import checks
from .._core.registry import did_you_mean
from ..errors import ConfigError
from .base import sample_uniform_factors

LabellerName = Literal["perfect", "bin", "noisy", "partial", "permuted"]
LABELLERS: tuple[str, ...] = ("perfect", "bin", "noisy", "partial", "permuted")


@dataclass(frozen=True)
class LabelsSpec:
    """The labelled subset of a run: the ``data.labels`` mapping of a config.

    Defaults: 1,000 perfect labels (one of the paper's two sizes, 100 and 1,000), 90 % of them for
    training and 10 % for validation, drawn with seed 0.
    """

    num_labelled: int = 1000  #: labelled observations in all (training + validation)
    labeller: LabellerName = "perfect"  #: how the true classes become labels (see the module docstring)
    #: the share used in training; the rest validates (model selection). 0: every label validates
    #: (U/S selection of runs trained without labels)
    train_fraction: float = 0.9
    seed: int = 0  #: the seed of the draw, the same for every run of a sweep
    num_bins: int = 5  #: ``bin``: the number of bins
    noise: float = 0.1  #: ``noisy``: the probability that a label is redrawn
    num_observed: int = 2  #: ``partial``: the number of labelled factors

    @classmethod
    def from_dict(cls, raw: Any, where: str = "data.labels", errors: list[ConfigError] | None = None) -> LabelsSpec:
        """Check a config mapping and fill in the defaults. Every unknown key and bad value is a
        :class:`ConfigError`: appended to ``errors`` when given (a bad value then keeps its
        default), else all raised at once (:meth:`ConfigError.all_of`)."""
        if raw is None or raw is True:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(
                f"{where} must be a mapping such as {{num_labelled: 1000, labeller: perfect}}, got {raw!r}. "
                f"Keys: {', '.join(f.name for f in fields(cls))}."
            )
        found: list[ConfigError] = [] if errors is None else errors
        names = [f.name for f in fields(cls)]
        for key in raw:
            if key not in names:
                found.append(ConfigError(
                    f"Unknown key '{where}.{key}'.{did_you_mean(key, names)} Valid keys: {', '.join(names)}."
                ))
        defaults = asdict(cls())
        checked = {}
        for key, check in _field_checks(where).items():
            try:
                checked[key] = check(raw.get(key, defaults[key]))
            except ConfigError as err:
                found.append(err)
                checked[key] = defaults[key]
        if errors is None and found:
            raise ConfigError.all_of(found, what=where) from None
        return cls(**checked)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def num_train(self) -> int:
        """``ceil(num_labelled · train_fraction)`` in floating point, exactly as the reference's
        ``train_test_split`` (disentanglement_lib's semi-supervised utilities): where the product
        rounds just above a whole number the count is one more (100 · 0.07 = 7.000000000000001
        gives 8 there and here)."""
        return int(math.ceil(self.num_labelled * self.train_fraction))


def _field_checks(where: str) -> dict[str, Callable[[Any], Any]]:
    """The check of each key of a ``data.labels`` mapping (``where``: its name in messages)."""
    return {
        "num_labelled": lambda v: checks.positive_int(f"{where}.num_labelled", v),
        "labeller": lambda v: checks.choice(f"{where}.labeller", v, LABELLERS),
        "train_fraction": lambda v: checks.in_range(f"{where}.train_fraction", v, 0, 1),
        "seed": lambda v: checks.integer(f"{where}.seed", v, minimum=0),
        "num_bins": lambda v: checks.integer(f"{where}.num_bins", v, minimum=2),
        "noise": lambda v: checks.in_range(f"{where}.noise", v, 0, 1),
        "num_observed": lambda v: checks.positive_int(f"{where}.num_observed", v),
    }


# ---------------------------------------------------------------------------- labellers
def bin_labels(classes: np.ndarray, factor_sizes: tuple[int, ...], num_bins: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Factors with more than ``num_bins`` classes binned into ``num_bins`` equal-width bins:
    ``min(c // (n / num_bins), num_bins − 1)`` for class ``c`` of ``n``, in float32 as
    disentanglement_lib's ``bin_labeller`` computes it (``semi_supervised_utils.py``), so a class at a
    bin edge lands where the reference puts it (float64 or exact arithmetic moves a few of them for
    some ``(n, num_bins)``; none at the default 5 bins)."""
    labels = np.array(classes, dtype=np.int64)
    for j, size in enumerate(factor_sizes):
        if size > num_bins:
            width = size / num_bins
            binned = labels[:, j].astype(np.float32) // np.float32(width)  # the reference's float32 floor division
            labels[:, j] = np.minimum(binned, num_bins - 1).astype(np.int64)
    return labels, tuple(min(int(s), num_bins) for s in factor_sizes)


def noisy_labels(classes: np.ndarray, factor_sizes: tuple[int, ...], noise: float, rng: np.random.Generator) -> np.ndarray:
    """Each label, with probability ``noise``, replaced by a uniform draw over its factor's classes."""
    labels = np.array(classes, dtype=np.int64)
    redraw = rng.random(labels.shape) < noise
    random_classes = sample_uniform_factors(factor_sizes, labels.shape[0], rng)
    return np.where(redraw, random_classes, labels)


def permuted_labels(classes: np.ndarray, factor_sizes: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Each factor's classes renamed by a random permutation of ``0 … size − 1``."""
    labels = np.array(classes, dtype=np.int64)
    for j, size in enumerate(factor_sizes):
        labels[:, j] = rng.permutation(int(size))[labels[:, j]]
    return labels


def apply_labeller(
    classes: np.ndarray, factor_sizes: tuple[int, ...], spec: LabelsSpec, rng: np.random.Generator
) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """``(labels, label_sizes, factors)``: the labels of ``classes`` by ``spec.labeller``, the
    number of values each labelled column takes, and which factor each column labels."""
    factor_sizes = tuple(int(s) for s in factor_sizes)
    everything = tuple(range(len(factor_sizes)))
    if spec.labeller == "perfect":
        return np.array(classes, dtype=np.int64), factor_sizes, everything
    if spec.labeller == "bin":
        labels, sizes = bin_labels(classes, factor_sizes, spec.num_bins)
        return labels, sizes, everything
    if spec.labeller == "noisy":
        return noisy_labels(classes, factor_sizes, spec.noise, rng), factor_sizes, everything
    if spec.labeller == "permuted":
        return permuted_labels(classes, factor_sizes, rng), factor_sizes, everything
    if spec.labeller == "partial":
        if spec.num_observed > len(factor_sizes):
            raise ConfigError(
                f"data.labels.num_observed is {spec.num_observed} but the dataset has only "
                f"{len(factor_sizes)} factors; set it to 1..{len(factor_sizes)}."
            )
        kept = tuple(int(j) for j in rng.choice(len(factor_sizes), size=spec.num_observed, replace=False))
        return np.array(classes, dtype=np.int64)[:, kept], tuple(factor_sizes[j] for j in kept), kept
    raise ConfigError(f"data.labels.labeller is {spec.labeller!r}; valid: {', '.join(LABELLERS)}.")


# ---------------------------------------------------------------------------- the labelled set
class LabelledBatch(NamedTuple):
    """One training batch of a semi-supervised objective: what its ``sample_batch`` returns."""

    x: torch.Tensor  #: ``(B, C, H, W)`` the unlabelled batch, float in [0, 1]
    labelled: torch.Tensor  #: ``(B, C, H, W)`` labelled images
    labels: torch.Tensor  #: ``(B, L)`` float32 labels (class numbers) of ``labelled``


@dataclass(frozen=True)
class LabelledSet:
    """The labelled observations of a run, split into training and validation parts.

    Images are float in [0, 1] on the dataset's device; labels are float32 class numbers (the
    reference feeds them to the losses as floats), ``(n, L)`` with ``L`` labelled factors.
    """

    spec: LabelsSpec
    train_images: torch.Tensor
    train_labels: torch.Tensor
    validation_images: torch.Tensor
    validation_labels: torch.Tensor
    true_factors: np.ndarray  #: ``(num_labelled, K)`` the true classes, for checks and studies
    label_sizes: tuple[int, ...]  #: the number of values of each labelled column
    factors: tuple[int, ...]  #: the dataset factor each labelled column stands for
    factor_names: tuple[str, ...]  #: the names of those factors

    @property
    def num_train(self) -> int:
        return int(self.train_images.shape[0])

    def batch(self, first: int | torch.Tensor, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Training images and labels number ``first, first + 1, …`` (``batch_size`` of them),
        wrapping around the training part. ``first`` may be a 0-d tensor (on the images' device:
        the indices are then computed there, without a trip to the host)."""
        device = self.train_images.device
        first = first.to(device) if isinstance(first, torch.Tensor) else first
        idx = (torch.arange(batch_size, device=device) + first) % self.num_train
        return self.train_images[idx], self.train_labels[idx]


def make_labelled_set(dataset, spec: LabelsSpec) -> LabelledSet:
    """Draw the labelled set of ``spec`` from ``dataset`` (anything with the ground-truth interface:
    ``factor_sizes``, ``sample_factors``, ``sample_observations_from_factors``).

    Deterministic in ``spec`` and the dataset: the factors, the observations' nuisance and the
    labeller all draw from ``numpy.random.default_rng(spec.seed)``, in this order.
    """
    rng = np.random.default_rng(spec.seed)
    factor_sizes = tuple(int(s) for s in dataset.factor_sizes)
    classes = np.asarray(dataset.sample_factors(spec.num_labelled, rng), dtype=np.int64)
    images = dataset.sample_observations_from_factors(classes, rng)
    labels, label_sizes, kept = apply_labeller(classes, factor_sizes, spec, rng)
    labels_t = torch.as_tensor(labels, dtype=torch.float32, device=images.device)
    n = spec.num_train
    names = tuple(dataset.factor_names[j] for j in kept) if hasattr(dataset, "factor_names") else tuple(map(str, kept))
    return LabelledSet(
        spec=spec,
        train_images=images[:n],
        train_labels=labels_t[:n],
        validation_images=images[n:],
        validation_labels=labels_t[n:],
        true_factors=classes,
        label_sizes=label_sizes,
        factors=kept,
        factor_names=names,
    )
