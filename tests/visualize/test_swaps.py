"""The swap grid of class/content models (``swaps.png``), by content: every cell is the decoded swap
computed here independently, the top row and left column are the source images, the columns show
distinct classes; a planted model that keeps the class in its class code draws, in cell ``(i, j)``,
the very image of row ``i``'s content in column ``j``'s class; the pictures command writes it for
class/content models only."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.errors import ConfigError
from disentangle.models import VAE
from disentangle.visualize import PICTURES, pictures_for, write_pictures
from disentangle.visualize.grids import LABEL_WIDTH, PAD_VALUE, PADDING, to_uint8
from disentangle.visualize.swaps import CLASS_CONTENT_OBJECTIVES, swap_grid, swap_sources

from .test_helpers import BlockFactors, BlockVAE

pytestmark = pytest.mark.usefixtures("one_thread")


def tile(grid: np.ndarray, row: int, column: int, h: int, w: int) -> np.ndarray:
    """The ``(h, w)`` grey tile at ``(row, column)`` of a grid right of the label column."""
    top, left = PADDING + row * (h + PADDING), LABEL_WIDTH + PADDING + column * (w + PADDING)
    rgb = grid[top : top + h, left : left + w]
    assert (rgb == rgb[..., :1]).all()  # one-channel images are grey
    return rgb[..., 0].astype(int)


def as_tile(image: torch.Tensor) -> np.ndarray:
    return to_uint8(image[0].numpy()).astype(int)


def class_content_vae(class_factors=("b",), class_dim: int = 2) -> VAE:
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=4, hidden_sizes=[8])
    model.config = {"objective": {"name": "mathieu2016", "class_factors": list(class_factors), "class_dim": class_dim}}
    return model


def test_each_cell_is_the_decoded_swap_and_the_top_row_and_left_column_the_sources(tiny_dataset):
    model = class_content_vae(["b"], class_dim=1)
    grid = swap_grid(model, tiny_dataset, rows=3, columns=5, seed=1)
    sources = swap_sources(tiny_dataset, ["b"], rows=3, columns=5, seed=1)
    h = w = 16
    assert grid.shape == (4 * (h + PADDING) + PADDING, LABEL_WIDTH + 4 * (w + PADDING) + PADDING, 3)  # b has 3 classes
    assert list(sources.class_labels) == [0, 1, 2]  # one column per class, all of them, in order
    # the sources are images of the dataset, of the classes said: find each among the 24 grid images
    images = tiny_dataset.images.float()
    for image, label in [*zip(sources.class_images, sources.class_labels), *zip(sources.content_images, sources.content_labels)]:
        index = int(torch.nonzero((images == image).flatten(1).all(1))[0])
        assert (index // 4) % 3 == label  # grid index (a, b, c) row-major over (2, 3, 4): b is the class
    with torch.no_grad():
        mu_content = model.encode(sources.content_images)[0]
        mu_class = model.encode(sources.class_images)[0]
        for i in range(3):
            assert np.array_equal(tile(grid, 1 + i, 0, h, w), as_tile(sources.content_images[i]))
            for j in range(3):
                z = torch.cat([mu_content[i, :3], mu_class[j, 3:]])[None]  # content: the first 3 of 4, class: the last
                expected = as_tile(torch.sigmoid(model.decode(z))[0])
                assert np.abs(tile(grid, 1 + i, 1 + j, h, w) - expected).max() <= 1
    for j in range(3):
        assert np.array_equal(tile(grid, 0, 1 + j, h, w), as_tile(sources.class_images[j]))
    assert (tile(grid, 0, 0, h, w) == round(PAD_VALUE * 255)).all()  # the corner is empty


def test_a_model_that_keeps_the_class_in_its_class_code_swaps_exactly():
    """BlockVAE: ``z0`` is factor ``a``, ``z1`` factor ``b``, ``z2`` a grey block. With the class
    ``b`` and class_dim 2, cell (i, j) is the dataset's image of row i's ``a`` and column j's ``b``."""
    data, model = BlockFactors(), BlockVAE([0.0, 0.0, 0.0])
    grid = swap_grid(model, data, class_factors=["b"], class_dim=2, rows=3, columns=4, seed=2)
    sources = swap_sources(data, ["b"], rows=3, columns=4, seed=2)
    h, w = data.image_shape[1:]
    a_of = model.encode(sources.content_images)[0][:, 0]
    a_rows = [int(np.argmin(np.abs(data.a_values - float(v)))) for v in a_of]
    rng = np.random.default_rng(0)
    for i, a in enumerate(a_rows):
        for j, b in enumerate(sources.class_labels):
            truth = data.sample_observations_from_factors(np.array([[a, b]]), rng)[0]
            assert np.abs(tile(grid, 1 + i, 1 + j, h, w) - as_tile(truth)).max() <= 1


