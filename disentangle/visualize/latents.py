"""Which latents a model uses: per-latent KL to the prior, ordering, active latents, the device.

``KL_j = E_x[½(μ_j² + σ_j² − log σ_j² − 1)]`` is the KL of the posterior ``q(z_j|x)`` to the prior
``N(0, 1)``, averaged over a batch (nats). Latents with (near) zero KL carry no information about
``x``; sorting by KL puts the latents a model uses first.
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
