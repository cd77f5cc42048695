"""The downstream task and the registry / evaluate_metrics glue."""
from __future__ import annotations

import pytest

from disentangle.errors import ConfigError, UnknownNameError
from disentangle.metrics import (
    LOCATELLO_METRICS,
    METRICS,
    FactorObservationDataset,
    available_metrics,
    downstream_task,
    evaluate_metrics,
)

from .test_common import Noise, dataset, perfect

ALL = {
    "beta_vae_score", "factor_vae_score", "mig", "modularity_explicitness", "dci", "sap_score",
    "unsupervised_scores", "downstream_task", "elbo_decomposition",
    "mig_sup", "dcimig", "jemmig",
    "infomec", "dci_es",
    "irs", "fairness", "reduced_downstream_task", "strong_downstream_task", "unified_scores",
    "elbo", "class_leakage", "swap_accuracy",
}


def test_downstream_scores_and_keys():
    out = downstream_task(dataset(), perfect, num_train=(10, 60), num_test=300, predictors="gradient_boosting")
    for n in (10, 60):
        for key in ("mean_test_accuracy", "mean_train_accuracy", "min_test_accuracy", "min_train_accuracy"):
            assert 0.0 <= out[f"gbt_{n}:{key}"] <= 1.0
        assert {f"gbt_{n}:test_accuracy_{f}" for f in "abc"} <= set(out)
    assert out["gbt_60:mean_test_accuracy"] == 1.0  # trees read a perfect code exactly
    assert "gbt:sample_efficiency" not in out  # needs both 100 and 10,000 points
    # logistic regression with 5-fold CV over 10 values of C costs ~1 s per factor whatever the size
    two = FactorObservationDataset((3, 4))
    lr = downstream_task(two, perfect, num_train=(40,), num_test=300, predictors=("logistic_regression",))
    assert lr["lr_40:mean_test_accuracy"] > 0.8 and lr["lr_40:min_train_accuracy"] > 0.8
    noise = downstream_task(dataset(), Noise(), num_train=(300,), num_test=500, predictors="hist_gradient_boosting")
    assert noise["hgbt_300:mean_test_accuracy"] < 0.45


def test_downstream_exact_booster_agrees_with_scikit_learn():
    def rotated(factors):
        import numpy as np

        f = np.asarray(factors, dtype=float)
        return np.stack([f[:, 0] + 0.3 * f[:, 1], f[:, 1] - 0.2 * f[:, 2], f[:, 2] + 0.1 * f[:, 0]], axis=1)

    kwargs = dict(num_train=(40, 200), num_test=300, predictors="gradient_boosting", n_jobs=1)
    exact = downstream_task(dataset(), rotated, booster="exact", **kwargs)
    ref = downstream_task(dataset(), rotated, booster="sklearn", **kwargs)
    assert exact.keys() == ref.keys()
    for key in ref:
        assert exact[key] == pytest.approx(ref[key], abs=0.02), key
    with pytest.raises(ConfigError, match="booster"):
        downstream_task(dataset(), rotated, booster="hist", **kwargs)


@pytest.mark.slow
def test_downstream_sample_efficiency():
    out = downstream_task(dataset(), perfect, num_train=(100, 10_000), num_test=500, predictors=("logistic_regression",))
    assert out["lr:sample_efficiency"] == pytest.approx(
        out["lr_100:mean_test_accuracy"] / out["lr_10000:mean_test_accuracy"]
    )


def test_downstream_setting_errors():
    with pytest.raises(ConfigError, match="predictors is .svm., which is not a valid choice"):
        downstream_task(dataset(), perfect, predictors=("svm",))
    with pytest.raises(ConfigError, match=">= 5"):
        downstream_task(dataset(), perfect, num_train=(3,))


def test_registry_holds_every_metric_under_its_function_name():
    assert set(METRICS.names()) == ALL
    for name in METRICS.names():
        assert METRICS.get(name).__name__ == name
    assert set(LOCATELLO_METRICS) < ALL
    assert "elbo_decomposition" not in available_metrics(perfect)  # no encoder
    with pytest.raises(UnknownNameError, match="Did you mean 'mig'"):
        METRICS.get("mgi")


def test_evaluate_metrics_runs_names_with_settings_and_reports_progress():
    seen = []
    out = evaluate_metrics(
        dataset(), perfect, "mig, sap_score", seed=2,
        settings={"sap_score": {"num_train": 300, "num_test": 100}},
        callback=lambda name, scores, secs: seen.append((name, secs >= 0)),
    )
    assert list(out) == ["mig", "sap_score"] and seen == [("mig", True), ("sap_score", True)]
    assert out["sap_score"] == METRICS.get("sap_score")(dataset(), perfect, seed=2, num_train=300, num_test=100)
    with pytest.raises(UnknownNameError, match="Did you mean 'dci'"):
        evaluate_metrics(dataset(), perfect, ["mig", "dcx"])
    with pytest.raises(UnknownNameError):
        evaluate_metrics(dataset(), perfect, ["mig"], settings={"migg": {}})
