"""IRS, fairness, the reduced and strong downstream tasks and the unified scores (disentanglement_lib's
remaining metrics), by value: known ends on known codes, planted effects, the score functions against
straightforward transcriptions of the reference's definitions, and the grid each one needs or not."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from disentangle.data import from_arrays
from disentangle.errors import NotAGridError, ParameterError
from disentangle.metrics import (
    dci,
    evaluate_metrics,
    fairness,
    irs,
    metric_spec,
    mig,
    modularity_explicitness,
    reduced_downstream_task,
    sap_score,
    strong_downstream_task,
    unified_scores,
)
from disentangle.metrics._representation import as_representation_function
from disentangle.metrics._sampling import sample_codes_and_factors
from disentangle.metrics._settings import derived_seed
from disentangle.metrics.fairness import fairness_scores, inter_group_fairness
from disentangle.metrics.irs import irs_from_codes
from disentangle.metrics.modularity import modularity_from_mutual_info
from disentangle.metrics.synthetic import FactorObservationDataset
from disentangle.metrics.unified_scores import aggregate_matrix, independent_groups, modularity_per_code

from .test_common import Linear, Noise, dataset, perfect, rotated

pytestmark = pytest.mark.usefixtures("one_thread")

EXACT = 1e-12


# ------------------------------------------------------------------ transcriptions of the reference
def reference_irs(codes, factors, diff_quantile=0.99, num_bins=20):
    """disentanglement_lib's ``compute_irs`` after sampling, loop for loop (arrays as (n, d))."""
    binned = np.zeros_like(factors)
    for k in range(factors.shape[1]):
        binned[:, k] = np.digitize(factors[:, k], np.histogram(factors[:, k], num_bins)[1][:-1])
    active = codes[:, codes.var(axis=0) > 0.0]
    if not active.any():
        return 0.0, np.sum(active)
    max_deviations = np.max(np.abs(active - active.mean(axis=0)), axis=0)
    cum = np.zeros((active.shape[1], binned.shape[1]))
    for i in range(binned.shape[1]):
        values = np.unique(binned[:, i])
        for value in values:
            match = binned[:, i] == value
            e_loc = np.mean(active[match, :], axis=0)
            cum[:, i] += np.percentile(np.abs(active[match, :] - e_loc), q=diff_quantile * 100, axis=0)
        cum[:, i] /= len(values)
    scores = (1.0 - cum / max_deviations[:, None]).max(axis=1)
    avg = np.average(scores, weights=max_deviations) if max_deviations.sum() > 0 else np.mean(scores)
    return avg, np.sum(active)


def reference_precision(matrix, th):
    """disentanglement_lib's ``visualize_scores.precision`` (its depth-first search over the graph)."""
    tmp = matrix.copy()
    tmp[tmp < th] = 0
    rows_seen, columns_seen = np.zeros(tmp.shape[0]), np.zeros(tmp.shape[1])

    def visit(node, is_row, size):
        if is_row:
            rows_seen[node] = 1
            for c in range(tmp.shape[1]):
                if tmp[node, c] != 0 and columns_seen[c] == 0:
                    size = visit(c, False, size + 1)
        else:
            columns_seen[node] = 1
            for r in range(tmp.shape[0]):
                if tmp[r, node] != 0 and rows_seen[r] == 0:
                    size = visit(r, True, size + 1)
        return size

    groups = 0
    for r in range(tmp.shape[0]):
        if rows_seen[r] == 0 and visit(r, True, 1) > 1:
            groups += 1
    return groups


