"""Regression tests of the metric defects of issue 9 (items 1, 5-12): each failed before its fix."""
from __future__ import annotations

import copy
import tracemalloc
import typing

import numpy as np
import pytest
import torch

from disentangle.errors import ConfigError, ParameterError
from disentangle.metrics import (
    METRICS,
    beta_vae_score,
    dci,
    discrete_mutual_info,
    downstream_task,
    evaluate_metrics,
    factor_vae_score,
    histogram_discretize,
    mig,
    modularity_explicitness,
    sap_score,
)
from disentangle.metrics.synthetic import FactorObservationDataset

SIZES = (3, 4, 5)
NAMES = ("a", "b", "c")
DSPRITES_SIZES = (3, 6, 40, 32, 32)
DSPRITES_NAMES = ("shape", "scale", "orientation", "position_x", "position_y")


pytestmark = pytest.mark.usefixtures("one_thread")


def small_dataset() -> FactorObservationDataset:
    return FactorObservationDataset(SIZES, NAMES)


class Counting:
    """``codes = x @ matrix`` that counts the observations it encoded."""

    def __init__(self, matrix=None) -> None:
        self.matrix = None if matrix is None else torch.as_tensor(matrix, dtype=torch.float64)
        self.images = 0

    def __call__(self, x):
        self.images += len(x)
        x = torch.as_tensor(x).to(torch.float64).flatten(1)
        return x if self.matrix is None else x @ self.matrix


class StochasticCodes:
    """A representation that samples its codes: a fresh Gaussian draw per call (seeded)."""

    def __init__(self, dim: int = 3, seed: int = 0) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.dim = dim
        self.images = 0

    def __call__(self, x):
        self.images += len(x)
        return torch.randn(len(x), self.dim, generator=self.generator, dtype=torch.float64)


CHEAP = {
    "beta_vae_score": {"num_train": 40, "num_eval": 20, "batch_size": 4},
    "factor_vae_score": {"num_train": 40, "num_eval": 20, "num_variance_estimate": 100, "batch_size": 4},
    "mig": {"num_train": 300},
    "modularity_explicitness": {"num_train": 300, "num_test": 100, "n_jobs": 1},
    "dci": {"num_train": 300, "num_test": 100},
    "sap_score": {"num_train": 300, "num_test": 100, "n_jobs": 1},
    "downstream_task": {"num_train": [50], "num_test": 50, "predictors": ["gradient_boosting"]},
    "irs": {"num_train": 300},
    "fairness": {"num_train": 200, "num_test_points_per_class": 20, "n_jobs": 1},
    "reduced_downstream_task": {"num_train": [150], "num_test": 50, "n_jobs": 1},
    "strong_downstream_task": {"num_train": [100], "num_test": 50, "n_experiment": 2, "n_jobs": 1},
    "unified_scores": {"num_train": 300, "num_test": 100, "n_jobs": 1},
}


# ------------------------------------------------------------------ item 1: value checks
BAD_SETTINGS = [
    ("mig", {"estimator": "chn"}, "Did you mean 'chen'"),
    ("mig", {"num_samples": 0}, "num_samples"),
    ("mig", {"seed": -1}, "seed"),
    ("dci", {"booster": "exat"}, "Did you mean 'exact'"),
    ("dci", {"n_jobs": 0}, "n_jobs"),
    ("sap_score", {"n_jobs": 0}, "n_jobs"),
    ("sap_score", {"continuous_factors": "yes"}, "continuous_factors"),
    ("modularity_explicitness", {"num_bins": 0}, "num_bins"),
    ("modularity_explicitness", {"n_jobs": -2}, "n_jobs"),
    ("factor_vae_score", {"prune_threshold": -1}, "prune_threshold"),
    ("beta_vae_score", {"representation_batch_size": 0}, "representation_batch_size"),
    ("unsupervised_scores", {"num_train": 1}, "num_train"),
    ("downstream_task", {"predictors": ["logistic_regresion"]}, "Did you mean 'logistic_regression'"),
    ("downstream_task", {"booster": "hist"}, "booster"),
    ("downstream_task", {"num_train": [100, 0]}, "num_train"),
    ("elbo_decomposition", {"mixture": "grd"}, "Did you mean 'grid'"),
    ("mig", {"factors": ["aa"]}, "Did you mean 'a'"),
    ("dci", {"factors": [7]}, "factors"),
    ("irs", {"diff_quantile": 1.5}, "diff_quantile"),
    ("fairness", {"predictor": "gradient_bosting"}, "Did you mean 'gradient_boosting'"),
    ("fairness", {"predictor": "logistic_regression", "num_train": 3}, ">= 5"),
    ("reduced_downstream_task", {"num_factors_to_remove": 0}, "num_factors_to_remove"),
    ("strong_downstream_task", {"n_experiment": 0}, "n_experiment"),
    ("unified_scores", {"matrices": []}, "matrices"),
]


