"""What :func:`~disentangle.study.analysis.analyze` returns: :class:`StudyResult`, and the layout
of its ``variance_explained`` rows (:func:`variance_row`, read back by :func:`shares_of_row`).

The analysis computes it and the report (:mod:`disentangle.study.report`) writes it; both import
it from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .statistics import Matrix, VarianceShares
from .table import Design


@dataclass
class StudyResult:
    """The tables of a study (plain numpy / dicts / lists) and the files written.

    * ``rank_correlation[dataset]``: :class:`~disentangle.study.statistics.Matrix` of Spearman's ρ
      between the supervised scores (``.values``, ``.counts`` = runs behind each entry);
    * ``unsupervised_vs_supervised[dataset]``: rows unsupervised scores, columns supervised;
    * ``variance_explained``: one dict per (dataset, score): ``score, method, strength, residual,
      n_runs, n_methods, n_settings``, the chance levels ``method_chance, strength_chance,
      residual_chance`` (expected shares under pure noise), the F-test p-values ``method_p,
      strength_p``, the same Holm-adjusted over the dataset's tests ``method_p_holm,
      strength_p_holm``, and ``df_method, df_strength, df_residual`` (+ ``dataset`` first when
      there are several);
    * ``summary``: one dict per (dataset, method, setting, score): ``n_runs, median, q25, q75, iqr``;
    * ``udr``: ``{run_id: {"udr": score, "udr_models": models compared}}`` when computed;
    * ``skipped``: analysis name -> why it was not done; ``files``: output name -> path.
    """

    design: Design
    rank_correlation: dict[str, Matrix]
    unsupervised_vs_supervised: dict[str, Matrix]
    variance_explained: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    udr: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    report: str = ""


def variance_row(score: str, s: VarianceShares, dataset: str | None) -> dict[str, Any]:
    """One row of ``variance_explained``: the shares, then (since issue 18) their chance levels and tests."""
    row = {"score": score, "method": s.method, "strength": s.strength, "residual": s.residual,
           "n_runs": s.n_runs, "n_methods": s.n_methods, "n_settings": s.n_settings,
           "method_chance": s.chance_method, "strength_chance": s.chance_strength, "residual_chance": s.chance_residual,
           "method_p": s.p_method, "strength_p": s.p_strength,
           "method_p_holm": s.p_method_adjusted, "strength_p_holm": s.p_strength_adjusted,
           "df_method": s.df_method, "df_strength": s.df_strength, "df_residual": s.df_residual}
    return row if dataset is None else {"dataset": dataset, **row}


def shares_of_row(row: dict[str, Any]) -> VarianceShares:
    """The :class:`VarianceShares` of a ``variance_explained`` row (the inverse of the row's layout)."""
    return VarianceShares(
        row["method"], row["strength"], row["residual"], row["n_runs"], row["n_methods"], row["n_settings"],
        row["df_method"], row["df_strength"], row["df_residual"],
        row["method_chance"], row["strength_chance"], row["residual_chance"],
        row["method_p"], row["strength_p"], row["method_p_holm"], row["strength_p_holm"],
    )
