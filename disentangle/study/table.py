"""The study's results table: reading it and inferring what each column is.

A study table has one row per scored model. Its columns are (the sweeps' ``results.csv``, whose
columns, writer and reader are :mod:`disentangle.metrics.results`'s):

* ``run_id``, ``status``, ``seed``;
* one column per config key that varies across the study, dotted (``objective.name``,
  ``objective.beta``, ``data.name``, ``train.steps``, ...);
* one column per score, ``<metric>.<score>`` (``mig.mig``, ``dci.disentanglement``, ...).

:func:`read_table` reads a sweep folder (``DIR/results.csv``, or its run folders' ``config.yaml``
and ``metrics.json`` when there is no ``results.csv`` yet), a ``results.csv`` file, or a
disentanglement_lib aggregated results JSON (:mod:`disentangle.study.dlib`).
:func:`infer_design` then says which column is the method, which is the strength of each method,
which is the seed and which are scores. :class:`StudyTable` and the roles of the columns
(:data:`HEADLINE_SCORES`, :func:`is_score_column`, ...) are :mod:`disentangle.study.columns`'s,
imported here under their former names.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._core.registry import did_you_mean
from ..errors import ConfigError, InputError
from ..metrics.results import (
    CONFIG_NAME,
    METRICS_NAME,
    RESULTS_NAME,
    RUNS_DIR,
    is_finished_record,
    read_json,
    read_results,
    score_column,
)
from .columns import (  # noqa: F401  (BOOKKEEPING_KEYS ... is_score_column: imported by their former module too)
    BOOKKEEPING_KEYS,
    CONFIG_SECTIONS,
    FINISHED_STATUSES,
    FOREIGN_CONFIG_PREFIXES,
    HEADLINE_SCORES,
    META_COLUMNS,
    METHOD_ORDER,
    UNSUPERVISED_METRICS,
    StudyTable,
    is_bookkeeping,
    is_config_column,
    is_headline,
    is_score_column,
    is_unsupervised,
    to_float,
)
from .dlib import read_dlib_json

# --------------------------------------------------------------------------------------------- reading


def read_table(source: str | Path, *, postprocess: str = "mean_representation") -> StudyTable:
    """Read a sweep folder, a ``results.csv`` or a disentanglement_lib aggregated results JSON.

    A sweep folder ``DIR`` is read from ``DIR/results.csv``; the run folders ``DIR/runs/<run_id>/``
    fill in ``objective.name`` and ``data.name`` when the table lacks them (``results.csv`` lists
    only the config keys that vary, so a one-objective study has no method column). Without
    ``results.csv`` the table is built from the run folders' ``config.yaml`` and ``metrics.json``.
    Rows whose ``status`` is not finished are dropped (with a note). ``postprocess`` picks the
    representation of a disentanglement_lib file (see :func:`~disentangle.study.dlib.read_dlib_json`).
    """
    path = Path(source)
    if not path.exists():
        raise InputError(
            f"'{source}' does not exist. Pass a sweep folder (holding results.csv and runs/), its "
            f"results.csv, or a disentanglement_lib aggregated results JSON (dlib_aggregate_results)."
        )
    if path.is_dir():
        return _read_sweep_folder(path)
    if path.suffix.lower() == ".json":
        return read_dlib_json(path, postprocess=postprocess)
    if path.suffix.lower() == ".csv":
        table = _read_csv(path)
        runs = path.parent / RUNS_DIR
        return _fill_from_run_configs(table, runs) if runs.is_dir() else table
    raise InputError(
        f"Cannot read '{source}': expected a sweep folder, a .csv results table or a .json "
        f"disentanglement_lib aggregated results file, got a '{path.suffix or 'no'}' file extension."
    )


def _read_csv(path: Path) -> StudyTable:
    read = read_results(path)
    return _drop_unfinished(StudyTable(read.columns, read.rows, source=str(path)))


def _drop_unfinished(table: StudyTable) -> StudyTable:
    if "status" not in table.columns:
        return table
    keep = [r for r in table.rows if str(r.get("status") or "").lower() in FINISHED_STATUSES]
    dropped = len(table.rows) - len(keep)
    if dropped:
        kinds = sorted({str(r.get("status")) for r in table.rows if r not in keep})
        table.notes.append(f"{dropped} row(s) with status {', '.join(kinds)} were left out (only finished runs are analysed).")
    return StudyTable(table.columns, keep, table.source, table.notes)


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as f:
        loaded = yaml.safe_load(f)
    return loaded if isinstance(loaded, dict) else {}


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _config_cell(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))
    return str(value)


def _fill_from_run_configs(table: StudyTable, runs: Path) -> StudyTable:
    """Add ``objective.name`` / ``data.name`` from ``runs/<run_id>/config.yaml`` where the table lacks them."""
    wanted = [c for c in ("objective.name", "data.name") if c not in table.columns]
    if not wanted or "run_id" not in table.columns:
        return table
    filled: dict[str, list[Any]] = {c: [] for c in wanted}
    for row in table.rows:
        config_file = runs / str(row.get("run_id")) / CONFIG_NAME
        flat = _flatten(_load_yaml(config_file)) if config_file.is_file() else {}
        for c in wanted:
            filled[c].append(_config_cell(flat.get(c)))
    for c in wanted:
        if any(v is not None for v in filled[c]):
            table = table.with_column(c, filled[c])
            table.notes.append(f"'{c}' (constant across the study, so not in results.csv) was read from the run folders' config.yaml.")
    return table


def _read_sweep_folder(folder: Path) -> StudyTable:
    results = folder / RESULTS_NAME
    runs = folder / RUNS_DIR
    if results.is_file():
        table = _read_csv(results)
        return _fill_from_run_configs(table, runs) if runs.is_dir() else table
    if runs.is_dir():
        return _table_from_run_folders(folder, runs)
    raise InputError(
        f"'{folder}' is not a sweep folder: it has neither results.csv nor runs/. Pass the folder given as "
        f"--out to python -m disentangle.sweep run, its results.csv, or a disentanglement_lib aggregated JSON."
    )


#: config keys that differ between the runs of one setting: each run's own folder
_PER_RUN_KEYS = frozenset({"train.out_dir"})


def _table_from_run_folders(folder: Path, runs: Path) -> StudyTable:
    """Build the results table from ``runs/*/config.yaml`` + ``metrics.json`` (finished runs only)."""
    records: list[tuple[str, dict[str, Any], dict[str, float]]] = []
    grid_keys: set[str] | None = set()  # the sweep's grid keys (its records' "values"), while every record has them
    unfinished = 0
    for run in sorted(p for p in runs.iterdir() if p.is_dir()):
        config_file, metrics_file = run / CONFIG_NAME, run / METRICS_NAME
        if not (config_file.is_file() and metrics_file.is_file()):
            unfinished += 1
            continue
        metrics = read_json(metrics_file)  # None when unreadable (a torn write): not finished
        if not is_finished_record(metrics):  # scores evaluate wrote into a run still training
            unfinished += 1
            continue
        values = metrics.get("values")
        grid_keys = grid_keys | set(values) if grid_keys is not None and isinstance(values, dict) else None
        nested = metrics.get("metrics", metrics) if isinstance(metrics, dict) else {}
        scores = {
            score_column(metric, score): to_float(value)
            for metric, values in nested.items()
            if isinstance(values, dict)
            for score, value in values.items()
        }
        records.append((run.name, _flatten(_load_yaml(config_file)), scores))
    if not records:
        raise InputError(
            f"'{folder}' has no results.csv and none of its {unfinished} run folder(s) is finished (a finished run "
            f"holds config.yaml and the sweep's metrics.json). Let the sweep finish, or write the table with "
            f"python -m disentangle.sweep results {folder}."
        )
    keys = sorted({k for _, flat, _ in records for k in flat})
    # the settings: the sweep's grid keys; else the config keys that vary, less where each run was written
    candidates = sorted(grid_keys) if grid_keys is not None else [k for k in keys if k not in _PER_RUN_KEYS]
    varying = [
        k for k in candidates
        if k != "seed" and len({json.dumps(flat.get(k), sort_keys=True, default=str) for _, flat, _ in records}) > 1
    ]
    for k in ("objective.name", "data.name"):  # always useful to name the method and the dataset
        if k not in varying and k in keys:
            varying.append(k)
    score_columns = sorted({s for _, _, scores in records for s in scores})
    columns = ["run_id", "seed", *varying, *score_columns]
    rows = []
    for run_id, flat, scores in records:
        row: dict[str, Any] = {"run_id": run_id, "seed": _config_cell(flat.get("seed"))}
        row.update({k: _config_cell(flat.get(k)) for k in varying})
        row.update({s: scores.get(s, math.nan) for s in score_columns})
        rows.append(row)
    table = StudyTable(columns, rows, source=str(folder))
    table.notes.append(
        f"No results.csv: the table was built from {len(records)} finished run folder(s) (config.yaml + metrics.json)"
        + (f"; {unfinished} unfinished folder(s) left out." if unfinished else ".")
    )
    return table


# ------------------------------------------------------------------------------------------- inference


@dataclass
class Design:
    """What each row of a study is: its dataset, method, configuration within the method, seed.

    ``configuration[i]`` is the label of run i's cell within its method (e.g. ``"beta=4"``), built
    from the config keys that vary within the method; ``strength[i]`` is that key's value when the
    cell is set by one numeric key (NaN otherwise). ``strength_name[(dataset, method)]`` names the
    key(s). ``scores`` maps every analysed score column to its float values (NaN = missing).
    """

    table: StudyTable
    method_column: str
    seed_column: str
    dataset_column: str | None
    datasets: list[str]
    methods: list[str]
    configuration: list[str]
    strength: np.ndarray
    seeds: list[str]
    strength_name: dict[tuple[str, str], str]
    supervised: list[str]
    unsupervised: list[str]
    scores: dict[str, np.ndarray]
    inferred: list[str]
    notes: list[str]

    @property
    def dataset_names(self) -> list[str]:
        return _ordered(set(self.datasets))

    def method_names(self, dataset: str) -> list[str]:
        return _ordered({m for d, m in zip(self.datasets, self.methods) if d == dataset})

    def rows_of(self, dataset: str) -> np.ndarray:
        return np.array([d == dataset for d in self.datasets], dtype=bool)

    @property
    def several_datasets(self) -> bool:
        return len(set(self.datasets)) > 1


def _ordered(names: set[str]) -> list[str]:
    known = [m for m in METHOD_ORDER if m in names]
    return known + sorted(names - set(known))


def _fmt(value: Any) -> str:
    x = to_float(value)
    if math.isnan(x):
        return str(value)
    return f"{x:g}"


def infer_design(
    table: StudyTable,
    *,
    method_column: str = "objective.name",
    seed_column: str = "seed",
    dataset_column: str = "data.name",
    scores: str | list[str] = "headline",
) -> Design:
    """Infer the method, the strength within each method, the seed and the scores of a study table.

    * method: ``method_column`` (``objective.name``);
    * dataset: ``dataset_column`` (``data.name``) when present with several values; every analysis
      is then done per dataset;
    * strength: the ``objective.*`` keys that vary among a method's runs (β, γ, c_max, λ_od, ...);
      other varying config keys (e.g. ``train.steps``) are added to the cell label and reported;
    * seed: ``seed_column``;
    * scores: every ``<metric>.<score>`` column with at least one number; ``scores="headline"``
      keeps those of :data:`HEADLINE_SCORES` (the Locatello et al. scores), ``"all"`` keeps every
      one, a list names them. Scores that read no factor labels are the unsupervised ones
      (:func:`~disentangle.study.columns.is_unsupervised`: those of :data:`UNSUPERVISED_METRICS` and of
      the metrics that need images alone, such as ``elbo``).

    Raises :class:`~disentangle.DisentangleError` for an empty table, a missing method or seed
    column, or a table without scores, and :class:`~disentangle.ConfigError` for unknown score names.
    """
    where = table.source or "the results table"
    if not table.rows:
        raise InputError(f"{where} has no rows (no finished runs): nothing to analyse.")
    if method_column not in table.columns:
        raise InputError(
            f"{where} has no method column '{method_column}' (its columns: {', '.join(table.columns)}). "
            f"The study compares methods, so every run needs its objective. results.csv lists only the config "
            f"keys that vary across the study, so a study of a single objective has no such column: pass the "
            f"sweep folder instead (its run folders' config.yaml name the objective), add the column, or name "
            f"the column that holds the method with --method-column COLUMN (method_column= in Python)."
            f"{did_you_mean(method_column, table.columns)}"
        )
    missing_method = [str(r.get("run_id", i)) for i, r in enumerate(table.rows) if r.get(method_column) in (None, "")]
    if missing_method:
        raise InputError(
            f"{len(missing_method)} row(s) of {where} have no value in the method column '{method_column}' "
            f"(run(s) {', '.join(missing_method[:5])}{', ...' if len(missing_method) > 5 else ''}). Every run needs "
            f"its method; fill the column or remove those rows."
        )
    if seed_column not in table.columns:
        raise InputError(
            f"{where} has no seed column '{seed_column}' (its columns: {', '.join(table.columns)}). The analyses "
            f"separate the method and its strength from the seed; add the column or name it with --seed-column."
            f"{did_you_mean(seed_column, table.columns)}"
        )

    score_columns = [c for c in table.columns if is_score_column(c) and c != method_column]
    available = [c for c in score_columns if np.isfinite(table.numeric(c)).any()]
    empty = [c for c in score_columns if c not in available]
    if not available:
        raise InputError(
            f"{where} has no scores: no '<metric>.<score>' column holds a number (columns: "
            f"{', '.join(table.columns)}). Evaluate the runs first: 'metrics: [mig, dci, ...]' in the sweep file, "
            f"or python -m disentangle.evaluate RUN_DIR for each run and then python -m disentangle.sweep results DIR."
        )
    if scores == "headline":
        chosen = [c for c in available if is_headline(c)] or available
    elif scores == "all":
        chosen = available
    else:
        requested = [scores] if isinstance(scores, str) else list(scores)
        unknown = [s for s in requested if s not in available]
        if unknown:
            hint = did_you_mean(unknown[0], available)
            raise ConfigError(
                f"Unknown score(s) {', '.join(repr(s) for s in unknown)}: not a column of {where} with numbers.{hint} "
                f"Valid scores: {', '.join(available)}; or 'headline' (default) or 'all'."
            )
        chosen = requested
    notes = list(table.notes)
    if empty:
        notes.append(f"Score column(s) without any number were left out: {', '.join(empty)}.")

    dataset_col = dataset_column if dataset_column in table.columns else None
    datasets = [str(v) if v not in (None, "") else "(unnamed)" for v in table.values(dataset_col)] if dataset_col else ["all"] * len(table)
    if dataset_col and len(set(datasets)) == 1:
        notes_ds = f"dataset: '{datasets[0]}' (column '{dataset_col}')"
    elif dataset_col:
        notes_ds = f"datasets: {', '.join(_ordered(set(datasets)))} (column '{dataset_col}'); each is analysed separately"
    else:
        notes_ds = "dataset: not named in the table (one dataset assumed)"
    methods = [str(v) for v in table.values(method_column)]

    # config keys are dotted under a config section; other columns (run_id, dlib_model_number, ...) are
    # labels, and so are bookkeeping keys such as disentanglement_lib's model.model_num or *.random_seed
    config_columns = [
        c for c in table.columns
        if is_config_column(c) and c not in (method_column, dataset_col, seed_column) and not is_bookkeeping(c)
    ]
    configuration = [""] * len(table)
    strength = np.full(len(table), np.nan)
    strength_name: dict[tuple[str, str], str] = {}
    inferred = [f"method: column '{method_column}'", notes_ds, f"seed: column '{seed_column}'"]
    for method in _ordered(set(methods)):
        idx = [i for i, m in enumerate(methods) if m == method]
        varying = [c for c in config_columns if len({table.rows[i].get(c) for i in idx} - {None, ""}) > 1]
        objective_keys = [c for c in varying if c.startswith("objective.")]
        other_keys = [c for c in varying if c not in objective_keys]
        keys = objective_keys + other_keys
        for i in idx:
            parts = []
            for c in keys:
                short = c.removeprefix("objective.")
                parts.append(f"{short}={_fmt(table.rows[i].get(c))}")
            configuration[i] = ", ".join(parts) if parts else "(one setting)"
            if len(keys) == 1:
                strength[i] = to_float(table.rows[i].get(keys[0]))
        name = ", ".join(keys)
        for d in {datasets[i] for i in idx}:
            strength_name[(d, method)] = name
        if objective_keys:
            desc = f"strength of {method}: {', '.join(objective_keys)}"
        else:
            desc = f"strength of {method}: none (no objective parameter varies)"
        if other_keys:
            desc += f"; also varying within {method}, treated as part of its setting: {', '.join(other_keys)}"
        inferred.append(desc)
    seeds = [str(v) if v is not None else "" for v in table.values(seed_column)]
    unsupervised = [c for c in chosen if is_unsupervised(c)]
    supervised = [c for c in chosen if not is_unsupervised(c)]
    inferred.append(f"supervised scores: {', '.join(supervised) or 'none'}")
    inferred.append(f"unsupervised scores: {', '.join(unsupervised) or 'none'}")
    return Design(
        table=table,
        method_column=method_column,
        seed_column=seed_column,
        dataset_column=dataset_col,
        datasets=datasets,
        methods=methods,
        configuration=configuration,
        strength=strength,
        seeds=seeds,
        strength_name=strength_name,
        supervised=supervised,
        unsupervised=unsupervised,
        scores={c: table.numeric(c) for c in chosen},
        inferred=inferred,
        notes=notes,
    )
