"""Our datasets as a ``torch.utils.data.Dataset``: item ``i`` is grid point ``i``'s image and factor
classes, the same in any batch, order or loader; nuisance is drawn per item from ``(seed, i)``."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from disentangle.data import TorchDataset, build_dataset

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def sprites():
    return build_dataset({"name": "sprites"})


def test_an_item_is_the_grid_points_image_and_factor_classes(sprites):
    view = sprites.as_torch_dataset()
    assert isinstance(view, TorchDataset) and len(view) == len(sprites) == 737_280
    for i in (0, 1, 12_345, len(sprites) - 1):
        image, factors = view[i]
        assert image.dtype == torch.float32 and image.shape == sprites.image_shape and image.device.type == "cpu"
        torch.testing.assert_close(image, sprites.observe(torch.tensor([i]), None)[0])
        expected = np.unravel_index(i, sprites.factor_sizes)  # row-major, the last factor fastest
        assert factors.tolist() == [int(k) for k in expected]
    torch.testing.assert_close(view[-1][0], view[len(view) - 1][0])
    with pytest.raises(IndexError, match="out of range"):
        view[len(view)]


def test_a_dataloader_batch_is_the_items_it_names(sprites):
    view = TorchDataset(sprites)
    sampler = [[5, 70_000, 3, 123_456]]
    images, factors = next(iter(DataLoader(view, batch_sampler=sampler)))
    assert images.shape == (4, *sprites.image_shape) and factors.shape == (4, len(sprites.factor_sizes))
    for row, i in enumerate(sampler[0]):
        torch.testing.assert_close(images[row], view[i][0])
        assert factors[row].tolist() == view[i][1].tolist()


def test_nuisance_is_per_item_and_seeded_not_per_batch():
    noisy = build_dataset({"name": "noisy_sprites"})
    assert not noisy.deterministic_observations
    view = noisy.as_torch_dataset(seed=3)
    alone = [view[i][0] for i in (10, 20, 30)]
    together = [image for image, _ in view.__getitems__([30, 10, 20])]
    for a, b in zip(alone, [together[1], together[2], together[0]]):
        torch.testing.assert_close(a, b)
    clean = build_dataset({"name": "sprites"}).as_torch_dataset()[10][0]
    assert not torch.equal(alone[0], clean)  # the noise is there ...
    assert not torch.equal(alone[0], noisy.as_torch_dataset(seed=4)[10][0])  # ... and another seed draws another


def test_only_our_datasets_are_viewed():
    with pytest.raises(TypeError, match="has no 'observe'"):
        TorchDataset([1, 2, 3])
