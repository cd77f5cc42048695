"""InfoMEC (Hsu et al. 2023) and DCI-ES (Eastwood et al. 2023): values of known codes, planted
effects, an independent recomputation of the NMI matrix, the formulas on hand-made inputs, and the
registered metrics equal to their array cores."""
from __future__ import annotations

import math

import numpy as np
import pytest

from disentangle.metrics import dci, dci_es, evaluate_metrics, infomec
from disentangle.metrics._representation import as_representation_function
from disentangle.metrics._sampling import sample_codes_and_factors
from disentangle.metrics.dci_es import (
    dci_es_from_codes,
    explicitness_from_curves,
    loss_capacity_curves,
    probe_widths,
    size_score,
)
from disentangle.metrics.infomec import (
    active_codes,
    infoe_per_factor,
    infom_infoc_from_nmi,
    infomec_from_codes,
    normalized_mutual_info,
)

from .test_common import SIZES, Linear, Noise, dataset, perfect, rotated

pytestmark = pytest.mark.usefixtures("one_thread")

ESTIMATORS = ("ksg", "histogram", "discrete")


def _uniform(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform factor vectors of SIZES and their values scaled to [0, 1] (the perfect code)."""
    factors = (np.random.default_rng(seed).random((n, len(SIZES))) * SIZES).astype(np.int64)
    return factors, factors / (np.asarray(SIZES) - 1.0)


def _grid(repeats: int = 20) -> np.ndarray:
    """Every factor vector of SIZES ``repeats`` times: the factors are exactly independent in it."""
    grid = np.indices(SIZES).reshape(len(SIZES), -1).T
    return np.tile(grid, (repeats, 1)).astype(np.int64)


# ------------------------------------------------------------------------------------- InfoMEC
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_perfect_code_has_infom_infoc_one_and_infoe_near_one(estimator):
    factors = _grid()
    scores = infomec_from_codes(factors / (np.asarray(SIZES) - 1.0), factors, estimator=estimator)
    # plug-in estimates of exactly independent factors are 0: exactly 1; KSG's are only near 0
    tolerance = 0.01 if estimator == "ksg" else 1e-9
    assert scores["infom"] == pytest.approx(1.0, abs=tolerance)
    assert scores["infoc"] == pytest.approx(1.0, abs=tolerance)
    assert 0.995 < scores["infoe"] <= 1.0


def test_noise_scores_near_the_low_ends():
    factors, _ = _uniform(2000)
    noise = np.random.default_rng(1).normal(size=(2000, 3))
    hist = infomec_from_codes(noise, factors, estimator="histogram")
    assert hist["infom"] < 0.15 and hist["infoc"] < 0.15 and 0.0 <= hist["infoe"] < 0.02
    # the reference's KSG estimator: every NMI entry and InfoE are near 0, but ratios of near-zero
    # (clipped) estimates are not (documented caveat of the reference's estimator)
    assert normalized_mutual_info(noise, factors).max() < 0.02
    assert infomec_from_codes(noise, factors)["infoe"] < 0.02


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_latent_mixing_two_factors_lowers_infom(estimator):
    factors, x = _uniform(2000)
    mixed = np.stack([x[:, 0] + x[:, 1], x[:, 1], x[:, 2]], axis=1)  # z_0 holds factors 0 and 1
    clean = infomec_from_codes(x, factors, estimator=estimator)
    planted = infomec_from_codes(mixed, factors, estimator=estimator)
    assert clean["infom"] > 0.98
    assert planted["infom"] < clean["infom"] - 0.15
    assert planted["infoe"] == pytest.approx(clean["infoe"], abs=0.01)  # still linearly decodable


def test_rotation_lowers_infom_and_dci_disentanglement_but_not_explicitness():
    small = {"num_train": 600, "num_test": 300, "max_features": 64, "n_jobs": 1}
    good, bad = dci_es(dataset(), perfect, **small), dci_es(dataset(), rotated(), **small)
    assert bad["disentanglement"] < 0.6 < 0.95 < good["disentanglement"]
    assert good["explicitness"] == pytest.approx(1.0, abs=1e-6)
    assert bad["explicitness"] == pytest.approx(1.0, abs=1e-6)  # a rotation is linear: still explicit
    good, bad = infomec(dataset(), perfect, num_train=1500), infomec(dataset(), rotated(), num_train=1500)
    assert bad["infom"] < 0.4 < 0.95 < good["infom"]
    assert bad["infoe"] > 0.99 and good["infoe"] > 0.99


def test_the_nmi_matrix_equals_a_recount():
    rng = np.random.default_rng(3)
    factors = rng.integers(0, [3, 4], size=(400, 2))
    codes = np.stack([factors[:, 0] + rng.integers(0, 2, 400), rng.integers(0, 4, 400), 2.5 * factors[:, 1]], axis=1)
    expected = np.zeros((3, 2))
    for j in range(3):
        for k in range(2):
            values, a = np.unique(codes[:, j], return_inverse=True)
            joint = np.zeros((len(values), factors[:, k].max() + 1))
            np.add.at(joint, (a, factors[:, k]), 1.0)
            joint /= joint.sum()
            pa, pb = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
            nz = joint > 0
            mi = np.sum(joint[nz] * np.log(joint[nz] / (pa @ pb)[nz]))
            expected[j, k] = mi / -np.sum(pb[pb > 0] * np.log(pb[pb > 0]))
    got = normalized_mutual_info(codes.astype(float), factors, estimator="discrete")
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert got[0, 0] > 0.4 and got[2, 1] == pytest.approx(1.0)
    # equal-width bins that keep each value apart (values 0..3, 4 bins) give the same matrix
    np.testing.assert_allclose(
        normalized_mutual_info(codes[:, :2].astype(float), factors, estimator="histogram", num_bins=4),
        expected[:2], atol=1e-12,
    )


def test_infom_infoc_formulas_and_edges():
    assert infom_infoc_from_nmi(np.eye(3)) == pytest.approx((1.0, 1.0))
    assert infom_infoc_from_nmi(np.full((3, 3), 0.4)) == pytest.approx((0.0, 0.0))
    # one code holds both factors equally, another only factor 1: rows 1/2 -> 0 and 1 -> 1
    nmi = np.array([[0.5, 0.5], [0.0, 0.5]])
    infom, infoc = infom_infoc_from_nmi(nmi)
    assert infom == pytest.approx(0.5)
    # factor 0: all in code 0 (ratio 1); factor 1: split evenly (ratio 1/2); L = 2
    assert infoc == pytest.approx(((1.0 + 0.5) / 2 - 0.5) / 0.5)
    # a pruned code is left out; a row of zeros counts as uniform (modularity 0)
    infom, infoc = infom_infoc_from_nmi(nmi, np.array([False, True]))
    assert infom == pytest.approx(1.0)
    assert infom_infoc_from_nmi(np.array([[1.0, 0.0], [0.0, 0.0]]))[0] == pytest.approx(0.5)
    assert infom_infoc_from_nmi(np.eye(2), np.zeros(2, dtype=bool)) == (0.0, 0.0)  # nothing active


def test_infom_and_infoc_are_nan_where_their_normalisation_is_zero(caplog):
    """One active code (InfoC) or one scored factor (InfoM): (1 - 1/1) = 0, the reference's 0/0, NaN
    with a warning; a code collapsed to one noise dimension is not perfectly compact."""
    with caplog.at_level("WARNING", logger="disentangle.metrics.infomec"):
        infom, infoc = infom_infoc_from_nmi(np.array([[0.01, 0.0], [0.3, 0.2]]), np.array([True, False]))
    assert infom == pytest.approx(1.0) and math.isnan(infoc)
    assert "InfoC is NaN: one code is active" in caplog.text and "InfoM" not in caplog.text
    infom, infoc = infom_infoc_from_nmi(np.array([[0.3], [0.1]]))  # one factor
    assert math.isnan(infom) and infoc == pytest.approx((0.75 - 0.5) / 0.5)


def test_the_discrete_estimator_one_hot_encodes_sparsely_as_the_reference():
    """A code that is not quantised has a value per row: the one-hot matrix is sparse (dense, it
    would be n x n d floats: 8 GB at the defaults), and InfoE equals the dense encoding's."""
    from disentangle.metrics.infomec import _one_hot

    rng = np.random.default_rng(0)
    codes = np.round(rng.normal(size=(400, 3)), 1)
    encoded = _one_hot(codes)
    assert encoded.nnz == codes.size and encoded.shape[0] == 400
    dense = np.concatenate([(codes[:, [j]] == np.unique(codes[:, j])[None]).astype(float) for j in range(3)], axis=1)
    np.testing.assert_array_equal(encoded.toarray(), dense)
    big = _one_hot(rng.normal(size=(10_000, 10)))
    assert big.shape == (10_000, 100_000) and big.data.nbytes == 800_000
    factors = np.stack([(codes[:, 0] > 0).astype(np.int64), rng.integers(0, 3, 400)], axis=1)
    scores = infoe_per_factor(codes, factors, discrete=True)
    assert scores[0] > 0.99 and 0.0 <= scores[1] < 0.5


def test_pruning_by_range_is_the_references():
    codes = np.array([[0.0, 0.0, 0.0], [10.0, 0.4, 0.6], [5.0, 0.2, 0.0]])
    assert active_codes(codes).tolist() == [True, False, True]  # range > max range / 20
    assert active_codes(codes, threshold=0.01).tolist() == [True, True, True]
    assert active_codes(np.array([[1.0, 2.0], [1.0, 2.5]]), estimator="discrete").tolist() == [False, True]


def test_a_code_of_small_range_is_pruned_before_infom():
    factors = _grid()
    x = factors / (np.asarray(SIZES) - 1.0)
    tiny = np.column_stack([x, 0.01 * (x[:, 0] + x[:, 1])])  # mixes two factors, 1/100 of the range
    assert infomec_from_codes(tiny, factors, estimator="histogram")["infom"] == pytest.approx(1.0, abs=1e-9)
    loud = np.column_stack([x, x[:, 0] + x[:, 1]])
    assert infomec_from_codes(loud, factors, estimator="histogram")["infom"] < 0.9


def test_infoe_of_a_skewed_factor_keeps_the_references_log_c_baseline():
    rng = np.random.default_rng(4)
    skewed = rng.choice(3, p=[0.7, 0.2, 0.1], size=(3000, 1))
    noise = rng.normal(size=(3000, 2))
    # balanced weights: the fit on noise predicts about uniform, its loss about log 3, InfoE about 0
    # (a baseline of the factor's entropy, about 0.80 nats, would give about -0.37)
    assert abs(infoe_per_factor(noise, skewed)[0]) < 0.02


def test_infoe_uses_the_uniform_baseline_of_balanced_weights():
    factors, x = _uniform(1500)
    noise = np.random.default_rng(2).normal(size=(1500, 3))
    assert infoe_per_factor(x, factors) == pytest.approx(np.ones(3), abs=0.005)
    assert np.all(np.abs(infoe_per_factor(noise, factors)) < 0.02)
    # one-hot inputs of a discrete code: the factor is read exactly
    assert infoe_per_factor(factors.astype(float), factors, discrete=True) == pytest.approx(np.ones(3), abs=0.005)


# ------------------------------------------------------------------------------------- DCI-ES
def test_explicitness_of_hand_made_curves():
    x = np.array([0.0, 1.0, 2.0])
    flat, zero, back_up, late, above = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.5], [0.5, 0.5, 0.0], [2.0, 2.0, 2.0]
    curves = np.array([flat, zero, back_up, late, above]).T  # (capacities, curves)
    e = explicitness_from_curves(x, curves)
    assert e[0] == pytest.approx(0.0) and e[1] == pytest.approx(1.0)  # at the baseline: 0; at zero: 1
    assert e[2] == pytest.approx(1.0 - 0.5 / 2)  # the running minimum [1, 0, 0]: the rise is not counted
    assert e[3] == pytest.approx(1.0 - (0.5 + 0.25) / 2)  # trapezoids: 0.5 and 0.25 over a width of 2
    assert e[4] == pytest.approx(0.0)  # capped at the baseline, not negative
    assert explicitness_from_curves(x, curves[:, 0], baseline=2.0)[0] == pytest.approx(0.5)
    # a curve at the baseline throughout is 0, not -2e-16 (shown as "-0.0")
    flat = explicitness_from_curves(np.log(3.0 + np.asarray(probe_widths(), dtype=float)), np.ones((7, 1)))
    assert flat[0] == 0.0 and not np.signbit(flat[0])
    with pytest.raises(ValueError):
        explicitness_from_curves(x[::-1], curves)


