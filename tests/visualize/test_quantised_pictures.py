"""Pictures of a model with quantised latents (QLAE): traversals over each latent's own codebook
values from the quantised code, rows ordered by code entropy, reconstructions through the
codebook and samples drawn from it.

:class:`BlockVAE` decodes ``z_j`` into block ``j`` as ``sigmoid(z_j)``, so every decoded value
is known in closed form once the codebook is.
"""
from __future__ import annotations

import numpy as np
import torch

from disentangle.visualize.latents import code_entropy_per_dim, decoder_code, latent_scores
from disentangle.visualize.reconstructions import mean_reconstructions, prior_samples
from disentangle.visualize.traversals import codebook_values, latent_traversals, traversal_animation, traversal_grid

from .test_helpers import BLOCK, BlockFactors, BlockVAE, block_image

# rows deliberately unsorted: the pictures must sort each latent's values
BOOK = torch.tensor([[1.0, -2.0, 0.0, 2.0], [0.5, -1.0, -0.5, 1.0], [3.0, -3.0, 0.25, -0.25]])


def quantised_model() -> BlockVAE:
    model = BlockVAE([0.0, 0.0, 0.0])
    model.objective_state = {"codebook": BOOK.clone()}
    return model


def block_values(images: torch.Tensor, latent_dim: int = 3) -> torch.Tensor:
    """The value of each block of decoded images, ``(N, latent_dim)`` (blocks are constant)."""
    return images.reshape(len(images), BLOCK, latent_dim, BLOCK)[:, 0, :, 0]


def test_a_traversal_starts_from_the_quantised_code_and_steps_through_the_sorted_codebook():
    model = quantised_model()
    x = block_image(torch.sigmoid(torch.tensor([0.3, -0.9, 2.0])).tolist())[None]
    start = torch.tensor([0.0, -1.0, 3.0])  # the nearest value of each latent's codebook
    torch.testing.assert_close(decoder_code(model, x)[0], start)
    values = codebook_values(model, [1, 2])
    torch.testing.assert_close(values, BOOK[[1, 2]].sort(1).values)
    decoded = block_values(latent_traversals(model, x, [1, 2], values))
    expected = start.repeat(8, 1)
    expected[:4, 1] = torch.tensor([-1.0, -0.5, 0.5, 1.0])
    expected[4:, 2] = torch.tensor([-3.0, -0.25, 0.25, 3.0])
    torch.testing.assert_close(decoded, torch.sigmoid(expected))


def test_the_grid_has_a_column_per_codebook_value_and_rows_by_code_entropy():
    data, model = BlockFactors(), quantised_model()
    model.objective_state["codebook"] = torch.tensor(
        [[-2.0, 0.0, 2.0, 9.0], [-1.0, -0.5, 0.5, 1.0], [0.0, 5.0, 6.0, 7.0]]
    )
    rng = np.random.default_rng(0)
    factors = data.sample_factors(600, rng)
    x = data.sample_observations_from_factors(factors, rng)
    entropy = code_entropy_per_dim(model, x, model.objective_state["codebook"])

    def bits(column: np.ndarray) -> float:
        p = np.bincount(column) / len(column)
        p = p[p > 0]
        return float(-(p * np.log2(p)).sum())

    # z0 takes a's three values, z1 b's four, z2 is always 0
    np.testing.assert_allclose(entropy, [bits(factors[:, 0]), bits(factors[:, 1]), 0.0], atol=1e-12)
    np.testing.assert_array_equal(latent_scores(model, x), entropy)
    grid = traversal_grid(model, x[:2], entropy, num_values=10)
    # 4 codebook values per latent, whatever num_values says: 96 + 2·(1 + 4)·(W + 2) + 2 wide
    assert grid.shape == (3 * (BLOCK + 2) + 2, 96 + 2 * 5 * (3 * BLOCK + 2) + 2, 3)
    unquantised = BlockVAE([0.0, 0.0, 0.0])
    assert traversal_grid(unquantised, x[:2], num_values=10).shape[1] == 96 + 2 * 11 * (3 * BLOCK + 2) + 2


