"""The ELBO and reconstruction of a model on drawn images: a score that needs no labels."""
from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from ._gaussian import encoder_of, sample_posterior
from ._representation import default_representation_batch_size, eval_mode
from ._sampling import draw_images
from ._settings import SettingsChecks, as_float_dict, count, one_of
from .registration import register_metric

ReconstructionSetting = Literal["auto", "bernoulli", "gaussian"]

CHECK_SETTINGS = SettingsChecks(
    num_samples=count("num_samples", 1),
    reconstruction=one_of("reconstruction", ("auto", "bernoulli", "gaussian")),
)


def _likelihood_of(model: Any, reconstruction: str) -> str:
    """``reconstruction``, or for ``auto`` the one the model was trained with (its config's
    ``objective.reconstruction``; ``bernoulli`` when it names none)."""
    if reconstruction != "auto":
        return reconstruction
    config = getattr(model, "config", None) or {}
    objective = config.get("objective", {}) if isinstance(config, dict) else {}
    value = objective.get("reconstruction") if isinstance(objective, dict) else None
    return value if value in ("bernoulli", "gaussian") else "bernoulli"


@register_metric(checks=CHECK_SETTINGS, requires_encoder=True, data="images")
def elbo(
    dataset: Any,
    model: Any,
    *,
    seed: int = 0,
    num_samples: int = 10_000,
    reconstruction: ReconstructionSetting = "auto",
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """The evidence lower bound of a Gaussian-encoder model, per image, on ``num_samples`` drawn images.

    For each image ``x`` (drawn uniformly: by index on a sample of images, labelled or not; from
    uniform factor classes on a grid) one posterior draw ``z ~ q(z|x) = N(μ, σ²)`` is decoded, and

    * ``reconstruction``: ``−log p(x|z)`` summed over pixels (nats): ``bernoulli``, the binary
      cross-entropy of the decoder logits; ``gaussian``, ``Σ (x − sigmoid(logits))²`` (the unit
      Gaussian's up to a constant, disentanglement_lib's ``l2``), the same likelihoods as the
      objectives' ``reconstruction``; ``auto`` (default): the model's own (its config's
      ``objective.reconstruction``, else ``bernoulli``);
    * ``kl``: ``KL(q(z|x) ‖ N(0, I)) = ½ Σ_j (μ_j² + σ_j² − log σ_j² − 1)`` (nats);
    * ``elbo = −(reconstruction + kl)``, the bound on ``log p(x)`` that the VAEs maximise (β = 1);
    * ``mse``: the mean squared error per pixel of the decoded mean ``sigmoid(decoder(μ))`` (no draw):
      a likelihood-free reconstruction error, comparable across models trained with either
      likelihood;

    each averaged over the images. It needs no labels, so it scores a model on any data, a folder of
    images included. ``model`` must have ``encode(x) -> (mu, logvar)`` and ``decode(z) -> logits``
    (every VAE of the library; not the GANs, whose generator takes noise besides the code).
    """
    from . import refuse_without_a_posterior

    refuse_without_a_posterior("elbo", model)
    encode = encoder_of(model)
    decode = getattr(model, "decode", None)
    if not callable(decode):
        from ..errors import ConfigError

        raise ConfigError(f"elbo needs a model with a decoder, decode(z) -> logits; got {type(model).__name__}.")
    likelihood = _likelihood_of(model, reconstruction)
    rng = np.random.default_rng(seed)
    device = next(model.parameters()).device if hasattr(model, "parameters") else torch.device("cpu")
    batch_size = representation_batch_size or default_representation_batch_size(device)
    totals = {"reconstruction": 0.0, "kl": 0.0, "mse": 0.0}
    count_images, count_pixels = 0, 0
    noise = np.random.default_rng(rng.integers(0, 2**63 - 1))  # the posterior draws, apart from the images'
    with torch.no_grad(), eval_mode(model):
        for x in draw_images(dataset, num_samples, rng, batch_size):
            x = x.to(device=device, dtype=torch.float32)
            mu, logvar = (t.float() for t in encode(x))
            z = sample_posterior(mu, logvar, noise)
            logits = decode(z).float()
            if likelihood == "bernoulli":
                per_pixel = F.binary_cross_entropy_with_logits(logits, x, reduction="none")
            else:
                per_pixel = (torch.sigmoid(logits) - x).square()
            totals["reconstruction"] += float(per_pixel.flatten(1).sum(1).double().sum())
            totals["kl"] += float((0.5 * (mu.square() + logvar.exp() - logvar - 1.0)).sum(1).double().sum())
            totals["mse"] += float((torch.sigmoid(decode(mu).float()) - x).square().double().sum())
            count_images += x.shape[0]
            count_pixels += x[0].numel() * x.shape[0]
    recon, kl = totals["reconstruction"] / count_images, totals["kl"] / count_images
    out = {"reconstruction": recon, "kl": kl, "elbo": -(recon + kl), "mse": totals["mse"] / count_pixels}
    if not all(math.isfinite(v) for v in out.values()):
        raise ValueError(f"the model gave non-finite values on these images: {out}.")
    return as_float_dict(out)
