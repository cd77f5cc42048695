"""Pair sampling (disentangle.data.pairs): the statistics of what is drawn (disentanglement_lib's
simple_dynamics), observations of every kind of dataset, and bit-exact determinism."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle import ConfigError
from disentangle.data import DATASETS, IndexedImageDataset
from disentangle.data.pairs import PairBatch, sample_pair_factors, sample_pairs
from disentangle.data.variants import ColorSprites, NoisySprites, ScreamSprites

SIZES = (3, 6, 40, 32, 32)
N = 20_000


def _pairs(k, seed=0, sizes=SIZES, n=N):
    return sample_pair_factors(sizes, n, torch.Generator().manual_seed(seed), k=k)


def _within(count, n, p, sigmas=5.0):
    """``count`` successes of ``n`` is within ``sigmas`` binomial standard deviations of ``n·p``."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1


@pytest.mark.parametrize("k", [1, 2, 4, "random"])
def test_unchanged_factors_are_equal_and_the_label_is_resampled(k):
    p = _pairs(k)
    assert p.factors1.dtype == p.factors2.dtype == p.changed.dtype == torch.int64
    assert torch.equal(p.factors1[~p.resampled], p.factors2[~p.resampled])
    assert torch.equal(p.resampled.sum(1), p.num_resampled)
    assert p.resampled.gather(1, p.changed[:, None]).all()
    sizes = torch.tensor(SIZES)
    for f in (p.factors1, p.factors2):
        assert (f >= 0).all() and (f < sizes).all()


def test_x1_classes_are_uniform_over_the_grid():
    p = _pairs(1)
    for j, size in enumerate(SIZES):
        counts = torch.bincount(p.factors1[:, j], minlength=size)
        assert all(_within(int(c), N, 1 / size) for c in counts), j


@pytest.mark.parametrize("k", [1, 3])
def test_fixed_k_resamples_one_or_k_factors_half_and_half(k):
    m = _pairs(k).num_resampled
    if k == 1:
        assert (m == 1).all()
    else:
        assert set(m.unique().tolist()) == {1, k}
        assert _within(int((m == 1).sum()), N, 0.5)


def test_random_k_distribution():
    # k_observed ~ U{1..K-1}, then m = 1 or k_observed: P(m=1) = 1/2 + 1/(2(K-1)), P(m=j) = 1/(2(K-1))
    m = _pairs("random").num_resampled
    counts = torch.bincount(m, minlength=len(SIZES))
    assert counts[0] == 0 and counts.sum() == N
    assert _within(int(counts[1]), N, 0.5 + 1 / 8)
    for j in (2, 3, 4):
        assert _within(int(counts[j]), N, 1 / 8), j


def test_resampled_factors_are_uniform_and_may_keep_their_value():
    p = _pairs(2)
    for j, size in enumerate(SIZES):
        chosen = p.resampled[:, j]
        # each factor is chosen with probability E[m]/K = 1.5/5 (m = 1 or 2, without replacement)
        assert _within(int(chosen.sum()), N, 1.5 / 5), j
        kept = (p.factors2[chosen, j] == p.factors1[chosen, j]).sum()
        assert _within(int(kept), int(chosen.sum()), 1 / size), j
        new = torch.bincount(p.factors2[chosen, j], minlength=size)
        assert all(_within(int(c), int(chosen.sum()), 1 / size) for c in new), j


def test_label_is_uniform_over_the_factors_for_single_factor_pairs():
    p = _pairs(1)
    counts = torch.bincount(p.changed, minlength=len(SIZES))
    assert all(_within(int(c), N, 1 / len(SIZES)) for c in counts)
    # with k = 1, the label is the only factor that may differ
    differs = p.factors1 != p.factors2
    assert torch.equal(differs.sum(1) > 0, differs.gather(1, p.changed[:, None]).squeeze(1))


