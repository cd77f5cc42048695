"""The names of metric groups, written once, in a module that imports nothing.

:mod:`disentangle.metrics`, the zoo and the study analysis all take their lists from here
(importing it imports :mod:`disentangle.metrics`' registry, not scikit-learn: the metrics import
their heavy dependencies when they run).
"""
from __future__ import annotations

LOCATELLO_METRICS: tuple[str, ...] = (
    "beta_vae_score",
    "factor_vae_score",
    "mig",
    "modularity_explicitness",
    "dci",
    "sap_score",
)
"""The six supervised scores of the Locatello et al. (2019) study, in the paper's order."""

UNSUPERVISED_METRICS: tuple[str, ...] = ("unsupervised_scores", "udr", "elbo_decomposition")
"""Metrics whose scores need no ground-truth factors (the study compares them with the supervised ones)."""

PUBLISHED_METRICS: tuple[str, ...] = (*LOCATELLO_METRICS, "unsupervised_scores")
"""The scores a published zoo model records by default: the study's six and the unsupervised scores."""

CLASS_CONTENT_METRICS: tuple[str, ...] = ("class_leakage", "swap_accuracy")
"""Metrics that read a class/content model's split: their ``class_factors`` and ``class_dim`` come
from the model's objective (``disentangle evaluate`` and the trainer's ``train.eval_metrics`` fill
them from a class/content run unless the settings give them)."""
