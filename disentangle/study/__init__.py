"""The study analyses of Locatello et al. 2019 over a sweep's results, in one call.

``python -m disentangle.study INPUT --out REPORT_DIR`` or::

    from disentangle.study import analyze
    result = analyze("sweeps/mini", out="reports/mini")     # a sweep folder, results.csv or dlib JSON
    result.rank_correlation["sprites"].values               # Spearman's rho between supervised scores
    result.variance_explained                               # [{"score", "method", "strength", "residual", ...}]

Modules: :mod:`~disentangle.study.columns` (:class:`StudyTable` and what each column is),
:mod:`~disentangle.study.table` (reading the table, inferring method / strength / seed / scores),
:mod:`~disentangle.study.dlib` (disentanglement_lib's aggregated JSON),
:mod:`~disentangle.study.statistics` (rank correlation, nested variance decomposition, quartiles),
:mod:`~disentangle.study.udr` (UDR, Duan et al. 2020), :mod:`~disentangle.study.result`
(:class:`StudyResult`), :mod:`~disentangle.study.figures` (matplotlib, optional),
:mod:`~disentangle.study.report` (the report folder) and :mod:`~disentangle.study.analysis`
(``analyze``). A sweep's ``results.csv`` is read through :mod:`disentangle.metrics.results`; nothing
here imports the sweep or the trainer.
"""
from __future__ import annotations

from .analysis import StudyResult, analyze
from .dlib import read_dlib_json
from .statistics import Matrix, quartiles, rank_correlation_matrix, spearman, variance_explained
from .table import Design, StudyTable, infer_design, read_table
from .udr import similarity_matrix, udr_from_runs, udr_pair, udr_scores

__all__ = [
    "Design",
    "Matrix",
    "StudyResult",
    "StudyTable",
    "analyze",
    "infer_design",
    "quartiles",
    "rank_correlation_matrix",
    "read_dlib_json",
    "read_table",
    "similarity_matrix",
    "spearman",
    "udr_from_runs",
    "udr_pair",
    "udr_scores",
    "variance_explained",
]
