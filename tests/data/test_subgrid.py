"""``data.subgrid``: a sub-grid keeps some classes of some factors and is still a complete grid whose
observations are the base grid's at the mapped points."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from disentangle.config import load_config
from disentangle.data import IndexedImageDataset, build_dataset
from disentangle.data.subgrid import SubGrid, subgrid_classes
from disentangle.errors import ConfigError
from disentangle.train import main
from disentangle.training.trainer import Trainer


def test_counts_are_evenly_spaced_with_both_ends_and_lists_are_sorted():
    kept = subgrid_classes({"x": 8, "r": [36, 0, 12]}, ("s", "x", "r"), (3, 32, 40))
    np.testing.assert_array_equal(kept[0], [0, 1, 2])
    np.testing.assert_array_equal(kept[1], [0, 4, 9, 13, 18, 22, 27, 31])  # round(linspace(0, 31, 8))
    np.testing.assert_array_equal(kept[2], [0, 12, 36])
    np.testing.assert_array_equal(subgrid_classes({"x": 1}, ("x",), (5,))[0], [0])
    np.testing.assert_array_equal(subgrid_classes({"x": 5}, ("x",), (5,))[0], np.arange(5))


def test_sprites_sub_grid_images_are_the_base_grid_s_at_the_mapped_points():
    base = build_dataset({"name": "sprites", "image_size": 32})
    sub = build_dataset({"name": "sprites", "image_size": 32, "subgrid": {"orientation": [0, 10, 20, 30], "position_x": 4}})
    assert isinstance(sub, SubGrid) and sub.factor_names == base.factor_names
    assert sub.factor_sizes == (3, 6, 4, 4, 32) and len(sub) == 3 * 6 * 4 * 4 * 32
    idx = torch.randperm(len(sub), generator=torch.Generator().manual_seed(0))[:300]
    classes = sub.indices_to_factors(idx.numpy())
    # the base point of each sub-grid point, computed independently from the factor classes
    base_classes = classes.copy()
    base_classes[:, 2] = np.array([0, 10, 20, 30])[classes[:, 2]]
    base_classes[:, 3] = np.array([0, 10, 21, 31])[classes[:, 3]]
    expected = base.raw(torch.as_tensor(base.factors_to_indices(base_classes)))
    assert torch.equal(sub.raw(idx), expected)
    sub.materialize()
    assert sub.materialized and sub._images.shape[0] == len(sub)
    assert torch.equal(sub.raw(idx), expected)
    # observations drawn from factors are the base's for the mapped factors
    rng = np.random.default_rng(1)
    factors = sub.sample_factors(50, rng)
    mapped = factors.copy()
    mapped[:, 2] = np.array([0, 10, 20, 30])[factors[:, 2]]
    mapped[:, 3] = np.array([0, 10, 21, 31])[factors[:, 3]]
    torch.testing.assert_close(
        sub.sample_observations_from_factors(factors, np.random.default_rng(2)),
        base.sample_observations_from_factors(mapped, np.random.default_rng(2)),
    )


def test_factor_values_follow_the_classes_kept():
    images = torch.arange(24, dtype=torch.uint8).reshape(24, 1, 1, 1).expand(24, 1, 2, 2).contiguous()
    values = [np.array([0.0, 1.0]), np.array([10.0, 20.0, 30.0]), np.array([0.1, 0.2, 0.3, 0.4])]
    base = IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0, factor_values=values)
    sub = SubGrid(base, {"b": [0, 2], "c": 2})
    assert sub.factor_sizes == (2, 2, 2)
    np.testing.assert_array_equal(sub.factor_values[1], [10.0, 30.0])
    np.testing.assert_array_equal(sub.factor_values[2], [0.1, 0.4])
    # image k of the base holds the value k: the sub-grid's images name their base points
    got = sub.raw(torch.arange(8))[:, 0, 0, 0].tolist()
    assert got == [a * 12 + b * 4 + c for a in (0, 1) for b in (0, 2) for c in (0, 3)]


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"nope": 3}, "does not have. Its factors: a \\(2 classes\\), b \\(3 classes\\)"),
        ({"b": 4}, "keeps 4 classes but the factor has 3"),
        ({"c": [0, 4]}, "classes are 0 .. 3"),
    ],
)
def test_a_spec_that_does_not_fit_the_dataset_is_refused_by_name(spec, message, tiny_dataset_name):
    with pytest.raises(ConfigError, match=message):
        build_dataset({"name": tiny_dataset_name, "subgrid": spec})


@pytest.mark.parametrize(
    "spec, message",
    [([1, 2], "must be a mapping"), ({"b": 0}, "at least 1 class"), ({"b": [1, 1]}, "lists a class twice"),
     ({"b": [-1]}, "class indices"), ({"b": "all"}, "a count of classes"), ({"b": True}, "not a factor name")],
)
def test_a_malformed_spec_is_refused_when_the_config_is_read(spec, message, tmp_path, tiny_overrides):
    with pytest.raises(ConfigError, match=message):
        load_config(None, tiny_overrides(tmp_path / "r") + [f"data.subgrid={json.dumps(spec)}"])


def test_the_config_keeps_subgrid_only_when_set(tmp_path, tiny_overrides):
    plain = load_config(None, tiny_overrides(tmp_path / "r"))
    assert "subgrid" not in plain.to_dict()["data"]  # earlier runs' configs and ids are unchanged
    sub = load_config(None, tiny_overrides(tmp_path / "r") + ['data.subgrid={"c": [1, 3]}'])
    assert sub.to_dict()["data"]["subgrid"] == {"c": [1, 3]}


def test_a_run_trains_on_the_sub_grid_and_a_bad_factor_stops_before_the_run_folder(tmp_path, tiny_overrides, capsys):
    run = tmp_path / "lord"
    overrides = tiny_overrides(run, steps=4, **{"objective.name": "lord", "objective.stage1_steps": 2})
    result = Trainer(load_config(None, overrides + ['data.subgrid={"b": [0, 2], "c": 2}'])).fit()
    assert result.step == 4
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["objective"]["content_codes"].shape[0] == 2 * 2 * 2  # a code per sub-grid image
    bad = tmp_path / "bad"
    load_config(None, tiny_overrides(bad, steps=2)).save(tmp_path / "bad.yaml")
    code = main(["--config", str(tmp_path / "bad.yaml"), 'data.subgrid={"zz": 2}'])
    assert code == 2 and not bad.exists()
    assert "zz" in capsys.readouterr().err


def test_a_grid_with_more_images_than_combinations_is_refused():
    """SmallNORB holds 10 instances per combination of the factors it shows: a sub-grid computed its
    images' rows from the shown factors alone and read other objects' images (43% matched)."""
    import torch

    from disentangle.data import IndexedImageDataset
    from disentangle.data.subgrid import SubGrid
    from disentangle.errors import ConfigError

    class WithHiddenInstances(IndexedImageDataset):
        name = "a grid with a hidden factor"

        def __len__(self) -> int:
            return 2 * super().__len__()

    images = torch.zeros(24, 1, 4, 4, dtype=torch.uint8)
    base = WithHiddenInstances(images, ("a", "b", "c"), (2, 3, 4), scale=1.0)
    with pytest.raises(ConfigError, match="holds 48 images for its 24 combinations"):
        SubGrid(base, {"c": 2})
    assert len(SubGrid(IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0), {"c": 2})) == 12
