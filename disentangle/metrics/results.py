"""``results.csv``: the results table of a sweep folder, its columns, its writer and its reader.

One row per finished run, built from the runs' ``metrics.json`` records. The sweep writes it
(:mod:`disentangle.sweep`, after every finished run and at the end of a sweep); the study reads it
(:mod:`disentangle.study`). This module sits below both: it imports neither of them nor the
trainer, only the standard library, :mod:`disentangle._core.atomic` and, for a metric's default
settings, the metrics registry.

Columns, in order: ``run_id``, ``status`` (``finished``), ``seed``, one column per config key that
varies across the sweep (dotted names, e.g. ``objective.name``, ``objective.beta``; the grid's keys
first in the sweep file's order, then keys that vary as a consequence, e.g. a method's default
parameter), ``dlib_model_number`` when some run is a model of Locatello et al. 2019's grid
(disentanglement_lib's model number, to match published per-model numbers), then one column per
metric score, ``<metric>.<score>`` (e.g. ``mig.mig``, ``dci.disentanglement``). A key a run does
not have (``objective.beta`` of a FactorVAE) is an empty cell; lists are JSON. Rows follow the
plan's order (grid point by grid point, seeds fastest).

A column never mixes metric settings. When the finished runs hold a metric computed with different
settings (``metrics.json`` records them per metric; two sweep files run into one folder asked ``mig:
{num_train: 300}`` and ``{num_train: 900}``, say), that metric's columns are split, one per
settings, each named with the settings that differ between them: ``mig.mig[num_train=300]`` and
``mig.mig[num_train=900]`` (no plain ``mig.mig``; a run's cell is empty in the columns of the
settings it was not scored with), and :attr:`ResultsTable.notes` says so. Settings that only change
the speed (:data:`EXECUTION_SETTINGS`: ``n_jobs``, ``representation_batch_size``) do not split a
column.

``metrics.json`` records ``metric_settings``: ``{metric: settings}`` for every metric it holds,
every setting the score depends on (:func:`settings_identity`: defaults filled in,
:data:`EXECUTION_SETTINGS` left out). Files written before settings were recorded per metric hold
the settings their sweep asked for (only those given); they are read the same way, so a metric
without an entry there (or a file without ``metric_settings``, as ``python -m disentangle.evaluate``
writes it) counts as scored with the metric's defaults (:func:`recorded_settings`).

Writing: :func:`build_table` and :func:`write_table` (atomic). A sweep rewrites its own
``results.csv`` under the folder's results lock (:func:`disentangle.sweep.files.write_results`), so
concurrent writers never leave an older table over a newer one. Reading: :func:`read_results`.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._core.atomic import atomic_write_text
from ..errors import InputError

# ---------------------------------------------------------------------- the files of a sweep folder
#: the plan of a sweep folder (``DIR/sweep.json``): its runs' order, varying keys and metrics
PLAN_NAME = "sweep.json"
#: the results table of a sweep folder (``DIR/results.csv``)
RESULTS_NAME = "results.csv"
#: the run folders of a sweep folder (``DIR/runs/<run_id>/``)
RUNS_DIR = "runs"
#: a run's scores, written last: its presence means finished (``DIR/runs/<run_id>/metrics.json``)
METRICS_NAME = "metrics.json"
#: a run's resolved config (``DIR/runs/<run_id>/config.yaml``)
CONFIG_NAME = "config.yaml"

# ---------------------------------------------------------------------- column names
#: the first columns of every results table
FIXED_COLUMNS = ("run_id", "status", "seed")
#: disentanglement_lib's model number of a run of Locatello et al.'s grid: a label, never a setting
DLIB_MODEL_NUMBER = "dlib_model_number"
#: the columns that label a run rather than configure or score it
META_COLUMNS = (*FIXED_COLUMNS, DLIB_MODEL_NUMBER)
#: the ``status`` of a row (only finished runs have one)
FINISHED_STATUS = "finished"
#: top-level config sections; a dotted column starting with one of them is a config key, not a score
CONFIG_SECTIONS = ("data", "model", "objective", "train")

#: metric settings that change how fast a score is computed, not its value: left out of the recorded
#: settings and of the comparison that decides whether a score answers a request
EXECUTION_SETTINGS: tuple[str, ...] = ("n_jobs", "representation_batch_size")


def score_column(metric: str, score: str, settings_tag: str = "") -> str:
    """``mig.mig``, or with the tag of its settings ``mig.mig[num_train=300]`` (module docstring)."""
    return f"{metric}.{score}{settings_tag}"


def is_score_column(column: str) -> bool:
    """``<metric>.<score>`` where ``<metric>`` is not a config section (nor a label column)."""
    head, dot, tail = column.partition(".")
    return bool(dot and tail) and head not in CONFIG_SECTIONS and column not in META_COLUMNS


def settings_tag(settings: Mapping[str, Any], keys: Iterable[str]) -> str:
    """``[num_train=300]``: the values of ``keys`` in a metric's settings, as a column suffix."""
    return "[" + ",".join(f"{k}={_tag_value(settings.get(k))}" for k in keys) + "]"


