"""A class/content run in the trainer: its evaluations and pictures read the split it learnt."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from disentangle import load
from disentangle.config import load_config
from disentangle.data import build_dataset
from disentangle.metrics import evaluate_metrics
from disentangle.training.trainer import fit
from disentangle.visualize.swaps import swap_grid

#: class_dim 1 of 4 latents: not the metrics' default split (half the code), so a score that ignored
#: the run's split would differ
EXTRA = {
    "objective.name": "drnet", "objective.class_factors": "[a]", "objective.class_dim": 1,
    "objective.discriminator_hidden": 16,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_overrides):
    out = tmp_path_factory.mktemp("class_content") / "run"
    overrides = tiny_overrides(out, steps=8, **{
        **EXTRA, "train.eval_metrics": "[class_leakage, swap_accuracy, mig]", "train.eval_every": 8,
        "train.traversals": "true",
    })
    return fit(load_config(None, overrides))


def _scores(out_dir):
    lines = [json.loads(line) for line in (out_dir / "log.jsonl").read_text().splitlines()]
    return [r["metrics"] for r in lines if "metrics" in r]


def test_the_trainers_evaluation_reads_the_runs_class_split(run):
    """The scores logged at step 8 equal the metrics called on the final model with the run's class
    factors and class_dim 1, and differ from the metrics' default split."""
    (logged,) = _scores(run.out_dir)
    model = load(run.out_dir / "checkpoint.pt")
    dataset = build_dataset(dict(model.config["data"]), device="cpu")
    split = {"class_factors": [0], "class_dim": 1}
    by_hand = evaluate_metrics(
        dataset, model, ["class_leakage", "swap_accuracy"], seed=0,
        settings={"class_leakage": split, "swap_accuracy": split},
    )
    for metric in ("class_leakage", "swap_accuracy"):
        for score, value in by_hand[metric].items():
            assert logged[metric][score] == pytest.approx(value, abs=1e-9), (metric, score)
    default = evaluate_metrics(dataset, model, ["class_leakage"], seed=0)
    assert default["class_leakage"] != by_hand["class_leakage"]
    assert "mig" in logged  # other metrics keep their defaults


def test_the_end_of_training_pictures_include_the_swap_grid_of_the_runs_split(run):
    written = Image.open(run.out_dir / "swaps.png")
    model = load(run.out_dir / "checkpoint.pt")
    dataset = build_dataset(dict(model.config["data"]), device="cpu")
    expected = swap_grid(model, dataset, class_dim=1, class_factors=[0], seed=0)
    assert np.array_equal(np.asarray(written.convert("RGB")), expected)
    for name in ("traversals.png", "reconstructions.png"):
        assert (run.out_dir / name).is_file()


def test_publish_scores_a_class_content_model_with_its_split(run, tmp_path):
    """``zoo publish`` fills class_leakage's class factors and class_dim from the run, as
    ``disentangle evaluate`` does, and records them with the score."""
    import shutil

    from disentangle import zoo

    copy = tmp_path / "run"
    shutil.copytree(run.out_dir, copy)
    record = zoo.publish(copy, "cc", manifest=tmp_path / "z" / "manifest.json", metrics=["class_leakage"])
    model = load(copy / "checkpoint.pt")
    dataset = build_dataset(dict(model.config["data"]), device="cpu")
    split = {"class_factors": [0], "class_dim": 1}
    by_hand = evaluate_metrics(dataset, model, ["class_leakage"], seed=0, settings={"class_leakage": split})
    assert record["metrics"]["class_leakage"] == pytest.approx(by_hand["class_leakage"], abs=1e-9)
    written = json.loads((copy / "metrics.json").read_text())
    assert written["metric_settings"]["class_leakage"]["class_dim"] == 1
