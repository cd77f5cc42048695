"""Color-, Noisy- and Scream-dSprites: exact definitions, per-batch nuisance from the torch
generator, reproducibility, registry entries on the dSprites file and on the renderer."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.data import DATASETS, GroundTruthDataset, IndexedImageDataset
from disentangle.data.variants import (
    BACKGROUND_BOX,
    ColorSprites,
    NoisySprites,
    ScreamSprites,
    load_background,
)
from disentangle.errors import CorruptDataFileError, DataFileNotFoundError

SIZES = (2, 3, 4)


@pytest.fixture
def sprites():
    """A tiny binary one-channel grid dataset with a different square per image (64×64)."""
    n = int(np.prod(SIZES))
    images = torch.zeros(n, 1, 64, 64, dtype=torch.uint8)
    for i in range(n):
        images[i, 0, 4 + i : 20 + i, 8 + i : 30 + i] = 1
    return IndexedImageDataset(images, ("a", "b", "c"), SIZES, scale=1.0)


@pytest.fixture
def background(tmp_path):
    y, x = np.mgrid[0:300, 0:200]
    rgb = np.stack([x % 256, y % 256, (x + 2 * y) % 256], axis=-1).astype(np.uint8)
    path = tmp_path / "bg.png"
    Image.fromarray(rgb).save(path)
    return path


def _batch(ds, n=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(ds), (n,), generator=g)
    return idx, ds.observe(idx, g)


def test_color(sprites):
    ds = ColorSprites(sprites)
    assert isinstance(ds, GroundTruthDataset)
    assert ds.factor_names == sprites.factor_names and ds.factor_sizes == SIZES and len(ds) == 24
    assert ds.image_shape == (3, 64, 64)
    idx, x = _batch(ds)
    mask = sprites.images[idx].bool().expand(-1, 3, -1, -1)
    assert x.shape == (32, 3, 64, 64) and x.dtype == torch.float32
    assert (x[~mask] == 0).all()
    colors = x.amax(dim=(2, 3))  # the sprite colour of each image
    assert ((colors >= 0.5) & (colors <= 1)).all() and colors.std(dim=0).min() > 0.05
    assert torch.equal(x, colors[:, :, None, None] * mask)  # one colour per image


def test_noisy(sprites):
    ds = NoisySprites(sprites)
    idx, x = _batch(ds, 64)
    mask = sprites.images[idx].bool().expand(-1, 3, -1, -1)
    assert (x[mask] == 1).all()
    bg = x[~mask]
    assert bg.min() >= 0 and bg.max() < 1 and abs(bg.mean().item() - 0.5) < 0.01
    # independent per pixel and channel
    assert (x[:, 0] != x[:, 1])[~mask[:, 0]].float().mean() > 0.99


def test_scream_matches_reference_definition(sprites, background):
    ds = ScreamSprites(sprites, str(background))
    img = load_background(background).astype(np.float64) / 255
    assert img.shape[1] <= BACKGROUND_BOX[0] and img.shape[0] <= BACKGROUND_BOX[1]
    idx, x = _batch(ds, 16, seed=3)
    # replay the draws of the same generator: index, then top, left, shift
    g = torch.Generator().manual_seed(3)
    torch.randint(len(ds), (16,), generator=g)
    h, w = img.shape[:2]
    top = torch.randint(0, h - 64 + 1, (16,), generator=g).tolist()
    left = torch.randint(0, w - 64 + 1, (16,), generator=g).tolist()
    shift = torch.rand((16, 3, 1, 1), generator=g).view(16, 3).double().numpy()
    for i in range(16):  # disentanglement_lib's per-sample loop, as the reference
        patch = (img[top[i] : top[i] + 64, left[i] : left[i] + 64] + shift[i]) / 2
        mask = sprites.images[idx[i], 0].numpy() == 1
        patch[mask] = 1 - patch[mask]
        np.testing.assert_allclose(x[i].permute(1, 2, 0).double().numpy(), patch, atol=1e-5)


def test_nuisance_is_replayed_from_generator_state(sprites, background):
    for ds in (ColorSprites(sprites), NoisySprites(sprites), ScreamSprites(sprites, str(background))):
        g = torch.Generator().manual_seed(7)
        state = g.get_state()
        a = ds.sample_batch(8, g)
        b = ds.sample_batch(8, g)
        g.set_state(state)
        assert torch.equal(ds.sample_batch(8, g), a) and not torch.equal(a, b)
        rng = np.random.default_rng(0)
        f = ds.sample_factors(5, rng)
        obs = ds.sample_observations_from_factors(f, np.random.default_rng(1))
        assert torch.equal(obs, ds.sample_observations_from_factors(f, np.random.default_rng(1)))
        assert obs.shape == (5, 3, 64, 64) and 0 <= obs.min() and obs.max() <= 1


def test_variants_need_one_channel(sprites):
    rgb = IndexedImageDataset(torch.zeros(24, 3, 8, 8, dtype=torch.uint8), ("a", "b", "c"), SIZES)
    with pytest.raises(ValueError, match="one-channel"):
        ColorSprites(rgb)


def test_scream_background_errors(sprites, tmp_path):
    small = tmp_path / "small.png"
    Image.fromarray(np.zeros((40, 500, 3), np.uint8)).save(small)
    with pytest.raises(CorruptDataFileError, match="at least 64"):
        ScreamSprites(sprites, str(small))
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"no image")
    with pytest.raises(CorruptDataFileError, match="junk.jpg"):
        ScreamSprites(sprites, str(junk))
    with pytest.raises(DataFileNotFoundError, match="data.background"):
        ScreamSprites(sprites, cache_dir=str(tmp_path / "empty"), download=False)


def test_dsprites_variants_from_registry(tmp_path, background):
    from .test_loaders import DSPRITES_TINY, write_dsprites

    path = write_dsprites(tmp_path / "d.npz", size=64)
    for name in ("color_dsprites", "noisy_dsprites", "scream_dsprites"):
        extra = {"background": str(background)} if name.startswith("scream") else {}
        ds = DATASETS.build(name, path=str(path), strict=False, device="cpu", **extra)
        assert ds.factor_sizes == DSPRITES_TINY and ds.image_shape == (3, 64, 64)
        assert ds.sample_batch(4, torch.Generator().manual_seed(0)).shape == (4, 3, 64, 64)


@pytest.mark.skipif("sprites" not in DATASETS, reason="the procedural sprites renderer is not there yet")
def test_sprites_variants_from_registry(background):
    base = DATASETS.build("sprites", device="cpu")
    for name in ("color_sprites", "noisy_sprites", "scream_sprites"):
        extra = {"background": str(background)} if name.startswith("scream") else {}
        ds = DATASETS.build(name, device="cpu", **extra)
        assert ds.factor_names == base.factor_names and ds.factor_sizes == base.factor_sizes
        x = ds.sample_batch(8, torch.Generator().manual_seed(0))
        assert x.shape == (8, 3, *base.image_shape[1:]) and 0 <= x.min() and x.max() <= 1
    params = DATASETS.parameters("scream_sprites")
    assert "background" in params and set(DATASETS.parameters("sprites")) <= set(params)


def test_sprites_variant_builders_take_the_renderer_parameters(monkeypatch, background):
    """The <variant>_sprites entries expose the ``sprites`` builder's parameters (checked here
    against a stand-in renderer, so this runs whether or not sprites.py exists)."""
    from disentangle.config import load_config
    from disentangle.errors import ConfigError

    def fake_sprites(size: int = 64, device: str = "cpu") -> IndexedImageDataset:
        images = torch.zeros(24, 1, size, size, dtype=torch.uint8)
        images[:, :, 10:30, 10:30] = 1
        return IndexedImageDataset(images, ("a", "b", "c"), SIZES, scale=1.0).to(device)

    monkeypatch.setitem(DATASETS._entries, "sprites", fake_sprites)
    params = DATASETS.parameters("scream_sprites")
    assert {"size", "device", "background", "cache_dir", "download"} <= set(params)
    assert set(DATASETS.parameters("color_sprites")) == {"size", "device"}
    cfg = load_config(None, ["data.name=scream_sprites", f"data.background={background}", "data.size=64"])
    assert cfg.data.params["size"] == 64 and cfg.data.params["background"] == str(background)
    with pytest.raises(ConfigError, match="data.size"):
        load_config(None, ["data.name=noisy_sprites", "data.size=big"])
    with pytest.raises(ConfigError, match="Unknown key 'data.sizes'"):
        load_config(None, ["data.name=color_sprites", "data.sizes=3"])
    ds = DATASETS.build("scream_sprites", background=str(background), size=64, device="cpu")
    assert isinstance(ds, ScreamSprites) and ds.sample_batch(2, torch.Generator()).shape == (2, 3, 64, 64)
    with pytest.raises(TypeError, match="unknown parameter"):
        DATASETS.build("color_sprites", colour="red")


def test_scream_torch_crop_path_matches_numpy_path(sprites, background):
    """The crop gather used on GPUs (torch unfold) gives the same images as the CPU one."""
    ds = ScreamSprites(sprites, str(background))
    a = ds.sample_batch(32, torch.Generator().manual_seed(11))
    ds.numpy_crops_on_cpu = False
    b = ds.sample_batch(32, torch.Generator().manual_seed(11))
    assert torch.equal(a, b)
