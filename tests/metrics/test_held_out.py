"""Scores that must be measured where their definition says: on held-out draws, normalised by the
empirical factor entropy, on codes divided by their global spread.

Each test plants a representation for which the right computation and a plausible wrong one give
values far apart (a code that changes between the training and the test draws, a dimension of tiny
scale), so that a classifier scored on its own training points, or a normalisation left out, fails.
"""
from __future__ import annotations

import numpy as np
import torch

from disentangle.metrics import factor_vae_score, mig, sap_score

from .test_common import dataset


class SwitchesAfter:
    """The factors themselves for the first ``rows`` observations, then ``after`` of them.

    Metrics draw their training points before their test points, so this is a representation that
    the training draws and the held-out draws see differently."""

    def __init__(self, rows: int, after) -> None:
        self.rows, self.after, self.seen = rows, after, 0

    def __call__(self, x: torch.Tensor):
        seen, self.seen = self.seen, self.seen + len(x)
        assert seen >= self.rows or self.seen <= self.rows, "a call straddles the switch"
        return x if seen < self.rows else self.after(x)


def shifted(x: torch.Tensor) -> torch.Tensor:
    """Code ``j`` holds factor ``j + 1`` (cyclically): every factor moves to another dimension."""
    return torch.roll(x, shifts=1, dims=1)


def constant(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)


def test_sap_scores_its_classifiers_on_the_test_draws():
    # trained on perfect codes, tested on constant ones: each SVM predicts one class for every test
    # draw, so its accuracy is that class's share of the draws (about 1/size) and each factor's top
    # two accuracies nearly tie; scored on the training draws SAP would be that of perfect codes
    num_train, num_test = 1000, 500
    clean = sap_score(dataset(), lambda x: x, num_train=num_train, num_test=num_test)["sap"]
    switched = sap_score(dataset(), SwitchesAfter(num_train, constant), num_train=num_train, num_test=num_test)["sap"]
    assert clean > 0.2  # 0.25: one code alone separates 3-5 classes only in part
    assert switched < 0.1


def test_factor_vae_score_evaluates_with_the_training_votes():
    # the majority vote learnt on the training points maps dimension j to factor j; on the eval
    # points factor k is carried by dimension k + 1, which that vote assigns to factor k + 1, so every
    # eval point is misclassified: eval accuracy 0 exactly (an eval set voting for itself gets 1)
    settings = {"num_train": 100, "num_eval": 60, "num_variance_estimate": 500, "batch_size": 16}
    rows_before_eval = settings["num_variance_estimate"] + settings["num_train"] * settings["batch_size"]
    scores = factor_vae_score(dataset(), SwitchesAfter(rows_before_eval, shifted), **settings)
    assert scores["train_accuracy"] == 1.0
    assert scores["eval_accuracy"] == 0.0


def test_factor_vae_score_divides_by_the_global_spread():
    # dimension 1 carries factor b at a fifth of its scale (sd 0.075, above the pruning threshold)
    # and no noise; the others carry their factor plus noise of sd 0.1. Raw batch variances make the
    # small dimension (variance 0.0056 < 0.01) the argmin when a or c is fixed; divided by their
    # global variance, the fixed factor's dimension is the argmin (about 0.06 against 1)
    rng = np.random.default_rng(0)
    scale = torch.tensor([1.0, 0.2, 1.0], dtype=torch.float64)

    def representation(x):
        jitter = torch.as_tensor(rng.normal(scale=0.1, size=tuple(x.shape))) * (scale == 1.0)
        return x.to(torch.float64) * scale + jitter

    scores = factor_vae_score(dataset(), representation, num_train=100, num_eval=60,
                              num_variance_estimate=2000, batch_size=32)
    assert scores["train_accuracy"] == 1.0 and scores["eval_accuracy"] == 1.0


def test_mig_is_normalised_by_the_empirical_factor_entropy():
    # one code holds factor a, the others are constant: I(code_a; a) is the plug-in entropy of a's
    # draws and the constant codes carry no information, so factor a's gap is exactly 1; normalising
    # by log(#classes) instead would leave it short by the draws' deviation from uniform
    def only_a(x):
        out = torch.zeros_like(x, dtype=torch.float64)
        out[:, 0] = x[:, 0]
        return out

    scores = mig(dataset(), only_a, num_train=3000)
    assert abs(scores["mig_a"] - 1.0) < 1e-12
    # b and c: I(code_a; b) is the plug-in bias of two independent draws, small and positive
    assert 0 < scores["mig_b"] < 0.01 and 0 < scores["mig_c"] < 0.01
