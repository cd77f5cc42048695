"""``results.csv``: one row per finished run of a sweep folder.

Columns, in order: ``run_id``, ``status`` (``finished``), ``seed``, one column per config key that
varies across the study (dotted names, e.g. ``objective.name``, ``objective.beta``; the grid's keys
first in the study's order, then keys that vary as a consequence, e.g. a method's default
parameter), ``dlib_model_number`` when some run is a model of Locatello et al. 2019's grid
(disentanglement_lib's model number, to match published per-model numbers), then one column per
metric score, ``<metric>.<score>`` (e.g. ``mig.mig``, ``dci.disentanglement``). A key a run does
not have (``objective.beta`` of a FactorVAE) is an empty cell; lists are JSON. Rows follow the
plan's order (grid point by grid point, seeds fastest). The file is written atomically.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import METRICS_NAME, PLAN_NAME, RESULTS_NAME, RUNS_DIR, atomic_write_text, read_json
from .ids import flatten
from .study import varying_keys

FIXED_COLUMNS = ("run_id", "status", "seed")


@dataclass
class ResultsTable:
    """The results of a sweep folder: ``columns`` and ``rows`` (dicts keyed by column)."""

    columns: list[str]
    rows: list[dict[str, Any]]
    path: Path | None = None

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
    score_columns: dict[str, None] = {}
    for metric in metric_order:
        for record in records:
            for score in (record["metrics"].get(metric) or {}):
                score_columns[f"{metric}.{score}"] = None
    for record in records:
        for metric in sorted(set(record["metrics"]) - set(metric_order)):
            for score in record["metrics"][metric]:
                score_columns[f"{metric}.{score}"] = None

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
            for score, value in (scores or {}).items():
                row[f"{metric}.{score}"] = value
        rows.append(row)
    with_number = any(r["dlib_model_number"] is not None for r in rows) or any(
        r.get("dlib_model_number") is not None for r in planned.values()
    )
    columns = [*FIXED_COLUMNS, *keys, *(["dlib_model_number"] if with_number else []), *score_columns]
    return ResultsTable(columns, rows)


def write_results(out_dir: str | Path, output: str | Path | None = None) -> ResultsTable:
    """Build the table and write it (atomically) to ``output`` (default ``DIR/results.csv``)."""
    table = build_table(out_dir)
    path = Path(output) if output is not None else Path(out_dir) / RESULTS_NAME
    atomic_write_text(path, table.to_csv())
    table.path = path
    return table
