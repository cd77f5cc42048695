"""Which latents a model uses: per-latent KL to the prior, ordering, active latents, the device.

``KL_j = E_x[½(μ_j² + σ_j² − log σ_j² − 1)]`` is the KL of the posterior ``q(z_j|x)`` to the prior
``N(0, 1)``, averaged over a batch (nats). Latents with (near) zero KL carry no information about
``x``; sorting by KL puts the latents a model uses first.

A model with quantised latents (QLAE: a scalar codebook per latent, ``model.objective_state
["codebook"]``, :func:`latent_codebook`) has no posterior variance and so no KL; its latents are
ordered by the entropy of their quantised values over a batch, ``H_j = −Σ_k p_jk log₂ p_jk`` with
``p_jk`` the fraction of images whose latent ``j`` takes the ``k``-th value (bits,
:func:`code_entropy_per_dim`): a latent that always takes one value carries nothing.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .._core.gaussian import model_device
from ..objectives.losses import kl_normal_per_dim

#: latents whose KL (nats) is at least this are "active" and animated in ``traversals.gif``
ACTIVE_KL = 0.1


def latent_codebook(model: Any) -> torch.Tensor | None:
    """The ``(D, V)`` scalar codebook of a model with quantised latents (QLAE's, loaded with the
    model as ``model.objective_state["codebook"]``), else ``None``."""
    book = (getattr(model, "objective_state", None) or {}).get("codebook")
    return None if book is None else book.detach()


@torch.no_grad()
def decoder_code(model: Any, images: torch.Tensor) -> torch.Tensor:
    """The code the decoder is given for ``images``: the posterior means ``μ(x)``, quantised to the
    codebook for a model with quantised latents (its decoder was trained on codebook values); a
    categorical code's probabilities (Elastic-InfoGAN's last K codes) as the one-hot of the likeliest
    category (its generator was trained on near one-hot samples, not on a mix of categories)."""
    mu, _ = model.encode(images.to(model_device(model)))
    k = num_categories(model)
    if k:
        mu = mu.clone()
        mu[:, -k:] = torch.nn.functional.one_hot(mu[:, -k:].argmax(1), k).to(mu.dtype)
    book = latent_codebook(model)
    if book is None:
        return mu
    from ..objectives.qlae import quantize

    return quantize(mu, book.to(mu.device)).values.to(mu.dtype)


@torch.no_grad()
def code_entropy_per_dim(model: Any, images: torch.Tensor, codebook: torch.Tensor) -> np.ndarray:
    """The entropy (bits) of each latent's quantised value over ``images``: float64 ``(D,)``."""
    from ..objectives.qlae import quantize

    mu, _ = model.encode(images.to(model_device(model)))
    indices = quantize(mu, codebook.to(mu.device)).indices.cpu().numpy()
    entropy = np.zeros(indices.shape[1])
    for j in range(indices.shape[1]):
        p = np.bincount(indices[:, j]) / len(indices)
        p = p[p > 0]
        entropy[j] = float(-(p * np.log2(p)).sum()) + 0.0
    return entropy


def num_categories(model: Any) -> int:
    """K, the slots of a model's categorical code (Elastic-InfoGAN's last K codes, ``VAE.num_categories``);
    0 for a model without one or that does not say."""
    return int(getattr(model, "num_categories", 0) or 0)


def has_uniform_codes(model: Any) -> bool:
    """Whether ``model`` is a generator with a uniform code prior on (−1, 1) (InfoGAN's: its decoder
    declares ``code_prior = "uniform"``), whose encoder is an inference network with a fixed variance."""
    return getattr(getattr(model, "decoder", None), "code_prior", None) == "uniform"


@torch.no_grad()
def code_spread_per_dim(model: Any, images: torch.Tensor) -> np.ndarray:
    """The standard deviation of each code's inferred value ``μ_j(x)`` over ``images`` (float64 ``(D,)``):
    how much a GAN's inference network tells images apart along the code (``1/√3`` ≈ 0.58 when it
    recovers a code of ``U(−1, 1)`` exactly; 0 when it reads nothing). Its "KL" with a fixed unit
    variance would be ``½ E[μ_j²]``, the distance of the means from 0, not what the code carries."""
    mu, _ = model.encode(images.to(model_device(model)))
    return mu.double().std(dim=0, unbiased=False).cpu().numpy() if len(mu) > 1 else np.zeros(mu.shape[1])


#: what :func:`latent_scores` gives, by kind of model: (short label, axis label, unit)
SCORE_NAMES = {"kl": ("KL", "KL(q(z_j|x) ‖ N(0, 1)) [nats]", "nats"),
               "entropy": ("H", "H(quantised z_j) [bits]", "bits"),
               "spread": ("sd", "sd of the inferred code μ_j(x)", "")}


def score_kind(model: Any) -> str:
    """Which score orders ``model``'s latents (:func:`latent_scores`): ``kl``, ``entropy`` (quantised
    latents) or ``spread`` (a GAN's codes)."""
    if latent_codebook(model) is not None:
        return "entropy"
    return "spread" if has_uniform_codes(model) else "kl"


@torch.no_grad()
def latent_scores(model: Any, images: torch.Tensor) -> np.ndarray:
    """What orders a model's latents in the pictures: :func:`kl_per_dim` (nats); for a model with
    quantised latents :func:`code_entropy_per_dim` (bits); for a GAN :func:`code_spread_per_dim`."""
    kind = score_kind(model)
    if kind == "entropy":
        return code_entropy_per_dim(model, images, latent_codebook(model))
    return code_spread_per_dim(model, images) if kind == "spread" else kl_per_dim(model, images)


@torch.no_grad()
def kl_per_dim(model: Any, images: torch.Tensor) -> np.ndarray:
    """``KL(q(z_j|x) ‖ N(0, 1))`` per latent, averaged over ``images`` (nats, float64 ``(D,)``)."""
    mu, logvar = model.encode(images.to(model_device(model)))
    return kl_normal_per_dim(mu, logvar).double().cpu().numpy()


def latent_order(kl: Sequence[float] | np.ndarray) -> list[int]:
    """Latent indices sorted by decreasing KL (ties keep index order)."""
    kl = np.asarray(kl, dtype=float)
    return [int(i) for i in np.argsort(-kl, kind="stable")]


def active_latents(kl: Sequence[float] | np.ndarray, min_kl: float = ACTIVE_KL) -> list[int]:
    """Latents with ``KL >= min_kl``, largest KL first; all latents (by KL) when none is active."""
    order = latent_order(kl)
    kl = np.asarray(kl, dtype=float)
    active = [d for d in order if kl[d] >= min_kl]
    return active or order