def test_probe_widths_and_size():
    assert probe_widths(512) == [0, 16, 32, 64, 128, 256, 512]
    assert probe_widths(100) == [0, 16, 32, 64, 100] and probe_widths(2) == [0, 2]
    assert size_score(10, 5) == 0.5 and size_score(3, 3) == 1.0


def test_a_monotone_warp_lowers_explicitness_but_not_disentanglement():
    """The planted effect: warping each dimension of a linear code by a monotone non-linear map
    keeps every tree split (D, C unchanged) but linear probes lose (E drops)."""
    mix = np.array([[1.0, 0.4, 0.0], [0.0, 1.0, 0.3], [0.2, 0.0, 1.0]])
    f_train, x_train = _uniform(800, seed=0)
    f_test, x_test = _uniform(400, seed=1)

    def warp(z):
        return np.exp(3.0 * z)

    kwargs = dict(max_features=64, n_jobs=1)
    linear = dci_es_from_codes(x_train @ mix, f_train, x_test @ mix, f_test, **kwargs)
    warped = dci_es_from_codes(warp(x_train @ mix), f_train, warp(x_test @ mix), f_test, **kwargs)
    assert warped["disentanglement"] == pytest.approx(linear["disentanglement"], abs=1e-9)
    assert warped["completeness"] == pytest.approx(linear["completeness"], abs=1e-9)
    assert linear["explicitness"] == pytest.approx(1.0, abs=1e-6)
    assert warped["explicitness"] < linear["explicitness"] - 0.02
    _, losses = loss_capacity_curves(warp(x_train @ mix), f_train, warp(x_test @ mix), f_test, max_features=64)
    assert losses[0].min() > 0.02 and losses[-1].max() < losses[0].min()  # linear probe loses, wider ones recover