def reference_unified(matrix, ys):
    """disentanglement_lib's ``pr_curves_values`` and four ``aggregation_*`` functions on one matrix."""
    out = {}
    thresholds = np.sort(matrix.flatten())[::-1]
    precisions = [reference_precision(matrix, t) for t in thresholds]
    area = 0.0
    for i in range(len(precisions) - 1):
        area += (precisions[i] + precisions[i + 1]) * (thresholds[i] - thresholds[i + 1]) * 0.5
    out["area_precision"], out["max_precision"] = area, max(precisions)
    per_code = 1.0 - scipy.stats.entropy(matrix.T + 1e-11, base=matrix.shape[1])
    per_factor = 1.0 - scipy.stats.entropy(matrix + 1e-11, base=matrix.shape[0])
    out["dci_disentanglement"] = np.sum(per_code * matrix.sum(axis=1) / matrix.sum())
    out["dci_completeness"] = np.sum(per_factor * matrix.sum(axis=0) / matrix.sum())
    from sklearn.metrics import mutual_info_score

    entropy = np.array([mutual_info_score(ys[:, k], ys[:, k]) for k in range(ys.shape[1])])
    ordered = np.sort(matrix, axis=0)[::-1]
    out["mig_per_factor"] = (ordered[0] - ordered[1]) / entropy
    out["mig"] = np.mean(out["mig_per_factor"])
    out["sap_per_factor"] = np.sort(matrix, axis=0)[-1] - np.sort(matrix, axis=0)[-2]
    out["sap"] = np.mean(out["sap_per_factor"])
    squared = np.square(matrix)
    top = squared.max(axis=1)
    modular = 1.0 - (squared.sum(axis=1) - top) / (top * (squared.shape[1] - 1.0))
    modular[top == 0.0] = 0.0
    out["modularity_per_code"], out["modularity"] = modular, np.mean(modular)
    out["per_code"], out["per_factor"] = per_code, per_factor
    return out


# ------------------------------------------------------------------ IRS
def test_irs_matches_the_reference_on_fixed_codes():
    rng = np.random.default_rng(1)
    factors = np.column_stack([rng.integers(0, 3, 600), rng.integers(0, 40, 600)])  # 40 classes -> 20 bins
    codes = np.column_stack([
        factors[:, 0] + 0.3 * rng.normal(size=600), np.sin(factors[:, 1] / 7.0) + 0.1 * rng.normal(size=600),
        rng.normal(size=600), np.full(600, 2.5),  # noise and a constant code (dropped)
    ])
    for quantile in (0.99, 1.0, 0.5):
        ours = irs_from_codes(codes, factors, diff_quantile=quantile)
        value, summed = reference_irs(codes, factors, quantile)
        assert ours["irs"] == pytest.approx(value, abs=EXACT)
        # the reference's num_active_dims is the sum of the active codes' values, kept as it is
        assert ours["num_active_dims"] == pytest.approx(summed, abs=1e-9)
        assert ours["num_active_dims_count"] == 3.0
    assert irs_from_codes(np.ones((50, 2)), factors[:50]) == {
        "irs": 0.0, "num_active_dims": 0.0, "num_active_dims_count": 0.0
    }


def test_irs_of_a_perfect_code_is_one_and_of_noise_about_zero():
    ds = dataset()
    assert irs(ds, perfect, num_train=2000)["irs"] == pytest.approx(1.0, abs=EXACT)
    rng = np.random.default_rng(123)  # not the metric's stream (seed 0): that would copy its factor draws

    def uniform(x):  # bounded noise: every bin spans about the whole range
        return rng.uniform(-1.0, 1.0, size=(len(x), 3))

    assert irs(ds, uniform, num_train=2000)["irs"] < 0.05
    assert irs(ds, uniform, num_train=2000, diff_quantile=1.0)["irs"] < 0.05
    # Gaussian noise: a bin's 99th percentile (about 2.6 sd) stays below the sample's maximum
    # (about 3.5 sd), so the reference's default leaves it at about 0.3
    assert 0.15 < irs(ds, Noise(seed=7), num_train=2000)["irs"] < 0.4
    assert irs(ds, rotated(), num_train=2000)["irs"] < 0.6


# ------------------------------------------------------------------ fairness
def test_inter_group_fairness_gives_the_reference_example_and_formula():
    # the reference's own example: overall 1/3 : 2/3, per class 0 : 1 and 1/2 : 1/2
    mean, largest = inter_group_fairness(np.array([[0, 100], [100, 100]]))
    assert mean == pytest.approx(2 / 9, abs=EXACT) and largest == pytest.approx(1 / 3, abs=EXACT)
    counts = np.random.default_rng(0).integers(0, 30, size=(4, 5))
    overall = counts.sum(axis=1) / counts.sum()
    tv = [0.5 * sum(abs(counts[y, c] / counts[:, c].sum() - overall[y]) for y in range(4)) for c in range(5)]
    weights = counts.sum(axis=0) / counts.sum()
    assert inter_group_fairness(counts) == pytest.approx((float(np.dot(tv, weights)), max(tv)), abs=EXACT)


