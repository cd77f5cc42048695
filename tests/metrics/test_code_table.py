"""Encoding each grid point once (CodeTable) gives the same scores as encoding every draw."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from disentangle.data import DATASETS
from disentangle.metrics import (
    LOCATELLO_METRICS,
    METRICS,
    CodeTable,
    evaluate_metrics,
    supports_code_table,
)
from disentangle.models.vae import VAE

SMALL = {
    "beta_vae_score": {"num_train": 60, "num_eval": 30, "batch_size": 8},
    "factor_vae_score": {"num_train": 60, "num_eval": 30, "num_variance_estimate": 200, "batch_size": 8},
    "mig": {"num_train": 300},
    "modularity_explicitness": {"num_train": 300, "num_test": 100},
    "dci": {"num_train": 300, "num_test": 100},
    "sap_score": {"num_train": 300, "num_test": 100},
    "unsupervised_scores": {"num_train": 300},
}


class CountingProjection:
    """Exact codes (integer sums of 0/1 pixels) that count how many images they encoded."""

    def __init__(self, pixels: int, dims: int = 4) -> None:
        self.weights = torch.as_tensor(np.random.default_rng(0).integers(-3, 4, size=(pixels, dims)), dtype=torch.float64)
        self.calls = 0
        self.images = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.images += len(x)
        return x.flatten(1).double() @ self.weights


def test_each_metric_scores_the_same_with_a_code_table_and_encodes_each_grid_point_once(tiny_dataset):
    dataset = tiny_dataset
    for name, settings in SMALL.items():
        direct_rep = CountingProjection(256)
        direct = METRICS.get(name)(dataset, direct_rep, seed=3, **settings)
        table_rep = CountingProjection(256)
        table = CodeTable(dataset, table_rep)
        cached = METRICS.get(name)(table, table.identity, seed=3, **settings)
        assert cached == direct, name
        assert table_rep.images == table.encoded <= len(dataset), name  # at most 24 images encoded
        assert table.served == direct_rep.images, name  # every draw still served, same points


def test_the_generator_advances_as_with_the_dataset(tiny_dataset):
    dataset = tiny_dataset
    table = CodeTable(dataset, CountingProjection(256))
    factors = dataset.sample_factors(50, np.random.default_rng(0))
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    codes = table.sample_observations_from_factors(factors, a)
    observations = dataset.sample_observations_from_factors(factors, b)
    np.testing.assert_array_equal(codes, CountingProjection(256)(observations).numpy())
    assert a.integers(1 << 30) == b.integers(1 << 30)


def test_datasets_with_per_draw_nuisance_are_not_tabled(tiny_dataset):
    assert supports_code_table(tiny_dataset)
    noisy = DATASETS.build("noisy_sprites")
    assert not noisy.deterministic_observations and not supports_code_table(noisy)
    with pytest.raises(ValueError, match="not a function of the factors alone"):
        CodeTable(noisy, CountingProjection(4096))
    assert DATASETS.build("sprites").deterministic_observations


def test_evaluate_metrics_uses_the_table_and_gives_the_model_to_metrics_that_need_it(tiny_dataset):
    dataset = tiny_dataset
    names = [*LOCATELLO_METRICS, "unsupervised_scores"]
    with_table_rep, without_rep = CountingProjection(256), CountingProjection(256)
    with_table = evaluate_metrics(dataset, with_table_rep, names, seed=1, settings=SMALL, code_table=True)  # exact codes
    without = evaluate_metrics(dataset, without_rep, names, seed=1, settings=SMALL, code_table=False)
    assert with_table == without
    assert with_table_rep.images <= len(dataset) < without_rep.images

    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=3, hidden_sizes=[16]).eval()
    out = evaluate_metrics(
        dataset, model, ["mig", "elbo_decomposition"], seed=0,
        settings={"mig": {"num_train": 200}, "elbo_decomposition": {"num_samples": 24}},
    )
    assert np.isfinite(out["elbo_decomposition"]["kl"]) and 0.0 <= out["mig"]["mig"] <= 1.0


DOWNSTREAM_SMALL = {"num_train": [20, 40], "num_test": 30, "predictors": ["gradient_boosting"], "n_jobs": 1}


@pytest.mark.parametrize("name", [*SMALL, "downstream_task"])
def test_each_metric_declares_the_draws_it_makes(tiny_dataset, name):
    """``metric_spec(name).draws(settings)`` is the number of observations the metric encodes when
    every draw is encoded (no code table): what ``code_table="auto"`` weighs against the grid."""
    from disentangle.metrics import metric_spec

    settings = DOWNSTREAM_SMALL if name == "downstream_task" else SMALL[name]
    counting = CountingProjection(256)
    METRICS.get(name)(tiny_dataset, counting, seed=3, **settings)
    assert metric_spec(name).draws(settings) == counting.images


def test_a_code_table_is_used_only_where_draws_repeat_grid_points(tiny_dataset):
    """``auto``: a table when the metrics that would use it draw at least a fifth of the grid's size."""
    from disentangle.metrics import CODE_TABLE_MIN_DRAWS_PER_POINT, code_table_pays

    assert CODE_TABLE_MIN_DRAWS_PER_POINT == 0.2
    sprites = DATASETS.build("sprites")  # 737,280 grid points: the threshold is 147,456 draws
    assert not code_table_pays(sprites, {"sap_score": {}})  # 15,000
    assert not code_table_pays(sprites, {"mig": {}, "dci": {}, "sap_score": {}, "unsupervised_scores": {}})  # 50,000
    assert code_table_pays(sprites, {"mig": {}, "factor_vae_score": {}})  # 10,000 + 970,000
    assert code_table_pays(sprites, {"mig": {"num_train": 147_456}})
    assert not code_table_pays(sprites, {"mig": {"num_train": 147_455}})
    assert not code_table_pays(sprites, {"mig": {"estimator": "chen", "num_train": 10**6}})  # gets the model
    assert code_table_pays(tiny_dataset, {"mig": {"num_train": 5}})  # 24 grid points: 5 >= 4.8

    torch.manual_seed(0)
    model = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=3).eval()
    seen: list[int] = []
    evaluate_metrics(sprites, model, ["mig"], settings={"mig": {"num_train": 200}}, on_encode=lambda n, t: seen.append(n))
    assert seen == []  # 200 draws from 737,280 points: encoded draw by draw
    evaluate_metrics(sprites, model, ["mig"], settings={"mig": {"num_train": 200}}, code_table=True,
                     on_encode=lambda n, t: seen.append(n))
    assert 0 < sum(seen) <= 200