@pytest.mark.parametrize(("name", "settings", "message"), BAD_SETTINGS)
def test_bad_metric_settings_raise_parameter_errors_before_any_encoding(name, settings, message):
    rep = Counting()
    with pytest.raises(ParameterError, match=message):
        METRICS.get(name)(small_dataset(), rep, **settings)
    assert rep.images == 0


@pytest.mark.parametrize(("name", "settings", "message"), BAD_SETTINGS)
def test_validate_settings_reports_the_same_errors_without_a_run(name, settings, message):
    from disentangle.metrics import validate_settings

    with pytest.raises(ParameterError, match=message):
        validate_settings(name, settings, small_dataset())


def test_validate_settings_explains_unknown_names_and_returns_good_settings():
    from disentangle.metrics import validate_settings

    with pytest.raises(ConfigError, match="Did you mean 'num_train'"):
        validate_settings("dci", {"num_trian": 10})
    with pytest.raises(ConfigError, match="Unknown metric"):
        validate_settings("dcx", {})
    assert validate_settings("dci", {"booster": "hist", "num_train": 200.0}) == {"booster": "hist", "num_train": 200}
    # factor names can only be checked against a dataset; without one their form is checked
    assert validate_settings("mig", {"factors": ["b"]}) == {"factors": ["b"]}
    with pytest.raises(ParameterError, match="factors"):
        validate_settings("mig", {"factors": "b"})


def test_evaluate_metrics_checks_every_setting_before_the_first_metric_runs():
    rep = Counting()
    with pytest.raises(ParameterError, match="Did you mean 'exact'"):
        evaluate_metrics(small_dataset(), rep, ["mig", "dci"], settings={"dci": {"booster": "exat"}})
    assert rep.images == 0


def test_choice_parameters_are_typed_with_their_choices():
    import importlib

    dci_module, mig_module, downstream, elbo_decomposition = (
        importlib.import_module(f"disentangle.metrics.{name}")
        for name in ("dci", "mig", "downstream", "elbo_decomposition")
    )
    hints = typing.get_type_hints(dci_module.dci)
    assert typing.get_args(hints["booster"]) == dci_module.BOOSTERS == ("exact", "sklearn", "hist")
    assert typing.get_args(typing.get_type_hints(mig_module.mig)["estimator"]) == ("histogram", "chen")
    predictors = typing.get_type_hints(downstream.downstream_task)["predictors"]
    assert typing.get_args(typing.get_args(predictors)[0]) == tuple(downstream.PREDICTORS)
    mixture = typing.get_type_hints(elbo_decomposition.elbo_decomposition)["mixture"]
    assert typing.get_args(mixture) == ("sample", "grid")


# ------------------------------------------------------------------ item 5: constant codes
def _reference_mutual_info(codes_binned, factors):
    from sklearn.metrics import mutual_info_score

    return np.array(
        [[mutual_info_score(codes_binned[:, j], factors[:, k]) for k in range(factors.shape[1])]
         for j in range(codes_binned.shape[1])]
    )


def _reference_modularity(mi):
    """disentanglement_lib's ``modularity``, written out from its definition."""
    squared = mi**2
    top = squared.max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 1.0 - (squared.sum(axis=1) - top) / (top * (mi.shape[1] - 1))
    score[top == 0] = 0.0
    return score.mean()


def test_mutual_information_with_a_single_valued_column_is_exactly_zero():
    rng = np.random.default_rng(0)
    a = np.column_stack([rng.integers(20, size=997), np.full(997, 3), rng.integers(7, size=997)])
    b = np.column_stack([rng.integers(5, size=997), np.zeros(997, dtype=np.int64)])
    mi = discrete_mutual_info(a, b)
    assert (mi[1] == 0.0).all() and (mi[:, 1] == 0.0).all()
    np.testing.assert_allclose(mi, _reference_mutual_info(a, b), atol=1e-12)


