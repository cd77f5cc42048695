"""Pretrained weight files: safetensors, encoder and decoder only, with their provenance.

A zoo weight file is a plain `safetensors <https://github.com/huggingface/safetensors>`_ file
(no pickle): the tensors are the VAE's ``state_dict`` (``encoder.*`` and ``decoder.*``; no
optimizer, no discriminator), stored as trained (fp32), and the objective's tensors that the model
is used with as ``objective.NAME`` (QLAE's ``objective.codebook``:
:attr:`~disentangle.objectives.base.Objective.published_state`). Its ``__metadata__`` (string to string,
as the format requires) holds:

=====================  =======================================================================
``format``             ``disentangle-zoo/1``
``name``               the pretrained name
``recipe``             the recipe it was trained from (or empty)
``config``             the full resolved config (JSON)
``image_shape``        the observation shape (JSON list), needed to build the model
``library_version``    ``disentangle`` version that published it; ``torch_version``
``trained_steps``      optimisation steps
``wall_time_s``        training wall time in seconds (and ``wall_time_source``: how it was known)
``machine``            the machine and CPU (JSON)
=====================  =======================================================================

Reading always hashes the bytes first and parses the same bytes afterwards, so what is checked
is exactly what is loaded.
"""
from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import torch

from .._core.atomic import atomic_write_bytes
from ..errors import HashMismatchError, WeightsError

FORMAT = "disentangle-zoo/1"
#: the name prefix of the objective's tensors in a weight file
OBJECTIVE_PREFIX = "objective."
#: metadata keys whose values are JSON
_JSON_KEYS = ("config", "image_shape", "machine")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode_weights(state_dict: dict[str, torch.Tensor], metadata: dict[str, Any]) -> bytes:
    """The bytes of a zoo weight file for ``state_dict`` (keys ``encoder.*`` / ``decoder.*``, and
    ``objective.*`` for the objective's published tensors)."""
    from safetensors.torch import save

    foreign = sorted(k for k in state_dict if not k.startswith(("encoder.", "decoder.", OBJECTIVE_PREFIX)))
    if foreign:
        raise WeightsError(
            "A zoo weight file holds the encoder, the decoder and the objective's published tensors "
            f"(objective.NAME) only; got other tensors: {', '.join(foreign[:5])}."
        )
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in state_dict.items()}
    text = {"format": FORMAT}
    for key, value in metadata.items():
        text[key] = json.dumps(value, sort_keys=True) if key in _JSON_KEYS else ("" if value is None else str(value))
    return save(tensors, metadata=text)


def write_weights(path: str | Path, state_dict: dict[str, torch.Tensor], metadata: dict[str, Any]) -> tuple[str, int]:
    """Write a zoo weight file atomically; returns its ``(sha256, size)``."""
    data = encode_weights(state_dict, metadata)
    atomic_write_bytes(Path(path), data)
    return sha256_bytes(data), len(data)


def _header_metadata(data: bytes, source: str) -> dict[str, str]:
    """The ``__metadata__`` of safetensors bytes (8-byte little-endian header length, JSON)."""
    try:
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length])
    except (struct.error, ValueError) as err:
        raise WeightsError(f"{source} is not a safetensors file ({err}).") from None
    return dict(header.get("__metadata__") or {})


def decode_weights(data: bytes, source: str = "the weight file") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors and metadata (JSON values decoded) of a zoo weight file's bytes."""
    from safetensors.torch import load

    raw_meta = _header_metadata(data, source)
    if raw_meta.get("format") != FORMAT:
        raise WeightsError(
            f"{source} is a safetensors file but not a disentangle zoo weight file (format "
            f"{raw_meta.get('format')!r}, expected {FORMAT!r})."
        )
    try:
        tensors = load(data)
    except Exception as err:  # safetensors raises its own error types for corrupt payloads
        raise WeightsError(f"{source} cannot be read as safetensors ({type(err).__name__}: {err}).") from None
    meta: dict[str, Any] = {}
    for key, value in raw_meta.items():
        meta[key] = json.loads(value) if key in _JSON_KEYS and value else value
    return tensors, meta


def read_verified(path: str | Path, sha256: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a weight file, check its full sha256 against ``sha256``, then decode those bytes.

    Raises :class:`HashMismatchError` (nothing is decoded) when the hash differs.
    """
    path = Path(path)
    data = path.read_bytes()
    actual = sha256_bytes(data)
    if actual != sha256.lower():
        raise HashMismatchError(
            f"{path} has sha256 {actual}, but the manifest records {sha256}; the file is corrupt, "
            f"truncated or a different model, and it was not loaded. Delete it (python -m "
            f"disentangle.zoo fetch NAME downloads it again) or place the right file there."
        )
    return decode_weights(data, str(path))


def build_model(tensors: dict[str, torch.Tensor], metadata: dict[str, Any], map_location: str | torch.device = "cpu"):
    """The :class:`~disentangle.models.vae.VAE` of decoded weights, in eval mode, with ``config``,
    ``trained_steps``, ``zoo_metadata`` and ``objective_state`` attributes (the tensors stored
    as ``objective.NAME``: :data:`OBJECTIVE_PREFIX`)."""
    from ..config import upgrade_saved_config
    from ..models.vae import VAE

    config = upgrade_saved_config(metadata["config"])
    model = VAE.for_weights(config["model"], metadata["image_shape"])
    weights = {k: v for k, v in tensors.items() if not k.startswith(OBJECTIVE_PREFIX)}
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:
        raise WeightsError(f"The weights do not fit the model their config describes: {err}") from None
    model.objective_state = {
        k[len(OBJECTIVE_PREFIX):]: v.to(map_location) for k, v in tensors.items() if k.startswith(OBJECTIVE_PREFIX)
    }
    model.config = config
    model.trained_steps = int(metadata.get("trained_steps") or 0)
    model.zoo_metadata = metadata
    return model.to(map_location).eval()
