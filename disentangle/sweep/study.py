"""The former name of :mod:`disentangle.sweep.grid` (a study file -> the grid of runs), kept so that
imports of ``disentangle.sweep.study`` keep working. New code imports :mod:`disentangle.sweep.grid`
(or the names :mod:`disentangle.sweep` exports)."""
from __future__ import annotations

from .grid import (  # noqa: F401  (the names of the former module)
    STUDY_KEYS,
    RunSpec,
    Study,
    apply_assignments,
    grid_points,
    import_plugins,
    load_study,
    shipped_study_names,
    studies_root,
    study_from_dict,
    study_path,
    varying_keys,
)