def test_the_animation_steps_each_panel_through_its_own_values_and_back():
    model = quantised_model()
    x = block_image([0.5, 0.5, 0.5])
    frames = traversal_animation(model, x, [1.0, 1.0, 1.0], num_frames=8)
    assert len(frames) == 8 and all(f.shape == frames[0].shape for f in frames)
    # the sweep in value indices: 0 → 3 at the middle frame → back
    values = codebook_values(model, [0, 1, 2])
    index = np.rint(3 * (1 - np.abs(2 * np.arange(8) / 8 - 1))).astype(int)
    assert index[0] == 0 and index[4] == 3
    decoded = block_values(latent_traversals(model, x, [0, 1, 2], values[:, index]))
    start = decoder_code(model, x)[0]
    for panel in range(3):
        expected = start.repeat(8, 1)
        expected[:, panel] = values[panel, index]
        torch.testing.assert_close(decoded[panel * 8 : (panel + 1) * 8], torch.sigmoid(expected))
    assert not np.array_equal(frames[0], frames[4])


def test_reconstructions_decode_the_quantised_code_and_samples_take_codebook_values():
    model = quantised_model()
    x = block_image(torch.sigmoid(torch.tensor([0.3, -0.9, 2.0])).tolist())[None]
    recon = block_values(mean_reconstructions(model, x))
    torch.testing.assert_close(recon[0], torch.sigmoid(torch.tensor([0.0, -1.0, 3.0])))
    samples = torch.logit(block_values(prior_samples(model, 4000, torch.Generator().manual_seed(0))).double())
    for j in range(3):
        found, counts = np.unique(np.round(samples[:, j].numpy(), 4), return_counts=True)
        np.testing.assert_allclose(found, np.sort(BOOK[j].numpy()), atol=1e-3)
        # uniform over the four values: 1000 expected each, sd about 27
        assert np.all(np.abs(counts - 1000) < 120), counts


def test_the_kl_and_response_plots_of_a_quantised_model_show_its_code_entropy(tmp_path, monkeypatch):
    """QLAE has no posterior variance, so a "KL" from its encoder's second output means nothing: the
    bar plot and the response rows are its code entropy (bits), as the traversals' order is."""
    import pytest

    pytest.importorskip("matplotlib")
    from disentangle.visualize import pictures, plots

    data, model = BlockFactors(), quantised_model()
    model.objective_state["codebook"] = torch.tensor(
        [[-2.0, 0.0, 2.0, 9.0], [-1.0, -0.5, 0.5, 1.0], [0.0, 5.0, 6.0, 7.0]]
    )
    drawn = {}
    bars, rows = plots.kl_per_dim_figure, plots.latent_responses_figure
    monkeypatch.setattr(plots, "kl_per_dim_figure", lambda values, **kw: drawn.setdefault("bars", (values, kw)) and bars(values, **kw))
    monkeypatch.setattr(plots, "latent_responses_figure",
                        lambda found, values, **kw: drawn.setdefault("rows", (values, kw)) and rows(found, values, **kw))
    pictures.write_pictures(model, data, tmp_path, ["kl_per_dim", "latent_responses"], seed=0)
    x = pictures.sample_images(data, pictures.KL_IMAGES, 0)
    entropy = code_entropy_per_dim(model, x, model.objective_state["codebook"])
    np.testing.assert_array_equal(drawn["bars"][0], entropy)
    assert drawn["bars"][1]["kind"] == "entropy"
    np.testing.assert_array_equal(drawn["rows"][0], entropy)
    assert drawn["rows"][1]["score"] == "H"
    figure = bars(entropy, entropy=True)
    assert "bits" in figure.axes[0].get_ylabel() and figure.axes[0].get_title().startswith("Code entropy per latent")
    unquantised = bars(np.array([1.0, 0.0]))
    assert "nats" in unquantised.axes[0].get_ylabel()
