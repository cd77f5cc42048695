"""Pictures checked pixel by pixel against values computed here: which latent each row and panel
moves and over which values, where the row labels sit and what they say, which image a traversal
starts from, the active latents of the animation, and the model's mode after a swap grid.

:class:`BlockVAE` (tests/visualize/test_helpers.py) decodes ``z_j`` into block ``j`` as ``sigmoid(z_j)``."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.visualize import latent_traversals, traversal_animation, traversal_grid
from disentangle.visualize.grids import LABEL_HEIGHT, LABEL_WIDTH, PADDING, add_row_labels
from disentangle.visualize.latents import active_latents
from disentangle.visualize.traversals import codebook_values, save_traversals

from .test_helpers import BLOCK, BlockFactors, BlockVAE, block_image

SIG = lambda v: 1.0 / (1.0 + np.exp(-np.asarray(v, dtype=float)))  # noqa: E731
H, W = BLOCK, 3 * BLOCK


def levels(grid: np.ndarray, top: int, left: int) -> np.ndarray:
    """The three block levels of the (H, W) tile whose top-left pixel is (top, left), in [0, 1]."""
    tile = grid[top : top + H, left : left + W, 0].astype(float) / 255
    blocks = tile.reshape(H, 3, BLOCK)
    assert (blocks.max(axis=(0, 2)) - blocks.min(axis=(0, 2)) <= 1.5 / 255).all()  # each block constant
    return blocks.mean(axis=(0, 2))


def grid_tile(grid: np.ndarray, row: int, col: int) -> np.ndarray:
    return levels(grid, PADDING + row * (H + PADDING), LABEL_WIDTH + PADDING + col * (W + PADDING))


@pytest.fixture
def model() -> BlockVAE:
    return BlockVAE([-1.0, 0.0, -3.0])


def test_a_traversal_starts_from_the_first_image_given(model):
    first, second = block_image([0.3, 0.6, 0.8]), block_image([0.9, 0.1, 0.4])
    decoded = latent_traversals(model, torch.stack([first, second]), [1], torch.tensor([-1.0, 1.0]))
    got = decoded.reshape(2, H, 3, BLOCK)[:, 0, :, 0].numpy()
    np.testing.assert_allclose(got, [[0.3, SIG(-1.0), 0.8], [0.3, SIG(1.0), 0.8]], atol=1e-5)


def test_the_grid_rows_follow_the_dims_given_in_their_order(model):
    x = block_image([0.3, 0.6, 0.8])[None]
    grid = traversal_grid(model, x, kl=[3.0, 2.0, 1.0], num_values=2, limit=1.0, dims=[2, 0])
    assert grid.shape[0] == 2 * (H + PADDING) + PADDING  # two rows
    for row, d in enumerate([2, 0]):
        for k, v in enumerate([-1.0, 1.0]):
            expected = np.array([0.3, 0.6, 0.8])
            expected[d] = SIG(v)
            np.testing.assert_allclose(grid_tile(grid, row, 1 + k), expected, atol=1 / 255)


def test_each_row_is_labelled_with_its_own_latent_and_score(model):
    """The label column is exactly the one add_row_labels draws for ``z<d> KL=<kl[d]>``, row by row."""
    x = block_image([0.3, 0.6, 0.8])[None]
    kl = [0.25, 3.5, 1.75]  # rows z1, z2, z0
    grid = traversal_grid(model, x, kl=kl, num_values=2)
    expected = add_row_labels(grid[:, LABEL_WIDTH:], ["z1 KL=3.50", "z2 KL=1.75", "z0 KL=0.25"], row_height=H)
    assert np.array_equal(grid, expected)


def test_row_labels_are_centred_on_their_rows():
    rows, height = 6, 40
    grid = np.full((PADDING + rows * (height + PADDING), 50, 3), 128, dtype=np.uint8)
    out = add_row_labels(grid, ["Hg"] * rows, row_height=height)
    dark = np.nonzero((out[:, :LABEL_WIDTH, 0] < 128).any(axis=1))[0]
    for row in range(rows):
        top = PADDING + row * (height + PADDING)
        ink = dark[(dark >= top) & (dark < top + height)]
        assert len(ink) > 3, row  # the label is drawn inside its row
        assert abs((ink.min() + ink.max()) / 2 - (top + height / 2)) <= 1.5, row  # and centred on it
    assert len(dark) == sum(((dark >= PADDING + r * (height + PADDING)) & (dark < PADDING + r * (height + PADDING) + height)).sum()
                            for r in range(rows))  # no ink between rows


def test_the_traversal_values_run_from_minus_to_plus_the_limit(model):
    x = block_image([0.3, 0.6, 0.8])[None]
    grid = traversal_grid(model, x, kl=[0.0, 0.0, 1.0], num_values=5, limit=3.0, dims=[2])
    for k, v in enumerate(np.linspace(-3.0, 3.0, 5)):
        np.testing.assert_allclose(grid_tile(grid, 0, 1 + k), [0.3, 0.6, SIG(v)], atol=1 / 255)
    np.testing.assert_allclose(grid_tile(grid, 0, 0), [0.3, 0.6, 0.8], atol=1 / 255)  # the input first


def test_save_traversals_traverses_the_limit_it_is_given(model, tmp_path):
    x = block_image([0.3, 0.6, 0.8])[None]
    path = save_traversals(model, x, [0.0, 0.0, 1.0], tmp_path / "t.png", num_values=2, limit=0.5)
    with Image.open(path) as png:
        grid = np.asarray(png.convert("RGB"))
    assert np.array_equal(grid, traversal_grid(model, x, [0.0, 0.0, 1.0], num_values=2, limit=0.5))
    np.testing.assert_allclose(grid_tile(grid, 0, 1)[2], SIG(-0.5), atol=1 / 255)
    np.testing.assert_allclose(grid_tile(grid, 0, 2)[2], SIG(0.5), atol=1 / 255)


def test_a_latent_at_exactly_the_threshold_is_active_and_the_animation_uses_the_threshold_given(model):
    assert active_latents([0.1, 0.05, 0.3]) == [2, 0]  # KL >= 0.1
    assert active_latents([0.5, 0.2, 0.3], min_kl=0.3) == [0, 2]
    x = block_image([0.5, 0.5, 0.5])
    frames = traversal_animation(model, x, [0.5, 0.2, 0.3], num_frames=2, limit=1.0, min_kl=0.3)
    # two panels (z0, z2), two per row: one row of panels under the title
    assert frames[0].shape[:2] == (LABEL_HEIGHT + (LABEL_HEIGHT + H + PADDING) + PADDING, 2 * (W + PADDING) + PADDING)
    for panel, d in enumerate([0, 2]):
        top, left = LABEL_HEIGHT + PADDING + LABEL_HEIGHT, PADDING + panel * (W + PADDING)
        expected = np.array([0.5, 0.5, 0.5])
        expected[d] = SIG(-1.0)  # frame 0 is -limit
        np.testing.assert_allclose(levels(frames[0], top, left), expected, atol=2 / 255)


def test_a_quantised_animation_steps_from_the_lowest_value_to_the_highest():
    model = BlockVAE([0.0, 0.0, 0.0])
    model.objective_state = {"codebook": torch.tensor([[1.0, -2.0, 0.0], [0.5, -1.0, 2.0], [3.0, -3.0, 0.25]])}
    x = block_image(list(SIG([0.0, 0.5, 0.25])))
    frames = traversal_animation(model, x, [1.0, 1.0, 1.0], num_frames=4)  # value indices 0, 1, 2, 1
    book = codebook_values(model, [0, 1, 2]).numpy()  # sorted rows
    start = np.array([0.0, 0.5, 0.25])
    top = LABEL_HEIGHT + PADDING + LABEL_HEIGHT
    for k, index in enumerate([0, 1, 2, 1]):
        for panel in range(3):  # ceil(sqrt(3)) = 2 per row
            r, c = divmod(panel, 2)
            expected = start.copy()
            expected[panel] = book[panel, index]
            got = levels(frames[k], top + r * (LABEL_HEIGHT + H + PADDING), PADDING + c * (W + PADDING))
            np.testing.assert_allclose(got, SIG(expected), atol=2 / 255)


def test_a_swap_grid_puts_a_training_model_back_in_training_mode():
    from disentangle.visualize.swaps import swap_grid

    data, model = BlockFactors(), BlockVAE([0.0, 0.0, 0.0])
    model.train()
    swap_grid(model, data, class_factors=["b"], class_dim=2, rows=2, columns=2, seed=0)
    assert model.training
    model.eval()
    swap_grid(model, data, class_factors=["b"], class_dim=2, rows=2, columns=2, seed=0)
    assert not model.training


def test_the_default_class_code_is_half_the_latents_rounded_down():
    from disentangle.visualize.swaps import swap_grid

    data, model = BlockFactors(), BlockVAE([0.0, 0.0, 0.0])  # 3 latents: class code 1, the last
    assert np.array_equal(swap_grid(model, data, class_factors=["b"], rows=2, columns=3, seed=1),
                          swap_grid(model, data, class_factors=["b"], class_dim=1, rows=2, columns=3, seed=1))
    assert not np.array_equal(swap_grid(model, data, class_factors=["b"], rows=2, columns=3, seed=1),
                              swap_grid(model, data, class_factors=["b"], class_dim=2, rows=2, columns=3, seed=1))
