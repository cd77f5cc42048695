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

POSTERIOR_METRICS: tuple[str, ...] = ("elbo", "elbo_decomposition")
"""Metrics of a VAE's posterior ``q(z|x)`` and likelihood ``p(x|z)``: meaningless for a GAN, whose
codes have a uniform prior and no posterior (its ``encode`` is an inference network's guess)."""
"""Metrics whose scores need no ground-truth factors (the study compares them with the supervised ones)."""

PUBLISHED_METRICS: tuple[str, ...] = (*LOCATELLO_METRICS, "unsupervised_scores")
"""The scores a published zoo model records by default: the study's six and the unsupervised scores."""

CLASS_CONTENT_METRICS: tuple[str, ...] = ("class_leakage", "swap_accuracy")
"""Metrics that read a class/content model's split: their ``class_factors`` and ``class_dim`` come
from the model's objective (``disentangle evaluate`` and the trainer's ``train.eval_metrics`` fill
them from a class/content run unless the settings give them)."""

HEADLINE_SCORES: dict[str, tuple[str, ...]] = {
    "beta_vae_score": ("eval_accuracy",),
    "factor_vae_score": ("eval_accuracy",),
    "mig": ("mig",),
    "modularity_explicitness": ("modularity", "explicitness_test"),
    "dci": ("disentanglement", "completeness", "informativeness_test"),
    "sap_score": ("sap",),
    "unsupervised_scores": (
        "gaussian_total_correlation",
        "gaussian_wasserstein_correlation",
        "gaussian_wasserstein_correlation_norm",
        "mutual_info_score",
    ),
    "downstream_task": (
        "lr_10000:mean_test_accuracy",
        "gbt_10000:mean_test_accuracy",
        "lr:sample_efficiency",
        "gbt:sample_efficiency",
    ),
    "elbo_decomposition": ("index_code_mi", "total_correlation", "dimwise_kl"),
    "udr": ("udr",),
    # disentanglement_lib's other metrics and the newer ones: their aggregate scores, not the
    # per-factor, per-code or per-pair entries
    "irs": ("irs",),
    "fairness": ("mean_fairness:mean_sens:mean_pred", "mean_fairness:max_sens:max_pred"),
    "reduced_downstream_task": ("10000:mean_test_accuracy_reduced_factor", "10000:mean_test_accuracy_other_factors"),
    "strong_downstream_task": ("1000:mean_test_accuracy", "1000:mean_strong_test_accuracy", "1000:strong_generalization_gap"),
    "unified_scores": tuple(
        f"{matrix}.{score}"
        for matrix in ("importance_gbt_matrix", "mutual_information_matrix", "accuracy_svm_matrix")
        for score in ("dci_disentanglement", "mig", "sap", "modularity")
    ),
    "dci_es": ("disentanglement", "completeness", "informativeness", "explicitness", "size"),
    "infomec": ("infom", "infoe", "infoc"),
    "mig_sup": ("mig_sup",),
    "dcimig": ("dcimig",),
    "jemmig": ("jemmig",),
    "class_leakage": ("class_leakage", "class_code_accuracy"),
    "swap_accuracy": ("swap_accuracy",),
}
"""The headline scores of each metric: those the study analyses by default and ``metrics.png`` draws when
there are too many bars; a metric not listed here contributes all its scores."""
