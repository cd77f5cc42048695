"""How metrics call the representation: batch size by device, and the code table's progress."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle.data import build_dataset
from disentangle.metrics import evaluate_metrics
from disentangle.metrics._representation import (
    CPU_REPRESENTATION_BATCH_SIZE,
    DEFAULT_REPRESENTATION_BATCH_SIZE,
    RepresentationFunction,
    default_representation_batch_size,
)
from disentangle.metrics.code_table import CodeTable
from disentangle.models import VAE

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_batch_size_depends_on_the_device():
    assert default_representation_batch_size("cpu") == default_representation_batch_size(None) == 64 == CPU_REPRESENTATION_BATCH_SIZE
    assert default_representation_batch_size("cuda") == default_representation_batch_size("cuda:1") == 1024 == DEFAULT_REPRESENTATION_BATCH_SIZE
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=2)
    assert RepresentationFunction(model).batch_size == 64
    assert RepresentationFunction(model, 100).batch_size == 100
    assert RepresentationFunction(lambda x: x).batch_size == 64  # a plain function: the CPU default


def test_a_model_encodes_the_same_codes_in_any_batch_size():
    torch.manual_seed(0)
    model = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=4).eval()
    x = torch.rand(300, 1, 64, 64)
    small, large = model.representation(x), model.representation(x, batch_size=1024)
    assert torch.allclose(small, large, atol=1e-5)


def test_the_code_table_reports_its_encoding():
    dataset = build_dataset({"name": "sprites"})
    calls = []
    table = CodeTable(dataset, lambda x: x.reshape(len(x), -1)[:, :3], on_encode=lambda n, total: calls.append((n, total)))
    rng = np.random.default_rng(0)
    table.sample_observations_from_factors(table.sample_factors(500, rng), rng)
    assert calls and all(total == len(dataset) for _, total in calls)
    assert sum(n for n, _ in calls) == table.encoded and all(n <= 64 for n, _ in calls)


def test_evaluate_metrics_passes_the_progress_on(monkeypatch):
    dataset = build_dataset({"name": "sprites"})
    torch.manual_seed(0)
    model = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=4)
    seen = []
    evaluate_metrics(
        dataset, model, ["mig"], settings={"mig": {"num_train": 200}}, code_table=True, on_encode=lambda n, t: seen.append(n)
    )
    assert 0 < sum(seen) <= 200


def test_a_metric_leaves_torchs_thread_count_as_it_was():
    """DCI's boosted trees set numba's OpenMP threads, which torch shares: a metric evaluated during
    a one-thread training run must not leave it on more threads."""
    from disentangle.metrics import dci
    from disentangle.metrics.synthetic import FactorObservationDataset

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        dci(FactorObservationDataset((4, 5, 6)), lambda x: x, num_train=300, num_test=100, n_jobs=2)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
