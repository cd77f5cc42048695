"""The exact gradient-boosting booster against scikit-learn's GradientBoostingClassifier."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier

from disentangle.metrics import dci
from disentangle.metrics._boosting import fit_boosted_trees
from disentangle.metrics.dci import importance_matrix
from disentangle.metrics.synthetic import FactorObservationDataset


def _problem(n: int, classes: int, seed: int = 0, d: int = 5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    latent = x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] + 0.4 * rng.normal(size=n)
    y = np.digitize(latent, np.quantile(latent, np.linspace(0, 1, classes + 1)[1:-1]))
    return x, y


def _heap(tree, num_nodes: int = 15):
    """scikit-learn's depth-first tree as our heap layout (feature, threshold, leaf value)."""
    feature, threshold, value = np.full(num_nodes, -1), np.zeros(num_nodes), np.zeros(num_nodes)

    def visit(node: int, slot: int) -> None:
        if tree.children_left[node] == -1:
            value[slot] = tree.value[node, 0, 0]
            return
        feature[slot], threshold[slot] = tree.feature[node], tree.threshold[node]
        visit(tree.children_left[node], 2 * slot + 1)
        visit(tree.children_right[node], 2 * slot + 2)

    visit(0, 0)
    return feature, threshold, value


def _raw(model: GradientBoostingClassifier, x):
    raw = model.decision_function(x)
    return raw[:, None] if raw.ndim == 1 else raw


@pytest.mark.parametrize("classes", [2, 4])
def test_same_fit_as_scikit_learn(classes):
    x, y = _problem(600, classes)
    x_test, y_test = _problem(400, classes, seed=1)
    ours = fit_boosted_trees(x, y, seed=0)
    ref = GradientBoostingClassifier(random_state=0).fit(x, y)

    # one tree per class per stage, or one tree per stage for two classes, as scikit-learn
    assert ours.split_feature.shape[:2] == ref.estimators_.shape
    # the first stage's trees are the same trees: features, thresholds and leaf values
    for k in range(ref.estimators_.shape[1]):
        feature, threshold, value = _heap(ref.estimators_[0, k].tree_)
        np.testing.assert_array_equal(ours.split_feature[0, k], feature)
        np.testing.assert_allclose(ours.threshold[0, k], threshold, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ours.value[0, k], value, rtol=1e-9, atol=1e-12)
    # the fitted function on the training points is the same after all 100 stages
    np.testing.assert_allclose(ours.raw_predictions(x)[0], _raw(ref, x), rtol=0, atol=1e-8)
    np.testing.assert_array_equal(ours.predict(x)[:, 0], ref.predict(x))
    np.testing.assert_allclose(ours.train_raw[0], ours.raw_predictions(x)[0], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ours.predict(), ours.predict(x))
    # elsewhere only exact ties (two features separating a node identically) may differ
    assert np.mean(ours.predict(x_test)[:, 0] == ref.predict(x_test)) > 0.97
    np.testing.assert_allclose(ours.importances[:, 0], ref.feature_importances_, atol=0.01)
    assert ours.importances[:, 0].sum() == pytest.approx(1.0)


def test_importances_differ_from_scikit_learn_no_more_than_its_own_random_state():
    x, y = _problem(800, 5, seed=3, d=6)
    ours = fit_boosted_trees(x, y, seed=0).importances[:, 0]
    ref = [GradientBoostingClassifier(random_state=s).fit(x, y).feature_importances_ for s in (0, 1)]
    own_spread = np.abs(ref[0] - ref[1]).max()
    assert np.abs(ours - ref[0]).max() <= max(3 * own_spread, 1e-3)


def test_tied_integer_features_match_scikit_learn():
    # codes equal to the factors: many equal values per feature, every split between two of them
    rng = np.random.default_rng(0)
    factors = rng.integers(0, [3, 6, 8], size=(500, 3))
    x = factors.astype(np.float64)
    y = factors[:, 1]
    ours = fit_boosted_trees(x, y, seed=0)
    ref = GradientBoostingClassifier(random_state=0).fit(x, y)
    np.testing.assert_allclose(ours.raw_predictions(x)[0], _raw(ref, x), rtol=0, atol=1e-8)
    # (tree structures are not compared here: nodes whose residuals are equal up to rounding get a
    # zero-gain split or none depending on the last bit of their impurity; that changes neither the
    # predictions nor, beyond 1e-9, the importances)
    np.testing.assert_allclose(ours.importances[:, 0], ref.feature_importances_, atol=1e-9)