def test_on_a_labelled_sample_each_column_is_an_image_of_its_class():
    from disentangle.data import from_arrays

    kind = np.repeat([0, 1, 2], [20, 12, 8])  # three kinds of unequal counts, shown in pixel (0, 0)
    images = np.zeros((40, 8, 8), dtype=np.uint8)
    images[:, 0, 0] = kind * 100
    images[:, 5, 5] = np.arange(40)  # every image differs
    data = from_arrays(images, np.stack([kind, np.arange(40) % 2], 1), ["kind", "parity"], grid=False)
    sources = swap_sources(data, ["kind"], rows=4, columns=5, seed=0)
    assert list(sources.class_labels) == [0, 1, 2]
    for image, label in [*zip(sources.class_images, sources.class_labels), *zip(sources.content_images, sources.content_labels)]:
        assert round(float(image[0, 0, 0]) * 255) == 100 * label


def test_the_class_code_and_class_come_from_the_model_config(tiny_dataset):
    model = class_content_vae(["a"], class_dim=1)
    from_config = swap_grid(model, tiny_dataset, rows=2, seed=0)
    assert np.array_equal(from_config, swap_grid(model, tiny_dataset, class_factors=["a"], class_dim=1, rows=2, seed=0))
    assert not np.array_equal(from_config, swap_grid(model, tiny_dataset, class_factors=["a"], class_dim=2, rows=2, seed=0))
    assert from_config.shape[1] == LABEL_WIDTH + 3 * (16 + PADDING) + PADDING  # a has 2 classes: 2 columns
    model.config = None  # any other model: half the latents, the first factor that varies (a)
    assert np.array_equal(swap_grid(model, tiny_dataset, rows=2, seed=0),
                          swap_grid(model, tiny_dataset, class_factors=["a"], class_dim=2, rows=2, seed=0))
    with pytest.raises(ConfigError, match="class_dim"):
        swap_grid(model, tiny_dataset, class_dim=4)


def test_the_pictures_command_draws_swaps_for_class_content_models_only(tiny_dataset, tmp_path):
    model = class_content_vae()
    assert pictures_for(model, list(PICTURES)) == [*PICTURES, "swaps"]
    written = write_pictures(model, tiny_dataset, tmp_path, "swaps", seed=4)
    with Image.open(written["swaps"]) as png:
        assert np.array_equal(np.asarray(png.convert("RGB")), swap_grid(model, tiny_dataset, seed=4))
    model.config = {"objective": {"name": "beta_vae", "beta": 4.0}}
    assert pictures_for(model, list(PICTURES)) == list(PICTURES)
    with pytest.raises(ConfigError, match="class/content objective"):
        write_pictures(model, tiny_dataset, tmp_path / "other", "swaps")
    assert not (tmp_path / "other").exists()


def test_the_cli_writes_swaps_png_for_a_class_content_run(tmp_path, tiny_overrides):
    pytest.importorskip("matplotlib")
    import disentangle
    from disentangle.config import load_config
    from disentangle.data import build_dataset
    from disentangle.training.trainer import fit
    from disentangle.visualize.__main__ import main

    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=2, **{"objective.name": "drnet", "objective.class_dim": 1})))
    out = tmp_path / "pictures"
    assert main([str(run), "--out", str(out), "--frames", "2", "--images", "1"]) == 0
    assert {p.name for p in out.iterdir()} == set(PICTURES.values()) - {"metrics.png"} | {"swaps.png"}
    model = disentangle.load(run)
    expected = swap_grid(model, build_dataset(model.config["data"]), seed=0)  # class_factors [a], class_dim 1
    with Image.open(out / "swaps.png") as png:
        assert np.array_equal(np.asarray(png.convert("RGB")), expected)


def test_the_list_of_class_content_objectives_matches_the_registry():
    from disentangle.objectives import OBJECTIVES
    from disentangle.objectives.class_content import ClassContentObjective

    registered = {n for n in OBJECTIVES.names() if issubclass(OBJECTIVES.get(n), ClassContentObjective)}
    assert registered <= set(CLASS_CONTENT_OBJECTIVES)
    assert {"mathieu2016", "drnet"} <= registered
    for name in CLASS_CONTENT_OBJECTIVES:
        if name in OBJECTIVES:
            assert issubclass(OBJECTIVES.get(name), ClassContentObjective), name
