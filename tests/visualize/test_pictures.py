"""Pictures of a model: their contents, checked on a stand-in VAE whose decoder output is known.

:class:`BlockVAE` decodes latent ``z_j`` into block ``j`` of the image as ``sigmoid(z_j)``, so
every tile of a traversal, reconstruction, sample or GIF frame has a value computed here
independently (see tests/visualize/test_helpers.py).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image, ImageSequence

import disentangle
from disentangle.visualize import (
    image_grid,
    kl_per_dim,
    latent_order,
    latent_responses,
    latent_traversals,
    reconstruction_grid,
    sample_grid,
    save_gif,
    save_traversals,
    sweep_values,
    traversal_animation,
    traversal_grid,
    traversal_values,
)
from disentangle.visualize.grids import LABEL_HEIGHT, LABEL_WIDTH, PADDING

from .test_helpers import BLOCK, BlockFactors, BlockVAE, block_image

LOGVAR = [-1.0, 0.0, -3.0]  # with the images below, KL is 2.71, 0.52, 0.36 for z2, z1, z0
SIG = lambda v: 1.0 / (1.0 + np.exp(-np.asarray(v, dtype=float)))  # noqa: E731


def expected_kl(mu: np.ndarray, logvar: list[float]) -> np.ndarray:
    lv = np.asarray(logvar)
    return (0.5 * (mu**2 + np.exp(lv) - lv - 1.0)).mean(0)


def tile(grid: np.ndarray, row: int, col: int, h: int, w: int, left: int = 0) -> np.ndarray:
    """Tile (row, col) of an image_grid laid out with PADDING, as floats in [0, 1] (first channel)."""
    top = PADDING + row * (h + PADDING)
    x0 = left + PADDING + col * (w + PADDING)
    return grid[top : top + h, x0 : x0 + w, 0].astype(float) / 255.0


def block_levels(t: np.ndarray, num_blocks: int) -> np.ndarray:
    """The constant level of each block of a tile (asserting it is constant)."""
    levels = []
    for j in range(num_blocks):
        block = t[:, j * BLOCK : (j + 1) * BLOCK]
        assert block.max() - block.min() <= 1.5 / 255
        levels.append(block.mean())
    return np.array(levels)


@pytest.fixture
def model() -> BlockVAE:
    return BlockVAE(LOGVAR)


@pytest.fixture
def images() -> torch.Tensor:
    return torch.stack([block_image([0.3, 0.6, 0.8]), block_image([0.5, 0.2, 0.9])])


def test_kl_per_dim_is_the_analytic_gaussian_kl_and_orders_latents(model, images):
    mu = np.log(images.numpy()[:, 0, 0, ::BLOCK] / (1 - images.numpy()[:, 0, 0, ::BLOCK]))
    kl = kl_per_dim(model, images)
    np.testing.assert_allclose(kl, expected_kl(mu, LOGVAR), rtol=1e-5)
    assert latent_order(kl) == list(np.argsort(-expected_kl(mu, LOGVAR)))
    assert latent_order([1.0, 3.0, 3.0, 0.0]) == [1, 2, 0, 3]  # ties keep index order


def test_image_grid_places_every_tile_and_keeps_colour():
    images = torch.rand(5, 3, 4, 6)
    grid = image_grid(images, nrow=2)
    assert grid.shape == (3 * (4 + PADDING) + PADDING, 2 * (6 + PADDING) + PADDING, 3)
    for i in range(5):
        r, c = divmod(i, 2)
        top, left = PADDING + r * (4 + PADDING), PADDING + c * (6 + PADDING)
        expected = (images[i].permute(1, 2, 0).numpy() * 255).round()
        np.testing.assert_array_equal(grid[top : top + 4, left : left + 6], expected)
    assert (grid[0] == 128).all()  # padding is mid grey


def test_latent_traversal_changes_only_the_traversed_latent(model, images):
    values = torch.tensor([-2.0, 0.0, 1.0])
    decoded = latent_traversals(model, images[:1], [2, 0], values)
    mu0 = torch.logit(torch.tensor([0.3, 0.6, 0.8]))
    for row, d in enumerate([2, 0]):
        for col, v in enumerate(values):
            z = mu0.clone()
            z[d] = v
            np.testing.assert_allclose(decoded[row * 3 + col].numpy(), model.decode_mean(z[None])[0].numpy(), atol=1e-6)


def test_traversal_grid_layout_and_every_tile(model, images):
    num_values, limit = 4, 1.5
    grid = traversal_grid(model, images, num_values=num_values, limit=limit)
    h, w = BLOCK, 3 * BLOCK
    cols = len(images) * (1 + num_values)
    assert grid.shape == (3 * (h + PADDING) + PADDING, LABEL_WIDTH + cols * (w + PADDING) + PADDING, 3)
    # the label column has text (dark pixels) beside every row
    for row in range(3):
        top = PADDING + row * (h + PADDING)
        assert grid[top : top + h, :LABEL_WIDTH].min() < 100

    kl = kl_per_dim(model, images)
    order = latent_order(kl)
    assert order == [2, 1, 0]
    values = traversal_values(num_values, limit).numpy()
    np.testing.assert_allclose(values, np.linspace(-1.5, 1.5, 4))
    for b, x in enumerate(images):
        base = x[0, 0, ::BLOCK].numpy()
        for row, d in enumerate(order):
            first = b * (1 + num_values)
            np.testing.assert_allclose(block_levels(tile(grid, row, first, h, w, LABEL_WIDTH), 3), base, atol=1 / 255)
            for k, v in enumerate(values):
                levels = block_levels(tile(grid, row, first + 1 + k, h, w, LABEL_WIDTH), 3)
                expected = base.copy()
                expected[d] = SIG(v)  # only block d moves, to sigmoid(value)
                np.testing.assert_allclose(levels, expected, atol=1 / 255)


def test_traversal_grid_uses_the_given_kl_for_row_order(model, images):
    grid = traversal_grid(model, images[:1], kl=[0.0, 5.0, 1.0], num_values=2)
    # row 0 is z1 (largest given KL): its last column has block 1 at sigmoid(+2)
    levels = block_levels(tile(grid, 0, 2, BLOCK, 3 * BLOCK, LABEL_WIDTH), 3)
    np.testing.assert_allclose(levels, [0.3, SIG(2.0), 0.8], atol=1 / 255)


def test_save_traversals_keeps_the_old_signature(model, images, tmp_path):
    path = tmp_path / "t.png"
    save_traversals(model, images[:1], [1.0, 2.0, 3.0], path, num_values=5)
    with Image.open(path) as im:
        assert im.size == (LABEL_WIDTH + 6 * (3 * BLOCK + PADDING) + PADDING, 3 * (BLOCK + PADDING) + PADDING)


def test_sweep_is_a_looping_triangle_wave():
    v = sweep_values(8, 2.0)
    np.testing.assert_allclose(v, [-2, -1, 0, 1, 2, 1, 0, -1])
    assert sweep_values(41, 3.0).max() < 3.0 and sweep_values(41, 3.0)[0] == -3.0


def test_gif_frames_sweep_every_active_latent_and_read_back(model, images, tmp_path):
    num_frames, limit = 10, 3.0
    kl = np.array([0.5, 0.01, 2.0])  # z1 inactive: panels z2, z0
    frames = traversal_animation(model, images[:1], kl, num_frames=num_frames, limit=limit)
    h, w = BLOCK, 3 * BLOCK
    ncol = 2  # ceil(sqrt(2))
    expected_size = (ncol * (w + PADDING) + PADDING, LABEL_HEIGHT + (LABEL_HEIGHT + h + PADDING) + PADDING)
    assert len(frames) == num_frames and all(f.shape == (expected_size[1], expected_size[0], 3) for f in frames)

    path = save_gif(frames, tmp_path / "t.gif", fps=10)
    with Image.open(path) as gif:
        assert gif.n_frames == num_frames and gif.size == expected_size
        assert gif.info["duration"] == 100 and gif.info["loop"] == 0
        read = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)]
    sweep = sweep_values(num_frames, limit)
    base = images[0, 0, 0, ::BLOCK].numpy()
    for k, frame in enumerate(read):
        for panel, d in enumerate([2, 0]):
            left = PADDING + panel * (w + PADDING)
            top = LABEL_HEIGHT + PADDING + LABEL_HEIGHT
            t = frame[top : top + h, left : left + w, 0].astype(float) / 255
            expected = base.copy()
            expected[d] = SIG(sweep[k])
            np.testing.assert_allclose(block_levels(t, 3), expected, atol=2 / 255)


def test_gif_of_a_model_without_active_latents_shows_them_all(model, images):
    frames = traversal_animation(model, images[:1], [0.0, 0.0, 0.0], num_frames=4)
    w = 3 * BLOCK
    assert frames[0].shape[1] == 2 * (w + PADDING) + PADDING  # 3 panels, 2 per row
    assert frames[0].shape[0] == LABEL_HEIGHT + 2 * (LABEL_HEIGHT + BLOCK + PADDING) + PADDING


def test_colour_images_render_in_colour_and_grey_as_grey():
    x = torch.zeros(1, 3, 4, 4)
    x[0, 0] = 1.0  # pure red
    np.testing.assert_array_equal(image_grid(x, nrow=1)[PADDING, PADDING], [255, 0, 0])
    np.testing.assert_array_equal(image_grid(torch.full((1, 1, 4, 4), 0.2), nrow=1)[PADDING, PADDING], [51, 51, 51])


def test_reconstructions_sit_under_their_inputs(model):
    rng = torch.Generator().manual_seed(0)
    x = torch.rand(5, 1, BLOCK, 3 * BLOCK, generator=rng)
    grid = reconstruction_grid(model, x, nrow=4)
    h, w = BLOCK, 3 * BLOCK
    assert grid.shape == (4 * (h + PADDING) + PADDING, 4 * (w + PADDING) + PADDING, 3)
    for i in range(5):
        r, c = divmod(i, 4)
        np.testing.assert_allclose(tile(grid, 2 * r, c, h, w), x[i, 0].numpy(), atol=0.5 / 255)
        # the stand-in reconstructs each block as its mean
        means = x[i, 0].reshape(h, 3, BLOCK).mean(dim=(0, 2)).numpy()
        np.testing.assert_allclose(block_levels(tile(grid, 2 * r + 1, c, h, w), 3), means, atol=1 / 255)
    assert (tile(grid, 3, 1, h, w) == 128 / 255).all()  # no image after the fifth


def test_samples_are_decoded_prior_draws(model):
    grid = sample_grid(model, num_samples=6, nrow=3, generator=torch.Generator().manual_seed(7))
    z = torch.randn(6, 3, generator=torch.Generator().manual_seed(7)).numpy()
    h, w = BLOCK, 3 * BLOCK
    assert grid.shape == (2 * (h + PADDING) + PADDING, 3 * (w + PADDING) + PADDING, 3)
    for i in range(6):
        np.testing.assert_allclose(block_levels(tile(grid, i // 3, i % 3, h, w), 3), SIG(z[i]), atol=1 / 255)


def test_latent_responses_recover_the_planted_factor_codes():
    data, model = BlockFactors(), BlockVAE([0.0, 0.0, 0.0])
    found = latent_responses(data, model, num_per_value=16, seed=3)
    assert found.factor_names == ("a", "b")
    np.testing.assert_array_equal(found.factor_values[0], data.factor_values[0])
    # z0 follows factor a exactly (std 0), z1 follows b; z2 is 0 everywhere
    np.testing.assert_allclose(found.mean[0][:, 0], data.a_values, atol=1e-4)
    np.testing.assert_allclose(found.std[0][:, 0], 0.0, atol=1e-4)
    np.testing.assert_allclose(found.mean[1][:, 1], data.b_values, atol=1e-4)
    np.testing.assert_allclose(found.mean[0][:, 2], 0.0, atol=1e-4)
    np.testing.assert_allclose(found.mean[1][:, 2], 0.0, atol=1e-4)
    # against the other factor, z0 averages over a's values: spread, not a function of b
    assert (found.std[1][:, 0] > 1.0).all()
    again = latent_responses(data, model, num_per_value=16, seed=3)
    np.testing.assert_array_equal(again.mean[1], found.mean[1])


def test_latent_responses_fall_back_to_class_indices():
    data = BlockFactors()
    data.factor_values = [np.array(["x", "y", "z"]), None]
    found = latent_responses(data, BlockVAE([0.0, 0.0, 0.0]), num_per_value=2)
    np.testing.assert_array_equal(found.factor_values[0], [0, 1, 2])
    np.testing.assert_array_equal(found.factor_values[1], [0, 1, 2, 3])


@pytest.mark.parametrize(
    "call",
    [
        lambda m, x: traversal_grid(m, x, num_values=0),
        lambda m, x: traversal_grid(m, x, limit=-1.0),
        lambda m, x: traversal_animation(m, x[:1], num_frames=1),
    ],
)
def test_bad_settings_are_config_errors(model, images, call):
    with pytest.raises(disentangle.ConfigError):
        call(model, images)

