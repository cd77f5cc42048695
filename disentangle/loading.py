"""``disentangle.load``: a trained model from a run folder or a checkpoint file."""
from __future__ import annotations

from pathlib import Path

import torch

from .checkpoint import CHECKPOINT_NAME, load_checkpoint
from .model import VAE


def load(path: str | Path, map_location: str | torch.device = "cpu") -> VAE:
    """Load the trained model of a run, in eval mode.

    ``path`` is a run folder (holding ``checkpoint.pt``) or a checkpoint file. The model's
    ``config`` attribute holds the run's resolved config as a nested dict.

    >>> model = disentangle.load("runs/quickstart")      # doctest: +SKIP
    >>> mu, logvar = model.encode(x)                      # posterior q(z|x)
    >>> images = model.decode_mean(mu)                    # decode() returns logits
    >>> codes = model.representation(x)                   # posterior means, as metrics use
    """
    path = Path(path)
    file = path / CHECKPOINT_NAME if path.is_dir() else path
    if not file.exists():
        where = f"folder '{path}' has no {CHECKPOINT_NAME}" if path.is_dir() else f"'{path}' does not exist"
        raise FileNotFoundError(f"Cannot load a model: {where}. Pass a run folder (train.out_dir) or a checkpoint file.")
    ckpt = load_checkpoint(file, map_location=map_location)
    config = ckpt["config"]
    model_cfg = dict(config["model"])
    backbone = model_cfg.pop("backbone")
    latent_dim = model_cfg.pop("latent_dim")
    model = VAE.from_backbone(backbone, image_shape=tuple(ckpt["image_shape"]), latent_dim=latent_dim, **model_cfg)
    model.load_state_dict(ckpt["model"])
    model.config = config
    model.trained_steps = int(ckpt["step"])
    return model.to(map_location).eval()
