"""TensorBoard during training (issue 14): the tags and values read back from the event file of a
tiny run, the images against the visualize functions, and the config check."""
from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch

import disentangle
from disentangle.config import load_config
from disentangle.config import validation as config_validation
from disentangle.training.trainer import fit

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
Image = pytest.importorskip("PIL.Image")


def _accumulator(run):
    (event_file,) = run.glob("events.out.tfevents.*")
    acc = event_accumulator.EventAccumulator(str(event_file), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    return acc


def test_training_writes_terms_metrics_and_images_to_tensorboard(tmp_path, tiny_overrides):
    torch.set_num_threads(1)
    run = tmp_path / "run"
    extra = {
        "train.tensorboard": "true", "train.image_every": 2, "train.eval_every": 4, "train.eval_metrics": "[mig]",
        "model.latent_dim": 3,
    }
    fit(load_config(None, tiny_overrides(run, steps=4, **extra)))
    acc = _accumulator(run)
    tags = acc.Tags()
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    terms = [r for r in records if "metrics" not in r]
    expected = {f"train/{k}" for k in ("loss", "recon", "kl", "elbo", "steps_per_s", "wall_time_s")} | {f"kl_per_dim/z{j}" for j in range(3)}
    (scores,) = [r["metrics"] for r in records if "metrics" in r]
    assert set(tags["scalars"]) == expected | {f"metrics/mig/{score}" for score in scores["mig"]}
    # every logged value, at its step, as log.jsonl has it (TensorBoard stores float32)
    for record in terms:
        for key, value in record.items():
            if key == "step":
                continue
            values = value if key == "kl_per_dim" else [value]
            names = [f"kl_per_dim/z{j}" for j in range(3)] if key == "kl_per_dim" else [f"train/{key}"]
            for name, v in zip(names, values):
                (event,) = [e for e in acc.Scalars(name) if e.step == record["step"]]
                assert math.isclose(event.value, v, rel_tol=1e-6, abs_tol=1e-9), (name, record["step"])
    for score, value in scores["mig"].items():
        (metric,) = acc.Scalars(f"metrics/mig/{score}")
        assert metric.step == 4 and math.isclose(metric.value, value, rel_tol=1e-6, abs_tol=1e-9)

    # images every 2 steps; the last ones are the final model's, made by the visualize functions
    assert set(tags["images"]) == {"reconstructions", "traversals"}
    for tag in ("reconstructions", "traversals"):
        assert [e.step for e in acc.Images(tag)] == [2, 4]
    from disentangle.visualize import kl_per_dim, reconstruction_grid, traversal_grid

    model = disentangle.load(run)
    dataset = disentangle.data.build_dataset(load_config(run / "config.yaml").data)
    x = dataset.sample_batch(256, torch.Generator().manual_seed(0 + 2))  # the trainer's picture generator
    kl = kl_per_dim(model, x)
    for tag, grid in (("reconstructions", reconstruction_grid(model, x[:8])), ("traversals", traversal_grid(model, x[:1], kl))):
        final = acc.Images(tag)[-1]
        got = np.asarray(Image.open(io.BytesIO(final.encoded_image_string)).convert("RGB"))
        assert got.shape == grid.shape and (final.height, final.width) == grid.shape[:2]
        assert np.abs(got.astype(int) - grid.astype(int)).max() <= 1, tag


def test_jsonl_stays_the_default_and_no_event_file_is_written(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=2)))
    assert not list(run.glob("events.out.tfevents.*"))


def test_missing_tensorboard_is_a_config_error_before_anything_is_created(tmp_path, monkeypatch, tiny_overrides):
    monkeypatch.setattr(config_validation, "_tensorboard_available", lambda: False)
    with pytest.raises(disentangle.ConfigError, match=r"tensorboard package is not installed.*disentangle-torch\[tensorboard\]"):
        load_config(None, tiny_overrides(tmp_path / "run", **{"train.tensorboard": "true"}))
    with pytest.raises(disentangle.ConfigError, match="train.image_every is 5, but images are written to TensorBoard only"):
        load_config(None, tiny_overrides(tmp_path / "run", **{"train.image_every": 5}))
    assert not (tmp_path / "run").exists()
