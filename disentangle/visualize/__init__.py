"""Seeing a model: latent traversals (PNG and GIF), reconstructions, prior samples, latent responses,
KL per latent, metric scores and the swap grids of class/content models, as arrays and figures, as
files, and in TensorBoard.

Functions return arrays (``(H, W, 3)`` uint8, Pillow-ready) or matplotlib figures and write nothing;
:func:`write_pictures` writes them into a folder, and ``python -m disentangle.visualize RUN_DIR``
does so from the command line::

    import disentangle
    from disentangle.data import build_dataset
    from disentangle.visualize import traversal_grid, latent_responses, latent_responses_figure

    model = disentangle.load("runs/quickstart")
    dataset = build_dataset(model.config["data"])
    x = sample_images(dataset, 256, seed=0)
    PIL.Image.fromarray(traversal_grid(model, x[:3], kl_per_dim(model, x)))
    latent_responses_figure(latent_responses(dataset, model), kl_per_dim(model, x))

Images use Pillow; plots use matplotlib (``pip install "disentangle-torch[plots]"``), imported only
when a plot is made; :class:`~disentangle.visualize.tensorboard.TensorBoardLogger` needs
``tensorboard``.
"""
from __future__ import annotations

from .grids import image_grid, labelled_panels, save_gif, save_image_grid, save_png
from .latents import (
    ACTIVE_KL,
    active_latents,
    code_entropy_per_dim,
    code_spread_per_dim,
    decoder_code,
    kl_per_dim,
    latent_codebook,
    latent_order,
    latent_scores,
)
from .pictures import (
    CLASS_CONTENT_PICTURES,
    PICTURES,
    pictures_for,
    resolve_pictures,
    sample_images,
    write_pictures,
    write_training_pictures,
)
from .plots import (
    check_metrics,
    kl_per_dim_figure,
    latent_responses_figure,
    metrics_figure,
    read_metrics,
    require_matplotlib,
    save_figure,
)
from .reconstructions import mean_reconstructions, prior_samples, reconstruction_grid, sample_grid
from .responses import LatentResponses, latent_responses
from .swaps import swap_grid
from .tensorboard import TensorBoardLogger
from .traversals import (
    codebook_values,
    latent_traversals,
    save_traversal_gif,
    save_traversals,
    sweep_values,
    traversal_animation,
    traversal_grid,
    traversal_values,
)

__all__ = [
    "ACTIVE_KL",
    "CLASS_CONTENT_PICTURES",
    "LatentResponses",
    "PICTURES",
    "TensorBoardLogger",
    "active_latents",
    "check_metrics",
    "latent_scores",
    "code_spread_per_dim",
    "latent_codebook",
    "decoder_code",
    "codebook_values",
    "code_entropy_per_dim",
    "image_grid",
    "kl_per_dim",
    "kl_per_dim_figure",
    "labelled_panels",
    "latent_order",
    "latent_responses",
    "latent_responses_figure",
    "latent_traversals",
    "metrics_figure",
    "pictures_for",
    "prior_samples",
    "read_metrics",
    "reconstruction_grid",
    "mean_reconstructions",
    "require_matplotlib",
    "resolve_pictures",
    "sample_grid",
    "sample_images",
    "save_figure",
    "save_gif",
    "save_image_grid",
    "save_png",
    "save_traversal_gif",
    "save_traversals",
    "swap_grid",
    "sweep_values",
    "traversal_animation",
    "traversal_grid",
    "traversal_values",
    "write_pictures",
    "write_training_pictures",
]
