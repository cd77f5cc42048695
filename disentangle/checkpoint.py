"""Atomic checkpoints and RNG state capture, loadable with ``torch.load(weights_only=True)``.

A checkpoint holds only tensors, numbers, strings and containers of them:
``{"format", "step", "config", "model", "objective", "optimizers", "precision", "rng"}``.
"""
from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 1


def atomic_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` to a temporary file in the same folder, fsync, then rename over ``path``.

    A crash at any point leaves either the old file or the new one, never a torn file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def capture_rng_state(generators: dict[str, torch.Generator]) -> dict[str, Any]:
    """States of Python's, NumPy's and torch's global RNGs and of the named torch generators."""
    py = random.getstate()
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "torch": torch.get_rng_state(),
        "generators": {name: g.get_state() for name, g in generators.items()},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any], generators: dict[str, torch.Generator]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    for name, g in generators.items():
        g.set_state(state["generators"][name])


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint file written by the trainer (safely: ``weights_only=True``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No checkpoint at '{path}'.")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated or foreign file
        raise RuntimeError(f"Could not read checkpoint '{path}': {err}") from err
    if not isinstance(ckpt, dict) or "model" not in ckpt or "config" not in ckpt:
        raise RuntimeError(f"'{path}' is not a disentangle checkpoint (missing 'model'/'config').")
    return ckpt