def test_several_targets_fit_together_equal_separate_fits_and_threads_do_not_matter():
    x, y3 = _problem(500, 3, seed=5)
    _, y2 = _problem(500, 2, seed=5)
    both = np.stack([y3, (y2 + x[:, 3] > 0.5).astype(int) * 7], axis=1)  # labels need not be 0..K-1
    joint = fit_boosted_trees(x, both, seed=0, n_threads=2)
    single = fit_boosted_trees(x, both, seed=0, n_threads=1)
    np.testing.assert_array_equal(joint.importances, single.importances)
    np.testing.assert_array_equal(joint.predict(x), single.predict(x))
    alone = fit_boosted_trees(x, both[:, 1], seed=0)
    np.testing.assert_allclose(joint.raw_predictions(x)[1], alone.raw_predictions(x)[0], atol=1e-12)
    assert set(np.unique(joint.predict(x)[:, 1])) <= {0, 7}


def test_invalid_inputs_are_explained():
    x, y = _problem(50, 3)
    with pytest.raises(ValueError, match="at least two classes"):
        fit_boosted_trees(x, np.zeros(50, dtype=int))
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_boosted_trees(bad, y)
    with pytest.raises(ValueError, match="same n"):
        fit_boosted_trees(x, y[:-1])
    model = fit_boosted_trees(x, y, n_stages=2)
    with pytest.raises(ValueError, match=r"\(n, 5\)"):
        model.predict(x[:, :3])


def test_dci_exact_booster_agrees_with_scikit_learn():
    sizes = (3, 4, 5)
    dataset = FactorObservationDataset(sizes, ("a", "b", "c"))
    rotation = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]

    def code(factors):
        f = np.asarray(factors, dtype=np.float64) / (np.asarray(sizes) - 1)
        return 0.8 * f + 0.2 * f @ rotation

    kwargs = dict(seed=0, num_train=600, num_test=300, n_jobs=1)
    exact = dci(dataset, code, booster="exact", **kwargs)
    ref = dci(dataset, code, booster="sklearn", **kwargs)
    for key in ref:
        assert exact[key] == pytest.approx(ref[key], abs=0.01), key
    rng = np.random.default_rng(1)
    factors = rng.integers(0, sizes, size=(400, 3))
    codes = code(factors)
    r_exact, *_ = importance_matrix(codes, factors, codes, factors, booster="exact", n_jobs=1)
    r_ref, *_ = importance_matrix(codes, factors, codes, factors, booster="sklearn", n_jobs=1)
    np.testing.assert_allclose(r_exact, r_ref, atol=0.01)


def test_dci_exact_booster_constant_factor():
    rng = np.random.default_rng(0)
    factors = np.stack([rng.integers(0, 4, 300), np.zeros(300, dtype=int)], axis=1)
    codes = np.stack([factors[:, 0] + 0.1 * rng.normal(size=300), rng.normal(size=300)], axis=1)
    importance, train_acc, test_acc = importance_matrix(codes, factors, codes, factors, n_jobs=1)
    np.testing.assert_array_equal(importance[:, 1], 0.0)
    assert train_acc[1] == test_acc[1] == 1.0
    assert importance[0, 0] > 0.9


def test_missing_numba_is_explained(monkeypatch):
    from disentangle.metrics import _boosting

    monkeypatch.setattr(_boosting, "numba", None)
    monkeypatch.setattr(_boosting, "_NUMBA_ERROR", ImportError("No module named 'numba'"))
    x, y = _problem(50, 3)
    with pytest.raises(ImportError, match=r"pip install numba.*booster='sklearn'"):
        fit_boosted_trees(x, y)
