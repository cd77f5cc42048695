"""Exact values of the shared helpers: discretisation, mutual information, entropy, batching."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import mutual_info_score

from disentangle.errors import ConfigError
from disentangle.metrics import evaluate_metrics, mig, sap_score
from disentangle.metrics._information import discrete_entropy, discrete_mutual_info, histogram_discretize
from disentangle.metrics._parallel import parallel_map, resolve_n_jobs
from disentangle.metrics._representation import RepresentationFunction

from .test_common import GaussianEncoder, dataset, perfect, rotated


def _reference_discretize(codes, num_bins):
    """disentanglement_lib's rule, one column at a time (0-based)."""
    out = np.zeros(codes.shape, dtype=np.int64)
    for j in range(codes.shape[1]):
        out[:, j] = np.digitize(codes[:, j], np.histogram(codes[:, j], num_bins)[1][:-1]) - 1
    return out


def test_histogram_discretize_hand_values():
    x = np.arange(9, dtype=np.float64)[:, None]  # edges 0, 2, 4, 6, 8
    assert histogram_discretize(x, 4)[:, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 3]
    const = np.full((5, 1), 3.0)  # np.histogram's range is then [2.5, 3.5]; 3.0 sits on an edge
    assert histogram_discretize(const, 2)[:, 0].tolist() == [1] * 5
    assert histogram_discretize(const, 2).tolist() == _reference_discretize(const, 2).tolist()


@pytest.mark.parametrize("num_bins", [1, 2, 7, 20, 50])
def test_histogram_discretize_matches_reference_bit_for_bit(num_bins):
    rng = np.random.default_rng(num_bins)
    codes = np.concatenate(
        [
            rng.normal(size=(3000, 3)) * [1.0, 1e-3, 1e4],
            rng.integers(0, 7, size=(3000, 2)) / 7.0,  # many values exactly on bin edges
            np.linspace(-1, 1, 3000)[:, None],
            np.full((3000, 1), -2.0),
        ],
        axis=1,
    )
    assert np.array_equal(histogram_discretize(codes, num_bins), _reference_discretize(codes, num_bins))


def test_discretize_rejects_bad_input():
    with pytest.raises(ValueError, match="finite"):
        histogram_discretize(np.array([[0.0], [np.nan]]), 5)
    with pytest.raises(ValueError, match=r"shape \(n, d\)"):
        histogram_discretize(np.zeros(5), 5)
    with pytest.raises(ConfigError, match="num_bins"):
        histogram_discretize(np.zeros((5, 1)), 0)


def test_mutual_information_hand_values():
    a = np.array([[0, 0, 1, 1], [0, 0, 0, 1]]).T
    b = np.array([[0, 1, 0, 1], [0, 0, 1, 1]]).T
    mi = discrete_mutual_info(a, b)
    expected_10 = 0.5 * math.log(4 / 3) + 0.25 * math.log(2 / 3) + 0.25 * math.log(2)
    assert mi[0, 0] == pytest.approx(0.0, abs=1e-15)  # independent
    assert mi[0, 1] == pytest.approx(math.log(2), rel=1e-12)  # identical
    assert mi[1, 1] == pytest.approx(expected_10, rel=1e-12)
    assert discrete_entropy(a).tolist() == pytest.approx([math.log(2), -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))])


