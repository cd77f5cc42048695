"""Writing a model's pictures into a folder: what ``python -m disentangle.visualize`` and the trainer call.

=====================  ============================  =========================================
``what``               file                          made by
=====================  ============================  =========================================
``traversals``         ``traversals.png``            :func:`~.traversals.traversal_grid`
``gif``                ``traversals.gif``            :func:`~.traversals.traversal_animation`
``reconstructions``    ``reconstructions.png``       :func:`~.reconstructions.reconstruction_grid`
``samples``            ``samples.png``               :func:`~.reconstructions.sample_grid`
``latent_responses``   ``latent_responses.png``      :func:`~.plots.latent_responses_figure`
``kl_per_dim``         ``kl_per_dim.png``            :func:`~.plots.kl_per_dim_figure`
``metrics``            ``metrics.png``               :func:`~.plots.metrics_figure`
``swaps``              ``swaps.png``                 :func:`~.swaps.swap_grid`
=====================  ============================  =========================================

``latent_responses``, ``kl_per_dim`` and ``metrics`` need matplotlib (the ``plots`` extra).
``swaps`` is drawn for models of a class/content objective only (:data:`CLASS_CONTENT_PICTURES`):
``all`` adds it for them (:func:`pictures_for`), and naming it for another model is an error.
``latent_responses`` and ``swaps`` read the factor labels (:data:`FACTOR_PICTURES`): on images without
labels (an image folder) ``all`` leaves them out with a logged note, and naming one is an error
(:func:`pictures_for_data`).
A model with quantised latents (QLAE) has no KL: every picture orders and labels its latents by
code entropy in bits (:func:`~.latents.code_entropy_per_dim`), ``kl_per_dim.png`` included. Nor
has a GAN (its inference network has a fixed variance): its codes are ordered and labelled by the
spread of their inferred values (``sd``, :func:`~.latents.code_spread_per_dim`).
Every input is checked, and matplotlib imported, before the folder or any file is made; each file
is written atomically, so a rerun rewrites the same files.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._core.checks import choice, positive, positive_int
from ..errors import ConfigError
from .grids import save_gif, save_png
from .latents import ACTIVE_KL, SCORE_NAMES, latent_scores, score_kind
from .traversals import code_limit

logger = logging.getLogger(__name__)

#: picture name -> file name, in the order they are written
PICTURES: dict[str, str] = {
    "traversals": "traversals.png",
    "gif": "traversals.gif",
    "reconstructions": "reconstructions.png",
    "samples": "samples.png",
    "latent_responses": "latent_responses.png",
    "kl_per_dim": "kl_per_dim.png",
    "metrics": "metrics.png",
}
#: the pictures of models of a class/content objective only (:mod:`~disentangle.visualize.swaps`)
CLASS_CONTENT_PICTURES: dict[str, str] = {"swaps": "swaps.png"}
#: the pictures drawn with matplotlib
PLOTTED = ("latent_responses", "kl_per_dim", "metrics")
#: the pictures that read the dataset's factor labels (a factor grid or a labelled sample), and what
#: they read them for
FACTOR_PICTURES: dict[str, str] = {
    "latent_responses": "plots each latent's mean code against each factor's value",
    "swaps": "takes its class images from the labels of the class factors",
}
#: what the trainer writes at the end of training
TRAINING_PICTURES = ("traversals", "reconstructions")
#: images whose mean KL orders the latents
KL_IMAGES = 256


def resolve_pictures(what: str | Iterable[str] | None) -> list[str]:
    """Picture names from ``"traversals,gif"``, a list, ``"all"`` or ``None`` (all of :data:`PICTURES`;
    :func:`pictures_for` adds those of the model), checked."""
    if what is None or what == "all":
        return list(PICTURES)
    known = {**PICTURES, **CLASS_CONTENT_PICTURES}
    names = [w.strip() for w in what.split(",")] if isinstance(what, str) else [str(w).strip() for w in what]
    names = [n for n in names if n]
    if not names:
        raise ConfigError(f"--what is empty; give one or more of {', '.join(known)} (comma-separated) or 'all'.")
    for name in names:
        choice("what", name, list(known))
    return [n for n in known if n in names]


def pictures_for(model: Any, names: Sequence[str]) -> list[str]:
    """``names`` (the pictures of ``all``) with those that apply to ``model`` alone added:
    ``swaps`` for a model of a class/content objective
    (:func:`~disentangle.visualize.swaps.class_content_objective`)."""
    from .swaps import class_content_objective

    names = list(names)
    if class_content_objective(model) is not None:
        names += [n for n in CLASS_CONTENT_PICTURES if n not in names]
    return names


def has_factors(dataset: Any) -> bool:
    """Whether ``dataset`` has factor labels: a factor grid, or a sample of images with labels (not
    an image folder's images alone)."""
    return getattr(dataset, "is_grid", True) is not False or bool(getattr(dataset, "labelled", False))


def pictures_for_data(names: Sequence[str], dataset: Any, *, explicit: bool, option: str = "what") -> list[str]:
    """``names`` that ``dataset`` can give. On images without factor labels (:func:`has_factors`) the
    pictures of :data:`FACTOR_PICTURES` are left out, with a logged note, when ``explicit`` is False
    (the pictures of ``all``); named explicitly, they raise :class:`~disentangle.errors.NotAGridError`
    (one paragraph naming them and ``option``, the argument that named them), before anything is drawn."""
    names = list(names)
    needing = [n for n in names if n in FACTOR_PICTURES]
    if not needing or has_factors(dataset):
        return names
    what = getattr(dataset, "name", type(dataset).__name__)
    files = ", ".join({**PICTURES, **CLASS_CONTENT_PICTURES}[n] for n in needing)
    if not explicit:
        logger.info("left out %s: %s factor labels, and %s has none", files,
                    "it reads" if len(needing) == 1 else "they read", what)
        return [n for n in names if n not in FACTOR_PICTURES]
    from ..errors import NotAGridError

    reasons = "; ".join(f"{n} {FACTOR_PICTURES[n]}" for n in needing)
    raise NotAGridError(
        f"{files} {'needs' if len(needing) == 1 else 'need'} labelled images ({reasons}), and {what} has no "
        f"labels. Leave "
        f"{', '.join(repr(n) for n in needing)} out of {option} ('all' leaves out what needs labels by itself), "
        f"or draw it from labelled images (a dataset with factor labels, e.g. disentangle.data.from_arrays(images, "
        f"labels), with disentangle.visualize.write_pictures)."
    )


def sample_images(dataset: Any, n: int, seed: int) -> torch.Tensor:
    """``n`` observations at uniformly drawn grid points, from ``np.random.default_rng(seed)`` (on a
    sample of images without a grid: ``n`` images drawn uniformly)."""
    rng = np.random.default_rng(seed)
    if getattr(dataset, "is_grid", True) is False:
        indices = torch.as_tensor(rng.integers(len(dataset), size=n, dtype=np.int64), device=dataset.device)
        return dataset.observe(indices).float()
    factors = np.asarray(dataset.sample_factors(n, rng), dtype=np.int64)
    return torch.as_tensor(dataset.sample_observations_from_factors(factors, rng)).float()


def write_pictures(
    model: Any,
    dataset: Any,
    out_dir: str | Path,
    what: str | Iterable[str] | None = None,
    *,
    seed: int = 0,
    metrics: Mapping[str, Mapping[str, float]] | None = None,
    num_images: int = 3,
    num_values: int = 10,
    limit: float | None = None,
    num_frames: int = 40,
    fps: float = 20.0,
    num_reconstructions: int = 16,
    num_samples: int = 64,
    num_per_value: int = 64,
    min_kl: float = ACTIVE_KL,
) -> dict[str, Path]:
    """Write the pictures named in ``what`` (default: all) into ``out_dir``; return name -> path.

    The images shown are drawn from the dataset with ``seed``; latents are ordered by their mean KL
    over :data:`KL_IMAGES` of them. ``traversals.png`` shows the first ``num_images`` with
    ``num_values`` values in ``[−limit, limit]`` (default ±2 for a VAE, ±1 for InfoGAN's uniform
    codes: :func:`~disentangle.visualize.traversals.code_limit`); ``traversals.gif`` sweeps the latents with
    ``KL >= min_kl`` of the first image over ``num_frames`` frames at ``fps``;
    ``reconstructions.png`` shows ``num_reconstructions`` images, ``samples.png`` ``num_samples``
    prior draws (``z`` from ``torch.Generator().manual_seed(seed)``); ``latent_responses.png``
    encodes ``num_per_value`` observations per factor value; ``swaps.png`` (added to ``all`` for a
    model of a class/content objective) is :func:`~disentangle.visualize.swaps.swap_grid` with
    ``seed`` and the run's ``objective.class_factors`` and ``objective.class_dim``. ``metrics``
    (``{metric: {score: value}}``) is required for ``metrics.png``. On images without factor labels,
    ``all`` leaves out ``latent_responses`` and ``swaps`` (logged) and naming one raises
    :class:`~disentangle.errors.NotAGridError` (:func:`pictures_for_data`). Every check runs before the
    folder is made. The model is evaluated in eval mode and its mode restored.
    """
    names = resolve_pictures(what)
    explicit = not (what is None or what == "all")
    if not explicit:
        names = pictures_for(model, names)
    names = pictures_for_data(names, dataset, explicit=explicit)
    if "swaps" in names:
        from .swaps import CLASS_CONTENT_OBJECTIVES, class_content_objective

        if class_content_objective(model) is None:
            config = getattr(model, "config", None)
            objective = (config.get("objective") or {}).get("name") if isinstance(config, dict) else None
            raise ConfigError(
                f"swaps.png swaps the content and class codes of a model trained by a class/content objective "
                f"({', '.join(CLASS_CONTENT_OBJECTIVES)}), and this model's config names "
                f"{f'objective {objective!r}' if objective else 'no objective'}. Leave 'swaps' out of what (--what), or draw "
                "the grid of any code split with disentangle.visualize.swaps.swap_grid(model, dataset, class_dim=...)."
            )
    settings = dict(
        num_images=positive_int("num_images", num_images),
        num_values=positive_int("num_values", num_values),
        limit=code_limit(model) if limit is None else positive("limit", limit),
        num_frames=positive_int("num_frames", num_frames, minimum=2),
        fps=positive("fps", fps),
        num_reconstructions=positive_int("num_reconstructions", num_reconstructions),
        num_samples=positive_int("num_samples", num_samples),
        num_per_value=positive_int("num_per_value", num_per_value),
    )
    if any(n in PLOTTED for n in names):
        from .plots import require_matplotlib

        require_matplotlib()
    if "metrics" in names:
        from .plots import check_metrics

        if metrics is None:
            raise ConfigError(
                "metrics.png needs scores: pass metrics={metric: {score: value}} (the 'metrics' entry of a "
                "metrics.json written by python -m disentangle.evaluate), or leave 'metrics' out of what (--what)."
            )
        metrics = check_metrics(metrics)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        return _write(model, dataset, out_dir, names, seed, metrics, min_kl, **settings)
    finally:
        if was_training:
            model.train()


@torch.no_grad()
def _write(
    model: Any, dataset: Any, out_dir: Path, names: Sequence[str], seed: int,
    metrics: Mapping[str, Mapping[str, float]] | None, min_kl: float, *, num_images: int, num_values: int,
    limit: float, num_frames: int, fps: float, num_reconstructions: int, num_samples: int, num_per_value: int,
) -> dict[str, Path]:
    from . import plots, reconstructions, responses, traversals

    x = sample_images(dataset, max(KL_IMAGES, num_images, num_reconstructions), seed)
    # a quantised model's latents are ordered by code entropy, a GAN's by the spread of its inferred codes:
    # neither has a posterior KL
    kind = score_kind(model)
    order = latent_scores(model, x)
    written: dict[str, Path] = {}
    for name in names:
        path = out_dir / {**PICTURES, **CLASS_CONTENT_PICTURES}[name]
        if name == "traversals":
            grid = traversals.traversal_grid(model, x[:num_images], order, num_values=num_values, limit=limit)
            save_png(grid, path)
        elif name == "gif":
            frames = traversals.traversal_animation(
                model, x[:1], order, num_frames=num_frames, limit=limit, min_kl=min_kl
            )
            save_gif(frames, path, fps=fps)
        elif name == "reconstructions":
            save_png(reconstructions.reconstruction_grid(model, x[:num_reconstructions]), path)
        elif name == "samples":
            generator = torch.Generator().manual_seed(seed)
            save_png(reconstructions.sample_grid(model, num_samples, generator=generator), path)
        elif name == "latent_responses":
            found = responses.latent_responses(dataset, model, num_per_value=num_per_value, seed=seed)
            # rows by what orders the latents everywhere else (a quantised model's code entropy)
            figure = plots.latent_responses_figure(found, order, score=SCORE_NAMES[kind][0])
            plots.save_figure(figure, path)
        elif name == "kl_per_dim":
            plots.save_figure(plots.kl_per_dim_figure(order, active_kl=min_kl, kind=kind), path)
        elif name == "metrics":
            plots.save_figure(plots.metrics_figure(metrics), path)
        elif name == "swaps":
            from .swaps import swap_grid

            save_png(swap_grid(model, dataset, seed=seed), path)
        written[name] = path
    return written


def write_training_pictures(
    model: Any,
    dataset: Any,
    out_dir: str | Path,
    seed: int = 0,
    class_split: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """The end-of-training pictures, ``traversals.png`` and ``reconstructions.png``, in ``out_dir``,
    and ``swaps.png`` where ``class_split`` gives a class/content model's ``class_factors`` and
    ``class_dim`` (:func:`~disentangle.visualize.swaps.swap_grid`).

    Made by :func:`write_pictures` (so they match ``python -m disentangle.visualize RUN_DIR``
    with the same seed); the model's mode and the global torch RNG state are left as they were.
    """
    with torch.random.fork_rng(devices=[]):
        written = write_pictures(model, dataset, out_dir, TRAINING_PICTURES, seed=seed)
        if class_split is not None:
            from .swaps import swap_grid

            path = Path(out_dir) / CLASS_CONTENT_PICTURES["swaps"]
            save_png(swap_grid(model, dataset, seed=seed, **dict(class_split)), path)
            written["swaps"] = path
        return written
