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


# ---------------------------------------------------------------------------- a shard of a batch
from disentangle.data.base import BatchShard, GridDataset, sampling_shard  # noqa: E402
from disentangle.data.pairs import sample_pairs  # noqa: E402
from disentangle.data.sprites import ProceduralSprites  # noqa: E402
from disentangle.data.variants import ColorSprites, NoisySprites, ScreamSprites  # noqa: E402


def _scream(tmp_path, base):
    from PIL import Image

    y, x = np.mgrid[0:90, 0:70]
    rgb = np.stack([x % 256, y % 256, (x + 2 * y) % 256], axis=-1).astype(np.uint8)
    Image.fromarray(rgb).save(tmp_path / "bg.png")
    return ScreamSprites(base, str(tmp_path / "bg.png"))


def _datasets(tmp_path, dataset):
    sprites = ProceduralSprites(image_size=16)
    return {
        "indexed": dataset,
        "sprites": sprites,
        "color": ColorSprites(sprites),
        "noisy": NoisySprites(sprites),
        "scream": _scream(tmp_path, sprites),
    }


def _shards(sample, world: int, seed: int):
    """What each of ``world`` ranks samples (one generator each, all seeded alike), and the state
    each generator is left in."""
    parts, states = [], []
    for rank in range(world):
        g = torch.Generator().manual_seed(seed)
        with sampling_shard(BatchShard(rank, world)):
            parts.append(sample(g))
        states.append(g.get_state())
    return parts, states


@pytest.mark.parametrize("name", ["indexed", "sprites", "color", "noisy", "scream"])
@pytest.mark.parametrize("world", [2, 4])
def test_a_shard_renders_its_rows_of_the_global_batch(name, world, dataset, tmp_path):
    """Indices and per-sample nuisance are drawn for the whole batch; a rank renders only its rows,
    which are exactly its rows of the single-process batch, and the generator moves on alike."""
    ds = _datasets(tmp_path, dataset)[name]
    assert ds.shard_rendering
    g = torch.Generator().manual_seed(7)
    whole = ds.sample_batch(16, g)
    parts, states = _shards(lambda gen: ds.sample_batch(16, gen), world, 7)
    assert all(p.shape[0] == 16 // world for p in parts)
    assert torch.equal(torch.cat(parts), whole)
    assert all(torch.equal(s, g.get_state()) for s in states)


@pytest.mark.parametrize("name", ["indexed", "color", "scream"])
def test_a_shard_of_pairs_renders_its_pairs(name, dataset, tmp_path):
    ds = _datasets(tmp_path, dataset)[name]
    g = torch.Generator().manual_seed(3)
    whole = sample_pairs(ds, 8, g, k="random")
    parts, states = _shards(lambda gen: sample_pairs(ds, 8, gen, k="random"), 2, 3)
    for field in range(3):
        assert torch.equal(torch.cat([p[field] for p in parts]), whole[field]), field
    assert parts[0].x1.shape[0] == 4
    assert all(torch.equal(s, g.get_state()) for s in states)


class _OwnNuisance(IndexedImageDataset):
    """A user's dataset whose transform draws without per_sample: it cannot render a shard alone."""

    deterministic_observations = False

    def transform(self, batch, generator):
        return batch + (torch.rand(batch.shape[0], 1, 1, 1, generator=generator) > 0.5).to(batch.dtype)


def test_a_dataset_with_its_own_draws_is_rendered_whole(dataset):
    own = _OwnNuisance(dataset.images, dataset.factor_names, dataset.factor_sizes)
    assert not own.shard_rendering and not ColorSprites(own).shard_rendering  # nor a variant of it
    g = torch.Generator().manual_seed(5)
    whole = own.sample_batch(8, g)
    parts, _ = _shards(lambda gen: own.sample_batch(8, gen), 2, 5)
    assert all(torch.equal(p, whole) for p in parts)  # the whole batch: the trainer slices it


def test_grid_subclass_without_transform_keeps_shard_rendering():
    class Plain(GridDataset):
        pass

    class Drawing(GridDataset):
        deterministic_observations = False

        def transform(self, batch, generator):
            return batch

    assert Plain.shard_rendering and not Drawing.shard_rendering