def test_dci_es_keeps_dci_and_scores_noise_low():
    small = {"num_train": 500, "num_test": 300, "n_jobs": 1}
    ours = dci_es(dataset(), rotated(), max_features=32, **small)
    theirs = dci(dataset(), rotated(), **small)
    assert ours["disentanglement"] == theirs["disentanglement"]
    assert ours["completeness"] == theirs["completeness"]
    assert ours["informativeness"] == theirs["informativeness_test"]
    assert ours["size"] == 1.0
    noise = dci_es(dataset(), Noise(dim=6), max_features=32, **small)
    assert 0.0 <= noise["explicitness"] < 0.05 and noise["size"] == 0.5


# ------------------------------------------------------------------------------------- registry
def test_evaluate_metrics_equals_the_array_cores():
    rep = Linear(np.array([[1.0, 0.3, 0.0], [0.0, 1.0, 0.2], [0.1, 0.0, 1.0]]))
    settings = {
        "infomec": {"num_train": 800},
        "dci_es": {"num_train": 400, "num_test": 200, "max_features": 32, "n_jobs": 1},
    }
    scores = evaluate_metrics(dataset(), rep, ["infomec", "dci_es"], seed=5, settings=settings)
    code_fn = as_representation_function(rep)
    rng = np.random.default_rng(5)
    codes, factors = sample_codes_and_factors(dataset(), code_fn, 800, rng)
    assert scores["infomec"] == infomec_from_codes(codes, factors, seed=5)
    rng = np.random.default_rng(5)
    train = sample_codes_and_factors(dataset(), code_fn, 400, rng)
    test = sample_codes_and_factors(dataset(), code_fn, 200, rng)
    assert scores["dci_es"] == dci_es_from_codes(*train, *test, max_features=32, seed=5, n_jobs=1)
    assert set(scores["infomec"]) == {"infom", "infoe", "infoc"}
    assert set(scores["dci_es"]) == {"disentanglement", "completeness", "informativeness", "explicitness", "size"}
    assert all(math.isfinite(v) for s in scores.values() for v in s.values())


def test_each_probe_has_the_capacity_of_its_parameters():
    """A probe of width w on d codes fits 1 + d + w weights per factor: capacity log(1 + d + w)."""
    rng = np.random.default_rng(0)
    codes, factors = rng.normal(size=(200, 2)), rng.integers(0, 3, size=(200, 1))
    capacities, losses = loss_capacity_curves(codes[:150], factors[:150], codes[150:], factors[150:], max_features=64)
    np.testing.assert_array_equal(capacities, np.log(3.0 + np.asarray(probe_widths(64), dtype=np.float64)))
    assert losses.shape == (len(probe_widths(64)), 1)
