"""Sweeps: grids of training runs on a laptop (process pool), Ray or Slurm, kill-safe and idempotent.

A sweep file (a YAML file, parsed by :mod:`disentangle.sweep.grid` into a :class:`SweepPlan`;
the shipped ones are in ``configs/sweeps/``) names a base config, overrides, a grid, seeds and
metrics. Every run gets a stable id (:func:`~disentangle.sweep.ids.run_id`, a hash of its resolved
config) and the folder ``DIR/runs/<id>``; ``metrics.json`` written last marks it finished, so a
rerun skips finished runs, resumes partial ones from their checkpoints and starts the rest.

>>> from disentangle import sweep
>>> report = sweep.run("mini", "sweeps/mini", workers=2, threads_per_run=1)   # doctest: +SKIP
>>> sweep.status("sweeps/mini").counts                                         # doctest: +SKIP
>>> sweep.results("sweeps/mini").rows[0]["mig.mig"]                            # doctest: +SKIP

Command line: ``python -m disentangle.sweep run|status|results`` (:mod:`disentangle.sweep.__main__`).

Modules: :mod:`~disentangle.sweep.grid` (a sweep file -> the grid of runs),
:mod:`~disentangle.sweep.ids` (run ids), :mod:`~disentangle.sweep.files` (the sweep folder: its
files, :class:`~disentangle.sweep.files.RunState`, the locks, writing ``results.csv``),
:mod:`~disentangle.sweep.runner` (one run: train, evaluate, record), :mod:`~disentangle.sweep.api`
(``run``, ``status``, ``results``), :mod:`~disentangle.sweep.backends` (local, Ray, Slurm). The
columns of ``results.csv``, its writer and its reader are :mod:`disentangle.metrics.results`'s.
The analyses of a sweep's results are another package's, :mod:`disentangle.study`.
"""
from __future__ import annotations

from .. import _compat
from .api import RunStatus, SweepReport, SweepStatus, results, run, run_state, status
from .backends import BACKENDS, BackendOptions
from .files import ResultsTable, RunState, build_table  # noqa: F401  (RunState: joins __all__ once docs/api/sweep.md documents it)
from .grid import RunSpec, SweepPlan, load_sweep, shipped_sweep_names, sweep_from_dict
from .ids import EXCLUDED_KEYS, run_id
from .runner import RunOutcome, RunTask, run_one

__all__ = [
    "BACKENDS",
    "BackendOptions",
    "EXCLUDED_KEYS",
    "ResultsTable",
    "RunOutcome",
    "RunSpec",
    "RunStatus",
    "RunTask",
    "SweepPlan",
    "SweepReport",
    "SweepStatus",
    "build_table",
    "load_sweep",
    "results",
    "run",
    "run_id",
    "run_one",
    "run_state",
    "shipped_sweep_names",
    "status",
    "sweep_from_dict",
]

__getattr__ = _compat.module_getattr(__name__)  # the names of 0.1: Study, load_study, ... (warn)
