"""The user's images given as arrays (from_arrays) or a torch dataset (from_torch): what a PIL image
holds is read as an image folder reads it (16-bit scaled, alpha composited on black), NaN pixels are
refused, mixed channel counts say so, spawned loader workers work, and a sample's names and values
are those the docstring promises."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.data import from_arrays, from_torch


def test_pil_images_are_read_as_an_image_folder_reads_them():
    ramp = (np.arange(400, dtype=np.uint16).reshape(20, 20) * 150)  # 16-bit values up to 59,850
    read = from_torch([Image.fromarray(ramp)]).images[0, 0].numpy()
    assert read.max() == round(59850 * 255 / 65535) and (read == 255).mean() == 0  # scaled, not clipped at 255
    white_transparent = np.zeros((20, 20, 4), np.uint8)
    white_transparent[..., :3] = 255  # alpha 0 everywhere: on black, as an image folder composites it
    assert int(from_torch([Image.fromarray(white_transparent, "RGBA")]).images.max()) == 0


def test_mixed_channel_counts_name_the_fix_not_a_resize():
    with pytest.raises(ValueError, match=r"item 1 has 1 channel\(s\), item 0 3; every image must have the same "
                                         r"channels. Convert them"):
        from_torch([Image.new("RGB", (20, 20)), Image.new("L", (20, 20))])


def test_nan_pixels_are_refused_not_turned_into_black():
    images = np.random.default_rng(0).random((8, 20, 20, 3))
    images[5, 1, 2, 0] = np.nan
    with pytest.raises(ValueError, match=r"hold NaN or infinite values \(1 of them; the first in image 5\)"):
        from_arrays(images)
    tensor = torch.rand(3, 20, 20)
    tensor[0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="item 2 is a float image with NaN or infinite values"):
        from_torch([torch.rand(3, 20, 20), torch.rand(3, 20, 20), tensor])


def test_spawned_loader_workers_can_take_the_items():
    """num_workers > 0 where workers are spawned (macOS, Windows; forkserver on Linux from Python 3.14):
    the data loader pickles its collate function for them, so it must not be a lambda."""
    import pickle

    from disentangle.data import samples

    assert pickle.loads(pickle.dumps(samples._as_they_are)) is samples._as_they_are
    images = [torch.full((1, 8, 8), i, dtype=torch.uint8) for i in range(4)]
    assert from_torch(images, num_workers=1).images[:, 0, 0, 0].tolist() == [0, 1, 2, 3]


def test_a_labelled_sample_has_the_names_and_values_of_the_docstring():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (6, 20, 20), dtype=np.uint8)
    classes = np.array([[0, 1], [1, 0], [0, 1], [1, 1], [0, 0], [1, 1]])  # duplicates: a sample, not a grid
    sample = from_arrays(images, classes, factor_values=[np.array([0.5, 1.0]), np.array([10.0, 20.0])])
    assert list(sample.factor_names) == ["factor0", "factor1"]
    assert [list(v) for v in sample.factor_values] == [[0.5, 1.0], [10.0, 20.0]]
    with pytest.raises(ValueError, match="factor_names were given without factor_classes"):
        from_arrays(images, factor_names=["size"])


@pytest.mark.parametrize("labelled_grid", [False, True])
def test_a_memory_mapped_array_streams_from_its_file_without_a_copy(tmp_path, monkeypatch, labelled_grid):
    """from_arrays(np.load(path, mmap_mode="r"), placement="stream"): the images stay in the file (the
    stored tensor is the file's mapping, not a copy), and the batches are those of an in-memory copy."""
    import disentangle._core.hardware as hardware

    rng = np.random.default_rng(0)
    stack = rng.integers(0, 256, (12, 1, 5, 5), dtype=np.uint8)
    np.save(tmp_path / "images.npy", stack)
    mapped = np.load(tmp_path / "images.npy", mmap_mode="r")
    labels = np.stack(np.unravel_index(np.arange(12), (3, 4)), 1) if labelled_grid else None
    streamed = from_arrays(mapped, labels, placement="stream")
    held = from_arrays(stack.copy(), labels, placement="device")
    assert streamed.stream and streamed.placement == "stream" and not held.stream
    assert streamed.images.data_ptr() == mapped.ctypes.data  # no copy: the file's pages
    assert torch.equal(streamed.images, held.images)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(streamed.sample_batch(6, g1), held.sample_batch(6, g2))
    monkeypatch.setattr(hardware, "available_memory_bytes", lambda device: 100)  # 300 bytes of images > 25 %
    assert not from_arrays(mapped, labels).stream  # Python callers opt in: the default stays on the device
    auto = from_arrays(mapped, labels, placement="auto")
    assert auto.stream and "auto:" in auto.placement_reason
    # an npz file (data.name: npz) takes data.placement as the other datasets read from files do
    from disentangle.data import build_dataset

    np.savez(tmp_path / "data.npz", images=stack, **({"factor_classes": labels} if labelled_grid else {}))
    config = {"name": "npz", "path": str(tmp_path / "data.npz")}
    assert build_dataset(config).stream and not build_dataset({**config, "placement": "device"}).stream
    with pytest.raises(Exception, match="placement"):
        from_arrays(stack, labels, placement="disk")


def test_a_memory_mapped_grid_out_of_grid_order_streams_without_a_copy(tmp_path):
    """Its rows shuffled (a grid saved in another order): streamed, the images stay in the file and a
    grid point reads its image through ``rows``; the batches, the grid's raw images and the observations
    of given factors are those of the in-memory copy sorted into grid order."""
    rng = np.random.default_rng(0)
    stack = rng.integers(0, 256, (12, 1, 5, 5), dtype=np.uint8)
    labels = np.stack(np.unravel_index(np.arange(12), (3, 4)), 1)
    shuffle = rng.permutation(12)
    np.save(tmp_path / "images.npy", stack[shuffle])
    mapped = np.load(tmp_path / "images.npy", mmap_mode="r")
    streamed = from_arrays(mapped, labels[shuffle], placement="stream")
    held = from_arrays(stack[shuffle].copy(), labels[shuffle], placement="device")
    assert streamed.images.data_ptr() == mapped.ctypes.data and streamed.rows is not None  # the file's pages
    assert held.rows is None and torch.equal(held.images, torch.from_numpy(stack))  # copied into grid order
    every = torch.arange(12)
    assert torch.equal(streamed.raw(every), held.raw(every))
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(streamed.sample_batch(16, g1), held.sample_batch(16, g2))
    factors = np.array([[2, 3], [0, 1]])
    assert torch.equal(streamed.sample_observations_from_factors(factors, np.random.default_rng(0)),
                       held.sample_observations_from_factors(factors, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="rows must be a permutation of the 12 image rows"):
        type(held)(held.images, ("a", "b"), (3, 4), rows=torch.zeros(12, dtype=torch.int64))


def test_float_images_are_rounded_to_the_nearest_of_256_levels():
    """Float images in [0, 1] are stored as round(255 x), as PIL and the image folder store 8 bits
    (truncating would darken every pixel by half a level on average)."""
    levels = np.array([0.0, 0.5, 0.7 / 255, 254.6 / 255, 1.0])
    dataset = from_arrays(np.broadcast_to(levels[:, None, None], (5, 4, 4)).copy())
    stored = dataset.raw(torch.arange(5))
    assert stored.dtype == torch.uint8
    assert stored[:, 0, 0, 0].tolist() == [0, 128, 1, 255, 255]