def test_fairness_aggregation_is_the_references_with_factor_names():
    matrix = np.array([[0.0, 2.0, 4.0], [4.0, 0.0, 8.0], [2.0, 10.0, 0.0]])
    expected = {  # the reference's test, its pred<i>/sens<i> named pred_<name>/sens_<name>
        "pred_0:sens_1": 2.0, "pred_0:sens_2": 4.0, "pred_1:sens_0": 4.0, "pred_1:sens_2": 8.0,
        "pred_2:sens_0": 2.0, "pred_2:sens_1": 10.0,
        "pred_0:mean_sens": 3.0, "pred_0:max_sens": 4.0, "pred_1:mean_sens": 6.0, "pred_1:max_sens": 8.0,
        "pred_2:mean_sens": 6.0, "pred_2:max_sens": 10.0,
        "sens_0:mean_pred": 3.0, "sens_0:max_pred": 4.0, "sens_1:mean_pred": 6.0, "sens_1:max_pred": 10.0,
        "sens_2:mean_pred": 6.0, "sens_2:max_pred": 8.0,
        "mean_sens:mean_pred": 5.0, "mean_sens:max_pred": 22.0 / 3.0, "max_sens:mean_pred": 6.0,
        "max_sens:max_pred": 10.0, "mean_pred:mean_sens": 5.0, "mean_pred:max_sens": 22.0 / 3.0,
        "max_pred:mean_sens": 6.0, "max_pred:max_sens": 10.0,
    }
    got = fairness_scores(matrix, "test", ["0", "1", "2"])
    assert got == pytest.approx({f"test:{k}": v for k, v in expected.items()}, abs=EXACT)


def test_a_code_that_mixes_two_factors_makes_their_classifiers_unfair():
    """A perfect code is fair (its classifiers never move with another factor); a code whose only
    trace of factors a and b is a + b predicts a differently as b is intervened on, and b as a is."""
    ds = FactorObservationDataset((4, 4, 3), ("a", "b", "c"))
    small = {"num_train": 600, "num_test_points_per_class": 50, "n_jobs": 1}
    fair = fairness(ds, perfect, **small)
    assert fair["mean_fairness:mean_pred:mean_sens"] == 0.0 and fair["max_fairness:max_pred:max_sens"] == 0.0
    mixed = fairness(ds, Linear(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])), **small)  # z = (a + b, c)
    assert mixed["mean_fairness:pred_a:sens_b"] > 0.15 and mixed["mean_fairness:pred_b:sens_a"] > 0.15
    assert mixed["max_fairness:pred_a:sens_b"] >= mixed["mean_fairness:pred_a:sens_b"]
    assert mixed["mean_fairness:pred_c:max_sens"] == 0.0  # c has a code of its own
    assert mixed["mean_fairness:mean_pred:mean_sens"] > 0.1
    assert len(mixed) == 2 * (6 + 4 * 3 + 8)


def test_fairness_classifiers_of_every_kind_predict_each_column_and_a_constant_one_as_itself():
    from disentangle.metrics.fairness import fit_classifiers

    rng = np.random.default_rng(5)
    targets = np.column_stack([rng.integers(0, 3, 120), np.full(120, 2), rng.integers(0, 2, 120)])
    codes = targets[:, [0, 2]] + 0.05 * rng.normal(size=(120, 2))  # columns 0 and 2 are separable
    for predictor, booster in [("gradient_boosting", "exact"), ("gradient_boosting", "sklearn"),
                               ("logistic_regression", "exact")]:
        predict = fit_classifiers(codes, targets, predictor=predictor, booster=booster, n_jobs=1)
        assert np.array_equal(predict(codes[:40]), targets[:40]), predictor


