"""MIG-sup, DCIMIG and JEMMIG (the information metrics of Carbonneau et al.'s review), by value.

The exact examples use a full factorial grid: every pair of distinct columns is then exactly
independent in the sample, so the plug-in information between them is 0 and the known ends hold
to rounding, not only approximately.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch

from disentangle.metrics import dcimig, evaluate_metrics, jemmig, mig, mig_sup
from disentangle.metrics._information import discrete_entropy, discrete_mutual_info, histogram_discretize
from disentangle.metrics._representation import as_representation_function
from disentangle.metrics._sampling import sample_codes_and_factors
from disentangle.metrics.dcimig import dcimig_from_codes, dcimig_from_mutual_info
from disentangle.metrics.jemmig import jemmig_from_codes
from disentangle.metrics.mig import mig_from_mutual_info
from disentangle.metrics.mig_sup import mig_sup_from_codes, mig_sup_from_mutual_info

from .test_common import dataset, perfect

EXACT = 1e-12


def grid(*sizes: int) -> np.ndarray:
    """Every combination of the values of ``sizes``, ``(prod(sizes), len(sizes))`` int64."""
    return np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)


def binned_mig(codes, factors, num_bins=20):
    """The library's MIG on the same codes and factors (its per-factor gaps, mean)."""
    mi = discrete_mutual_info(histogram_discretize(codes, num_bins), factors)
    return float(mig_from_mutual_info(mi, discrete_entropy(factors)).mean())


# ------------------------------------------------------------------ known ends on exact examples
def test_a_perfect_code_with_a_noise_dimension_gives_the_known_ends():
    cells = grid(2, 4, 3)  # factor 0, factor 1, a third axis that is the noise dimension
    factors = cells[:, :2]
    codes = 0.3 * cells.astype(float) + np.array([5.0, -1.0, 2.0])  # each factor copied (affinely) into one code
    sup = mig_sup_from_codes(codes, factors)
    # per code: the two copies score 1, the noise code 0; the mean runs over all d = 3 codes: K / d
    assert sup["mig_sup_0"] == pytest.approx(1.0, abs=EXACT)
    assert sup["mig_sup_1"] == pytest.approx(1.0, abs=EXACT)
    assert sup["mig_sup_2"] == pytest.approx(0.0, abs=EXACT)
    assert sup["mig_sup"] == pytest.approx(2 / 3, abs=EXACT)
    assert mig_sup_from_codes(codes[:, :2], factors)["mig_sup"] == pytest.approx(1.0, abs=EXACT)
    # DCIMIG: each factor is credited its full entropy by its copy; the noise code credits 0
    dci_mig = dcimig_from_codes(codes, factors, names=["u", "v"])
    assert dci_mig == pytest.approx({"dcimig": 1.0, "dcimig_u": 1.0, "dcimig_v": 1.0}, abs=EXACT)
    # JEMMIG: H(v, z_a) = H(v) = I(v; z_a) and I(v; z_b) = 0, so JEMMIG(v) = 0 and the score is 1
    assert jemmig_from_codes(codes, factors) == pytest.approx(
        {"jemmig": 1.0, "jemmig_factor_0": 1.0, "jemmig_factor_1": 1.0}, abs=EXACT
    )


def test_a_factor_with_more_values_than_bins_gives_the_derived_values():
    """8 equally likely values into 4 bins: the code keeps log 4 of the factor's log 8 nats."""
    cells = grid(8, 3)
    factors, codes = cells[:, :1], cells.astype(float)
    # JEMMIG = H(v) + H(z) - 2 I + 0 = log 8 + log 4 - 2 log 4 = log 2; normaliser log 8 + log 4 = log 32
    assert jemmig_from_codes(codes, factors, num_bins=4)["jemmig"] == pytest.approx(1 - 1 / 5, abs=EXACT)
    # DCIMIG: the gap log 4 over the entropy log 8; MIG-sup: I / H(z) = 1 for the copy, 0 for the noise code
    assert dcimig_from_codes(codes, factors, num_bins=4)["dcimig"] == pytest.approx(2 / 3, abs=EXACT)
    assert mig_sup_from_codes(codes, factors, num_bins=4)["mig_sup"] == pytest.approx(0.5, abs=EXACT)


def test_codes_of_pure_noise_score_about_zero():
    rng = np.random.default_rng(0)
    factors = rng.integers(0, [3, 5], size=(4000, 2))
    codes = rng.uniform(size=(4000, 3))  # uniform noise fills its bins: H(z) ~ log(num_bins)
    sup, dm, je = (f(codes, factors) for f in (mig_sup_from_codes, dcimig_from_codes, jemmig_from_codes))
    assert 0 <= sup["mig_sup"] < 0.01
    assert 0 <= dm["dcimig"] < 0.01
    assert abs(je["jemmig"]) < 0.02