def test_modularity_scores_dead_dimensions_as_not_modular_on_the_dsprites_grid():
    dataset = FactorObservationDataset(DSPRITES_SIZES, DSPRITES_NAMES)

    def five_informative_five_dead(x):
        x = torch.as_tensor(x, dtype=torch.float64)
        return torch.cat([x, torch.zeros_like(x)], dim=1)

    scores = modularity_explicitness(dataset, five_informative_five_dead, num_train=600, num_test=20, n_jobs=1)
    rng = np.random.default_rng(0)  # the metric's own draw, repeated
    factors = dataset.sample_factors(600, rng)
    codes = five_informative_five_dead(dataset.sample_observations_from_factors(factors, rng)).numpy()
    expected = _reference_modularity(_reference_mutual_info(histogram_discretize(codes, 20), factors))
    assert expected < 0.55  # half the codes carry no information
    assert scores["modularity"] == pytest.approx(expected, abs=1e-9)


# ------------------------------------------------------------------ item 6: factors=
def test_mig_factors_selects_the_factors_averaged_chen_protocol_on_a_dsprites_like_grid():
    from disentangle.metrics import CodeTable  # noqa: F401 - the public API stays importable

    class Encoder(torch.nn.Module):
        """mu = factors (scaled), constant small posterior variance."""

        def encode(self, x):
            mu = torch.as_tensor(x, dtype=torch.float64)
            return mu, torch.full_like(mu, -6.0)

        def representation(self, x):
            return self.encode(x)[0]

    dataset = FactorObservationDataset((3, 4, 2, 3), ("shape", "scale", "orientation", "position_x"))
    chen_protocol = ["scale", "orientation", "position_x"]
    every = mig(dataset, Encoder(), estimator="chen", num_samples=72)
    chosen = mig(dataset, Encoder(), estimator="chen", num_samples=72, factors=chen_protocol)
    assert set(chosen) == {"mig", *(f"mig_{n}" for n in chen_protocol)}
    assert chosen["mig"] == pytest.approx(np.mean([every[f"mig_{n}"] for n in chen_protocol]), abs=1e-12)
    by_index = mig(dataset, Encoder(), estimator="chen", num_samples=72, factors=[1, 2, 3])
    assert by_index == chosen
    hist = mig(dataset, Counting(), num_train=500, factors=["shape"])
    assert set(hist) == {"mig", "mig_shape"} and hist["mig"] == mig(dataset, Counting(), num_train=500)["mig_shape"]


def test_dci_sap_and_modularity_score_only_the_chosen_factors():
    from disentangle.metrics.dci import dci_from_importance, importance_matrix
    from disentangle.metrics.sap import sap_from_score_matrix

    dataset = small_dataset()
    mixing = Counting(np.array([[1.0, 0.3, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))  # c unencoded
    rng = np.random.default_rng(0)
    from disentangle.metrics._representation import as_representation_function
    from disentangle.metrics._sampling import sample_codes_and_factors
    from disentangle.metrics._settings import derived_seed

    code_fn = as_representation_function(mixing)
    x_train, y_train = sample_codes_and_factors(dataset, code_fn, 300, rng)
    x_test, y_test = sample_codes_and_factors(dataset, code_fn, 100, rng)
    R, train_acc, test_acc = importance_matrix(x_train, y_train[:, :2], x_test, y_test[:, :2], random_state=derived_seed(0, 1))
    chosen = dci(dataset, mixing, num_train=300, num_test=100, factors=["a", "b"])
    expected = dci_from_importance(R)
    assert chosen["disentanglement"] == pytest.approx(expected["disentanglement"], abs=1e-12)
    assert chosen["completeness"] == pytest.approx(expected["completeness"], abs=1e-12)
    assert chosen["informativeness_test"] == pytest.approx(test_acc.mean(), abs=1e-12)
    every = dci(dataset, mixing, num_train=300, num_test=100)
    assert every["completeness"] < chosen["completeness"]  # c, which no code carries, is scored

    sap_all = sap_score(dataset, mixing, num_train=300, num_test=100, continuous_factors=True)
    sap_ab = sap_score(dataset, mixing, num_train=300, num_test=100, continuous_factors=True, factors=["b", "a"])
    from disentangle.metrics.sap import squared_correlation_matrix

    matrix = squared_correlation_matrix(x_train, y_train)
    assert sap_all["sap"] == pytest.approx(sap_from_score_matrix(matrix), abs=1e-12)
    assert sap_ab["sap"] == pytest.approx(sap_from_score_matrix(matrix[:, [1, 0]]), abs=1e-12)

    mod = modularity_explicitness(dataset, mixing, num_train=300, num_test=20, factors=["a", "b"], n_jobs=1)
    from disentangle.metrics.modularity import modularity_from_mutual_info

    mi = discrete_mutual_info(histogram_discretize(x_train, 20), y_train)
    assert mod["modularity"] == pytest.approx(modularity_from_mutual_info(mi[:, :2]), abs=1e-12)


def test_factor_vae_and_beta_vae_hold_fixed_only_the_chosen_factors():
    dataset = small_dataset()
    b_and_c_mixed = Counting(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]))  # codes (a, b + c)
    settings = {"num_train": 200, "num_eval": 100, "num_variance_estimate": 500, "batch_size": 16}
    every = factor_vae_score(dataset, b_and_c_mixed, **settings)
    chosen = factor_vae_score(dataset, b_and_c_mixed, factors=["a", "b"], **settings)
    assert chosen["eval_accuracy"] > 0.95 and every["eval_accuracy"] < 0.75
    beta = beta_vae_score(dataset, b_and_c_mixed, factors=["a", "b"], num_train=200, num_eval=100, batch_size=16)
    beta_every = beta_vae_score(dataset, b_and_c_mixed, num_train=200, num_eval=100, batch_size=16)
    assert beta["eval_accuracy"] > 0.95 and beta_every["eval_accuracy"] < 0.75


