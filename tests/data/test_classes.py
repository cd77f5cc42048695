"""Groups of images of one class (disentangle.data.classes) and the class/content code split
(disentangle.objectives.class_content): what is drawn, by value, on a grid and on a labelled sample."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle.data import IndexedImageDataset
from disentangle.data.base import BatchShard, sampling_shard
from disentangle.data.classes import (
    ClassBatch,
    class_labels_of_factors,
    num_classes,
    resolve_class_factors,
    sample_class_groups,
)
from disentangle.data.samples import SampleDataset
from disentangle.errors import ConfigError, ParameterError
from disentangle.objectives.class_content import ClassContentObjective, split_codes

pytestmark = pytest.mark.usefixtures("one_thread")


def _grid() -> IndexedImageDataset:
    """A 2×3×4 grid whose image ``i`` is filled with the value ``i`` (so the image names its index)."""
    images = torch.arange(24, dtype=torch.uint8)[:, None, None, None].expand(24, 1, 4, 4).contiguous()
    return IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0)


def _sample() -> SampleDataset:
    labels = np.array([[0, 1], [0, 1], [1, 0], [1, 0], [1, 1], [0, 1], [2, 0], [2, 0], [2, 0], [1, 1], [2, 1]])
    images = torch.arange(len(labels), dtype=torch.uint8)[:, None, None, None].expand(len(labels), 1, 4, 4).contiguous()
    return SampleDataset(images, labels, ["hair", "smile"], scale=1.0)


def test_a_grid_group_shares_the_class_factors_and_the_labels_and_indices_say_which_image():
    ds = _grid()
    factors = resolve_class_factors(["b", "a"], ds)
    assert factors == (1, 0) and num_classes(ds, factors) == 6
    batch = sample_class_groups(ds, 50, 3, torch.Generator().manual_seed(0), factors)
    assert isinstance(batch, ClassBatch)
    # the image is its own index
    assert torch.equal(batch.x[:, 0, 0, 0].long(), batch.indices)
    rows = torch.as_tensor(np.stack(np.unravel_index(batch.indices.numpy(), (2, 3, 4)), axis=1))
    groups = rows.view(50, 3, 3)
    assert torch.equal(groups[:, :, :2], groups[:, :1, :2].expand(50, 3, 2))  # a, b shared in a group
    # the class is b·2 + a (the first class factor most significant)
    assert torch.equal(batch.labels, rows[:, 1] * 2 + rows[:, 0])
    # the free factor varies within groups (not a copy of the first member)
    assert (groups[:, 1:, 2] != groups[:, :1, 2]).any()


def test_grid_classes_are_uniform_and_the_free_factors_independent():
    ds = _grid()
    batch = sample_class_groups(ds, 6000, 2, torch.Generator().manual_seed(1), (0,))
    counts = np.bincount(batch.labels.numpy(), minlength=2) / batch.labels.numel()
    np.testing.assert_allclose(counts, [0.5, 0.5], atol=0.02)
    c = np.unravel_index(batch.indices.numpy(), (2, 3, 4))[2].reshape(-1, 2)
    assert abs(np.mean(c[:, 0] == c[:, 1]) - 0.25) < 0.02  # independent uniform over 4 values


def test_class_labels_of_factors_is_the_mixed_radix_index():
    rows = torch.tensor([[1, 2, 3], [0, 0, 1], [1, 1, 0]])
    assert class_labels_of_factors(rows, (2, 3, 4), (2, 0)).tolist() == [3 * 2 + 1, 1 * 2 + 0, 0 * 2 + 1]


def test_a_sample_draws_anchors_uniformly_and_members_of_the_anchor_class():
    ds = _sample()
    factors = resolve_class_factors(["hair", "smile"], ds)
    combos = {tuple(r) for r in ds.labels[:, [0, 1]]}
    assert num_classes(ds, factors) == len(combos) == 5
    batch = sample_class_groups(ds, 4000, 3, torch.Generator().manual_seed(2), factors)
    idx = batch.indices.view(-1, 3).numpy()
    assert torch.equal(batch.x[:, 0, 0, 0].long(), batch.indices)
    for g in idx[:200]:
        assert len({tuple(ds.labels[i]) for i in g}) == 1
    # anchors uniform over the 11 images
    np.testing.assert_allclose(np.bincount(idx[:, 0], minlength=11) / len(idx), np.full(11, 1 / 11), atol=0.012)
    # members uniform within the anchor's class: class (2, 0) has images 6, 7, 8
    rows = idx[np.isin(idx[:, 0], [6, 7, 8])][:, 1:].ravel()
    np.testing.assert_allclose(np.bincount(rows, minlength=11)[[6, 7, 8]] / len(rows), [1 / 3] * 3, atol=0.03)
    # one label per class id, shared within the group
    labels = batch.labels.view(-1, 3)
    assert torch.equal(labels, labels[:, :1].expand_as(labels))


def test_the_batch_is_reproducible_and_a_shard_keeps_whole_groups_of_the_global_batch():
    for ds, factors in ((_grid(), (0,)), (_sample(), (0,))):
        a = sample_class_groups(ds, 8, 2, torch.Generator().manual_seed(3), factors)
        b = sample_class_groups(ds, 8, 2, torch.Generator().manual_seed(3), factors)
        assert all(torch.equal(u, v) for u, v in zip(a, b))
        with sampling_shard(BatchShard(1, 2)):
            part = sample_class_groups(ds, 8, 2, torch.Generator().manual_seed(3), factors)
        assert torch.equal(part.indices, a.indices[8:]) and torch.equal(part.labels, a.labels[8:])
        assert torch.equal(part.x, a.x[8:])


def test_bad_class_factors_are_one_paragraph_naming_the_factors():
    ds = _grid()
    with pytest.raises(ParameterError, match="Did you mean 'b'"):
        resolve_class_factors(["bb"], ds)
    with pytest.raises(ParameterError, match="has 3 factors"):
        resolve_class_factors([5], ds)
    with pytest.raises(ParameterError, match="every factor"):
        resolve_class_factors(["a", "b", "c"], ds)
    with pytest.raises(ParameterError, match="needs objective.class_factors"):
        resolve_class_factors(None, ds)
    with pytest.raises(ParameterError, match="twice"):
        resolve_class_factors(["a", 0], ds)
    with pytest.raises(ParameterError, match="non-empty list"):
        resolve_class_factors([], ds)
    unlabelled = SampleDataset(torch.zeros(3, 1, 4, 4, dtype=torch.uint8))
    with pytest.raises(ParameterError, match="no labels"):
        resolve_class_factors(["a"], unlabelled)


def test_split_codes_takes_the_last_class_dim_columns_as_the_class_code():
    codes = torch.arange(12.0).view(2, 6)
    content, cls = split_codes(codes, 2)
    assert torch.equal(content, codes[:, :4]) and torch.equal(cls, codes[:, 4:])
    with pytest.raises(ValueError, match="between 1 and 5"):
        split_codes(codes, 6)


class _Model:
    latent_dim = 4


def test_the_base_objective_resolves_its_split_and_classes_and_refuses_bad_batches():
    objective = ClassContentObjective(class_factors=["c"], group_size=3)
    objective.setup(model=_Model(), dataset_size=24)
    assert objective.class_dim == 2
    objective.check_dataset(_grid())
    assert objective.class_factors == (2,) and objective.num_classes == 4
    with pytest.raises(ConfigError, match="multiple of group_size"):
        objective.sample_batch(_grid(), 8, torch.Generator())
    assert objective.sample_batch(_grid(), 9, torch.Generator()).x.shape[0] == 9
    with pytest.raises(ConfigError, match="class_dim"):
        ClassContentObjective(class_factors=["c"], class_dim=4).setup(model=_Model(), dataset_size=24)
    with pytest.raises(ConfigError, match="1 class"):
        ClassContentObjective(class_factors=["a"]).check_dataset(
            IndexedImageDataset(torch.zeros(3, 1, 2, 2, dtype=torch.uint8), ("a", "b"), (1, 3))
        )
    with pytest.raises(TypeError, match="ClassBatch"):
        ClassContentObjective.check_batch(torch.zeros(2), "x")