# ------------------------------------------------------------------ reduced downstream task
def test_removing_a_perfect_codes_own_dimension_leaves_its_factor_at_chance_and_the_others_intact():
    small = {"num_train": [400], "num_test": 300, "n_jobs": 1}
    out = reduced_downstream_task(dataset(), perfect, **small)
    for name in ("a", "b", "c"):
        assert out[f"400:reduced_factor_{name}:mean_test_accuracy_non_reduced_factor"] == 1.0
    assert out["400:mean_test_accuracy_other_factors"] == 1.0
    assert out["400:mean_test_accuracy_reduced_factor"] < 0.45  # about the largest class share
    # a rotation leaks every factor into every code: one removed code hides nothing
    leaky = reduced_downstream_task(dataset(), rotated(), **small)
    assert leaky["400:mean_test_accuracy_reduced_factor"] > 0.9


def test_reduced_downstream_task_is_the_references_loop_on_the_same_draws():
    """With scikit-learn's booster, our fits are the reference's: its loop, written out here with
    ``GradientBoostingClassifier`` (importance per factor, ``np.delete`` of the argmax, a classifier
    per factor on what is left), gives the same numbers on the same draws."""
    from sklearn.ensemble import GradientBoostingClassifier

    ds = FactorObservationDataset((3, 4), ("u", "v"))
    mixing = Linear(np.array([[1.0, 0.2, 0.5], [0.3, 1.0, -0.4]]))
    out = reduced_downstream_task(ds, mixing, seed=4, num_train=[150], num_test=80, booster="sklearn", n_jobs=1)
    rng = np.random.default_rng(4)
    code_fn = as_representation_function(mixing)
    x_train, y_train = sample_codes_and_factors(ds, code_fn, 150, rng)
    x_test, y_test = sample_codes_and_factors(ds, code_fn, 80, rng)
    state = derived_seed(4, 1)

    def fit(x, k):
        return GradientBoostingClassifier(random_state=state).fit(x, y_train[:, k])

    for a, name in enumerate(("u", "v")):
        importance = fit(x_train, a).feature_importances_
        keep = np.delete(np.arange(3), np.argmax(np.abs(importance)))
        for b, other in enumerate(("u", "v")):
            model = fit(x_train[:, keep], b)
            test = np.mean(model.predict(x_test[:, keep]) == y_test[:, b])
            assert out[f"150:reduced_factor_{name}:mean_test_accuracy_factor_{other}"] == pytest.approx(test, abs=EXACT)


# ------------------------------------------------------------------ strong downstream task
def test_an_intervention_shift_costs_a_perfect_code_nothing_and_a_rotated_one_much():
    small = {"num_train": [300], "num_test": 200, "n_experiment": 2, "n_jobs": 1}
    out = strong_downstream_task(dataset(), perfect, **small)
    assert out["300:mean_strong_test_accuracy"] == 1.0 and out["300:strong_generalization_gap"] == 0.0
    shifted = strong_downstream_task(dataset(), rotated(), **small)
    assert shifted["300:mean_test_accuracy"] > 0.95
    assert shifted["300:strong_generalization_gap"] > 0.25


def test_no_strong_generalization_gap_is_given_where_the_test_accuracy_is_zero(monkeypatch):
    """The gap is relative to the test accuracy: at 0 it is NaN, not -inf (the reference divides by it)."""
    import sys

    module = sys.modules[strong_downstream_task.__module__]

    calls = []

    def wrong_then_right(x_train, y_train, x_test, y_test, **fit):
        """0 on the plain task (the first call), 1 on the shifted ones"""
        calls.append(1)
        accuracy = np.full(y_train.shape[1], 0.0 if len(calls) == 1 else 1.0)
        return accuracy, accuracy

    monkeypatch.setattr(module, "predictive_accuracy", wrong_then_right)
    out = strong_downstream_task(dataset(), perfect, num_train=[50], num_test=20, n_experiment=1, n_jobs=1)
    assert out["50:mean_test_accuracy"] == 0.0 and out["50:mean_strong_test_accuracy"] == 1.0
    assert math.isnan(out["50:strong_generalization_gap"])