# ------------------------------------------------------------------ what each one sees, and MIG does not
def test_a_redundant_copy_lowers_mig_but_neither_dcimig_nor_mig_sup():
    """Both copies credit the same full gap to the same factor (DCIMIG keeps the maximum) and each
    copy holds one factor (MIG-sup), while MIG's gap for the copied factor is 0."""
    cells = grid(2, 4)
    codes = cells[:, [0, 1, 0]].astype(float)
    assert binned_mig(codes[:, :2], cells) == pytest.approx(1.0, abs=EXACT)
    assert binned_mig(codes, cells) == pytest.approx(0.5, abs=EXACT)
    assert dcimig_from_codes(codes, cells)["dcimig"] == pytest.approx(1.0, abs=EXACT)
    assert mig_sup_from_codes(codes, cells)["mig_sup"] == pytest.approx(1.0, abs=EXACT)


def test_a_code_holding_two_factors_lowers_dcimig_and_mig_sup_but_not_mig():
    """One code holds both factors (a bijection of the pair), the other is independent noise: each
    factor still has one informative code (MIG 1), but that code's gap between the factors is only
    ``log 4 - log 2``, credited to the larger factor."""
    cells = grid(2, 4, 3)
    factors = cells[:, :2]
    codes = np.stack([4 * cells[:, 0] + cells[:, 1], cells[:, 2]], axis=1).astype(float)
    assert binned_mig(codes, factors) == pytest.approx(1.0, abs=EXACT)
    assert dcimig_from_codes(codes, factors)["dcimig"] == pytest.approx(math.log(2) / math.log(8), abs=EXACT)
    # MIG-sup: the mixed code's gap (log 4 - log 2) / log 8 = 1/3, the noise code's 0; perfect would be 1 and 0
    assert mig_sup_from_codes(codes, factors)["mig_sup"] == pytest.approx(1 / 6, abs=EXACT)
    mixed = np.concatenate([factors, 4 * factors[:, :1] + factors[:, 1:]], axis=1).astype(float)
    assert mig_sup_from_codes(mixed, factors)["mig_sup"] == pytest.approx((1 + 1 + 1 / 3) / 3, abs=EXACT)


def test_the_planted_effects_through_the_metrics_on_a_dataset():
    """The same effects on sampled codes: a duplicated code takes MIG's gap of its factor to 0 and
    leaves DCIMIG; an entangled code pair leaves MIG high and lowers DCIMIG and MIG-sup."""
    data, kwargs = dataset(), {"num_train": 2000, "seed": 1}

    def duplicated_first(x):
        return torch.cat([x, x[:, :1]], dim=1)

    def pair_code(x):  # factors a (3 values) and b (4 values) one-to-one in code 0 (4 a + b), c in code 1
        return torch.stack([8 * x[:, 0] + 3 * x[:, 1], x[:, 2]], dim=1)

    base_mig, dup_mig = mig(data, perfect, **kwargs)["mig"], mig(data, duplicated_first, **kwargs)["mig"]
    base_dm, dup_dm = dcimig(data, perfect, **kwargs)["dcimig"], dcimig(data, duplicated_first, **kwargs)["dcimig"]
    assert base_mig > 0.99 and dup_mig < 0.7  # factor a's gap is gone: about 2/3
    assert base_dm > 0.99 and dup_dm == pytest.approx(base_dm, abs=1e-12)
    assert mig_sup(data, duplicated_first, **kwargs)["mig_sup"] > 0.99
    pair = {"factors": ["a", "b"], **kwargs}  # c is not scored: code 1 is noise to the scored factors
    assert mig(data, pair_code, **pair)["mig"] > 0.99
    assert dcimig(data, pair_code, **pair)["dcimig"] < 0.3
    assert mig_sup(data, pair_code, **pair)["mig_sup"] < 0.2


# ------------------------------------------------------------------ an independent recomputation
def _reference_bins(x: np.ndarray, num_bins: int) -> np.ndarray:
    """The review's rule: min-max scale the column to [0, 1], then equal bins (max in the last)."""
    scaled = (x - x.min()) / (x.max() - x.min())
    return np.digitize(scaled, np.linspace(0, 1, num_bins + 1)[:-1])


def _entropy(*columns: np.ndarray) -> float:
    n = len(columns[0])
    counts = Counter(zip(*columns))
    return -sum(c / n * math.log(c / n) for c in counts.values())


def _mi(a: np.ndarray, b: np.ndarray) -> float:
    return _entropy(a) + _entropy(b) - _entropy(a, b)


