"""``disentangle.load``: a trained model from a run folder, a checkpoint file or the zoo."""
from __future__ import annotations

import logging
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
    """A weight file read by path. It names the zoo model it was exported as (``zoo_name``) only when
    its bytes are that model's, as the manifest's sha256 says; a file whose name the manifest knows
    with other bytes (changed, or another version) loads as the file it is, with a warning."""
    import hashlib

    from .zoo.weights import build_model, decode_weights

    data = path.read_bytes()
    tensors, metadata = decode_weights(data, str(path))
    model = build_model(tensors, metadata, map_location=map_location)
    model.source = str(path)
    name = metadata.get("name")
    if name:
        published = _published_sha256(name)
        digest = hashlib.sha256(data).hexdigest()
        if published is None or published == digest:
            model.zoo_name = name  # a model of a manifest, or a file exported under a name of its own
        else:
            logging.getLogger(__name__).warning(
                "%s names itself the zoo model %s, but its bytes are not that model's (sha256 %s..., the zoo's is "
                "%s...): it is loaded as this file, not as zoo:%s. Load zoo:%s for the published model.",
                path, name, digest[:12], published[:12], name, name)
    return model


def _published_sha256(name: str) -> str | None:
    """The sha256 the manifests record for the pretrained model ``name``, or None."""
    from .zoo import catalog

    found = catalog.lookup(name)
    pretrained = getattr(found, "pretrained", None) if found is not None else None
    return pretrained.sha256 if pretrained is not None else None


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