def test_downstream_task_reports_only_the_chosen_factors():
    out = downstream_task(small_dataset(), Counting(), factors=["c"], **CHEAP["downstream_task"])
    assert [k for k in out if "test_accuracy_" in k] == ["gbt_50:test_accuracy_c"]
    assert out["gbt_50:mean_test_accuracy"] == out["gbt_50:test_accuracy_c"]


# ------------------------------------------------------------------ item 7: code table
def test_the_code_table_is_not_used_for_a_stochastic_callable():
    from disentangle.data import DATASETS
    from disentangle.models.vae import VAE

    dataset = DATASETS.build("_tiny_test")  # 24 grid points, deterministic observations
    settings = {"mig": {"num_train": 300}}
    noise = StochasticCodes()
    out = evaluate_metrics(dataset, noise, ["mig"], settings=settings)
    assert noise.images == 300  # every draw encoded: no code frozen per grid point
    assert out["mig"] == mig(dataset, StochasticCodes(), num_train=300)
    forced = StochasticCodes()
    evaluate_metrics(dataset, forced, ["mig"], settings=settings, code_table=True)
    assert forced.images <= len(dataset)

    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=3, hidden_sizes=[8]).eval()
    encoded = []
    model.encoder.register_forward_hook(lambda module, inputs, output: encoded.append(len(inputs[0])))
    evaluate_metrics(dataset, model, ["mig"], settings=settings)
    assert sum(encoded) <= len(dataset)  # a model's posterior means are deterministic: tabled
    with pytest.raises(ParameterError, match="code_table"):
        evaluate_metrics(dataset, model, ["mig"], settings=settings, code_table="yes")


# ------------------------------------------------------------------ item 8: eval mode
class BatchNormCodes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8), torch.nn.Tanh())
        self.head = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Linear(8, 3))

    def forward(self, x):
        return self.head(self.body(torch.as_tensor(x, dtype=torch.float32)))


def test_metrics_evaluate_modules_in_eval_mode_and_restore_every_submodule_mode():
    dataset = small_dataset()
    module = BatchNormCodes()
    with torch.no_grad():  # running statistics away from their initial values
        module.body(torch.randn(64, 3) * 3 + 1)
    module.train()
    module.head[1].eval()  # mixed modes must come back as they were
    modes = {name: m.training for name, m in module.named_modules()}
    stats = {k: v.clone() for k, v in module.state_dict().items()}
    reference = copy.deepcopy(module).eval()

    for representation in (module, module.forward):
        scores = mig(dataset, representation, num_train=400)
        assert scores == mig(dataset, reference, num_train=400)
        assert {name: m.training for name, m in module.named_modules()} == modes
        for key, value in module.state_dict().items():
            assert torch.equal(value, stats[key]), key
    evaluate_metrics(dataset, module, ["mig", "unsupervised_scores"],
                     settings={"mig": {"num_train": 300}, "unsupervised_scores": {"num_train": 300}})
    assert {name: m.training for name, m in module.named_modules()} == modes
    assert all(torch.equal(v, stats[k]) for k, v in module.state_dict().items())


