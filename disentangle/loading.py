"""``disentangle.load``: a trained model from a run folder, a checkpoint file or the zoo."""
from __future__ import annotations

from pathlib import Path

import torch

from .config import ZOO_PREFIX, upgrade_saved_config
from .errors import CheckpointNotFoundError
from .models.vae import VAE
from .training.checkpoint import load_checkpoint, load_latest


def load(path: str | Path, map_location: str | torch.device = "cpu") -> VAE:
    """Load a trained model, in eval mode.

    ``path`` is a run folder (its newest readable checkpoint: ``checkpoint.pt``, or
    ``checkpoint.prev.pt`` with a warning when the newest is unreadable), a checkpoint file, or
    ``"zoo:NAME"`` for a pretrained zoo model (see :mod:`disentangle.zoo`). The model's ``config``
    attribute holds the run's resolved config as a nested dict and ``trained_steps`` its step count.
    A missing or unreadable file raises :class:`~disentangle.training.checkpoint.CheckpointError` (a
    :class:`~disentangle.DisentangleError`) naming it.

    >>> model = disentangle.load("runs/quickstart")      # doctest: +SKIP
    >>> mu, logvar = model.encode(x)                      # posterior q(z|x)
    >>> images = model.decode_mean(mu)                    # decode() returns logits
    >>> codes = model.representation(x)                   # posterior means, as metrics use
    """
    if isinstance(path, str) and path.startswith(ZOO_PREFIX):
        from . import zoo

        return zoo.load(path[len(ZOO_PREFIX):], map_location=map_location)
    path = Path(path)
    if path.is_dir():
        ckpt, _ = load_latest(path, map_location=map_location)
    elif path.exists():
        ckpt = load_checkpoint(path, map_location=map_location)
    else:
        raise CheckpointNotFoundError(
            f"Cannot load a model: '{path}' does not exist. Pass a run folder (train.out_dir), a "
            f"checkpoint file, or zoo:NAME for a pretrained model (python -m disentangle.zoo list --pretrained)."
        )
    return model_from_checkpoint(ckpt, map_location)


def model_from_checkpoint(ckpt: dict, map_location: str | torch.device = "cpu") -> VAE:
    """The :class:`VAE` described by a checkpoint dict (its config's model section), in eval mode."""
    config = upgrade_saved_config(ckpt["config"])
    model = VAE.for_weights(config["model"], ckpt["image_shape"])
    model.load_state_dict(ckpt["model"])
    model.config = config
    model.trained_steps = int(ckpt["step"])
    return model.to(map_location).eval()
