"""The labelled subset of semi-supervised runs: the labellers on planted labels, the split, the batches."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from disentangle.config import load_config
from disentangle.data.labels import (
    LabelsSpec,
    apply_labeller,
    bin_labels,
    make_labelled_set,
    noisy_labels,
    permuted_labels,
)
from disentangle.errors import ConfigError

SIZES = (3, 6, 40, 32, 32)  # the dSprites grid


def test_bin_maps_32_positions_into_5_bins_and_leaves_small_factors_alone():
    classes = np.stack([np.zeros(32, int), np.zeros(32, int), np.zeros(32, int), np.arange(32), np.arange(32)], 1)
    classes[:3, 0] = [0, 1, 2]
    labels, sizes = bin_labels(classes, SIZES, 5)
    assert sizes == (3, 5, 5, 5, 5)
    assert labels[31, 3] == 4 and labels[0, 3] == 0
    # bins of width 6.4: 0-6 -> 0, 7-12 -> 1, 13-19 -> 2, 20-25 -> 3, 26-31 -> 4
    expected = np.minimum(np.floor(np.arange(32) / 6.4), 4).astype(int)
    np.testing.assert_array_equal(labels[:, 3], expected)
    assert np.bincount(labels[:, 3]).tolist() == [7, 6, 7, 6, 6]
    np.testing.assert_array_equal(labels[:3, 0], [0, 1, 2])  # 3 classes <= 5 bins: unchanged


def test_noisy_redraws_the_planted_share_of_labels():
    rng = np.random.default_rng(1)
    n = 40_000
    classes = np.zeros((n, len(SIZES)), dtype=np.int64)
    labels = noisy_labels(classes, SIZES, 0.1, rng)
    changed = (labels != 0).mean(0)
    # a redrawn label keeps its value with probability 1 / size
    expected = 0.1 * (1 - 1 / np.asarray(SIZES))
    np.testing.assert_allclose(changed, expected, atol=4 * math.sqrt(0.1 / n))
    assert labels.min() >= 0 and (labels < np.asarray(SIZES)).all()


def test_permuted_is_one_bijection_per_factor():
    rng = np.random.default_rng(2)
    classes = np.stack([np.arange(40) % s for s in SIZES], 1)
    labels = permuted_labels(classes, SIZES, rng)
    for j, size in enumerate(SIZES):
        mapping = {}
        for c, y in zip(classes[:, j], labels[:, j], strict=True):
            assert mapping.setdefault(c, y) == y  # the same class always gets the same label
        assert sorted(mapping.values()) == list(range(size))  # every label used once
    assert any((labels[:, j] != classes[:, j]).any() for j in range(len(SIZES)))


def test_partial_keeps_two_true_factors():
    rng = np.random.default_rng(3)
    classes = np.stack([np.arange(50) % s for s in SIZES], 1)
    labels, sizes, kept = apply_labeller(classes, SIZES, LabelsSpec(labeller="partial"), rng)
    assert len(kept) == 2 and len(set(kept)) == 2
    np.testing.assert_array_equal(labels, classes[:, list(kept)])
    assert sizes == tuple(SIZES[j] for j in kept)


def test_perfect_is_the_identity(rng):
    classes = np.stack([np.arange(10) % s for s in SIZES], 1)
    labels, sizes, kept = apply_labeller(classes, SIZES, LabelsSpec(), rng)
    np.testing.assert_array_equal(labels, classes)
    assert sizes == SIZES and kept == (0, 1, 2, 3, 4)


@pytest.mark.parametrize(("num_labelled", "fraction"), [(100, 0.07), (100, 0.9), (1000, 0.9), (10, 0.3), (1000, 0.57),
                                                      (100, 0.29), (250, 0.1), (3, 1.0)])
def test_the_split_counts_as_the_reference_computes_it(num_labelled, fraction):
    """disentanglement_lib's train_test_split: ``int(math.ceil(num_labelled_samples * train_percentage))``
    in plain float arithmetic, artefacts included (100 * 0.07 = 7.000000000000001 -> 8)."""
    import math

    reference = int(math.ceil(num_labelled * fraction))
    assert LabelsSpec(num_labelled=num_labelled, train_fraction=fraction).num_train == reference
    if (num_labelled, fraction) == (100, 0.07):
        assert reference == 8


def test_the_split_is_ceil_of_the_fraction_and_the_draw_depends_on_its_seed_only(tiny_dataset):
    spec = LabelsSpec(num_labelled=25, train_fraction=0.9, seed=4)
    a = make_labelled_set(tiny_dataset, spec)
    assert a.num_train == 23 and a.validation_images.shape[0] == 2  # ceil(22.5)
    torch.manual_seed(99)  # the run's RNG plays no part
    b = make_labelled_set(tiny_dataset, spec)
    assert torch.equal(a.train_images, b.train_images) and torch.equal(a.validation_labels, b.validation_labels)
    c = make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=25, seed=5))
    assert not np.array_equal(a.true_factors, c.true_factors)
    # the images are the observations of the true factors, the labels the perfect labeller's
    idx = torch.as_tensor(tiny_dataset.factors_to_indices(a.true_factors[:23]))
    assert torch.equal(a.train_images, tiny_dataset.observe(idx, None))
    np.testing.assert_array_equal(a.train_labels.numpy(), a.true_factors[:23])


def test_labelled_batches_walk_through_the_training_labels_and_wrap(tiny_dataset):
    labelled = make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=10, train_fraction=0.5))
    images, labels = labelled.batch(3, 4)
    assert torch.equal(labels, labelled.train_labels[[3, 4, 0, 1]])
    assert torch.equal(images, labelled.train_images[[3, 4, 0, 1]])


def test_config_fills_the_defaults_for_semi_supervised_objectives_and_checks_the_keys():
    cfg = load_config(None, ["objective.name=s2_beta_vae"])
    assert cfg.data.labels == LabelsSpec().to_dict()
    assert cfg.to_dict()["data"]["labels"]["num_labelled"] == 1000
    assert "labels" not in load_config(None, []).to_dict()["data"]  # unsupervised runs: no key, same ids
    with pytest.raises(ConfigError, match="num_labeled.*Did you mean 'num_labelled'"):
        load_config(None, ["data.labels.num_labeled=100"])
    with pytest.raises(ConfigError, match="labeller.*perfect"):
        load_config(None, ["data.labels.labeller=exact"])
    with pytest.raises(ConfigError, match="train_fraction"):
        load_config(None, ["data.labels.train_fraction=1.5"])



def test_a_labelled_set_without_training_labels_validates_only(tiny_dataset):
    from disentangle.objectives import OBJECTIVES

    labelled = make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=30, train_fraction=0.0))
    assert labelled.num_train == 0 and labelled.validation_images.shape[0] == 30
    with pytest.raises(ConfigError, match="keeps none for training"):
        OBJECTIVES.build("s2_beta_vae").attach_labels(labelled)


def test_bin_edges_fall_where_the_references_float32_arithmetic_puts_them():
    """disentanglement_lib's bin_labeller floor-divides float32 classes by n / num_bins: class 4 of 8
    in 6 bins is bin 2 there (4 / 1.3333334 = 2.9999998), not the exact 3; class 9 of 18 in 14 bins
    is bin 7 there, where float64 gave 6."""
    assert bin_labels(np.array([[4]]), (8,), 6)[0].tolist() == [[2]]
    assert bin_labels(np.array([[9]]), (18,), 14)[0].tolist() == [[7]]


def test_noisy_labels_redraw_each_entry_on_its_own():
    """Each entry is redrawn with probability ``noise``, independently: with noise 0.5 both labels of a
    row are redrawn in a quarter of the rows (a row-wise redraw would make it half)."""
    from disentangle.data.labels import noisy_labels

    classes = np.zeros((20_000, 2), dtype=np.int64)
    noisy = noisy_labels(classes, (1000, 1000), 0.5, np.random.default_rng(0))
    changed = noisy != 0  # a redraw lands on class 0 one time in 1,000
    assert changed.mean(axis=0) == pytest.approx([0.5, 0.5], abs=0.02)
    assert changed.all(axis=1).mean() == pytest.approx(0.25, abs=0.02)
