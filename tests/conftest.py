"""Shared fixtures: a tiny registered image dataset so trainer tests need no renderer or files."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle.data import DATASETS, IndexedImageDataset

TINY = "_tiny_test"


@DATASETS.register(TINY, overwrite=True)
def tiny_dataset(size: int = 16, channels: int = 1, device: str = "cpu") -> IndexedImageDataset:
    """2×3×4 grid of deterministic random binary images (``size``×``size``)."""
    g = torch.Generator().manual_seed(123)
    images = (torch.rand(24, channels, size, size, generator=g) > 0.5).to(torch.uint8)
    return IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0).to(device)


def tiny_overrides(out_dir, steps: int = 12, **extra) -> list[str]:
    """Overrides for a fast CPU run on the tiny dataset with a small MLP."""
    items = {
        "data.name": TINY,
        "model.backbone": "mlp",
        "model.hidden_sizes": "[32]",
        "model.latent_dim": 4,
        "train.steps": steps,
        "train.batch_size": 8,
        "train.log_every": 2,
        "train.checkpoint_every": 4,
        "train.out_dir": str(out_dir),
        "train.progress": "false",
        "train.device": "cpu",
        "train.traversals": "false",
        **extra,
    }
    return [f"{k}={v}" for k, v in items.items()]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
