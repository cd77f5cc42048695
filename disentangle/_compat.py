"""The import paths of release 0.1 that moved, kept working for one release with a warning.

Release 0.2 put the package's layers into folders (``_core/``, ``training/``, ``models/``) and the
error classes into :mod:`disentangle.errors`. Every old path still imports, through this module
only, and emits a :class:`DeprecationWarning` that names the new path; they go away in
:data:`REMOVED_IN`.

* :data:`MOVED_MODULES`: ``import disentangle.trainer`` (and ``from disentangle.trainer import
  Trainer``, ``python -m disentangle.bench``) gives the module at its new path.
* :data:`MOVED_NAMES`: a name that left its module (``disentangle.trainer.train`` is
  :func:`disentangle.training.fit`; the error classes; the sweep file's names of 0.1, ``Study``
  and ``load_study``, now :class:`~disentangle.sweep.grid.SweepPlan` and
  :func:`~disentangle.sweep.grid.load_sweep`) is found at its new home.
* :func:`renamed_keyword` and :func:`renamed_attribute`: a keyword argument or an attribute that
  was renamed (``disentangle.sweep.run(study=...)``, ``SweepReport.study``).

Installed by ``disentangle/__init__.py`` (:func:`install`).
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Any

REMOVED_IN = "0.3"

#: old module path -> new module path
MOVED_MODULES: dict[str, str] = {
    "disentangle.registry": "disentangle._core.registry",
    "disentangle.checks": "disentangle._core.checks",
    "disentangle.atomic": "disentangle._core.atomic",
    "disentangle._discovery": "disentangle._core.discovery",
    "disentangle._cli": "disentangle._core.cli",
    "disentangle.choices": "disentangle._core.choices",
    "disentangle.distributed": "disentangle._core.distributed",
    "disentangle.trainer": "disentangle.training.trainer",
    "disentangle.optim": "disentangle.training.optim",
    "disentangle.precision": "disentangle.training.precision",
    "disentangle.runtime": "disentangle.training.runtime",
    "disentangle.checkpoint": "disentangle.training.checkpoint",
    "disentangle.resume": "disentangle.training.resume",
    "disentangle.interrupt": "disentangle.training.interrupt",
    "disentangle.bench": "disentangle.training.bench",
    "disentangle.model": "disentangle.models.vae",
    "disentangle.results_table": "disentangle.metrics.results",
    "disentangle.sweep.study": "disentangle.sweep.grid",
    "disentangle.metric_names": "disentangle.metrics.names",
}

_ERRORS = "disentangle.errors"
_GRID = "disentangle.sweep.grid"
#: (new module path, name) -> (module the name lives in now, its name there), for names that left
#: the module an old path now leads to
MOVED_NAMES: dict[tuple[str, str], tuple[str, str]] = {
    ("disentangle._core.registry", "DisentangleError"): (_ERRORS, "DisentangleError"),
    ("disentangle._core.registry", "ConfigError"): (_ERRORS, "ConfigError"),
    ("disentangle._core.registry", "UnknownNameError"): (_ERRORS, "UnknownNameError"),
    ("disentangle._core.checks", "ParameterError"): (_ERRORS, "ParameterError"),
    ("disentangle._core.distributed", "GradientMismatchError"): (_ERRORS, "GradientMismatchError"),
    ("disentangle._core.distributed", "local_sampling"): ("disentangle.training.trainer", "local_sampling"),
    ("disentangle.training.trainer", "train"): ("disentangle.training.trainer", "fit"),
    ("disentangle.training.trainer", "RunExistsError"): (_ERRORS, "RunExistsError"),
    ("disentangle.training.trainer", "NonFiniteLossError"): (_ERRORS, "NonFiniteLossError"),
    ("disentangle.training.trainer", "LR_SCHEDULES"): ("disentangle.training.optim", "LR_SCHEDULES"),
    ("disentangle.training.trainer", "OPTIMIZERS"): ("disentangle.training.optim", "OPTIMIZERS"),
    ("disentangle.training.trainer", "lr_factor"): ("disentangle.training.optim", "lr_factor"),
    ("disentangle.training.trainer", "optimizer_factory"): ("disentangle.training.optim", "optimizer_factory"),
    ("disentangle.training.trainer", "RESUMABLE_KEYS"): ("disentangle.training.resume", "RESUMABLE_KEYS"),
    ("disentangle.training.checkpoint", "CheckpointError"): (_ERRORS, "CheckpointError"),
    ("disentangle.training.checkpoint", "CheckpointNotFoundError"): (_ERRORS, "CheckpointNotFoundError"),
    ("disentangle.data.download", "DataFileNotFoundError"): (_ERRORS, "DataFileNotFoundError"),
    ("disentangle.data.download", "CorruptDataFileError"): (_ERRORS, "CorruptDataFileError"),
    ("disentangle.data.download", "OversizeDownloadError"): (_ERRORS, "OversizeDownloadError"),
    ("disentangle.data.download", "ChecksumMismatchError"): (_ERRORS, "ChecksumMismatchError"),
    ("disentangle.zoo.fetching", "ZooFileError"): (_ERRORS, "ZooFileError"),
    ("disentangle.zoo.fetching", "OversizeDownloadError"): (_ERRORS, "ZooOversizeDownloadError"),
    ("disentangle.zoo.weights", "WeightsError"): (_ERRORS, "WeightsError"),
    ("disentangle.zoo.weights", "HashMismatchError"): (_ERRORS, "HashMismatchError"),
    ("disentangle.zoo.manifest", "ManifestError"): (_ERRORS, "ManifestError"),
    ("disentangle.objectives.losses", "reparameterize"): ("disentangle.models.vae", "reparameterize"),
    # "study" meant both a sweep's YAML file and the analysis package disentangle.study: the file is
    # a "sweep file" now (configs/sweeps/), parsed into a SweepPlan
    ("disentangle.sweep", "Study"): (_GRID, "SweepPlan"),
    ("disentangle.sweep", "load_study"): (_GRID, "load_sweep"),
    ("disentangle.sweep", "study_from_dict"): (_GRID, "sweep_from_dict"),
    ("disentangle.sweep", "shipped_study_names"): (_GRID, "shipped_sweep_names"),
    (_GRID, "Study"): (_GRID, "SweepPlan"),
    (_GRID, "load_study"): (_GRID, "load_sweep"),
    (_GRID, "study_from_dict"): (_GRID, "sweep_from_dict"),
    (_GRID, "shipped_study_names"): (_GRID, "shipped_sweep_names"),
    (_GRID, "studies_root"): (_GRID, "sweeps_root"),
    (_GRID, "study_path"): (_GRID, "sweep_path"),
    (_GRID, "STUDY_KEYS"): (_GRID, "SWEEP_KEYS"),
}


def _warn(old: str, new: str, what: str = "moved", stacklevel: int = 3) -> None:
    if what == "moved":
        text = f"{old} moved to {new} in disentangle 0.2; the old path goes away in {REMOVED_IN}. Import {new}."
    else:
        text = f"{old} {what} to {new} in disentangle 0.2; the old name goes away in {REMOVED_IN}. Use {new}."
    warnings.warn(text, DeprecationWarning, stacklevel=stacklevel)


def moved_name(module: str, name: str, shown: str | None = None) -> Any:
    """The object ``name`` of ``module`` (a new path) if it moved elsewhere, with a warning that
    names it as ``shown.name`` (the path the caller used); :class:`AttributeError` otherwise (the
    module-level ``__getattr__`` of a module that lost names)."""
    try:
        home, new_name = MOVED_NAMES[(module, name)]
    except KeyError:
        raise AttributeError(f"module '{shown or module}' has no attribute '{name}'") from None
    _warn(f"{shown or module}.{name}", f"{home}.{new_name}", stacklevel=4)  # the line of the caller's code
    return getattr(importlib.import_module(home), new_name)


def module_getattr(module: str):
    """A module-level ``__getattr__`` for ``module`` that finds its moved names
    (``__getattr__ = _compat.module_getattr(__name__)``)."""
    return lambda name: moved_name(module, name)


def renamed_keyword(old: str, new: str):
    """A decorator: the function's keyword argument ``old`` (its name in 0.1) is taken as ``new``,
    with a warning (``run(study=...)`` is ``run(sweep_file=...)``); ``new`` is the first parameter."""

    def decorate(function):
        shown = f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs or args:
                    raise TypeError(f"{shown}() got {new} twice: as {old}= (its old name) and as {new}.")
                _warn(f"The keyword {old}= of {shown}()", f"{new}=", what="was renamed")
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper

    return decorate


def renamed_attribute(old: str, new: str, owner: str) -> property:
    """A read-only property ``old`` of the class ``owner`` that gives the attribute ``new``, with a
    warning (``SweepReport.study`` is ``SweepReport.plan``)."""

    def get(self: Any) -> Any:
        _warn(f"{owner}.{old}", f"{owner}.{new}", what="was renamed")
        return getattr(self, new)

    return property(get, doc=f"Deprecated: :attr:`{new}` (its name before 0.2).")


class _MovedModule(types.ModuleType):
    """What an old module path imports as: the new module's attributes, then its moved names."""

    def __init__(self, old: str, new: types.ModuleType) -> None:
        super().__init__(old, new.__doc__)
        self.__dict__["_new"] = new

    def __getattr__(self, name: str) -> Any:
        new = self.__dict__["_new"]
        try:
            return getattr(new, name)
        except AttributeError:
            return moved_name(new.__name__, name, shown=self.__name__)

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["_new"])


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module paths of :data:`MOVED_MODULES` (also for ``python -m OLD``)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if fullname not in MOVED_MODULES:
            return None
        if _called_by_runpy():  # python -m OLD: run the new module as __main__, in its own package
            _warn(fullname, MOVED_MODULES[fullname])
            spec = importlib.util.find_spec(MOVED_MODULES[fullname])
            if spec is not None:
                spec.loader = _CodeUnderNewName(spec.loader, spec.name)
            return spec
        return importlib.machinery.ModuleSpec(fullname, self, origin=MOVED_MODULES[fullname])

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = MOVED_MODULES[spec.name]
        _warn(spec.name, new)
        return _MovedModule(spec.name, importlib.import_module(new))

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _CodeUnderNewName:
    """runpy asks the loader for the code under the old name; source loaders check the name."""

    def __init__(self, loader: Any, name: str) -> None:
        self.loader, self.name = loader, name

    def get_code(self, fullname: str) -> Any:
        return self.loader.get_code(self.name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.loader, attr)


def _called_by_runpy() -> bool:
    """Whether runpy is looking up the module to run it (``python -m OLD``): its
    ``_get_module_details`` calls ``importlib.util.find_spec``, a few frames above this finder
    (not any runpy frame: ``python -m pytest`` has one at the bottom of every stack)."""
    frame = sys._getframe(1)
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == "runpy" and frame.f_code.co_name == "_get_module_details":
            return True
        frame = frame.f_back
    return False


def install() -> None:
    """Put the finder of old module paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