def test_bit_exact_from_the_generator_and_generator_state_advances_alike():
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a, b = sample_pair_factors(SIZES, 512, g1, "random"), sample_pair_factors(SIZES, 512, g2, "random")
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    assert torch.equal(g1.get_state(), g2.get_state())
    c = sample_pair_factors(SIZES, 512, torch.Generator().manual_seed(8), "random")
    assert not torch.equal(a.factors1, c.factors1)
    # the next draw continues the stream: not a repeat of the first
    assert not torch.equal(sample_pair_factors(SIZES, 512, g1, "random").factors1, a.factors1)


def test_bad_k_is_a_config_error():
    with pytest.raises(ConfigError, match="only 5 factors"):
        _pairs(6)
    with pytest.raises(ConfigError, match="integer"):
        _pairs(0)
    with pytest.raises(ConfigError, match="random"):
        _pairs("rnd")
    with pytest.raises(ConfigError, match="at least 2 factors"):
        _pairs("random", sizes=(4,))


# ---------------------------------------------------------------------------- observations
@pytest.fixture
def grid_images():
    """A 2×3×4 grid of distinct 16×16 binary images: image i has i + 1 pixels on."""
    n = 24
    images = torch.zeros(n, 1, 16, 16, dtype=torch.uint8)
    for i in range(n):
        images[i, 0].view(-1)[: i + 1] = 1
    return IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0)


def _decode_index(x):
    """The grid index of a mask image built by ``grid_images`` (pixels on − 1)."""
    return (x > 0).flatten(1).sum(1) - 1


def _grid_index(factors, sizes):
    strides = torch.tensor([int(np.prod(sizes[i + 1 :])) for i in range(len(sizes))])
    return (factors * strides).sum(1)


def test_observations_show_the_pair_factors(grid_images):
    g = torch.Generator().manual_seed(3)
    state = g.get_state()
    batch = sample_pairs(grid_images, 256, g, k=2)
    assert isinstance(batch, PairBatch)
    assert batch.x1.shape == batch.x2.shape == (256, 1, 16, 16) and batch.x1.dtype == torch.float32
    g.set_state(state)
    factors = sample_pair_factors(grid_images.factor_sizes, 256, g, k=2)
    assert torch.equal(batch.changed, factors.changed)
    assert torch.equal(_decode_index(batch.x1), _grid_index(factors.factors1, (2, 3, 4)))
    assert torch.equal(_decode_index(batch.x2), _grid_index(factors.factors2, (2, 3, 4)))


@pytest.fixture
def background(tmp_path):
    y, x = np.mgrid[0:300, 0:200]
    rgb = np.stack([x % 256, y % 256, (x + 2 * y) % 256], axis=-1).astype(np.uint8)
    path = tmp_path / "bg.png"
    Image.fromarray(rgb).save(path)
    return path


@pytest.mark.parametrize("variant", ["color", "noisy", "scream"])
def test_variants_draw_their_nuisance_independently_per_element(grid_images, background, variant):
    ds = {"color": ColorSprites, "noisy": NoisySprites, "scream": lambda b: ScreamSprites(b, str(background))}[variant](
        grid_images
    )
    g = torch.Generator().manual_seed(4)
    batch = sample_pairs(ds, 64, g, k=1)
    assert batch.x1.shape == (64, 3, 16, 16)
    # identical factor pairs (a resampled factor that kept its value) still differ in nuisance
    g2 = torch.Generator().manual_seed(4)
    f = sample_pair_factors(ds.factor_sizes, 64, g2, k=1)
    same = (f.factors1 == f.factors2).all(1)
    assert same.any()
    assert all(not torch.equal(batch.x1[i], batch.x2[i]) for i in torch.nonzero(same).flatten())
    if variant == "color":  # the mask is the grid image, the colour one per image
        mask1, mask2 = batch.x1.amax(1) > 0, batch.x2.amax(1) > 0
        assert torch.equal(mask1.flatten(1).sum(1) - 1, _grid_index(f.factors1, (2, 3, 4)))
        assert torch.equal(mask2.flatten(1).sum(1) - 1, _grid_index(f.factors2, (2, 3, 4)))