def test_vectorised_mutual_information_matches_sklearn():
    rng = np.random.default_rng(0)
    n = 2000
    factors = np.stack([rng.integers(0, s, n) for s in (3, 6, 40)], axis=1)
    codes = np.stack(
        [factors[:, 0] * 2 + rng.integers(0, 2, n), rng.integers(0, 20, n), (factors[:, 2] // 3 + 5) * 7], axis=1
    )
    mi = discrete_mutual_info(codes, factors)
    for i in range(codes.shape[1]):
        for j in range(factors.shape[1]):
            assert mi[i, j] == pytest.approx(mutual_info_score(factors[:, j], codes[:, i]), rel=1e-10, abs=1e-13)
    entropy = discrete_entropy(factors)
    for j in range(3):
        assert entropy[j] == pytest.approx(mutual_info_score(factors[:, j], factors[:, j]), rel=1e-12)


def test_representation_function_accepts_models_callables_and_arrays():
    model = GaussianEncoder(np.eye(3), logvar=0.0)
    x = torch.rand(2500, 3, dtype=torch.float64)
    calls = []

    def fn(obs):
        calls.append(len(obs))
        return obs.numpy()

    out_model = RepresentationFunction(model, batch_size=1000)(x)
    out_fn = RepresentationFunction(fn, batch_size=1000)(x)
    assert out_model.dtype == np.float64 and out_model.shape == (2500, 3)
    assert np.array_equal(out_model, x.numpy()) and np.array_equal(out_fn, x.numpy())
    assert calls == [1000, 1000, 500]
    with pytest.raises(ValueError, match=r"1-D array"):
        RepresentationFunction(lambda o: o[:, 0])(x)
    with pytest.raises(ValueError, match="one code per observation"):
        RepresentationFunction(lambda o: o[:-1])(x)
    with pytest.raises(ValueError, match="non-finite"):
        RepresentationFunction(lambda o: o * float("nan"))(x)
    with pytest.raises(TypeError, match="returned a tuple"):
        RepresentationFunction(model.encode)(x)
    with pytest.raises(TypeError, match="representation must be"):
        RepresentationFunction(42)


def test_representation_of_a_module_runs_without_gradients_on_its_device():
    seen = {}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def representation(self, x):
            seen["grad"] = torch.is_grad_enabled()
            seen["device"] = x.device
            return self.lin(x.float())

    codes = RepresentationFunction(Net())(np.random.rand(10, 3))  # ndarray input becomes a tensor
    assert codes.shape == (10, 2) and seen == {"grad": False, "device": torch.device("cpu")}


def test_bad_settings_and_datasets_are_explained():
    with pytest.raises(ConfigError, match="num_train must be an integer >= 2"):
        mig(dataset(), perfect, num_train=1)
    with pytest.raises(ConfigError, match="estimator is 'ksg', which is not a valid choice. Valid choices: 'histogram', 'chen'"):
        mig(dataset(), perfect, estimator="ksg")
    with pytest.raises(ConfigError, match="seed"):
        mig(dataset(), perfect, seed=-1)
    with pytest.raises(TypeError, match="ground-truth interface"):
        mig(object(), perfect)
    with pytest.raises(ConfigError, match="n_jobs"):
        sap_score(dataset(), perfect, num_train=50, num_test=20, n_jobs=0)
    with pytest.raises(ConfigError, match="encode"):
        mig(dataset(), perfect, estimator="chen")


def test_code_cache_shares_draws_without_changing_values():
    ds = dataset()
    calls = []

    def rep(x):
        calls.append(len(x))
        return x.numpy() * 2.0

    alone = {name: fn for name, fn in [("mig", mig)]}
    direct = alone["mig"](ds, rep, num_train=500)
    n_direct = len(calls)
    calls.clear()
    results = evaluate_metrics(
        ds, rep, ["mig", "unsupervised_scores"], settings={"mig": {"num_train": 500}, "unsupervised_scores": {"num_train": 500}}
    )
    assert results["mig"] == direct
    assert len(calls) == n_direct  # the second metric reused the first one's draw


def test_a_metric_served_from_the_code_cache_scores_as_it_does_alone():
    """The cache hands a later metric the earlier one's draw and moves the random generator past it:
    SAP's test draw (after its training draw, which MIG's draw serves) is a fresh one, and SAP scores
    as it does alone (left where it was, the test draw would repeat the training draw)."""
    ds = dataset()
    settings = {"mig": {"num_train": 300}, "sap_score": {"num_train": 300, "num_test": 300}}
    results = evaluate_metrics(ds, rotated(), ["mig", "sap_score"], settings=settings)
    assert results["sap_score"] == sap_score(ds, rotated(), num_train=300, num_test=300)


def test_parallel_map_order_and_n_jobs():
    tasks = [(i,) for i in range(7)]
    serial = parallel_map(_square, tasks, n_jobs=1, costs=[1, 5, 2, 7, 3, 0, 4])
    parallel = parallel_map(_square, tasks, n_jobs=2, costs=[1, 5, 2, 7, 3, 0, 4])
    assert serial == parallel == [i * i for i in range(7)]
    assert resolve_n_jobs(None, 1) == 1 and resolve_n_jobs(3, 2) == 2


def _square(i):
    return i * i
