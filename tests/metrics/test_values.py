"""Scores of representations with a known structure: perfect, rotated, noise, permuted, duplicated."""
from __future__ import annotations

import numpy as np
import pytest

from disentangle.metrics import (
    beta_vae_score,
    dci,
    factor_vae_score,
    mig,
    modularity_explicitness,
    sap_score,
    unsupervised_scores,
)

from .test_common import (
    SIZES,
    Noise,
    dataset,
    duplicated,
    perfect,
    permuted,
    rotated,
)

CHANCE = float(np.mean([1.0 / s for s in SIZES]))
SMALL = {
    "mig": {"num_train": 3000},
    "dci": {"num_train": 500, "num_test": 300},
    "sap_score": {"num_train": 1000, "num_test": 500},
    "modularity_explicitness": {"num_train": 2000, "num_test": 1000},
    "beta_vae_score": {"num_train": 200, "num_eval": 200, "batch_size": 16},
    "factor_vae_score": {"num_train": 300, "num_eval": 200, "num_variance_estimate": 1000, "batch_size": 16},
    "unsupervised_scores": {"num_train": 2000},
}
FUNCS = {
    "mig": mig,
    "dci": dci,
    "sap_score": sap_score,
    "modularity_explicitness": modularity_explicitness,
    "beta_vae_score": beta_vae_score,
    "factor_vae_score": factor_vae_score,
    "unsupervised_scores": unsupervised_scores,
}


def run(name, rep, seed=0, noise=0.0, **extra):
    return FUNCS[name](dataset(noise), rep, seed=seed, **{**SMALL[name], **extra})


@pytest.fixture(scope="module")
def scores():
    """Every metric on the perfect, rotated and noise representations (computed once)."""
    out = {}
    for label, rep in [("perfect", perfect), ("rotated", rotated()), ("noise", Noise())]:
        out[label] = {name: run(name, rep) for name in FUNCS}
    return out


def test_perfect_representation_scores_high(scores):
    s = scores["perfect"]
    assert s["mig"]["mig"] > 0.95
    assert s["dci"]["disentanglement"] > 0.95 and s["dci"]["completeness"] > 0.95
    assert s["dci"]["informativeness_test"] > 0.99
    assert s["modularity_explicitness"]["modularity"] > 0.98
    assert s["modularity_explicitness"]["explicitness_test"] > 0.95
    assert s["beta_vae_score"]["eval_accuracy"] == 1.0
    assert s["factor_vae_score"]["eval_accuracy"] == 1.0
    assert s["factor_vae_score"]["num_active_dims"] == 3.0
    # a linear one-vs-rest SVM on one dimension cannot isolate middle classes: "high" is relative
    assert s["sap_score"]["sap"] > 0.2 and s["sap_score"]["sap"] > 2 * scores["rotated"]["sap_score"]["sap"]
    assert s["unsupervised_scores"]["gaussian_total_correlation"] < 0.01


def test_rotation_keeps_information_but_loses_disentanglement(scores):
    s, p = scores["rotated"], scores["perfect"]
    assert s["mig"]["mig"] < 0.35 < p["mig"]["mig"]
    assert s["dci"]["disentanglement"] < 0.6
    assert s["dci"]["informativeness_test"] > 0.95  # trees still read every factor
    assert s["modularity_explicitness"]["modularity"] < p["modularity_explicitness"]["modularity"] - 0.1
    # a rotation of (nearly) isotropic factors stays uncorrelated: the Gaussian TC cannot see it,
    # the histogram mutual information between codes can
    mi = "mutual_info_score"
    assert s["unsupervised_scores"][mi] > 10 * p["unsupervised_scores"][mi] + 0.1


def test_noise_scores_zero_or_chance(scores):
    s = scores["noise"]
    assert s["mig"]["mig"] < 0.03
    assert abs(s["dci"]["informativeness_test"] - CHANCE) < 0.05
    assert abs(s["beta_vae_score"]["eval_accuracy"] - 1 / 3) < 0.1
    assert abs(s["factor_vae_score"]["eval_accuracy"] - 1 / 3) < 0.1
    assert abs(s["modularity_explicitness"]["explicitness_test"] - 0.5) < 0.05
    assert s["sap_score"]["sap"] < 0.03


def test_a_copy_of_each_factor_drops_mig_but_not_informativeness(scores):
    m = run("mig", duplicated)
    assert m["mig"] < 0.01 and all(m[f"mig_{n}"] < 0.01 for n in ("a", "b", "c"))
    d = run("dci", duplicated)
    assert d["informativeness_test"] > 0.99
    assert d["completeness"] < scores["perfect"]["dci"]["completeness"] - 0.3


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_permuting_code_dimensions_changes_nothing(name):
    # Observation noise makes every code value distinct. Classifier fits on permuted columns agree
    # up to the solvers' tolerance; boosted trees also meet exact ties between features (a node of
    # two samples is split the same way by every feature), which sklearn, as the reference, breaks
    # by its random feature order, so DCI's importances move by a little.
    base = rotated()
    a = run(name, base, noise=0.1)
    b = run(name, permuted(base, [2, 0, 1]), noise=0.1)
    assert a.keys() == b.keys()
    tol = {"beta_vae_score": 2e-3, "modularity_explicitness": 2e-3, "dci": 1e-2}.get(name, 1e-9)
    for key in a:
        assert a[key] == pytest.approx(b[key], abs=tol), key


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_same_seed_same_numbers(name):
    rep = rotated()
    a, b = run(name, rep, seed=3), run(name, rep, seed=3)
    assert a == b
    assert all(type(v) is float for v in a.values())
    if name != "unsupervised_scores":
        assert run(name, rep, seed=4) != a  # a different seed draws different points


def test_results_do_not_depend_on_n_jobs():
    rep = rotated()
    for name in ("dci", "sap_score", "modularity_explicitness"):
        assert run(name, rep, n_jobs=1) == run(name, rep, n_jobs=2), name
