"""U/S model selection with a few labels: the validation metrics on planted codes, the comparison
of picks, and the whole path over a small sweep folder."""
from __future__ import annotations

import csv

import pytest
import torch

from disentangle.study.few_labels import compare_selections, select_with_few_labels, validation_mig, write_selection


def test_validation_mig_is_high_for_codes_that_copy_the_labels_and_low_for_noise(rng):
    labels = rng.integers(0, 5, size=(100, 3))
    aligned = labels + 0.01 * rng.normal(size=labels.shape)
    assert validation_mig(aligned, labels) > 0.9
    assert validation_mig(rng.normal(size=(100, 3)), labels) < 0.3


def test_compare_selections_counts_agreement_and_regret():
    validation = {"a": 0.9, "b": 0.5, "c": 0.1}
    full = {"a": 0.2, "b": 0.8, "c": 0.1}
    pick_v, pick_f, rho, agreement, regret, subsets, size = compare_selections(validation, full)
    assert (pick_v, pick_f, agreement, subsets, size) == ("a", "b", 0.0, 1, 3)
    assert regret == pytest.approx(0.6) and rho == pytest.approx(0.5)
    # subsets of 2: {a,b} disagree (regret 0.6), {a,c} agree, {b,c} agree -> 2/3 on average
    _, _, _, agreement, regret, _, _ = compare_selections(validation, full, subsets=3000, subset_size=2, seed=1)
    assert agreement == pytest.approx(2 / 3, abs=0.03) and regret == pytest.approx(0.2, abs=0.02)


class _Aligned(torch.nn.Module):
    """A 'model' whose codes are the true factors plus noise of a given size (more noise, worse)."""

    def __init__(self, dataset, noise: float, config: dict):
        super().__init__()
        self.dataset, self.noise, self.config = dataset, noise, config

    def representation(self, images):
        # the tiny dataset's images are distinct: recover the factors by lookup
        grid = self.dataset.observe(torch.arange(len(self.dataset)), None).flatten(1)
        idx = (images.flatten(1)[:, None, :] == grid[None]).all(-1).float().argmax(1)
        factors = torch.as_tensor(self.dataset.indices_to_factors(idx.numpy()), dtype=torch.float32)
        g = torch.Generator().manual_seed(0)
        return factors + self.noise * torch.randn(factors.shape, generator=g)


def test_the_validation_pick_on_a_sweep_folder(tmp_path, tiny_dataset, tiny_dataset_name):
    noises = {"r0": 0.05, "r1": 0.6, "r2": 3.0}
    with (tmp_path / "results.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run_id", "status", "seed", "mig.mig"])
        for i, r in enumerate(noises):
            w.writerow([r, "finished", i, [0.9, 0.5, 0.1][i]])
    config = {"data": {"name": tiny_dataset_name}}
    models = {r: _Aligned(tiny_dataset, n, config) for r, n in noises.items()}
    sel = select_with_few_labels(
        tmp_path, labels={"num_labelled": 400, "train_fraction": 0.5}, progress=False,
        load=lambda path: models[path.rsplit("/", 1)[-1]],
    )
    assert sel.pick_by_validation == sel.pick_by_full == "r0"
    assert sel.validation["r0"] > sel.validation["r1"] > sel.validation["r2"]
    assert sel.num_validation == {"r0": 200, "r1": 200, "r2": 200}
    files = write_selection(sel, tmp_path / "report")
    assert "picks r0" in files["few_labels.md"].read_text()
    assert files["few_labels.csv"].read_text().splitlines()[1].startswith("r0,")


def test_runs_scored_on_different_numbers_of_validation_images_are_warned_of(caplog):
    """An S² run validates on its own data.labels (100 images at train_fraction 0.9 of 1,000), an
    unsupervised one on the default 1,000: a metric on few points reads lower, so the ranking is unfair."""
    import logging

    from disentangle.study.few_labels import warn_of_mixed_validation_counts

    with caplog.at_level(logging.WARNING, logger="disentangle.study.few_labels"):
        warn_of_mixed_validation_counts({"a": 1000, "b": 1000})
        assert caplog.text == ""
        warn_of_mixed_validation_counts({"a": 1000, "b": 100, "c": 1000})
    assert "different numbers of labelled validation images (1 run(s) on 100, 2 run(s) on 1,000)" in caplog.text


def test_a_few_labels_metric_the_study_cannot_use_is_refused_before_the_report(tmp_path, capsys):
    from disentangle.study.__main__ import main

    assert main([str(tmp_path / "sweep"), "--out", str(tmp_path / "report"), "--few-labels", "sap"]) == 2
    assert "--few-labels is 'sap', which is not a valid choice" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


def test_a_label_with_one_observed_value_is_left_out_of_the_validation_mig():
    """Labels whose last column is constant (a factor the labelled images never vary): scored on the
    other two, where the codes copy the labels, MIG is near 1; counted as a 0 it would be near 2/3."""
    import numpy as np

    rng = np.random.default_rng(0)
    labels = np.stack([rng.integers(0, 4, 500), rng.integers(0, 5, 500), np.zeros(500, dtype=np.int64)], axis=1)
    codes = labels[:, :2].astype(np.float64)
    assert validation_mig(codes, labels) > 0.95
    assert validation_mig(codes, labels) == pytest.approx(validation_mig(codes, labels[:, :2]), abs=1e-12)
