"""Swap grids of class/content models (``swaps.png``): the content of one image drawn with the class of another.

The class/content objectives (``mathieu2016``, ``drnet``, ``lord``, ``f_statistic``;
:mod:`disentangle.objectives.class_content`) split a ``D``-dimensional code into a content code, the
first ``D − C`` dimensions, and a class code, the last ``C = class_dim``. Mathieu et al. (2016),
DrNet (Denton & Birodkar 2017) and LORD (Gabbay & Hoshen 2020) show what a model learnt with a grid
of swaps; :func:`swap_grid` draws it:

* the top row holds the *class images* ``x_j``, one per class (distinct classes, at most one column
  per class), the left column the *content images* ``x_i`` (drawn uniformly);
* cell ``(i, j)`` is ``sigmoid(model.decode([μ(x_i)[:D−C], μ(x_j)[D−C:]]))``
  (``model.decode_mean``), ``μ`` the posterior mean: row ``i``'s content in column ``j``'s class.

A model that separated the two codes draws every cell of a column in the column's class and every
cell of a row with the row's content (pose, position, ...). ``python -m disentangle.visualize RUN``
writes ``swaps.png`` beside the other pictures for a model whose config's ``objective.name`` is one
of :data:`CLASS_CONTENT_OBJECTIVES`, with the run's ``objective.class_factors`` and
``objective.class_dim`` (this package does not import the objectives: the list is kept here).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from .._core.checks import positive_int
from .._core.gaussian import model_device
from ..errors import ConfigError
from .grids import PAD_VALUE, PADDING, add_row_labels, image_grid

#: the objectives whose models split their codes into content and class (``objective.name``)
CLASS_CONTENT_OBJECTIVES: tuple[str, ...] = ("mathieu2016", "drnet", "lord", "f_statistic")
#: grey level of the empty top-left cell (the padding's)
CORNER_VALUE = PAD_VALUE


def class_content_objective(model: Any) -> dict[str, Any] | None:
    """The ``objective`` section of the config of ``model`` (as :func:`disentangle.load` sets it)
    where it names one of :data:`CLASS_CONTENT_OBJECTIVES`; None for any other model."""
    config = getattr(model, "config", None)
    objective = config.get("objective") if isinstance(config, dict) else None
    if isinstance(objective, dict) and objective.get("name") in CLASS_CONTENT_OBJECTIVES:
        return objective
    return None


class SwapSources(NamedTuple):
    """The images of a swap grid and their classes."""

    content_images: torch.Tensor  #: ``(rows, C, H, W)``, the left column
    class_images: torch.Tensor  #: ``(columns, C, H, W)``, the top row, one class each
    content_labels: np.ndarray  #: ``(rows,)`` the class of each content image
    class_labels: np.ndarray  #: ``(columns,)`` distinct classes, increasing


def swap_sources(
    dataset: Any, class_factors: Sequence[int | str] | None = None, *, rows: int = 6, columns: int = 8, seed: int = 0
) -> SwapSources:
    """The images of :func:`swap_grid`, drawn from ``np.random.default_rng(seed)``.

    ``class_factors`` (names or indices; default the first factor with more than one value) make
    the class. ``min(columns, number of classes)`` distinct classes are chosen uniformly without
    replacement and shown in increasing order, each by one image: on a grid, a uniform grid point
    whose class factors are set to the class; on a labelled sample, a uniform image of the class.
    The ``rows`` content images are uniform grid points (uniform images of a labelled sample)."""
    from ..data.classes import class_index, num_classes
    from ..metrics._sampling import sample_factors
    from ..metrics._settings import is_sample
    from ..metrics.class_leakage import class_labels, resolve_metric_class_factors

    rows, columns = positive_int("rows", rows), positive_int("columns", columns)
    chosen = resolve_metric_class_factors(dataset, class_factors, "a swap grid")
    k = num_classes(dataset, chosen)
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(k, size=min(columns, k), replace=False)).astype(np.int64)
    if is_sample(dataset):
        index = class_index(dataset, chosen)
        offsets, counts, order = (t.cpu().numpy() for t in (index.offsets, index.counts, index.order))
        class_rows = order[offsets[picked] + rng.integers(0, counts[picked])]
        content_rows = dataset.sample_labelled_indices(rows, rng)
        factors = np.asarray(dataset.indices_to_factors(np.concatenate([content_rows, class_rows])))

        def observe(indices: np.ndarray) -> torch.Tensor:
            return dataset.observe(torch.as_tensor(indices, device=dataset.device))
    else:
        sizes = [int(dataset.factor_sizes[f]) for f in chosen]
        class_rows = sample_factors(dataset, len(picked), rng)
        class_rows[:, list(chosen)] = np.stack(np.unravel_index(picked, sizes), axis=1)
        content_rows = sample_factors(dataset, rows, rng)
        factors = np.concatenate([content_rows, class_rows])

        def observe(keys: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(dataset.sample_observations_from_factors(keys, rng))
    labels = class_labels(dataset, factors, chosen)
    content_images = observe(content_rows).float().cpu()
    class_images = observe(class_rows).float().cpu()
    return SwapSources(content_images, class_images, labels[:rows], labels[rows:])


@torch.no_grad()
def swapped_images(model: Any, content_images: torch.Tensor, class_images: torch.Tensor, class_dim: int) -> torch.Tensor:
    """``(rows, columns, C, H, W)``: cell ``(i, j)`` is ``model.decode_mean`` of the content code of
    ``content_images[i]`` (the first ``D − class_dim`` dimensions of its posterior mean) joined to the
    class code of ``class_images[j]`` (the last ``class_dim``). CPU float tensors."""
    device = model_device(model)
    mu_content = model.encode(content_images.to(device))[0]
    mu_class = model.encode(class_images.to(device))[0]
    d = mu_content.shape[1]
    if not 1 <= int(class_dim) < d:
        raise ConfigError(
            f"a swap grid joins a content code (the first dimensions) and a class code (the last class_dim) and "
            f"needs one of each; class_dim is {class_dim} for {d}-dimensional codes. Pass class_dim between 1 and {d - 1}."
        )
    c = int(class_dim)
    rows, columns = len(mu_content), len(mu_class)
    z = torch.cat([
        mu_content[:, None, :-c].expand(rows, columns, d - c),
        mu_class[None, :, -c:].expand(rows, columns, c),
    ], dim=2).reshape(rows * columns, d)
    decoded = model.decode_mean(z).float().cpu()
    return decoded.reshape(rows, columns, *decoded.shape[1:])


@torch.no_grad()
def swap_grid(
    model: Any,
    dataset: Any,
    *,
    class_dim: int | None = None,
    class_factors: Sequence[int | str] | None = None,
    rows: int = 6,
    columns: int = 8,
    seed: int = 0,
) -> np.ndarray:
    """The swap grid of ``model`` on ``dataset`` as an ``(H', W', 3)`` uint8 array (module docstring).

    Tiles of ``(rows + 1) × (columns' + 1)`` images, ``columns' = min(columns, number of classes)``:
    the top-left tile is padding grey, the rest of the top row the class images, the rest of the left
    column the content images (:func:`swap_sources` with ``seed``), and tile ``(1 + i, 1 + j)`` the
    swap of content image ``i`` and class image ``j`` (:func:`swapped_images`); tiles sit as
    :func:`~disentangle.visualize.grids.image_grid` places them, right of a label column
    (``class of ->`` on the top row, ``content of`` on the first content row). ``class_dim`` and
    ``class_factors`` default to the model's config (``objective.class_dim``,
    ``objective.class_factors``) for a model of a class/content objective, else to half the latent
    dimensions (rounded down) and the first factor with more than one value. The model is evaluated
    in eval mode and its mode restored.
    """
    objective = class_content_objective(model) or {}
    if class_factors is None:
        class_factors = objective.get("class_factors")
    if class_dim is None:
        class_dim = objective.get("class_dim")
    if class_dim is None:
        class_dim = int(model.latent_dim) // 2
    class_dim = positive_int("class_dim", class_dim)
    sources = swap_sources(dataset, class_factors, rows=rows, columns=columns, seed=seed)
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        swaps = swapped_images(model, sources.content_images, sources.class_images, class_dim)
    finally:
        if was_training:
            model.train()
    n_rows, n_columns = swaps.shape[:2]
    shape = swaps.shape[2:]
    corner = torch.full((1, *shape), CORNER_VALUE)
    header = torch.cat([corner, sources.class_images.reshape(n_columns, *shape)])
    body = torch.cat([sources.content_images.reshape(n_rows, 1, *shape), swaps], dim=1)
    tiles = torch.cat([header[None], body]).reshape(-1, *shape)
    grid = image_grid(tiles, nrow=n_columns + 1)
    labels = ["class of ->", "content of"] + [""] * (n_rows - 1)
    return add_row_labels(grid, labels, row_height=int(shape[-2]), padding=PADDING)


__all__ = [
    "CLASS_CONTENT_OBJECTIVES",
    "SwapSources",
    "class_content_objective",
    "swap_grid",
    "swap_sources",
    "swapped_images",
]
