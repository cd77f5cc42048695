"""A planted effect for every class/content objective: trained on sprites whose class is planted,
the content code leaks less of the class than the unsupervised twin's.

The data: 8,192 sprites (32×32) at uniform grid points except ``position_x``, which takes one of
two far-apart values (index 6 or 25): the class is the side, independent of every other factor.
Every model (an ``mlp`` backbone, 6 latents, Adam 1e-3, batch 64, 2,000 steps) is read by
``class_leakage`` with the class code the last 3 dimensions; the twin is a β-VAE of the same
network. The side is the image's largest change, so the twin encodes it and its first three
dimensions carry it; the class/content objectives move it to the class code. Single runs are noisy
at this length (adversarial methods oscillate), so each side is the mean over three seeds.

Measured when the test was written (AMD EPYC, one thread; leakage, seeds 0/1/2): twin 0.71 / 0.83 /
0.34; mathieu2016 0.17 / 0.37 / 0.62; drnet with ``similarity_normalization: batch``
0.00 / 0.00 / 0.00 (0.07 / 0.86 / 0.43 with its default, the raw codes); lord 0.18 / 0.40 / 0.25; f_statistic 0.43 /
0.30 / 0.14. Marked slow (about 7 minutes on one thread): ``python -m pytest -m slow
tests/objectives/test_class_content_planted.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle import load
from disentangle.config import load_config
from disentangle.data import build_dataset
from disentangle.data.samples import SampleDataset
from disentangle.metrics import evaluate_metrics
from disentangle.training.trainer import fit

pytestmark = pytest.mark.slow

SEEDS = (0, 1, 2)
STEPS = 2000
SPLIT = {"class_factors": ["side"], "class_dim": 3}


@pytest.fixture(scope="module")
def planted():
    grid = build_dataset({"name": "sprites", "image_size": 32})
    rng = np.random.default_rng(0)
    factors = np.asarray(grid.sample_factors(8192, rng))
    side = rng.integers(0, 2, size=len(factors))
    factors[:, 3] = np.where(side == 1, 25, 6)
    x = torch.as_tensor(grid.sample_observations_from_factors(factors, rng))
    images = (x.clamp(0, 1) * 255).round().to(torch.uint8)
    labels = np.stack([side, factors[:, 0]], 1)
    return lambda: SampleDataset(images, labels, ["side", "shape"], label_sizes=[2, 3], name="sprites by side")


def _leakage(objective: str, seed: int, make, out) -> float:
    overrides = {
        "seed": seed, "data.name": "sprites", "model.backbone": "mlp", "model.hidden_sizes": "[256]",
        "model.latent_dim": 6, "objective.name": objective, "train.steps": STEPS, "train.batch_size": 64,
        "train.lr": 1e-3, "train.log_every": 500, "train.checkpoint_every": STEPS, "train.out_dir": str(out),
        "train.progress": "false", "train.device": "cpu", "train.traversals": "false",
    }
    if objective != "beta_vae":
        overrides.update({"objective.class_factors": "[side]", "objective.class_dim": 3})
    if objective == "lord":
        overrides["objective.stage1_steps"] = STEPS // 2
    if objective == "drnet":  # on a small MLP the batch-standardised similarity separates best
        overrides["objective.similarity_normalization"] = "batch"
    fit(load_config(None, [f"{k}={v}" for k, v in overrides.items()]), dataset=make())
    settings = {**SPLIT, "num_train": 2000, "num_test": 1000}
    scores = evaluate_metrics(make(), load(out / "checkpoint.pt"), ["class_leakage"], seed=0,
                              settings={"class_leakage": settings})
    return scores["class_leakage"]["class_leakage"]


@pytest.fixture(scope="module")
def twin(planted, tmp_path_factory, one_thread_module):
    root = tmp_path_factory.mktemp("twin")
    return float(np.mean([_leakage("beta_vae", s, planted, root / f"s{s}") for s in SEEDS]))


@pytest.fixture(scope="module")
def one_thread_module():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("objective", ["mathieu2016", "drnet", "lord", "f_statistic"])
def test_the_content_code_leaks_less_of_a_planted_class_than_the_twins(objective, planted, twin, tmp_path):
    assert twin > 0.3  # the twin does carry the side in its first three dimensions
    leakage = float(np.mean([_leakage(objective, s, planted, tmp_path / f"s{s}") for s in SEEDS]))
    assert leakage < twin - 0.1, (objective, leakage, twin)
