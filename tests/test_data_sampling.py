"""The vectorised sampling helpers: image gathering, layout conversion, factor sampling seeded by
numpy generators, and the fixed-factor sampler of the BetaVAE/FactorVAE scores."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle.data import IndexedImageDataset, factor_strides, sample_with_fixed_factor
from disentangle.data.base import gather_rows, to_nchw_uint8


@pytest.fixture
def dataset():
    sizes = (3, 4, 5)
    n = int(np.prod(sizes))
    images = torch.arange(n, dtype=torch.uint8).view(n, 1, 1, 1).expand(n, 1, 4, 4).contiguous()
    return IndexedImageDataset(images, ("a", "b", "c"), sizes, scale=1.0 / 255.0)


def test_gather_rows_matches_indexing():
    images = torch.randint(0, 255, (50, 3, 8, 8), dtype=torch.uint8)
    idx = torch.randint(50, (200,))
    out = gather_rows(images, idx)
    assert out.is_contiguous() and torch.equal(out, images[idx])
    channels_last = images.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    assert torch.equal(gather_rows(channels_last, idx), images[idx])


@pytest.mark.parametrize("layout", ["NHW", "NHWC", "NCHW"])
def test_to_nchw_uint8_in_chunks(layout):
    rng = np.random.default_rng(0)
    shape = {"NHW": (10, 5, 6), "NHWC": (10, 5, 6, 3), "NCHW": (10, 3, 5, 6)}[layout]
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    out = to_nchw_uint8(a, layout, chunk=3)
    expected = {"NHW": lambda: a[:, None], "NHWC": lambda: a.transpose(0, 3, 1, 2), "NCHW": lambda: a}[layout]()
    assert out.is_contiguous() and np.array_equal(out.numpy(), expected)
    with pytest.raises(TypeError):
        to_nchw_uint8(a.astype(np.float32), layout)


def test_factors_to_observations_is_index_arithmetic(dataset):
    rng = np.random.default_rng(0)
    factors = dataset.sample_factors(1000, rng)
    assert factors.dtype == np.int64 and factors.shape == (1000, 3)
    assert (factors >= 0).all() and (factors < np.array(dataset.factor_sizes)).all()
    assert all(len(np.unique(factors[:, k])) == s for k, s in enumerate(dataset.factor_sizes))
    obs = dataset.sample_observations_from_factors(factors, rng)
    index = factors @ factor_strides(dataset.factor_sizes)
    assert torch.equal((obs[:, 0, 0, 0] * 255).round().long(), torch.as_tensor(index))
    assert np.array_equal(dataset.indices_to_factors(index), factors)
    assert torch.equal(dataset.index_tensor_to_factors(torch.as_tensor(index)), torch.as_tensor(factors))


def test_seeded_sampling_is_reproducible(dataset):
    a = dataset.sample_factors(64, np.random.default_rng(5))
    b = dataset.sample_factors(64, np.random.default_rng(5))
    assert np.array_equal(a, b)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(dataset.sample_batch(32, g1), dataset.sample_batch(32, g2))


def test_sample_with_fixed_factor(dataset):
    rng = np.random.default_rng(0)
    for k in range(3):
        f = sample_with_fixed_factor(dataset, 256, k, rng)
        assert (f[:, k] == f[0, k]).all()
        others = [j for j in range(3) if j != k]
        assert all(len(np.unique(f[:, j])) == dataset.factor_sizes[j] for j in others)
