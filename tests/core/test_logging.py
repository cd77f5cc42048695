"""Library messages go through :mod:`logging` (``logging.getLogger(__name__)`` under ``disentangle``);
the command lines show them on stderr, fewer with ``--quiet``, more with ``--verbose``."""
from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from disentangle.config import load_config
from disentangle.training import fit

PACKAGE = Path(__file__).resolve().parents[2] / "disentangle"
#: the command lines, whose output (a results table, the run folder) is printed
CLI_MODULES = {"train.py", "evaluate.py", "_core/cli.py", "training/bench.py"}
#: warnings where the user must act: a deprecated spelling, a damaged file that was replaced
WARNING_MODULES = {"_compat.py", "sweep/grid.py", "training/checkpoint.py", "zoo/fetching.py"}


def _calls(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else f"{getattr(func.value, 'id', '?')}.{func.attr}" \
                if isinstance(func, ast.Attribute) else ""
            found.add(name)
    return found


def test_the_library_prints_nothing_and_warns_only_where_the_user_must_act():
    printing, warning = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.endswith("__main__.py") or relative in CLI_MODULES:
            continue
        calls = _calls(path)
        if {"print", "tqdm.write"} & calls:
            printing.append(relative)
        if "warnings.warn" in calls and relative not in WARNING_MODULES:
            warning.append(relative)
    assert not printing, f"library modules that print instead of logging: {printing}"
    assert not warning, f"library modules that warn (warnings.warn) where a log message would do: {warning}"


def test_the_trainer_logs_what_it_chose(tmp_path, tiny_overrides, caplog, one_thread):
    with caplog.at_level(logging.INFO, logger="disentangle"):
        fit(load_config(None, tiny_overrides(tmp_path / "run", steps=2)))
    lines = [r for r in caplog.records if r.name == "disentangle.training.trainer" and r.levelno == logging.INFO]
    assert any(r.getMessage().startswith("execution: cpu") for r in lines)


@pytest.mark.parametrize("flag, shown", [(None, True), ("--quiet", False), ("--verbose", True)])
def test_the_command_line_shows_log_messages_unless_quiet(tmp_path, tiny_dataset_name, capsys, flag, shown, one_thread):
    """--quiet: warnings and errors only, so neither the messages nor the progress bar; the result
    line (the run folder) is the command's output and stays on stdout."""
    from disentangle.train import main

    args = ["--config", "quickstart", f"data.name={tiny_dataset_name}", "model.backbone=mlp", "train.steps=2",
            "train.batch_size=8", "train.progress=true", "train.traversals=false", "train.device=cpu",
            f"train.out_dir={tmp_path / 'run'}"]
    assert main(args + ([flag] if flag else [])) == 0
    out, err = capsys.readouterr()
    assert out == f"done: 2 steps, run folder {tmp_path / 'run'}\n"
    assert ("execution: cpu" in err) is shown
    assert ("2/2" in err) is shown  # the bar
    assert logging.getLogger("disentangle").level == {"--quiet": logging.WARNING, "--verbose": logging.DEBUG}.get(
        flag, logging.INFO)


@pytest.mark.parametrize("flags, shown", [((), True), (("--quiet",), False), (("--no-progress",), False),
                                          (("--verbose",), True)])
def test_the_commands_draw_progress_bars_unless_quiet_or_asked_not_to(flags, shown):
    import argparse

    from disentangle._core.cli import add_logging_options, show_progress

    p = argparse.ArgumentParser()
    p.add_argument("--no-progress", action="store_true")
    add_logging_options(p)
    assert show_progress(p.parse_args(list(flags))) is shown
    assert show_progress(argparse.Namespace()) is True  # a command without either option
