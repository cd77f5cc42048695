"""``analyze``: every analysis of the study from one results table, and the report folder.

The analyses follow Locatello et al. 2019 ("Challenging Common Assumptions in the Unsupervised
Learning of Disentangled Representations", ICML 2019), done per dataset:

* rank correlation (Spearman) between every pair of supervised scores, over all runs;
* rank correlation of each unsupervised score (Gaussian TC, Wasserstein correlation, MI score,
  UDR, ...) with each supervised one;
* the share of each score's variance explained by the method, by the strength within the method,
  and the residual (seed and noise): :func:`~disentangle.study.statistics.variance_explained`,
  each share with its chance level (what pure noise gives, df / (N − 1)) and, for the method and
  the strength, the p-value of its F-test, Holm-adjusted over all the tests of a dataset;
* the median and interquartile range of every score per method × strength.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .._core.checks import choice, positive_int
from ..errors import InputError
from .report import write_report
from .result import StudyResult, variance_row
from .statistics import Matrix, holm, quartiles, rank_correlation_matrix, variance_explained
from .table import Design, StudyTable, infer_design, read_table
from .udr import AGGREGATIONS, CORRELATIONS, udr_from_runs

FIGURE_NAMES = (
    "metric_rank_correlation.png",
    "unsupervised_vs_supervised.png",
    "variance_explained.png",
    "scores_by_method.png",
    "score_vs_strength.png",
)


def _runs_folder(source: Any) -> Path | None:
    if isinstance(source, StudyTable):
        source = source.source
    if not source:
        return None
    path = Path(source)
    folder = path if path.is_dir() else path.parent
    return folder / "runs" if (folder / "runs").is_dir() else None


def _udr_groups(design: Design, runs: Path) -> dict[tuple[str, str, str], list[tuple[str, str]]]:
    if "run_id" not in design.table.columns:
        raise InputError("UDR needs the run_id column to find each run's folder (runs/<run_id>/); the table has none.")
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    missing = []
    for i, row in enumerate(design.table.rows):
        run_id = str(row.get("run_id"))
        run_dir = runs / run_id
        if not (run_dir / "checkpoint.pt").is_file():
            missing.append(run_id)
        key = (design.datasets[i], design.methods[i], design.configuration[i])
        groups.setdefault(key, []).append((run_id, str(run_dir)))
    if missing:
        raise InputError(
            f"UDR needs every run's trained model, but {len(missing)} run folder(s) under '{runs}' have no "
            f"checkpoint.pt ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}). Run the analysis on the "
            f"sweep folder that holds the runs, or leave out --udr."
        )
    return groups


def analyze(
    source: str | Path | StudyTable,
    out: str | Path | None = None,
    *,
    scores: str | list[str] = "headline",
    method_column: str = "objective.name",
    seed_column: str = "seed",
    dataset_column: str = "data.name",
    udr: bool = False,
    udr_points: int = 1000,
    udr_correlation: str = "lasso",
    udr_aggregation: str = "paper",
    postprocess: str = "mean_representation",
    figures: bool = True,
    progress: bool = True,
) -> StudyResult:
    """Analyse a study and, with ``out``, write its report folder.

    ``source`` is a sweep folder, its ``results.csv``, a disentanglement_lib aggregated results
    JSON (``postprocess`` picks its representation) or a :class:`StudyTable`. Column roles are
    inferred by :func:`~disentangle.study.table.infer_design` (``scores``: ``"headline"``,
    ``"all"`` or a list of ``<metric>.<score>`` columns). ``udr=True`` computes UDR
    (:mod:`disentangle.study.udr`) from the sweep's run folders and analyses it as the
    unsupervised score ``udr.udr``. Every check runs before ``out`` is created; rerunning
    overwrites the report's files (each written atomically). Without matplotlib the CSVs and
    ``report.md`` are still written, and the report says how to get the figures.
    """
    udr_points = positive_int("udr_points (--udr-points)", udr_points)
    udr_correlation = choice("udr_correlation (--udr-correlation)", udr_correlation, CORRELATIONS)
    udr_aggregation = choice("udr_aggregation (--udr-aggregation)", udr_aggregation, AGGREGATIONS)
    out_dir = Path(out) if out is not None else None
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out '{out_dir}' exists and is not a folder; name a folder for the report.")
    table = source if isinstance(source, StudyTable) else read_table(source, postprocess=postprocess)
    columns = dict(method_column=method_column, seed_column=seed_column, dataset_column=dataset_column)
    by_mode = isinstance(scores, str) and scores in ("headline", "all")
    requested = scores if by_mode else [s for s in ([scores] if isinstance(scores, str) else list(scores)) if s != "udr.udr"]
    design = infer_design(table, **columns, scores=requested)

    udr_results: dict[str, dict[str, float]] = {}
    if udr:
        runs = _runs_folder(source)
        if runs is None:
            raise InputError(
                "UDR is computed from the trained models, so it needs a sweep folder (or its results.csv) next to "
                "its runs/ folder; this input has no run folders (a disentanglement_lib JSON holds only scores)."
            )
        groups = _udr_groups(design, runs)
        udr_results = udr_from_runs(groups, num_points=udr_points, correlation=udr_correlation,
                                    aggregation=udr_aggregation, progress=progress)
        run_ids = [str(r.get("run_id")) for r in table.rows]
        table = table.with_column("udr.udr", [udr_results[r]["udr"] for r in run_ids])
        design = infer_design(table, **columns, scores=requested if by_mode else [*requested, "udr.udr"])

    result = _compute(design)
    result.udr = udr_results
    if out_dir is not None:
        write_report(result, out_dir, figures=figures, progress=progress)
    return result


def _compute(design: Design) -> StudyResult:
    skipped: dict[str, str] = {}
    rank: dict[str, Matrix] = {}
    unsup: dict[str, Matrix] = {}
    for dataset in design.dataset_names:
        mask = design.rows_of(dataset)
        if len(design.supervised) >= 2:
            rank[dataset] = rank_correlation_matrix(design.scores, design.supervised, design.supervised, mask)
        if design.unsupervised and design.supervised:
            unsup[dataset] = rank_correlation_matrix(design.scores, design.unsupervised, design.supervised, mask)
    if len(design.supervised) < 2:
        skipped["metric_rank_correlation"] = (
            f"it needs at least two supervised scores; the table has {len(design.supervised)} "
            f"({', '.join(design.supervised) or 'none'})."
        )
    if not (design.unsupervised and design.supervised):
        skipped["unsupervised_vs_supervised"] = (
            "it needs at least one unsupervised score (unsupervised_scores.*, udr.udr: add 'unsupervised_scores' to "
            "the study's metrics or pass --udr) and one supervised score."
            if not design.unsupervised else "the table has no supervised score."
        )
    too_few = [d for d, m in rank.items() if (m.counts.max() if m.counts.size else 0) < 3]
    if too_few:
        skipped.setdefault("metric_rank_correlation", f"fewer than 3 runs in {', '.join(too_few)}: no rank correlation there.")

    variance: list[dict[str, Any]] = []
    cells: dict[tuple[str, str, str], int] = {}
    for d, m, c in zip(design.datasets, design.methods, design.configuration):
        cells[(d, m, c)] = cells.get((d, m, c), 0) + 1
    distinct_seeds = len(set(design.seeds))
    if max(cells.values()) < 2:
        why = "the study has a single seed" if distinct_seeds <= 1 else "no method × strength setting has more than one seed"
        skipped["variance_explained"] = (
            f"{why}, so the seed's share (the residual) cannot be separated from the strength's. Run at least two "
            f"seeds per setting (seeds: [0, 1] in the sweep file)."
        )
    else:
        for dataset in design.dataset_names:
            mask = design.rows_of(dataset)
            methods = [m for m, keep in zip(design.methods, mask) if keep]
            settings = [c for c, keep in zip(design.configuration, mask) if keep]
            shares = {score: variance_explained(values[mask], methods, settings) for score, values in design.scores.items()}
            # one family per dataset: every method and strength test of every score, Holm-adjusted
            family = holm([p for s in shares.values() for p in (s.p_method, s.p_strength)])
            for k, (score, s) in enumerate(shares.items()):
                s.p_method_adjusted, s.p_strength_adjusted = float(family[2 * k]), float(family[2 * k + 1])
                variance.append(variance_row(score, s, dataset if design.several_datasets else None))

    summary: list[dict[str, Any]] = []
    for dataset in design.dataset_names:
        for method in design.method_names(dataset):
            idx = [i for i in range(len(design.methods)) if design.datasets[i] == dataset and design.methods[i] == method]
            settings = sorted({design.configuration[i] for i in idx}, key=lambda c: _setting_key(design, idx, c))
            for setting in settings:
                members = np.array([i for i in idx if design.configuration[i] == setting])
                strength = float(design.strength[members[0]])
                for score, values in design.scores.items():
                    q = quartiles(values[members])
                    row = {"method": method, "setting": setting, "strength": strength, "score": score, "n_runs": q.n,
                           "median": q.median, "q25": q.q25, "q75": q.q75, "iqr": q.iqr}
                    if design.several_datasets:
                        row = {"dataset": dataset, **row}
                    summary.append(row)
    return StudyResult(design, rank, unsup, variance, summary, skipped=skipped)


def _setting_key(design: Design, idx: list[int], setting: str) -> tuple[float, str]:
    value = next(design.strength[i] for i in idx if design.configuration[i] == setting)
    return (value if not math.isnan(value) else math.inf, setting)
