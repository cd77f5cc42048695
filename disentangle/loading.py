"""``disentangle.load``: a trained model from a run folder, a checkpoint file or the zoo."""
from __future__ import annotations

from pathlib import Path

import torch

from ._core.devices import check_device
from .config import ZOO_PREFIX, upgrade_saved_config
from .errors import CheckpointNotFoundError
from .models.vae import VAE
from .training.checkpoint import load_checkpoint, load_latest


def load(path: str | Path, map_location: str | torch.device = "cpu") -> VAE:
    """Load a trained model, in eval mode.

    ``path`` is a run folder (its newest readable checkpoint: ``checkpoint.pt``, or
    ``checkpoint.prev.pt`` with a warning when the newest is unreadable), a checkpoint file,
    ``"zoo:NAME"`` for a pretrained zoo model (see :mod:`disentangle.zoo`; a ``Path`` spelling it
    works too), or a zoo weight file (``.safetensors``, as ``python -m disentangle.zoo fetch``
    writes or ``zoo publish`` exports). The model's ``config`` attribute holds the run's resolved
    config as a nested dict, ``trained_steps`` its step count, ``source`` what was read (the
    checkpoint file actually used, ``zoo:NAME`` or the weight file) and ``objective_state`` the
    objective's tensors the model is used with (QLAE's ``codebook``; ``{}`` for most objectives:
    :attr:`~disentangle.objectives.base.Objective.published_state`). A missing or unreadable file
    raises :class:`~disentangle.training.checkpoint.CheckpointError` (a
    :class:`~disentangle.DisentangleError`) naming it. A ``map_location`` that is not a device of
    this machine (``"cuda"`` without CUDA, ``"gpu"``) raises :class:`~disentangle.ConfigError`
    naming the devices there are (:func:`disentangle._core.devices.check_device`) before any file
    is read.

    >>> model = disentangle.load("runs/quickstart")      # doctest: +SKIP
    >>> mu, logvar = model.encode(x)                      # posterior q(z|x)
    >>> images = model.decode_mean(mu)                    # decode() returns logits
    >>> codes = model.representation(x)                   # posterior means, as metrics use
    """
    map_location = check_device(map_location, "map_location")
    if is_zoo_name(path):
        from . import zoo

        model = zoo.load(str(path)[len(ZOO_PREFIX):], map_location=map_location)
        model.source = str(path)
        return model
    path = Path(path)
    if path.is_dir():
        ckpt, used = load_latest(
            path, map_location=map_location, fallback_consequence="the model loaded is the one of that step"
        )
    elif is_weights_file(path):
        return _load_weights_file(path, map_location)
    elif path.exists():
        ckpt, used = load_checkpoint(path, map_location=map_location), path
    else:
        raise CheckpointNotFoundError(
            f"Cannot load a model: '{path}' does not exist. Pass a run folder (train.out_dir), a "
            f"checkpoint file, or zoo:NAME for a pretrained model (python -m disentangle.zoo list --pretrained)."
        )
    model = model_from_checkpoint(ckpt, map_location)
    model.source = str(used)
    return model


def is_zoo_name(source: str | Path) -> bool:
    """Whether ``source`` names a pretrained model (``zoo:NAME``) rather than a file: a ``Path``
    spelling it counts too (``Path("zoo:x")`` is what a CLI that wraps its argument passes), unless
    a file or folder of that name exists."""
    text = str(source)
    return text.startswith(ZOO_PREFIX) and (isinstance(source, str) or not Path(source).exists())


def is_weights_file(path: str | Path) -> bool:
    """Whether ``path`` is a safetensors file (a zoo weight file): its first 8 bytes are the
    little-endian length of a JSON header that starts with ``{``; a trainer checkpoint is a zip."""
    path = Path(path)
    if not path.is_file():
        return False
    with path.open("rb") as f:
        head = f.read(9)
    return len(head) == 9 and head[8:9] == b"{"


def _load_weights_file(path: Path, map_location: str | torch.device) -> VAE:
    from .zoo.weights import build_model, decode_weights

    tensors, metadata = decode_weights(path.read_bytes(), str(path))
    model = build_model(tensors, metadata, map_location=map_location)
    model.source = str(path)
    if metadata.get("name"):
        model.zoo_name = metadata["name"]
    return model


def model_from_checkpoint(ckpt: dict, map_location: str | torch.device = "cpu") -> VAE:
    """The :class:`VAE` described by a checkpoint dict (its config's model section), in eval mode."""
    config = upgrade_saved_config(ckpt["config"])
    from .objectives import published_objective_state

    model = VAE.for_weights(config["model"], ckpt["image_shape"])
    model.load_state_dict(ckpt["model"])
    model.config = config
    model.trained_steps = int(ckpt["step"])
    # a run trained on a dataset given to fit (not its config's data): what the trainer recorded of it
    model.data_given = ckpt.get("data_given")
    # images read from files (an image folder, CelebA): which ones (disentangle.data.content_identity)
    model.data_content = ckpt.get("data_content")
    model.objective_state = {
        k: v.to(map_location) for k, v in published_objective_state(config, ckpt.get("objective") or {}).items()
    }
    return model.to(map_location).eval()