def test_evaluate_metrics_encodes_with_a_channels_last_copy_and_leaves_the_model_alone(monkeypatch):
    """``channels_last``: a conv VAE encodes through a copy in channels-last layout (on: the same
    scores up to rounding, the user's weights untouched); off, or a model without 4-D weights, or
    any other callable: the representation itself. ``auto`` follows the CPU capability."""
    from disentangle._core import hardware
    from disentangle.errors import ParameterError
    from disentangle.metrics import encoding_representation

    torch.manual_seed(0)
    conv = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=3).eval()
    weights = {n: p.detach().clone() for n, p in conv.named_parameters()}
    copy = encoding_representation(conv, True)
    assert copy is not conv and isinstance(copy, VAE)
    four_d = [p for p in copy.parameters() if p.dim() == 4]
    assert all(p.is_contiguous(memory_format=torch.channels_last) for p in four_d)
    assert any(not p.is_contiguous() for p in four_d)  # the layout really changed
    assert all(p.is_contiguous() for p in conv.parameters())  # the user's model is left as it was
    assert isinstance(encoding_representation(conv.representation, True), VAE)
    assert encoding_representation(copy, True) is copy  # already channels-last: nothing to copy
    assert encoding_representation(conv, False) is conv
    mlp = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=3, hidden_sizes=[8])
    assert encoding_representation(mlp, True) is mlp
    plain = CountingProjection(4096)
    assert encoding_representation(plain, True) is plain
    monkeypatch.setattr(hardware, "cpu_capability", lambda: "DEFAULT")
    assert encoding_representation(conv, "auto") is conv
    monkeypatch.setattr(hardware, "cpu_capability", lambda: "AVX512")
    assert encoding_representation(conv, "auto") is not conv

    dataset = DATASETS.build("sprites")
    settings = {"mig": {"num_train": 300}, "sap_score": {"num_train": 300, "num_test": 100, "n_jobs": 1}}
    on = evaluate_metrics(dataset, conv, ["mig", "sap_score"], settings=settings, channels_last=True)
    off = evaluate_metrics(dataset, conv, ["mig", "sap_score"], settings=settings, channels_last=False)
    for name in on:
        for key in on[name]:
            assert on[name][key] == pytest.approx(off[name][key], abs=1e-6), (name, key)
    assert all(torch.equal(p, weights[n]) and p.is_contiguous() for n, p in conv.named_parameters())
    with pytest.raises(ParameterError, match="channels_last"):
        evaluate_metrics(dataset, conv, ["mig"], settings=settings, channels_last="yes")
