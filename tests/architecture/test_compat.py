"""Every import path of release 0.1 still works in 0.2, with a DeprecationWarning that names the
new path, and gives the very objects of the new one."""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from disentangle import _compat


@pytest.mark.parametrize("old, new", sorted(_compat.MOVED_MODULES.items()))
def test_an_old_module_path_imports_the_new_module(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    public = [n for n in dir(target) if not n.startswith("_")]
    assert public and all(getattr(module, n) is getattr(target, n) for n in public)


@pytest.mark.parametrize("where, name", sorted(_compat.MOVED_NAMES))
def test_a_name_that_left_its_module_is_found_at_its_new_home(where, name):
    """The same object under the old name, at the old module path and, where the module finds its
    old names itself (a module ``__getattr__``: ``disentangle.sweep.grid.Study``), at the new one;
    with a warning unless the module still imports it for its own use (the error classes a module
    raises)."""
    home, new_name = _compat.MOVED_NAMES[(where, name)]
    expected = getattr(importlib.import_module(home), new_name)
    still_there = vars(importlib.import_module(where)).get(name) is expected
    old_paths = [old for old, new in _compat.MOVED_MODULES.items() if new == where] or [where]
    if where not in old_paths and "__getattr__" in vars(importlib.import_module(where)):
        old_paths.append(where)  # a module that kept the old name through its own __getattr__
    for old in old_paths:
        module = _quietly_import(old)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(module, name) is expected
        messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
        assert still_there or any(f"{name} moved to {home}.{new_name}" in m for m in messages), messages


def _quietly_import(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def test_the_0_1_spellings_users_wrote():
    sys.modules.pop("disentangle.trainer", None)
    sys.modules.pop("disentangle.registry", None)
    with pytest.warns(DeprecationWarning):
        from disentangle.trainer import Trainer, train
    from disentangle.training import Trainer as NewTrainer
    from disentangle.training import fit

    assert Trainer is NewTrainer and train is fit
    with pytest.warns(DeprecationWarning):
        from disentangle.registry import ConfigError
    import disentangle

    assert ConfigError is disentangle.ConfigError
    sys.modules.pop("disentangle.checks", None)
    vars(disentangle).pop("checks", None)  # set on the package by an earlier import of the old path
    with pytest.warns(DeprecationWarning):
        assert disentangle.checks.positive_int("n", 3) == 3  # attribute access on the package


def test_an_unknown_name_is_still_an_attribute_error():
    module = _quietly_import("disentangle.trainer")
    with pytest.raises(AttributeError, match="disentangle.trainer.*no_such_name"):
        module.no_such_name  # noqa: B018


def test_python_dash_m_on_an_old_path_runs_the_new_command():
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-m", "disentangle.bench", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout and "disentangle.bench moved to disentangle.training.bench" in proc.stderr


def test_the_0_1_names_of_a_sweep_file():
    """ "study" was both a sweep's YAML file and the analysis package: the file's names are
    "sweep" names now; the old ones still import, warn and are the same objects."""
    from disentangle.sweep import grid

    new = {"Study": "SweepPlan", "load_study": "load_sweep", "study_from_dict": "sweep_from_dict",
           "shipped_study_names": "shipped_sweep_names"}
    with pytest.warns(DeprecationWarning) as caught:
        from disentangle.sweep import Study, load_study, shipped_study_names, study_from_dict
    messages = {str(w.message) for w in caught}
    for old, obj in (("Study", Study), ("load_study", load_study), ("study_from_dict", study_from_dict),
                     ("shipped_study_names", shipped_study_names)):
        assert obj is getattr(grid, new[old])
        assert any(f"disentangle.sweep.{old} moved to disentangle.sweep.grid.{new[old]} " in m for m in messages)
    new |= {"studies_root": "sweeps_root", "study_path": "sweep_path", "STUDY_KEYS": "SWEEP_KEYS"}
    for old, name in new.items():
        with pytest.warns(DeprecationWarning, match=f"grid\\.{old} moved to disentangle\\.sweep\\.grid\\.{name}"):
            assert getattr(grid, old) is getattr(grid, name)
    with pytest.warns(DeprecationWarning) as caught:
        from disentangle.sweep.grid import STUDY_KEYS, studies_root, study_path
    assert len({str(w.message) for w in caught}) == 3
    assert (STUDY_KEYS, studies_root, study_path) == (grid.SWEEP_KEYS, grid.sweeps_root, grid.sweep_path)
    assert "Study" not in __import__("disentangle.sweep").sweep.__all__
    with pytest.raises(ImportError):
        from disentangle.sweep import no_such_name  # noqa: F401


def test_the_renamed_keywords_and_attributes_of_a_sweep(tmp_path):
    from disentangle import sweep
    from disentangle.config import shipped_config_names

    with pytest.warns(DeprecationWarning, match="keyword study= of disentangle.sweep.api.run.. was renamed to sweep_file="):
        report = sweep.run(study="mini", out=tmp_path / "out", dry_run=True, log=None)
    assert report.to_run == 12 and not (tmp_path / "out").exists()
    with pytest.warns(DeprecationWarning, match="SweepReport.study was renamed to SweepReport.plan"):
        assert report.study is report.plan
    assert sweep.run(sweep_file="mini", out=tmp_path / "out", dry_run=True, log=None).plan.name == "mini"
    with pytest.raises(TypeError, match="sweep_file twice"):
        sweep.run("mini", study="mini", out=tmp_path / "out", dry_run=True, log=None)
    with pytest.warns(DeprecationWarning, match="include_studies= .* renamed to include_sweeps="):
        assert shipped_config_names(include_studies=True) == shipped_config_names(include_sweeps=True)
    assert "mini" not in shipped_config_names() and "sweeps/mini" in shipped_config_names(True)