def test_procedural_sprites_pairs_match_rendered_factors():
    ds = DATASETS.build("sprites", image_size=32)
    g = torch.Generator().manual_seed(5)
    state = g.get_state()
    batch = sample_pairs(ds, 16, g, k="random")
    g.set_state(state)
    f = sample_pair_factors(ds.factor_sizes, 16, g, k="random")
    strides = torch.tensor([int(np.prod(ds.factor_sizes[i + 1 :])) for i in range(5)])
    assert torch.equal(batch.x1, ds.observe((f.factors1 * strides).sum(1), None))
    assert torch.equal(batch.x2, ds.observe((f.factors2 * strides).sum(1), None))


class HiddenInstanceDataset:
    """A ground-truth dataset (protocol only, no GridDataset) with a hidden nuisance drawn per
    observation, as SmallNORB's instance: pixel 0 holds the factor code, pixel 1 the instance."""

    factor_names = ("a", "b")
    factor_sizes = (3, 5)

    def sample_factors(self, n, rng):
        return np.column_stack([rng.integers(0, s, n) for s in self.factor_sizes])

    def sample_observations_from_factors(self, factors, rng):
        out = torch.zeros(len(factors), 1, 2, 2)
        out[:, 0, 0, 0] = torch.as_tensor(factors[:, 0] * 5 + factors[:, 1], dtype=torch.float32) / 15
        out[:, 0, 0, 1] = torch.as_tensor(rng.integers(0, 10, len(factors)), dtype=torch.float32) / 10
        return out


def test_datasets_without_grid_storage_go_through_the_ground_truth_interface():
    ds = HiddenInstanceDataset()
    g = torch.Generator().manual_seed(6)
    state = g.get_state()
    batch = sample_pairs(ds, 400, g, k=1)
    g.set_state(state)
    f = sample_pair_factors(ds.factor_sizes, 400, g, k=1)
    code = lambda f: (f[:, 0] * 5 + f[:, 1]).float() / 15  # noqa: E731
    torch.testing.assert_close(batch.x1[:, 0, 0, 0], code(f.factors1))
    torch.testing.assert_close(batch.x2[:, 0, 0, 0], code(f.factors2))
    # the hidden instance is drawn independently for x1 and x2
    assert (batch.x1[:, 0, 0, 1] != batch.x2[:, 0, 0, 1]).float().mean() > 0.8
    again = sample_pairs(ds, 400, torch.Generator().manual_seed(6), k=1)
    assert torch.equal(again.x1, batch.x1) and torch.equal(again.x2, batch.x2)


def test_smallnorb_pairs_redraw_the_hidden_instance(tmp_path):
    from .test_loaders import NORB_TINY, grid, norb_intensity, write_smallnorb

    ds = DATASETS.build("smallnorb", path=str(write_smallnorb(tmp_path / "norb")), strict=False)
    g = torch.Generator().manual_seed(9)
    state = g.get_state()
    batch = sample_pairs(ds, 200, g, k=1)
    g.set_state(state)
    f = sample_pair_factors(ds.factor_sizes, 200, g, k=1)
    rows = grid(NORB_TINY)
    lookup = {int(v): i for i, v in enumerate(norb_intensity(np.arange(len(rows))))}

    def full_rows(x):
        values = np.round(x[:, 0, 32, 32].numpy() * 255).astype(np.int64)
        return rows[[lookup[v] for v in values]]

    full1, full2 = full_rows(batch.x1), full_rows(batch.x2)
    assert np.array_equal(np.delete(full1, 1, axis=1), f.factors1.numpy())
    assert np.array_equal(np.delete(full2, 1, axis=1), f.factors2.numpy())
    assert (full1[:, 1] != full2[:, 1]).any() and (full1[:, 1] == full2[:, 1]).any()