# ------------------------------------------------------------------ item 9: float32 overflow
def test_exact_booster_refuses_codes_that_overflow_float32():
    from disentangle.metrics._boosting import fit_boosted_trees

    dataset = small_dataset()
    with pytest.raises(ValueError, match="float32"):
        dci(dataset, lambda x: torch.as_tensor(x, dtype=torch.float64) * 1e39, num_train=100, num_test=50)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2))
    y = (x[:, 0] > 0).astype(np.int64)
    model = fit_boosted_trees(x, y, n_stages=3)
    with pytest.raises(ValueError, match="float32"):
        model.predict(x * 1e39)
    with pytest.raises(ValueError, match="float32"):
        fit_boosted_trees(x * 1e39, y, n_stages=3)


# ------------------------------------------------------------------ item 10: FactorVAE, no pruning
def test_factor_vae_score_without_pruning_never_chooses_a_constant_dimension():
    dataset = small_dataset()

    def factors_and_a_constant(x):
        x = torch.as_tensor(x, dtype=torch.float64)
        return torch.cat([x, torch.zeros(len(x), 1, dtype=torch.float64)], dim=1)

    scores = factor_vae_score(dataset, factors_and_a_constant, prune_threshold=0.0, **CHEAP["factor_vae_score"])
    assert scores == {"train_accuracy": 1.0, "eval_accuracy": 1.0, "num_active_dims": 3.0}


# ------------------------------------------------------------------ item 11: size-1 factors
class WithConstantFactor:
    """``base`` plus a last factor with a single value, drawing exactly what ``base`` draws."""

    def __init__(self, base) -> None:
        self.base = base
        self.factor_sizes = (*base.factor_sizes, 1)
        self.factor_names = (*base.factor_names, "constant")

    def sample_factors(self, n, rng):
        factors = self.base.sample_factors(n, rng)
        return np.column_stack([factors, np.zeros(n, dtype=np.int64)])

    def sample_observations_from_factors(self, factors, rng):
        return self.base.sample_observations_from_factors(np.asarray(factors)[:, :-1], rng)


@pytest.mark.parametrize("name", list(CHEAP))
def test_a_single_valued_factor_changes_no_score(name):
    base = FactorObservationDataset((5, 6), ("x", "y"))
    with_constant = WithConstantFactor(base)
    mixing = Counting(np.array([[1.0, 0.4], [0.5, 1.0]]))
    settings = CHEAP[name]
    assert METRICS.get(name)(with_constant, mixing, **settings) == METRICS.get(name)(base, mixing, **settings)
    with pytest.raises(ParameterError, match="single value"):
        METRICS.get(name)(with_constant, mixing, factors=["constant"], **settings)


# ------------------------------------------------------------------ item 12: wide codes
def test_mutual_information_of_wide_codes_stays_in_bounded_memory():
    rng = np.random.default_rng(0)
    n, d = 1000, 256
    codes = rng.normal(size=(n, d))
    codes[:, 1] = codes[:, 0] + 0.01 * rng.normal(size=n)  # one informative pair
    binned = histogram_discretize(codes, 20)
    tracemalloc.start()
    try:
        mi = discrete_mutual_info(binned, binned)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 48 * 2**20  # the one-hot product needed (20 d)^2 doubles several times: > 400 MB
    pick = [0, 1, 2, 255]
    np.testing.assert_allclose(mi[np.ix_(pick, pick)], _reference_mutual_info(binned[:, pick], binned[:, pick]), atol=1e-12)
    assert mi[0, 1] > 1.0 and mi[0, 2] < 0.3


@pytest.mark.parametrize("block", [1, 700, 1 << 20])
def test_mutual_information_does_not_depend_on_the_block_size(block, monkeypatch):
    from disentangle.metrics import _information

    monkeypatch.setattr(_information, "MI_BLOCK_ELEMENTS", block)
    rng = np.random.default_rng(1)
    codes = histogram_discretize(rng.normal(size=(300, 7)), 20)
    codes[:, 3] = codes[:, 2] // 2  # a dependent pair
    codes[:, 5] = 0  # a constant code
    factors = rng.integers(4, size=(300, 3))
    pairwise = discrete_mutual_info(codes, codes)
    np.testing.assert_allclose(pairwise, _reference_mutual_info(codes, codes), atol=1e-12)
    assert (pairwise == pairwise.T).all() and (pairwise[5] == 0).all()
    np.testing.assert_allclose(discrete_mutual_info(codes, factors), _reference_mutual_info(codes, factors), atol=1e-12)