def _tag_value(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


# ---------------------------------------------------------------------- values of the records
def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: one text per value, in every process.

    The same text as :func:`disentangle.sweep.ids.canonical_json`, which keeps its own copy: a run
    id must be computable from ``sweep/ids.py`` alone, with the standard library."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"train": {"steps": 5}}`` -> ``{"train.steps": 5}`` (lists and empty mappings stay values)."""
    return dict(_flatten_items(config, prefix))


def _flatten_items(node: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _flatten_items(value, dotted + ".")
        else:
            yield dotted, value


def varying_keys(
    configs: list[dict[str, Any]], first: Iterable[str] = (), swept: Iterable[str] = (), ignore: Iterable[str] = ()
) -> list[str]:
    """The config columns of a table of ``configs``: dotted keys that take at least two values among
    them (a key missing from a run, such as ``objective.beta`` of a FactorVAE, is not a value), plus
    the ``swept`` keys (given two or more values by a grid); the seed (a column of its own) and the
    ``ignore`` keys are left out (a sweep ignores the keys that do not change a run id). ``first``
    keys lead, in their order; the others follow sorted."""
    values: dict[str, set[str]] = {}
    for config in configs:
        for key, value in flatten(config).items():
            values.setdefault(key, set()).add(canonical_json(value))
    varying = {k for k, v in values.items() if len(v) > 1} | {k for k in swept if k in values}
    varying -= {"seed", *ignore}
    ordered = [k for k in dict.fromkeys(first) if k in varying]
    return ordered + sorted(varying - set(ordered))


def read_json(path: str | Path) -> Any | None:
    """The JSON value in ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------- metric settings
def _json_value(value: Any) -> Any:
    return json.loads(canonical_json(value))


def settings_identity(metric: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """The settings a score of ``metric`` depends on: every keyword setting of the metric (but
    ``seed``, the run's, and :data:`EXECUTION_SETTINGS`), ``settings`` over the defaults, as JSON
    values (tuples become lists). ``{}`` and ``{"num_train": 10000}`` give the same identity for
    MIG, whose default ``num_train`` is 10000. A metric this process does not know (a plugin's,
    not imported) keeps ``settings`` as given."""
    import inspect

    from ..errors import UnknownNameError
    from . import METRICS

    try:
        function = METRICS.get(metric)
    except UnknownNameError:
        defaults: dict[str, Any] = {}
    else:
        defaults = {
            name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.kind is p.KEYWORD_ONLY and name != "seed" and name not in EXECUTION_SETTINGS
        }
    given = {k: v for k, v in (settings or {}).items() if k != "seed" and k not in EXECUTION_SETTINGS}
    return _json_value({**defaults, **given})


def recorded_settings(record: dict[str, Any], metric: str) -> dict[str, Any]:
    """The identity of the settings ``metric`` was scored with in a ``metrics.json`` record (see
    the module docstring for files without per-metric settings: the defaults)."""
    recorded = record.get("metric_settings")
    entry = recorded.get(metric) if isinstance(recorded, dict) else None
    return settings_identity(metric, entry if isinstance(entry, dict) else {})


def stale_metrics(record: Mapping[str, Any] | None, metrics: Iterable[str],
                  settings: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The ``metrics`` that a ``metrics.json`` ``record`` lacks or holds with other settings than
    ``settings`` asks for (a metric absent from ``settings``: its defaults; see
    :func:`settings_identity`): what must be computed (again) before ``record`` answers the request."""
    have = (record or {}).get("metrics")
    have = have if isinstance(have, dict) else {}
    settings = settings or {}
    return [
        m for m in metrics
        if m not in have or recorded_settings(dict(record or {}), m) != settings_identity(m, dict(settings.get(m) or {}))
    ]


# ---------------------------------------------------------------------- the table
@dataclass
class ResultsTable:
    """The results of a sweep folder: ``columns`` and ``rows`` (dicts keyed by column)."""

    columns: list[str]
    rows: list[dict[str, Any]]
    path: Path | None = None
    notes: list[str] = field(default_factory=list)  #: metrics whose columns were split by settings

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=self.columns, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({c: _cell(row.get(c)) for c in self.columns})
        return buffer.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value


# ---------------------------------------------------------------------- writing
#: the key that only a sweep's record of a run has: the sweep writes the record once the run is trained to
#: its end (or stopped by a callback) and scored. ``python -m disentangle.evaluate`` and ``zoo publish``
#: merge their scores into such a record and keep it; a record they wrote alone (scores of a run folder
#: part-way through training) lacks it.
FINISHED_KEY = "finished_at"


def is_finished_record(record: Any) -> bool:
    """Whether ``record`` (a run's ``metrics.json``) is a sweep's record of a finished run: scores, and
    :data:`FINISHED_KEY`, or, in a record written before that key existed, the sweep runner's own
    ``run_id`` and ``train_seconds`` (which ``evaluate`` and ``zoo publish`` never write). Scores
    written by hand into a run folder that is still training do not make the run finished."""
    if not (isinstance(record, dict) and isinstance(record.get("metrics"), dict)):
        return False
    return FINISHED_KEY in record or ("run_id" in record and "train_seconds" in record)


def finished_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """The ``metrics.json`` records of the finished runs (:func:`is_finished_record`) of the folder's
    sweep files, in the plan's order; without a plan (``sweep.json``), of every run folder."""
    return _finished(out_dir)[0]


def _finished(out_dir: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """``(records, left_out)``: the planned runs' finished records, and the ids of finished run
    folders that no sweep file of the folder plans (a grid point removed, or a run id that a later
    version of the library computes otherwise: the same setting and seed would count twice)."""
    out_dir = Path(out_dir)
    plan = read_json(out_dir / PLAN_NAME) or {}
    order = [r["run_id"] for r in plan.get("runs", [])]
    runs_dir = out_dir / RUNS_DIR
    present = sorted(p.name for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    records, left_out = [], []
    for rid in dict.fromkeys([*order, *present]):
        record = read_json(runs_dir / rid / METRICS_NAME)
        if not is_finished_record(record):
            continue
        if order and rid not in order:
            left_out.append(rid)
        else:
            records.append(record)
    return records, left_out


def build_table(out_dir: str | Path, *, ignore: Iterable[str] = ()) -> ResultsTable:
    """The results table of a sweep folder (see the module docstring); config keys in ``ignore``
    are never columns (:func:`varying_keys`)."""
    out_dir = Path(out_dir)
    plan = read_json(out_dir / PLAN_NAME) or {}
    planned = {r["run_id"]: r for r in plan.get("runs", [])}
    records, left_out = _finished(out_dir)
    plan_keys = list(plan.get("varying_keys", []))
    keys = varying_keys([r.get("config") or {} for r in records], first=plan_keys, ignore=ignore)
    keys = plan_keys + [k for k in keys if k not in plan_keys]

    metric_order = list(plan.get("metrics", []))
    metric_order += sorted({m for r in records for m in r["metrics"]} - set(metric_order))
    tags, notes = _settings_tags(records, metric_order)
    if left_out:
        shown = ", ".join(left_out[:3]) + (f" and {len(left_out) - 3} more" if len(left_out) > 3 else "")
        notes.append(
            f"{len(left_out)} finished run folder(s) under runs/ belong to no sweep file of this folder ({shown}): "
            f"a grid point since removed, or a run id an earlier version of the library computed otherwise. They "
            f"are left out, so a setting and seed never count twice; move them away, or add their sweep file "
            f"back to this folder, to change that."
        )
    score_columns: dict[str, None] = {}
    for metric in metric_order:
        for tag in dict.fromkeys(tags[metric].values()):
            for record in records:
                if tags[metric].get(id(record)) == tag:
                    for score in (record["metrics"].get(metric) or {}):
                        score_columns[score_column(metric, score, tag)] = None

    rows = []
    for record in records:
        flat = flatten(record.get("config") or {})
        number = record.get(DLIB_MODEL_NUMBER)
        if number is None:
            number = planned.get(record.get("run_id"), {}).get(DLIB_MODEL_NUMBER)
        row: dict[str, Any] = {"run_id": record.get("run_id"), "status": FINISHED_STATUS, "seed": record.get("seed")}
        row.update({k: flat.get(k) for k in keys})
        row[DLIB_MODEL_NUMBER] = number
        for metric, scores in record["metrics"].items():
            tag = tags[metric][id(record)]
            for score, value in (scores or {}).items():
                row[score_column(metric, score, tag)] = value
        rows.append(row)
    with_number = any(r[DLIB_MODEL_NUMBER] is not None for r in rows) or any(
        r.get(DLIB_MODEL_NUMBER) is not None for r in planned.values()
    )
    columns = [*FIXED_COLUMNS, *keys, *([DLIB_MODEL_NUMBER] if with_number else []), *score_columns]
    return ResultsTable(columns, rows, notes=notes)


def _settings_tags(records: list[dict[str, Any]], metrics: list[str]) -> tuple[dict[str, dict[int, str]], list[str]]:
    """``{metric: {id(record): tag}}``: ``""`` where every record scored the metric with the same
    settings, else ``[key=value,...]`` naming the settings that differ (module docstring)."""
    tags: dict[str, dict[int, str]] = {}
    notes: list[str] = []
    for metric in metrics:
        holders = [r for r in records if metric in r["metrics"]]
        identities = {id(r): recorded_settings(r, metric) for r in holders}
        distinct = {canonical_json(v): v for v in identities.values()}
        if len(distinct) <= 1:
            tags[metric] = {id(r): "" for r in holders}
            continue
        groups = list(distinct.values())
        differing = sorted({k for g in groups for k in g if len({canonical_json(h.get(k)) for h in groups}) > 1})

        tags[metric] = {key: settings_tag(identity, differing) for key, identity in identities.items()}
        shown = ", ".join(dict.fromkeys(f"{metric}.*{t}" for t in tags[metric].values()))
        notes.append(
            f"{metric} was computed with {len(groups)} different settings across the finished runs; its "
            f"columns are split by settings ({shown}), never mixed. Rerun the sweep file whose settings you "
            f"want to score every run with them."
        )
    return tags, notes


def write_table(table: ResultsTable, path: str | Path) -> ResultsTable:
    """Write ``table`` as CSV to ``path`` atomically; returns it with ``path`` set."""
    path = Path(path)
    atomic_write_text(path, table.to_csv())
    table.path = path
    return table


# ---------------------------------------------------------------------- reading
def read_results(path: str | Path) -> ResultsTable:
    """Read a results table: column names and cells stripped, an empty cell as None, every other
    cell the text written (no type is guessed). Raises :class:`~disentangle.errors.InputError`
    (bad input: exit status 2 from the command lines) for a file without a header row."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames:
                raise InputError(f"'{path}' is empty: a results table needs a header row and one row per run. Pass a "
                                 f"sweep's results.csv (python -m disentangle.sweep results DIR writes it).")
            columns = [c.strip() for c in reader.fieldnames]
            rows = [
                {c.strip(): (v.strip() if isinstance(v, str) and v.strip() != "" else None) for c, v in raw.items() if c}
                for raw in reader
            ]
    except UnicodeDecodeError as err:
        from .._core.checks import not_text_message

        raise InputError(not_text_message(path, err, "a results table (a sweep's results.csv)")) from None
    return ResultsTable(columns, rows, path=path)
