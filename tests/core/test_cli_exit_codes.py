"""One table of exit statuses for every command line (``disentangle.errors.EXIT_CODES``): 2 bad
input, 3 bad data, 4 a failed run, 130 interrupted; tried through subprocesses, as a user meets them."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from disentangle.config import load_config
from disentangle.errors import EXIT_BAD_DATA, EXIT_BAD_INPUT, EXIT_CODES
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_overrides):
    """A good run, the same run with both checkpoints corrupt, and a folder that is no run."""
    root = tmp_path_factory.mktemp("exit_codes")
    good = root / "good"
    # a dataset every subprocess knows (the tiny one of conftest is registered in this process only)
    fit(load_config(None, tiny_overrides(good, steps=4, **{"data.name": "sprites", "model.hidden_sizes": "[16]"})))
    corrupt = root / "corrupt"
    shutil.copytree(good, corrupt)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        if (corrupt / name).exists():
            (corrupt / name).write_bytes(b"not a checkpoint")
    (root / "empty").mkdir()
    return {"good": good, "corrupt": corrupt, "empty": root / "empty", "missing": root / "missing"}


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DISENTANGLE_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def test_the_table():
    assert EXIT_CODES == {"done": 0, "internal error": 1, "bad input": 2, "bad data": 3, "run failed": 4, "interrupted": 130}


CASES = [
    # (what, command, expected status, a phrase of the message)
    ("train: an unknown config key", lambda r: ["disentangle.train", "--config", "quickstart", "train.nope=1"], EXIT_BAD_INPUT, "Unknown key"),
    ("train: a folder that holds a run", lambda r: ["disentangle.train", "--config", str(r["good"] / "config.yaml")], EXIT_BAD_INPUT, "already holds a run"),
    ("train: resume a folder with no run", lambda r: ["disentangle.train", "--resume", str(r["empty"])], EXIT_BAD_INPUT, "no config.yaml"),
    ("train: resume from corrupt checkpoints", lambda r: ["disentangle.train", "--resume", str(r["corrupt"])], EXIT_BAD_DATA, "No readable checkpoint"),
    ("evaluate: a missing run", lambda r: ["disentangle.evaluate", str(r["missing"]), "-m", "mig"], EXIT_BAD_INPUT, "does not exist"),
    ("evaluate: an unknown metric", lambda r: ["disentangle.evaluate", str(r["good"]), "-m", "migg"], EXIT_BAD_INPUT, "mig"),
    ("evaluate: corrupt checkpoints", lambda r: ["disentangle.evaluate", str(r["corrupt"]), "-m", "mig"], EXIT_BAD_DATA, "No readable checkpoint"),
    ("visualize: a missing run", lambda r: ["disentangle.visualize", str(r["missing"])], EXIT_BAD_INPUT, "missing"),
    ("visualize: corrupt checkpoints", lambda r: ["disentangle.visualize", str(r["corrupt"])], EXIT_BAD_DATA, "No readable checkpoint"),
    ("zoo: an unknown model", lambda r: ["disentangle.zoo", "info", "no_such_model"], EXIT_BAD_INPUT, "no_such_model"),
    ("sweep: a missing sweep file", lambda r: ["disentangle.sweep", "run", str(r["missing"] / "s.yaml"), "--out", str(r["empty"])], EXIT_BAD_INPUT, "s.yaml"),
    ("study: a missing results folder", lambda r: ["disentangle.study", str(r["missing"]), "--out", str(r["empty"] / "rep")], EXIT_BAD_INPUT, "missing"),
]


@pytest.mark.parametrize("what, command, status, phrase", CASES, ids=[c[0] for c in CASES])
def test_every_cli_exits_with_the_status_of_the_error(runs, what, command, status, phrase):
    proc = _run(*command(runs))
    assert proc.returncode == status, (what, proc.returncode, proc.stderr[-2000:])
    assert phrase in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