def test_the_three_scores_equal_a_plain_recomputation_by_counting():
    rng = np.random.default_rng(7)
    n, sizes, bins = 300, (3, 4, 2), 5
    factors = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
    codes = np.stack(
        [factors[:, 0] + 0.8 * rng.normal(size=n), factors[:, 1] + 0.3 * factors[:, 2] + 0.5 * rng.normal(size=n),
         rng.normal(size=n), factors[:, 1] - factors[:, 0] + 0.2 * rng.normal(size=n)],
        axis=1,
    )
    z = [_reference_bins(codes[:, j], bins) for j in range(codes.shape[1])]
    v = [factors[:, k] for k in range(len(sizes))]
    info = np.array([[_mi(v[k], z[j]) for k in range(len(v))] for j in range(len(z))])  # (d, K)
    h_v = [_entropy(f) for f in v]

    sup_parts = []
    for j in range(len(z)):  # per code: best two factors, normalised by the code's entropy
        first, second = sorted(info[j], reverse=True)[:2]
        sup_parts.append((first - second) / _entropy(z[j]))
    credited = [0.0] * len(v)
    for j in range(len(z)):  # per code: the gap goes to its best factor; each factor keeps its best
        first, second = sorted(info[j], reverse=True)[:2]
        best = int(np.argmax(info[j]))
        credited[best] = max(credited[best], first - second)
    je_parts = []
    for k in range(len(v)):  # per factor: joint entropy with its best code minus the gap
        column = info[:, k]
        a = int(np.argmax(column))
        first, second = sorted(column, reverse=True)[:2]
        je = _entropy(v[k], z[a]) - first + second
        je_parts.append(1 - je / (h_v[k] + math.log(bins)))

    sup = mig_sup_from_codes(codes, factors, bins)
    assert sup["mig_sup"] == pytest.approx(np.mean(sup_parts), abs=EXACT)
    assert [sup[f"mig_sup_{j}"] for j in range(len(z))] == pytest.approx(sup_parts, abs=EXACT)
    dm = dcimig_from_codes(codes, factors, bins)
    assert dm["dcimig"] == pytest.approx(sum(credited) / sum(h_v), abs=EXACT)
    assert [dm[f"dcimig_factor_{k}"] for k in range(len(v))] == pytest.approx(
        [c / h for c, h in zip(credited, h_v)], abs=EXACT
    )
    je = jemmig_from_codes(codes, factors, bins)
    assert je["jemmig"] == pytest.approx(np.mean(je_parts), abs=EXACT)
    assert [je[f"jemmig_factor_{k}"] for k in range(len(v))] == pytest.approx(je_parts, abs=EXACT)
    # not degenerate: every part strictly inside (0, 1), two factors credited and one that no code prefers
    assert 0 < min(sup_parts) and max(sup_parts) < 1 and 0 < min(je_parts) < max(je_parts) < 1
    assert credited[2] == 0 < min(credited[:2])


# ------------------------------------------------------------------ edges of the cores
def test_cores_at_their_edges():
    # one factor: the second-largest information is 0; a constant code counts 0 in MIG-sup's mean
    assert mig_sup_from_mutual_info(np.array([[0.5], [0.0]]), np.array([1.0, 0.0])) == pytest.approx([0.5, 0.0])
    score, best = dcimig_from_mutual_info(np.array([[0.6], [0.2]]), np.array([0.8]))
    assert score == pytest.approx(0.75) and best == pytest.approx([0.6])
    # a code whose two best factors tie credits nothing; a factor no code prefers keeps 0
    score, best = dcimig_from_mutual_info(np.array([[0.4, 0.4, 0.0], [0.3, 0.1, 0.0]]), np.array([1.0, 1.0, 1.0]))
    assert best == pytest.approx([0.2, 0.0, 0.0]) and score == pytest.approx(0.2 / 3)
    # JEMMIG's normaliser counts the bins asked for, not those a code occupies (the reference's):
    # a 3-valued code independent of a 4-valued factor scores 1 - (log 4 + log 3) / (log 4 + log 20)
    cells = grid(4, 3)
    assert jemmig_from_codes(cells[:, 1:].astype(float), cells[:, :1])["jemmig"] == pytest.approx(
        1 - math.log(12) / math.log(80), abs=EXACT
    )
    with pytest.raises(ValueError, match=r"\(d, K\)"):
        mig_sup_from_mutual_info(np.zeros((2, 3)), np.zeros(3))


# ------------------------------------------------------------------ through evaluate_metrics
METRICS_CALL = {"mig_sup": mig_sup, "dcimig": dcimig, "jemmig": jemmig}


