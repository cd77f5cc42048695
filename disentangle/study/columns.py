"""What each column of a study table is, and :class:`StudyTable`, the rows the study analyses.

A study table has one row per scored model; its columns are those of a sweep's ``results.csv``
(:mod:`disentangle.metrics.results`: ``run_id``, ``status``, ``seed``, the config keys that vary,
``dlib_model_number``, one ``<metric>.<score>`` column per score), or the same columns read from a
disentanglement_lib aggregated results JSON (:mod:`disentangle.study.dlib`, whose own config keys
are kept under :data:`FOREIGN_CONFIG_PREFIXES`). Reading a table is :mod:`disentangle.study.table`'s,
inferring the role of each column :func:`disentangle.study.table.infer_design`'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..metrics import results as results_table
from ..metrics.names import HEADLINE_SCORES, UNSUPERVISED_METRICS  # noqa: F401  (HEADLINE_SCORES: the study's name for it)
from ..metrics.results import CONFIG_SECTIONS, FINISHED_STATUS, META_COLUMNS  # noqa: F401  (the study's names for them)

#: prefixes of config columns that are not our sections (disentanglement_lib's gin keys)
FOREIGN_CONFIG_PREFIXES = ("train_config", "postprocess_config", "evaluation_config")
#: last parts of config keys that label a run (one value per run) rather than set it: never a setting
BOOKKEEPING_KEYS = ("random_seed", "model_num", "uuid", "elapsed_time")
#: the order methods are listed in (Locatello et al. 2019's order); others follow alphabetically
METHOD_ORDER = ("beta_vae", "annealed_vae", "factor_vae", "dip_vae_i", "dip_vae_ii", "beta_tcvae")
#: ``status`` values of a finished run (ours, and other tools' spellings); other rows are left out
FINISHED_STATUSES = (FINISHED_STATUS, "done", "ok", "success", "")


@dataclass
class StudyTable:
    """Rows of a study: ``rows[i][column]`` is a string (config values), a float (scores) or None."""

    columns: list[str]
    rows: list[dict[str, Any]]
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def values(self, column: str) -> list[Any]:
        return [row.get(column) for row in self.rows]

    def numeric(self, column: str) -> np.ndarray:
        """The column as float64, NaN where a cell is empty or not a number."""
        return np.array([to_float(v) for v in self.values(column)], dtype=np.float64)

    def with_column(self, name: str, values: list[Any]) -> StudyTable:
        """A copy with ``name`` set (added or replaced) to ``values`` (one per row)."""
        if len(values) != len(self.rows):
            raise ValueError(f"{len(values)} values for a table of {len(self.rows)} rows")
        rows = [{**row, name: value} for row, value in zip(self.rows, values)]
        columns = self.columns + ([name] if name not in self.columns else [])
        return StudyTable(columns, rows, self.source, list(self.notes))


def to_float(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, (int, float, np.floating, np.integer)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return math.nan


def is_score_column(column: str) -> bool:
    """``<metric>.<score>`` where ``<metric>`` is not a config section
    (:func:`disentangle.metrics.results.is_score_column`) nor disentanglement_lib's."""
    return results_table.is_score_column(column) and column.partition(".")[0] not in FOREIGN_CONFIG_PREFIXES


def is_config_column(column: str) -> bool:
    """A dotted config key: ``objective.beta``, or disentanglement_lib's ``train_config.vae.beta``."""
    head, _, tail = column.partition(".")
    return head in CONFIG_SECTIONS + FOREIGN_CONFIG_PREFIXES and bool(tail)


def is_bookkeeping(column: str) -> bool:
    """A config key such as ``model.model_num`` or ``*.random_seed`` that labels a run, never a setting."""
    return column.rpartition(".")[2] in BOOKKEEPING_KEYS


def is_unsupervised(score: str) -> bool:
    """Whether the score column ``<metric>.<score>`` reads no factor labels: a score of
    :data:`~disentangle.metrics.names.UNSUPERVISED_METRICS` (``udr``, ``elbo_decomposition``, ...) or of
    a registered metric that needs images alone (its :meth:`~disentangle.metrics.MetricSpec.data` at its
    default settings is ``"images"``: ``elbo``, ``unsupervised_scores``, a metric of ``--import`` registered
    with ``data="images"``). Every other score, an unregistered metric's too, is a supervised one."""
    from ..errors import UnknownNameError
    from ..metrics.registration import metric_spec

    metric = score.partition(".")[0]
    if metric in UNSUPERVISED_METRICS:
        return True
    try:
        return metric_spec(metric).data({}) == "images"
    except UnknownNameError:  # disentanglement_lib's and other tools' metrics that we do not register
        return False


def is_headline(score: str) -> bool:
    """Whether the score column ``<metric>.<score>`` is one of its metric's headline scores; a column
    split by settings (``mig.mig[num_train=300]``, :mod:`disentangle.metrics.results`) is judged
    without its tag."""
    metric, _, name = score.partition(".")
    name = name.split("[", 1)[0]
    return metric not in HEADLINE_SCORES or name in HEADLINE_SCORES[metric]
