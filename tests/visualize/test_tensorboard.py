"""TensorBoard: tags and values read back from the event file."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import disentangle
from disentangle.visualize import kl_per_dim, reconstruction_grid, traversal_grid

from .test_helpers import BlockFactors, BlockVAE

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from disentangle.visualize.tensorboard import TensorBoardLogger  # noqa: E402


def read_events(run_dir) -> EventAccumulator:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    return acc


def test_scalars_kl_per_dim_and_metrics_read_back(tmp_path):
    with TensorBoardLogger(tmp_path) as logger:
        logger.log_terms(10, {"loss": torch.tensor(3.5), "recon": 2.25, "kl_per_dim": torch.tensor([0.5, 1.5, 0.0]),
                              "q_mse_per_code": [0.5, float("nan")], "note": "text", "nan": float("nan")})
        logger.log_terms(20, {"loss": 1.5, "recon": 1.0, "kl_per_dim": [0.25, 2.0, 0.125]})
        logger.log_metrics(20, {"mig": {"mig": 0.3, "mig_shape": 0.1}, "dci": {"disentanglement": 0.7}})
    acc = read_events(tmp_path)
    tags = set(acc.Tags()["scalars"])
    # every per-latent term (not only kl_per_dim), its non-finite entries left out as the other loggers do
    assert tags == {"train/loss", "train/recon", "kl_per_dim/z0", "kl_per_dim/z1", "kl_per_dim/z2",
                    "q_mse_per_code/z0", "metrics/mig/mig", "metrics/mig/mig_shape", "metrics/dci/disentanglement"}

    def series(tag):
        return [(e.step, e.value) for e in acc.Scalars(tag)]

    assert series("train/loss") == [(10, 3.5), (20, 1.5)]
    assert series("train/recon") == [(10, 2.25), (20, 1.0)]
    assert series("kl_per_dim/z1") == [(10, 1.5), (20, 2.0)]
    assert series("kl_per_dim/z2") == [(10, 0.0), (20, 0.125)]
    assert series("metrics/mig/mig_shape") == [(20, pytest.approx(0.1))]


def test_resume_with_purge_step_hides_the_events_after_the_checkpoint(tmp_path):
    with TensorBoardLogger(tmp_path) as crashed:
        for step in (10, 20, 30):
            crashed.log_terms(step, {"loss": float(step)})
    with TensorBoardLogger(tmp_path, purge_step=20) as resumed:  # checkpoint was at step 20
        resumed.log_terms(20, {"loss": -20.0})
        resumed.log_terms(30, {"loss": -30.0})
    steps = [(e.step, e.value) for e in read_events(tmp_path).Scalars("train/loss")]
    assert steps == [(10, 10.0), (20, -20.0), (30, -30.0)]


def test_images_are_the_png_pictures(tmp_path):
    data, model = BlockFactors(), BlockVAE([0.0, -1.0, -2.0])
    model.train()
    logger = TensorBoardLogger(tmp_path, num_images=4, kl_images=32)
    logger.log_images(5, model, data, torch.Generator().manual_seed(11))
    logger.close()
    assert model.training  # mode restored

    # the same draws, made by the PNG functions
    x = data.sample_batch(32, torch.Generator().manual_seed(11))
    expected = {
        "reconstructions": reconstruction_grid(model, x[:4]),
        "traversals": traversal_grid(model, x[:1], kl_per_dim(model, x)),
    }
    acc = read_events(tmp_path)
    assert set(acc.Tags()["images"]) == set(expected)
    for tag, array in expected.items():
        (event,) = acc.Images(tag)
        assert event.step == 5 and (event.height, event.width) == array.shape[:2]
        decoded = np.asarray(Image.open(io.BytesIO(event.encoded_image_string)).convert("RGB"))
        np.testing.assert_array_equal(decoded, array)


def test_missing_tensorboard_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(disentangle.DisentangleError, match=r'pip install "disentangle-torch\[tensorboard\]"'):
        TensorBoardLogger(tmp_path / "run")
    assert not (tmp_path / "run").exists()
