"""Latent traversals: a grid of several images (``traversals.png``) and an animation (``traversals.gif``).

A traversal starts from the posterior mean ``μ(x)`` of an image and sets one latent ``z_j`` to a
range of values while the others stay at ``μ(x)``; decoded (``sigmoid`` of the decoder logits),
the images show what ``z_j`` controls. Latents are ordered by their KL to the prior
(:func:`~disentangle.visualize.latents.kl_per_dim`), largest first: latents with (near) zero KL
carry no information and decode to the same image whatever their value.

The animation follows disentanglement_lib's ``visualize_model`` animated traversals (one panel
per latent, all panels moving together), sweeping every active latent from ``−limit`` to ``+limit``
and back on a triangle wave.

A model with quantised latents (QLAE, whose decoder was trained on codebook values only:
:func:`~disentangle.visualize.latents.latent_codebook`) is traversed over its codebook instead:
the start is the quantised code ``ẑ(x)``, latent ``j`` takes each of its own ``V`` values in
increasing order, and rows are ordered and labelled by the entropy of the latent's values
(``H=<bits>``) in place of the KL.

A model here is anything with ``encode(x) -> (mu, logvar)`` and ``decode_mean(z) -> images``
(a :class:`~disentangle.models.vae.VAE`).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._core.checks import positive, positive_int
from .grids import PADDING, add_row_labels, image_grid, labelled_panels, save_gif, save_png
from .latents import (
    ACTIVE_KL,
    SCORE_NAMES,
    active_latents,
    decoder_code,
    has_uniform_codes,
    latent_codebook,
    latent_order,
    latent_scores,
    num_categories,
    score_kind,
)


def code_limit(model: Any) -> float:
    """The default traversal range of a model's codes: ±2 prior σ for a Gaussian prior, ±1 for a
    decoder that declares a uniform prior on (−1, 1) (``decoder.code_prior = "uniform"``: the
    InfoGAN generator, which never saw codes outside it)."""
    return 1.0 if has_uniform_codes(model) else 2.0


def traversal_values(num_values: int = 10, limit: float = 2.0) -> torch.Tensor:
    """``num_values`` evenly spaced values from ``−limit`` to ``+limit`` (±2 prior σ by default)."""
    num_values = positive_int("num_values", num_values)
    limit = positive("limit", limit)
    return torch.linspace(-limit, limit, num_values)


def sweep_values(num_frames: int = 40, limit: float = 2.0) -> np.ndarray:
    """A looping triangle wave over ``num_frames`` frames: ``−limit`` → ``+limit`` → back.

    Frame ``k`` has value ``−limit + 2·limit·(1 − |2k/num_frames − 1|)``: frame 0 is ``−limit``,
    frame ``num_frames/2`` is ``+limit`` (for an even count) and the last frame leads back to frame 0.
    """
    num_frames = positive_int("num_frames", num_frames, minimum=2)
    limit = positive("limit", limit)
    k = np.arange(num_frames, dtype=np.float64)
    return -limit + 2.0 * limit * (1.0 - np.abs(2.0 * k / num_frames - 1.0))


def codebook_values(model: Any, dims: Sequence[int]) -> torch.Tensor | None:
    """``(len(dims), V)``: each latent's codebook values in increasing order, for a model with
    quantised latents; ``None`` for any other model."""
    book = latent_codebook(model)
    if book is None:
        return None
    return book.float().cpu()[[int(d) for d in dims]].sort(dim=1).values


@torch.no_grad()
def latent_traversals(model: Any, x: torch.Tensor, dims: Sequence[int], values: torch.Tensor) -> torch.Tensor:
    """Decoded images ``(len(dims)·n, C, H, W)`` for the first image of ``x``.

    Row ``i`` (images ``i·n`` to ``(i + 1)·n − 1``) sets ``z[dims[i]]`` to each of ``values`` in
    turn, the other latents at :func:`~disentangle.visualize.latents.decoder_code` of ``x[0]``. ``values`` is ``(n,)``, the same
    for every row, or ``(len(dims), n)``, a row's own (a codebook's values).
    """
    start = decoder_code(model, x[:1])
    values = torch.as_tensor(values)
    rows = values.expand(len(dims), -1) if values.ndim == 1 else values
    if rows.shape[0] != len(dims):
        raise ValueError(f"values must be (n,) or ({len(dims)}, n) for {len(dims)} latents; got {tuple(values.shape)}.")
    n = rows.shape[1]
    z = start.repeat(len(dims) * n, 1)
    first = categorical_start(model)
    for row, d in enumerate(dims):
        if first is not None and d >= first:  # the categorical code: its categories, one-hot, in turn
            k = z.shape[1] - first
            z[row * n : (row + 1) * n, first:] = torch.eye(k, dtype=z.dtype, device=z.device)[category_steps(k, n)]
        else:
            z[row * n : (row + 1) * n, d] = rows[row].to(z)
    return model.decode_mean(z)


def categorical_start(model: Any) -> int | None:
    """The index of the first of a model's categorical code's K slots (the last K codes of an
    Elastic-InfoGAN generator's), or None for a model without one."""
    k = num_categories(model)
    return int(model.latent_dim) - k if k else None


def category_steps(k: int, n: int) -> torch.Tensor:
    """The category shown at each of ``n`` traversal positions of a K-category code: 0 to K − 1, each
    over an equal share of the positions (every category shown when ``n ≥ K``)."""
    return torch.as_tensor(np.rint(np.linspace(0, k - 1, n)).astype(np.int64))


def _rows(model: Any, order: Sequence[int]) -> list[int]:
    """``order`` with a categorical code's K slots as one row, at the place of its first slot (a slot
    of the simplex alone is no code the generator saw)."""
    first = categorical_start(model)
    if first is None:
        return list(order)
    rows, seen = [], False
    for d in order:
        if d < first:
            rows.append(d)
        elif not seen:
            rows.append(first)
            seen = True
    return rows


def _scores_or_compute(model: Any, images: torch.Tensor, kl: Sequence[float] | np.ndarray | None) -> np.ndarray:
    return latent_scores(model, images) if kl is None else np.asarray(kl, dtype=float)


def _label(model: Any, d: int, score: float) -> str:
    first = categorical_start(model)
    if first is not None and d >= first:
        return f"category (z{first}-z{int(model.latent_dim) - 1})"
    return f"z{d} {SCORE_NAMES[score_kind(model)][0]}={score:.2f}"


@torch.no_grad()
def traversal_grid(
    model: Any,
    images: torch.Tensor,
    kl: Sequence[float] | np.ndarray | None = None,
    *,
    num_values: int = 10,
    limit: float | None = None,
    dims: Sequence[int] | None = None,
) -> np.ndarray:
    """Traversals of several images side by side, one row per latent, as an ``(H', W', 3)`` uint8 array.

    For each of the ``N`` images there is a block of ``1 + num_values`` columns: the input image,
    then the latent set to :func:`traversal_values` ``(num_values, limit)`` (``limit`` by default
    :func:`code_limit`: ±2 for a VAE, ±1 for InfoGAN's codes). Rows are the latents in
    ``dims`` (default: all, by decreasing KL), each labelled ``z<j> KL=<KL_j>`` in a left column.
    ``kl`` is the per-latent KL in nats; by default it is computed on ``images`` themselves (pass a
    larger batch's KL for a steadier ordering). For a model with quantised latents the columns
    are each latent's ``V`` codebook values (``num_values`` and ``limit`` are not used) and ``kl``
    is the code entropy in bits (:func:`~disentangle.visualize.latents.latent_scores`), labelled
    ``H=``.

    Size: ``H' = R·(H + 2) + 2`` for ``R`` rows and ``W' = 96 + N·(1 + num_values)·(W + 2) + 2``.
    """
    kl = _scores_or_compute(model, images, kl)
    order = _rows(model, latent_order(kl) if dims is None else [int(d) for d in dims])
    values = codebook_values(model, order)
    if values is None:
        values = traversal_values(num_values, code_limit(model) if limit is None else limit)
    num_values = values.shape[-1]
    c, h, w = images.shape[1:]
    blocks = []
    for x in images:
        decoded = latent_traversals(model, x[None], order, values).float().cpu()
        decoded = decoded.reshape(len(order), num_values, c, h, w)
        inputs = x.float().cpu().expand(len(order), 1, c, h, w)
        blocks.append(torch.cat([inputs, decoded], dim=1))
    tiles = torch.cat(blocks, dim=1)  # (rows, N·(1 + num_values), C, H, W)
    grid = image_grid(tiles.reshape(-1, c, h, w), nrow=tiles.shape[1])
    labels = [_label(model, d, kl[d]) for d in order]
    return add_row_labels(grid, labels, row_height=h, padding=PADDING)


@torch.no_grad()
def traversal_animation(
    model: Any,
    image: torch.Tensor,
    kl: Sequence[float] | np.ndarray | None = None,
    *,
    num_frames: int = 40,
    limit: float | None = None,
    dims: Sequence[int] | None = None,
    min_kl: float = ACTIVE_KL,
    ncol: int | None = None,
) -> list[np.ndarray]:
    """Frames of an animated traversal of one image: one panel per latent, all sweeping together.

    In frame ``k`` every panel ``j`` shows the decoder output with ``z_j`` set to
    :func:`sweep_values` ``(num_frames, limit)[k]`` and the other latents at ``μ(image)``. Panels are
    the ``dims`` given, else the :func:`active_latents` (``KL >= min_kl``; all latents when none
    is; every code, by the spread of its inferred values, for a generator with a uniform code prior,
    InfoGAN's: it is given every code; a categorical code's slots are one panel, ``category``, stepping
    through its one-hot categories), labelled ``z<j>``, ``ncol`` per row (default ``ceil(sqrt(panels))``), under a title strip
    with the current value. Returns ``num_frames`` equal-sized ``(H', W', 3)`` uint8 arrays. For a
    model with quantised latents each panel steps through its own codebook values on the same
    triangle wave (title ``value k of V``) and ``kl`` is the code entropy in bits.
    """
    image = image[:1] if image.ndim == 4 else image[None]
    kl = _scores_or_compute(model, image, kl)
    if dims is not None:
        panels = _rows(model, [int(d) for d in dims])
    elif code_limit(model) == 1.0:  # a generator (InfoGAN's): it is given every code, so every one is shown
        panels = _rows(model, latent_order(kl))
    else:
        panels = active_latents(kl, min_kl)
    ncol = int(np.ceil(np.sqrt(len(panels)))) if ncol is None else positive_int("ncol", ncol)
    book = codebook_values(model, panels)
    if book is None:
        sweep = sweep_values(num_frames, code_limit(model) if limit is None else limit)
        values = torch.as_tensor(sweep, dtype=torch.float32)
        titles = [f"z = {value:+.2f}" for value in sweep]
    else:  # each latent steps through its own values, lowest to highest and back
        levels = book.shape[1]
        index = np.rint((levels - 1) * (sweep_values(num_frames, 1.0) + 1.0) / 2.0).astype(int)
        values = book[:, index]
        titles = [f"value {k + 1} of {levels}" for k in index]
    # all frames in one decoder call: panel-major, frame-minor
    decoded = latent_traversals(model, image, panels, values).float().cpu()
    decoded = decoded.reshape(len(panels), num_frames, *decoded.shape[1:])
    first = categorical_start(model)
    labels = ["category" if first is not None and d >= first else f"z{d}" for d in panels]
    return [labelled_panels(decoded[:, k], labels, ncol=ncol, title=title) for k, title in enumerate(titles)]


def save_traversals(
    model: Any, x: torch.Tensor, kl_per_dim: Sequence[float] | np.ndarray | None, path: str | Path,
    num_values: int = 10, limit: float | None = None,
) -> Path:
    """Write :func:`traversal_grid` of the images ``x`` (rows sorted by decreasing KL) as a PNG."""
    return save_png(traversal_grid(model, x, kl_per_dim, num_values=num_values, limit=limit), path)


def save_traversal_gif(
    model: Any, image: torch.Tensor, kl: Sequence[float] | np.ndarray | None, path: str | Path, *,
    num_frames: int = 40, limit: float | None = None, fps: float = 20.0, min_kl: float = ACTIVE_KL,
) -> Path:
    """Write :func:`traversal_animation` of one image as a looping GIF (``fps`` frames per second)."""
    frames = traversal_animation(model, image, kl, num_frames=num_frames, limit=limit, min_kl=min_kl)
    return save_gif(frames, path, fps=fps)
