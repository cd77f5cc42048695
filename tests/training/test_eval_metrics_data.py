"""A training run refused for a metric of ``train.eval_metrics`` its data cannot give says that the
metric comes from ``train.eval_metrics`` and how to leave it out, and, for a metric that needs
labels on unlabelled images, that labelled images would do (not only a factor grid)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle.config import load_config
from disentangle.errors import NotAGridError
from disentangle.training import fit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def samples(tmp_path, tiny_dataset):
    """A labelled and an unlabelled sample of the tiny grid, as npz files."""
    idx = np.random.default_rng(3).integers(len(tiny_dataset), size=64)
    images = tiny_dataset.raw(torch.as_tensor(idx)).numpy()
    labelled, unlabelled = tmp_path / "labelled.npz", tmp_path / "unlabelled.npz"
    np.savez(labelled, images=images, factor_classes=tiny_dataset.indices_to_factors(idx))
    np.savez(unlabelled, images=images)
    return labelled, unlabelled


def _refusal(out, tiny_overrides, **extra) -> str:
    config = load_config(None, tiny_overrides(out, steps=2, **extra))
    with pytest.raises(NotAGridError) as err:
        fit(config)
    assert not out.exists()
    return str(err.value)


def test_a_label_metric_on_an_image_folder_says_where_it_comes_from_and_what_would_do(tmp_path, tiny_overrides):
    from PIL import Image

    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):
        Image.fromarray(rng.integers(0, 256, (20, 20), dtype=np.uint8)).save(folder / f"{i}.png")
    message = _refusal(tmp_path / "run", tiny_overrides, **{
        "data.name": "image_folder", "data.path": str(folder), "data.image_size": 16, "data.cache": str(tmp_path / "c"),
        "train.eval_metrics": "[mig, unsupervised_scores]", "train.eval_every": 1000})
    assert message.startswith(f"The metric 'mig' cannot run on image folder {folder}: it compares codes with factor "
                              "labels, and this dataset holds images without labels; labelled images would do (")
    assert "disentangle.data.from_arrays(images, labels)), as would a grid dataset." in message
    assert ("It comes from train.eval_metrics ([mig, unsupervised_scores]; shipped configs and zoo recipes name "
            "metrics there), which the run would evaluate every 1,000 steps on its training data.") in message
    assert ("To train on this data, leave it out: train.eval_metrics=[unsupervised_scores] (metrics that apply to "
            "this data: elbo, unsupervised_scores).") in message


def test_metrics_a_sample_cannot_give_are_named_with_the_list_without_them(tmp_path, samples, tiny_overrides):
    labelled, unlabelled = samples
    message = _refusal(tmp_path / "a", tiny_overrides, **{
        "data.name": "npz", "data.path": str(labelled), "train.eval_metrics": "[factor_vae, mig]",
        "train.eval_every": 1})
    assert message.startswith("The metric 'factor_vae_score' cannot run on the images of")
    assert "and this dataset holds labelled images without a factor grid; a grid dataset would do (" in message
    assert "labelled images would do" not in message
    assert "leave it out: train.eval_metrics=[mig] (metrics that apply to this data: " in message
    message = _refusal(tmp_path / "b", tiny_overrides, **{
        "data.name": "npz", "data.path": str(unlabelled), "train.eval_metrics": "[sap, beta_vae]",
        "train.eval_every": 1})
    assert message.startswith("The metrics 'sap_score' and 'beta_vae_score' cannot run on the images of")
    assert "which holds images without labels: 'sap_score': it compares codes with factor labels (labelled images " in message
    assert "'beta_vae_score': it fixes factors and draws the others" in message
    assert "They come from train.eval_metrics ([sap, beta_vae]; " in message
    assert "To train on this data, leave them out: train.eval_metrics=[] (metrics that apply to this data: " in message


def test_metrics_never_evaluated_are_not_refused_but_named(tmp_path, samples, tiny_overrides, caplog):
    """With train.eval_every 0 no metric runs during training: the run trains, and the warning for
    a setting that does nothing names them (setting eval_every would then refuse the unfit ones)."""
    import logging

    _, unlabelled = samples
    caplog.set_level(logging.WARNING, logger="disentangle")
    result = fit(load_config(None, tiny_overrides(tmp_path / "run", steps=2, **{
        "data.name": "npz", "data.path": str(unlabelled), "train.eval_metrics": "[mig]"})))
    assert result.step == 2
    assert any(r.getMessage().startswith("train.eval_metrics is [mig], but train.eval_every is 0, so they are never "
                                         "evaluated during training.") for r in caplog.records)