class Recording(FactorObservationDataset):
    """Records every batch of factors it renders."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[np.ndarray] = []

    def sample_observations_from_factors(self, factors, rng):
        self.batches.append(np.array(factors))
        return super().sample_observations_from_factors(factors, rng)


def test_the_strong_task_trains_at_one_value_of_another_factor_and_tests_at_the_others():
    ds = Recording((3, 4, 5), ("a", "b", "c"))
    strong_downstream_task(ds, perfect, num_train=[40], num_test=30, n_experiment=3, n_jobs=1,
                           representation_batch_size=1000)
    plain_train, plain_test, *shifted = ds.batches
    assert len(shifted) == 2 * 3 * 3  # a training and a test batch per factor and repetition
    for index, (train, test) in enumerate(zip(shifted[0::2], shifted[1::2])):
        target = index // 3
        changed = np.flatnonzero((train != plain_train).any(axis=0) | (test != plain_test).any(axis=0))
        assert len(changed) == 1 and changed[0] != target  # one other factor is intervened on
        j = changed[0]
        assert len(np.unique(train[:, j])) == 1 and train[0, j] not in test[:, j]


# ------------------------------------------------------------------ unified scores
def test_unified_aggregations_match_the_reference_on_a_fixed_matrix():
    rng = np.random.default_rng(3)
    matrix = rng.uniform(size=(5, 3)) ** 3
    matrix[1, 2] = 0.0
    ys = rng.integers(0, [3, 4, 6], size=(500, 3))
    from disentangle.metrics import discrete_entropy

    ours = aggregate_matrix(matrix, discrete_entropy(ys), ["x", "y", "z"])
    ref = reference_unified(matrix, ys)
    for key in ("area_precision", "max_precision", "dci_disentanglement", "dci_completeness", "mig", "sap", "modularity"):
        assert ours[key] == pytest.approx(ref[key], abs=EXACT), key
    for j in range(5):
        assert ours[f"dci_disentanglement.code_{j}"] == pytest.approx(ref["per_code"][j], abs=EXACT)
        assert ours[f"modularity.code_{j}"] == pytest.approx(ref["modularity_per_code"][j], abs=EXACT)
    for k, name in enumerate("xyz"):
        assert ours[f"dci_completeness.{name}"] == pytest.approx(ref["per_factor"][k], abs=EXACT)
        assert ours[f"mig.{name}"] == pytest.approx(ref["mig_per_factor"][k], abs=EXACT)
        assert ours[f"sap.{name}"] == pytest.approx(ref["sap_per_factor"][k], abs=EXACT)
    assert np.mean(modularity_per_code(matrix)) == pytest.approx(modularity_from_mutual_info(matrix), abs=EXACT)
    for t in np.unique(matrix):
        assert independent_groups(matrix, t) == reference_precision(matrix, t)


def test_independent_groups_counts_connected_blocks():
    assert independent_groups(np.eye(3), 0.5) == 3  # one code per factor
    assert independent_groups(np.array([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]), 0.5) == 1  # one block
    assert independent_groups(np.array([[1.0, 0.2], [0.0, 1.0]]), 0.5) == 2  # the weak edge is cut
    assert independent_groups(np.zeros((2, 2)), 0.0) == 0


def test_unified_scores_are_the_library_metrics_on_their_own_matrices():
    """Same seed, same draws: each matrix's own aggregation is the metric it comes from."""
    ds, rep = dataset(), Linear(np.array([[1.0, 0.3, 0.0], [0.0, 1.0, 0.2], [0.1, 0.0, 1.0]]))
    small = {"num_train": 400, "num_test": 200}
    out = unified_scores(ds, rep, seed=2, n_jobs=1, **small)
    assert out["importance_gbt_matrix.dci_disentanglement"] == pytest.approx(
        dci(ds, rep, seed=2, n_jobs=1, **small)["disentanglement"], abs=EXACT)
    assert out["importance_gbt_matrix.dci_completeness"] == pytest.approx(
        dci(ds, rep, seed=2, n_jobs=1, **small)["completeness"], abs=EXACT)
    assert out["mutual_information_matrix.mig"] == pytest.approx(mig(ds, rep, seed=2, num_train=400)["mig"], abs=EXACT)
    assert out["mutual_information_matrix.modularity"] == pytest.approx(
        modularity_explicitness(ds, rep, seed=2, n_jobs=1, **small)["modularity"], abs=EXACT)
    assert out["accuracy_svm_matrix.sap"] == pytest.approx(sap_score(ds, rep, seed=2, n_jobs=1, **small)["sap"], abs=EXACT)
    assert "importance_gbt_matrix.dci" not in out  # the reference's copy of dci_disentanglement


