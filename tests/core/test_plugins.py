"""The user's own components on the command lines: ``--import MODULE`` (a dotted name or a ``.py``
file) registers them before the config or the model is read, in ``train``, ``evaluate`` and
``visualize`` as in a sweep file's ``imports:``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from disentangle._core.plugins import import_plugins, plugin_module_name
from disentangle.errors import ConfigError

PLUGIN = '''
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_vae import BetaVAE

IMPORTED = globals().get("IMPORTED", 0) + 1


@OBJECTIVES.register("{name}")
class Mine(BetaVAE):
    """β-VAE under a name of the user's, with a parameter of its own."""

    def __init__(self, beta: float = 1.0, extra: float = 0.5, reconstruction: str = "bernoulli") -> None:
        super().__init__(beta=beta, reconstruction=reconstruction)
        self.extra = float(extra)
'''


def _plugin(folder: Path, name: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(PLUGIN.format(name=name))
    return path


def test_a_file_is_imported_once_and_registers_its_names(tmp_path):
    from disentangle.objectives import OBJECTIVES

    path = _plugin(tmp_path, "_plugin_once_objective")
    import_plugins([str(path)])
    import_plugins([str(path)])  # a second import would register the name twice
    assert "_plugin_once_objective" in OBJECTIVES
    assert sys.modules[plugin_module_name(path)].IMPORTED == 1
    assert set(OBJECTIVES.parameters("_plugin_once_objective")) >= {"beta", "extra"}


def test_a_module_that_cannot_be_found_is_one_paragraph(tmp_path):
    with pytest.raises(ConfigError, match=r"--import 'no_such_module_here' cannot be imported .*PYTHONPATH"):
        import_plugins(["no_such_module_here"])
    with pytest.raises(ConfigError, match=r"--import '.*missing.py' is not a file"):
        import_plugins([str(tmp_path / "missing.py")])
    for blank in ("", "  ", ".mine", "..lab"):  # --import "$PLUGIN" with the variable unset; relative names
        with pytest.raises(ConfigError, match=r"is not a module name. Give a dotted name importable here"):
            import_plugins([blank])


def test_an_error_inside_the_user_s_module_is_its_own(tmp_path, monkeypatch):
    """Only a module that is not found is 'cannot be imported': a TypeError, or an import of a missing
    package, raised while the user's module runs propagates as it is, with its traceback."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "_plugin_raises_type.py").write_text("def f(x):\n    return x\n\nf(1, 2)\n")
    (tmp_path / "_plugin_needs_missing.py").write_text("import no_such_dependency_here\n")
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        import_plugins(["_plugin_raises_type"])
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_here"):
        import_plugins(["_plugin_needs_missing"])
    with pytest.raises(ConfigError, match="'_plugin_not_here.sub' cannot be imported"):
        import_plugins(["_plugin_not_here.sub"])


def test_the_commands_train_resume_and_evaluate_a_run_of_the_user_s_objective(tmp_path, tiny_overrides):
    """In fresh interpreters (the registrations of one process are not another's): a run of a
    registered objective trains with --import, its resume without --import names the fix, with it
    resumes; evaluate loads it with --import."""
    from disentangle.evaluate import main as evaluate

    path = _plugin(tmp_path, "_plugin_cli_objective")
    run = tmp_path / "run"
    overrides = tiny_overrides(run, steps=4, **{"objective.name": "_plugin_cli_objective", "objective.extra": 0.25})
    # the tiny dataset is the test suite's: its conftest registers it, and so imports it here too
    conftest = str(Path(__file__).resolve().parents[1] / "conftest.py")
    train = [sys.executable, "-m", "disentangle.train", "--import", conftest]
    config = ["--config", "quickstart"]
    done = subprocess.run([*train, "--import", str(path), *config, *overrides], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    resume = [*train, "--resume", str(run), "train.steps=6", "train.progress=false"]
    refused = subprocess.run(resume, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert "Unknown objective '_plugin_cli_objective'" in refused.stderr
    assert "--import MODULE_OR_FILE.py on a command line" in refused.stderr and "Traceback" not in refused.stderr
    resumed = subprocess.run([*resume[:3], "--import", str(path), *resume[3:]], capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert evaluate([str(run), "--import", str(path), "--metrics", "mig", "--set", "mig.num_train=100",
                     "--no-progress"]) == 0
    assert (run / "metrics.json").exists()


def test_a_folder_without_init_is_refused_naming_the_module_to_give(tmp_path, monkeypatch, capsys):
    """--import FOLDER (no __init__.py) used to import an empty namespace package: none of its files
    ran, nothing was registered, and nothing said so. Given as a path or as a module name, it is one
    paragraph naming the .py file to give (or the __init__.py to add), exit 2 before any work."""
    from disentangle.objectives import OBJECTIVES
    from disentangle.train import main as train

    folder = tmp_path / "_plugin_lab"
    folder.mkdir()
    _plugin(folder, "_plugin_in_a_folder")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # the folder's name is importable, as from the current folder
    for given in (str(folder), "_plugin_lab/", "./_plugin_lab", "_plugin_lab"):
        with pytest.raises(ConfigError) as info:
            import_plugins([given])
        message = str(info.value)
        assert f"--import '{given}' is a folder without an __init__.py" in message, message
        assert "--import _plugin_lab/_plugin_in_a_folder.py" in message and "add an __init__.py" in message
        assert "_plugin_lab" not in sys.modules  # nothing left behind
    assert "_plugin_in_a_folder" not in OBJECTIVES
    (folder / "second.py").write_text("")
    with pytest.raises(ConfigError, match=r"each listed \(_plugin_lab/_plugin_in_a_folder.py, _plugin_lab/second.py\)"):
        import_plugins(["_plugin_lab"], where="The sweep file's import")
    # a command line: exit 2, one paragraph, before the config is read or anything written
    assert train(["--import", "_plugin_lab", "--config", "quickstart", f"train.out_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --import '_plugin_lab' is a folder without an __init__.py") and err.count("\n") == 1
    assert not (tmp_path / "run").exists()
    # the file it names registers the objective
    import_plugins(["_plugin_lab/_plugin_in_a_folder.py"])
    assert "_plugin_in_a_folder" in OBJECTIVES


def test_a_package_folder_given_as_a_path_names_its_package(tmp_path):
    package = tmp_path / "_plugin_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    with pytest.raises(ConfigError, match=r"is a folder .*Give the package's name, --import _plugin_pkg, with the folder "
                                          r"above it on PYTHONPATH"):
        import_plugins([str(package)])
