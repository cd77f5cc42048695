"""Reconstructions (inputs above their reconstructions) and samples from the prior, as image grids."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._core.checks import positive_int
from .._core.gaussian import model_device
from .grids import image_grid
from .latents import decoder_code, has_uniform_codes, latent_codebook, num_categories


@torch.no_grad()
def mean_reconstructions(model: Any, images: torch.Tensor) -> torch.Tensor:
    """Mean reconstructions ``sigmoid(decode(μ(x)))`` of ``images`` (no sampling), on the CPU;
    ``μ(x)`` quantised for a model with quantised latents (:func:`~.latents.decoder_code`)."""
    return model.decode_mean(decoder_code(model, images)).float().cpu()


@torch.no_grad()
def reconstruction_grid(model: Any, images: torch.Tensor, nrow: int = 8) -> np.ndarray:
    """Inputs above their reconstructions as an ``(H', W', 3)`` uint8 array.

    The ``N`` images go ``nrow`` to a row; each row of inputs is followed by the row of their
    reconstructions, so grid row ``2r`` holds inputs ``r·nrow …`` and row ``2r + 1`` their
    reconstructions (``2·ceil(N / nrow)`` rows in all; a short last row leaves padding).
    """
    nrow = positive_int("nrow", nrow)
    inputs = images.float().cpu()
    recon = mean_reconstructions(model, images)
    tiles = []
    for start in range(0, len(inputs), nrow):
        chunk_in, chunk_rec = inputs[start : start + nrow], recon[start : start + nrow]
        missing = nrow - len(chunk_in)
        if missing:  # keep each reconstruction under its input
            blank = torch.full((missing, *chunk_in.shape[1:]), 0.5)
            chunk_in, chunk_rec = torch.cat([chunk_in, blank]), torch.cat([chunk_rec, blank])
        tiles += [chunk_in, chunk_rec]
    return image_grid(torch.cat(tiles), nrow=nrow)


@torch.no_grad()
def prior_samples(model: Any, num_samples: int = 64, generator: torch.Generator | None = None) -> torch.Tensor:
    """Decoded draws ``sigmoid(decode(z))`` from the codes' prior, on the CPU: ``z ~ N(0, I)``, or
    ``U(−1, 1)`` for a decoder that declares it (``decoder.code_prior = "uniform"``, InfoGAN's; a
    categorical code's K slots a uniformly drawn category, one-hot, as Elastic-InfoGAN's generator saw),
    or for a model with quantised latents each ``z_j`` one of its ``V`` codebook values, uniformly
    (QLAE's generative model has no other prior).

    ``z`` is drawn on the CPU (from ``generator`` if given), so a seed gives the same samples on
    every device.
    """
    num_samples = positive_int("num_samples", num_samples)
    latent_dim = int(model.latent_dim)
    book = latent_codebook(model)
    if book is not None:
        book = book.float().cpu()
        index = torch.randint(book.shape[1], (num_samples, latent_dim), generator=generator)
        z = torch.gather(book.expand(num_samples, -1, -1), 2, index.unsqueeze(2)).squeeze(2)
    elif has_uniform_codes(model):
        z = torch.rand(num_samples, latent_dim, generator=generator) * 2 - 1
        k = num_categories(model)
        if k:  # Elastic-InfoGAN's categorical code: a category drawn uniformly, one-hot
            z[:, latent_dim - k:] = torch.eye(k)[torch.randint(k, (num_samples,), generator=generator)]
    else:
        z = torch.randn(num_samples, latent_dim, generator=generator)
    return model.decode_mean(z.to(model_device(model))).float().cpu()


def sample_grid(
    model: Any, num_samples: int = 64, nrow: int = 8, generator: torch.Generator | None = None
) -> np.ndarray:
    """:func:`prior_samples` tiled ``nrow`` per row as an ``(H', W', 3)`` uint8 array."""
    return image_grid(prior_samples(model, num_samples, generator), nrow=positive_int("nrow", nrow))
