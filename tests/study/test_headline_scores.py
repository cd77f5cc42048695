"""The study's headline scores name scores the metrics really return."""
from __future__ import annotations

import numpy as np
import pytest

from disentangle.metrics import evaluate_metrics
from disentangle.metrics.synthetic import FactorObservationDataset
from disentangle.study.columns import HEADLINE_SCORES, is_headline

#: metrics whose scores a synthetic grid gives cheaply, at their defaults (the names depend on them)
CHEAP = ("irs", "fairness", "reduced_downstream_task", "strong_downstream_task", "unified_scores", "dci_es",
         "infomec", "mig_sup", "dcimig", "jemmig", "mig", "sap_score")
#: fewer points where the score names do not depend on them (the downstream tasks' names hold theirs)
SMALL = {m: {"num_train": 1000} for m in ("fairness", "unified_scores", "dci_es", "infomec")}


@pytest.fixture(scope="module")
def scores():
    dataset = FactorObservationDataset((4, 4, 3), ("a", "b", "c"))
    mixing = np.random.default_rng(0).normal(size=(3, 4))
    return evaluate_metrics(dataset, lambda x: np.asarray(x) @ mixing, list(CHEAP), seed=0, settings=SMALL)


@pytest.mark.parametrize("metric", CHEAP)
def test_every_headline_score_is_a_score_of_its_metric(metric, scores):
    assert set(HEADLINE_SCORES[metric]) <= set(scores[metric]), sorted(set(HEADLINE_SCORES[metric]) - set(scores[metric]))
    kept = [k for k in scores[metric] if is_headline(f"{metric}.{k}")]
    assert kept and len(kept) == len(HEADLINE_SCORES[metric])


def test_a_column_split_by_settings_keeps_its_headline_status():
    """results.csv splits a metric computed with several settings (mig.mig[num_train=300]): the
    default --scores headline dropped those columns silently."""
    assert is_headline("mig.mig[num_train=300]") and is_headline("dci.disentanglement[num_train=2000]")
    assert not is_headline("mig.mig_shape[num_train=300]") and not is_headline("dci.informativeness_train[num_train=2]")