def test_unified_scores_of_a_perfect_code_and_of_noise():
    small = {"num_train": 500, "num_test": 200, "n_jobs": 1, "matrices": ["importance_gbt_matrix", "mutual_information_matrix"]}
    good = unified_scores(dataset(), perfect, **small)
    bad = unified_scores(dataset(), Noise(seed=7), **small)
    for matrix in small["matrices"]:
        assert good[f"{matrix}.dci_disentanglement"] > 0.9 > 0.15 > bad[f"{matrix}.dci_disentanglement"]
        assert good[f"{matrix}.modularity"] > 0.95 and good[f"{matrix}.max_precision"] == 3.0
        assert bad[f"{matrix}.mig"] < 0.05
    assert good["mutual_information_matrix.mig"] > 0.95
    assert not any(k.startswith("accuracy_svm_matrix") for k in good)
    with pytest.raises(ParameterError, match="Did you mean 'accuracy_svm_matrix'"):
        unified_scores(dataset(), perfect, matrices=["accuracy_svm_matrx"])


# ------------------------------------------------------------------ what data each one needs
def _labelled_sample():
    """A labelled sample (not a grid) of 3 x 4 factors drawn into the first two pixels of 4 x 4 images."""
    rows = np.indices((3, 4)).reshape(2, -1).T
    rows = np.concatenate([rows] * 30 + [rows[:5]])
    images = np.zeros((len(rows), 4, 4), dtype=np.uint8)
    images[:, 0, 0], images[:, 0, 1] = rows[:, 0] * 100, rows[:, 1] * 80
    return from_arrays(images, rows, ("a", "b"), grid=False)


def _pixels(x):
    return torch.as_tensor(x).flatten(1)[:, :2].to(torch.float64)


@pytest.mark.parametrize("name", ["fairness", "strong_downstream_task"])
def test_the_metrics_that_intervene_refuse_a_sample_without_a_grid(name):
    assert metric_spec(name).data({}) == "grid"
    with pytest.raises(NotAGridError, match=f"'{name}' cannot run on .*needs a complete grid"):
        evaluate_metrics(_labelled_sample(), _pixels, [name])


def test_the_metrics_of_code_label_pairs_run_on_a_labelled_sample():
    settings = {"irs": {"num_train": 300}, "unified_scores": {"num_train": 200, "num_test": 100, "n_jobs": 1,
                                                                "matrices": ["mutual_information_matrix"]},
                "reduced_downstream_task": {"num_train": [100], "num_test": 50, "n_jobs": 1}}
    out = evaluate_metrics(_labelled_sample(), _pixels, list(settings), settings=settings)
    assert out["irs"]["irs"] == pytest.approx(1.0, abs=EXACT)
    assert out["unified_scores"]["mutual_information_matrix.mig"] > 0.9
    assert out["reduced_downstream_task"]["100:mean_test_accuracy_other_factors"] == 1.0
    assert all(metric_spec(n).data({}) == "labels" for n in settings)


def test_declared_draws():
    assert metric_spec("irs").draws({}) == 10_000
    assert metric_spec("unified_scores").draws({}) == 15_000
    assert metric_spec("reduced_downstream_task").draws({}) == 15_000
    assert metric_spec("fairness").draws({}) == 10_400  # a lower bound: the grid's sizes decide
    assert metric_spec("strong_downstream_task").draws({}) == 2_000 * 11
    assert metric_spec("strong_downstream_task").draws({"factors": ["a", "b"]}) == 2_000 * 21
    assert math.isfinite(metric_spec("fairness").draws({"num_test_points_per_class": 1}))
