"""``results.csv``: one row per finished run of a sweep folder.

Columns, in order: ``run_id``, ``status`` (``finished``), ``seed``, one column per config key that
varies across the study (dotted names, e.g. ``objective.name``, ``objective.beta``; the grid's keys
first in the study's order, then keys that vary as a consequence, e.g. a method's default
parameter), ``dlib_model_number`` when some run is a model of Locatello et al. 2019's grid
(disentanglement_lib's model number, to match published per-model numbers), then one column per
metric score, ``<metric>.<score>`` (e.g. ``mig.mig``, ``dci.disentanglement``). A key a run does
not have (``objective.beta`` of a FactorVAE) is an empty cell; lists are JSON. Rows follow the
plan's order (grid point by grid point, seeds fastest).

A column never mixes metric settings. When the finished runs hold a metric computed with different
settings (``metrics.json`` records them per metric; two studies in one folder asked ``mig:
{num_train: 300}`` and ``{num_train: 900}``, say), that metric's columns are split, one per
settings, each named with the settings that differ between them: ``mig.mig[num_train=300]`` and
``mig.mig[num_train=900]`` (no plain ``mig.mig``; a run's cell is empty in the columns of the
settings it was not scored with), and :attr:`ResultsTable.notes` says so. Settings that only change
the speed (``n_jobs``, ``representation_batch_size``) do not split a column.

The file is rewritten atomically after every finished run (by the worker that ran it) and at the
end of a sweep, under the folder's results lock, so concurrent writers never leave an older table
over a newer one.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import (
    METRICS_NAME,
    PLAN_NAME,
    RESULTS_LOCK_NAME,
    RESULTS_NAME,
    RUNS_DIR,
    FolderLock,
    atomic_write_text,
    read_json,
)
from .ids import canonical_json, flatten
from .study import varying_keys

FIXED_COLUMNS = ("run_id", "status", "seed")


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


def finished_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """The ``metrics.json`` records of the finished runs, in the plan's order."""
    out_dir = Path(out_dir)
    plan = read_json(out_dir / PLAN_NAME) or {}
    order = [r["run_id"] for r in plan.get("runs", [])]
    runs_dir = out_dir / RUNS_DIR
    present = sorted(p.name for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    records = []
    for rid in dict.fromkeys([*order, *present]):
        record = read_json(runs_dir / rid / METRICS_NAME)
        if isinstance(record, dict) and isinstance(record.get("metrics"), dict):
            records.append(record)
    return records


def build_table(out_dir: str | Path) -> ResultsTable:
    """The results table of a sweep folder (see the module docstring)."""
    out_dir = Path(out_dir)
    plan = read_json(out_dir / PLAN_NAME) or {}
    planned = {r["run_id"]: r for r in plan.get("runs", [])}
    records = finished_records(out_dir)
    plan_keys = list(plan.get("varying_keys", []))
    keys = varying_keys([r.get("config") or {} for r in records], first=plan_keys)
    keys = plan_keys + [k for k in keys if k not in plan_keys]

    metric_order = list(plan.get("metrics", []))
    metric_order += sorted({m for r in records for m in r["metrics"]} - set(metric_order))
    tags, notes = _settings_tags(records, metric_order)
    score_columns: dict[str, None] = {}
    for metric in metric_order:
        for tag in dict.fromkeys(tags[metric].values()):
            for record in records:
                if tags[metric].get(id(record)) == tag:
                    for score in (record["metrics"].get(metric) or {}):
                        score_columns[f"{metric}.{score}{tag}"] = None

    rows = []
    for record in records:
        flat = flatten(record.get("config") or {})
        number = record.get("dlib_model_number")
        if number is None:
            number = planned.get(record.get("run_id"), {}).get("dlib_model_number")
        row: dict[str, Any] = {"run_id": record.get("run_id"), "status": "finished", "seed": record.get("seed")}
        row.update({k: flat.get(k) for k in keys})
        row["dlib_model_number"] = number
        for metric, scores in record["metrics"].items():
            tag = tags[metric][id(record)]
            for score, value in (scores or {}).items():
                row[f"{metric}.{score}{tag}"] = value
        rows.append(row)
    with_number = any(r["dlib_model_number"] is not None for r in rows) or any(
        r.get("dlib_model_number") is not None for r in planned.values()
    )
    columns = [*FIXED_COLUMNS, *keys, *(["dlib_model_number"] if with_number else []), *score_columns]
    return ResultsTable(columns, rows, notes=notes)


def _settings_tags(records: list[dict[str, Any]], metrics: list[str]) -> tuple[dict[str, dict[int, str]], list[str]]:
    """``{metric: {id(record): tag}}``: ``""`` where every record scored the metric with the same
    settings, else ``[key=value,...]`` naming the settings that differ (module docstring)."""
    from .runner import recorded_settings

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

        tags[metric] = {key: _tag(identity, differing) for key, identity in identities.items()}
        shown = ", ".join(dict.fromkeys(f"{metric}.*{t}" for t in tags[metric].values()))
        notes.append(
            f"{metric} was computed with {len(groups)} different settings across the finished runs; its "
            f"columns are split by settings ({shown}), never mixed. Rerun the study whose settings you "
            f"want to score every run with them."
        )
    return tags, notes


def _tag(identity: dict[str, Any], keys: list[str]) -> str:
    """``[num_train=300]``: the values of ``keys`` in a metric's settings, as a column suffix."""
    return "[" + ",".join(f"{k}={_tag_value(identity.get(k))}" for k in keys) + "]"


def _tag_value(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def write_results(out_dir: str | Path, output: str | Path | None = None) -> ResultsTable:
    """Build the table and write it (atomically) to ``output`` (default ``DIR/results.csv``).

    Writing the sweep's own ``results.csv``, the table is built and written under the folder's
    results lock, so the last writer always wrote the newest table."""
    out_dir = Path(out_dir)
    if output is not None:
        table = build_table(out_dir)
        path = Path(output)
        atomic_write_text(path, table.to_csv())
    else:
        path = out_dir / RESULTS_NAME
        with FolderLock(out_dir / RESULTS_LOCK_NAME, "the results table"):
            table = build_table(out_dir)
            atomic_write_text(path, table.to_csv())
    table.path = path
    return table