def test_evaluate_metrics_gives_the_array_cores_on_the_drawn_codes():
    data = dataset(noise=0.05)

    def representation(x):
        x = torch.as_tensor(x, dtype=torch.float64)
        return torch.stack([x[:, 0] + 0.5 * x[:, 1], x[:, 1], x[:, 2] - 0.3 * x[:, 0], x[:, 0] ** 2], dim=1)

    names = ["mig_sup", "dcimig", "jemmig", "mig"]
    settings = {name: {"num_train": 600, "num_bins": 8} for name in names}
    results = evaluate_metrics(data, representation, names, seed=4, settings=settings)
    codes, factors = sample_codes_and_factors(
        data, as_representation_function(representation), 600, np.random.default_rng(4)
    )
    expected = {
        "mig_sup": mig_sup_from_codes(codes, factors, 8),
        "dcimig": dcimig_from_codes(codes, factors, 8, names=["a", "b", "c"]),
        "jemmig": jemmig_from_codes(codes, factors, 8, names=["a", "b", "c"]),
    }
    for name, scores in expected.items():
        assert results[name] == pytest.approx(scores, abs=EXACT)
        assert results[name] == METRICS_CALL[name](data, representation, seed=4, num_train=600, num_bins=8)
    assert set(results["jemmig"]) == {"jemmig", "jemmig_a", "jemmig_b", "jemmig_c"}
    assert set(results["mig_sup"]) == {"mig_sup", "mig_sup_0", "mig_sup_1", "mig_sup_2", "mig_sup_3"}
    assert 0.05 < results["dcimig"]["dcimig"] < 0.95  # an informative, entangled code: neither end


def test_mig_sup_in_li_et_al_s_convention_matches_an_independent_computation():
    """convention="paper" (Li et al.'s code): each I(z_j; v_k) over H(v_k) before the ranking, the mean
    over active dimensions only. A perfect copy of dSprites-like factors padded with collapsed units:
    the review's convention halves the score, the paper's does not; checked against scikit-learn's
    mutual information and scipy's entropy on the same binned codes."""
    from scipy.stats import entropy
    from sklearn.metrics import mutual_info_score

    rng = np.random.default_rng(0)
    sizes = (3, 6, 40, 32, 32)
    factors = np.stack([rng.integers(0, k, 10_000) for k in sizes], axis=1)
    collapsed = rng.normal(0.0, 1e-3, (10_000, 5))
    codes = np.concatenate([factors / np.array(sizes), collapsed], axis=1)
    paper = mig_sup_from_codes(codes, factors, num_bins=20, convention="paper")
    review = mig_sup_from_codes(codes, factors, num_bins=20)
    binned = histogram_discretize(codes, 20)
    h = np.array([entropy(np.bincount(factors[:, k])) for k in range(len(sizes))])
    expected = []
    for j in range(5):  # the active dimensions (the collapsed ones' variance is 1e-6)
        normed = sorted((mutual_info_score(factors[:, k], binned[:, j]) / h[k] for k in range(len(sizes))),
                        reverse=True)
        expected.append(normed[0] - normed[1])
    assert paper["mig_sup"] == pytest.approx(np.mean(expected), rel=1e-9)
    assert [paper[f"mig_sup_{j}"] for j in range(5, 10)] == [0.0] * 5
    assert 0.85 < paper["mig_sup"] < 0.95 and 0.45 < review["mig_sup"] < 0.55
    with pytest.raises(Exception, match="convention"):
        mig_sup(dataset(), perfect, num_train=100, convention="article")


def test_unsupervised_mutual_info_score_is_the_mean_over_ordered_pairs():
    """Codes (a, a, b) with b independent of a: of the 6 ordered pairs only (0, 1) and (1, 0) share
    information, H(binned a) each, so the score is 2 H / 6 up to the plug-in MI of a and b."""
    from sklearn.metrics import mutual_info_score

    from disentangle.metrics import unsupervised_scores

    from .test_common import dataset

    def twice_a_then_c(x):
        x = np.asarray(x, dtype=np.float64)
        return np.stack([x[:, 0], x[:, 0], x[:, 2]], axis=1)

    score = unsupervised_scores(dataset(), twice_a_then_c, num_train=3000)["mutual_info_score"]
    codes, _ = sample_codes_and_factors(dataset(), as_representation_function(twice_a_then_c), 3000,
                                        np.random.default_rng(0))
    binned = histogram_discretize(codes, 20)
    pairs = [mutual_info_score(binned[:, i], binned[:, j]) for i in range(3) for j in range(3) if i != j]
    assert score == pytest.approx(sum(pairs) / 6, rel=1e-12)
    entropy = mutual_info_score(binned[:, 0], binned[:, 0])
    assert score == pytest.approx(2 * entropy / 6, abs=0.01)  # the (a, c) pairs: plug-in bias only
