"""train.flush_denormal: denormal floats flushed to zero in CPU runs, set before torch's threads start."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from disentangle._core.hardware import choose_flush_denormal, denormals_flushed, flush_denormals
from disentangle.config import load_config
from disentangle.sweep.ids import run_id
from disentangle.training.runtime import choose_execution

CPU = torch.device("cpu")


@pytest.fixture
def mode_restored():
    """Every test leaves this process's threads keeping denormals, as torch starts them."""
    yield
    torch.set_flush_denormal(False)


def test_auto_flushes_on_a_cpu_only():
    assert choose_flush_denormal("auto", CPU) == (True, "auto: a CPU computes with denormal floats many times slower")
    assert choose_flush_denormal("auto", torch.device("meta")) == (False, "auto: not measured on meta")
    assert choose_flush_denormal(False, CPU) == (False, "set")
    assert choose_flush_denormal(True, torch.device("meta")) == (True, "set")


def test_the_session_applies_and_records_the_setting(mode_restored):
    torch.set_flush_denormal(False)
    assert not denormals_flushed()  # 1e-39 * 1 is 1e-39: a denormal kept
    config = load_config("quickstart", ["train.steps=10", "train.threads=1"])
    execution = choose_execution(config, CPU, session_steps=10)
    assert (execution.flush_denormal, execution.flush_denormal_reason) == (
        "on", "auto: a CPU computes with denormal floats many times slower")
    assert denormals_flushed()
    assert "denormal floats flushed to zero on" in execution.describe()
    execution = choose_execution(load_config("quickstart", ["train.flush_denormal=false", "train.threads=1"]), CPU,
                                 session_steps=10)
    assert (execution.flush_denormal, execution.flush_denormal_reason) == ("off", "set")
    assert not denormals_flushed() and "denormal floats kept (off; set)" in execution.describe()


def test_threads_started_before_keep_their_mode_and_it_is_said(mode_restored):
    """The mode is per thread, inherited at a thread's start: set after torch's threads began, only
    the calling thread flushes, and the record says so."""
    code = (
        "import torch\n"
        "from disentangle._core.hardware import flush_denormals, denormals_flushed\n"
        "torch.set_num_threads(2)\n"
        "(torch.ones(1 << 22) * 2).sum()\n"  # torch starts its second thread
        "print(flush_denormals(True, 2)); print(denormals_flushed(1 << 22))\n"
    )
    late = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    early = subprocess.run([sys.executable, "-c", code.replace("(torch.ones(1 << 22) * 2).sum()\n", "")],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    assert early[:2] == ["on", "True"]
    if torch.get_num_threads() > 1 or late[1] == "False":  # a machine where torch may start a second thread
        assert late[:2] == ["on this thread only (torch's other threads were started before; set it before any "
                            "work)", "False"]
    assert flush_denormals(False) == "off" and not denormals_flushed()


def test_turned_off_after_threads_started_flushing_it_is_said():
    """A process that trained with flushing (its threads started then, and flush) and then trains a
    run with ``flush_denormal: false``: only the calling thread keeps denormals, and the record says so."""
    code = (
        "import torch\n"
        "from disentangle._core.hardware import flush_denormals, denormals_flushed\n"
        "torch.set_num_threads(2)\n"
        "print(flush_denormals(True, 2))\n"
        "(torch.ones(1 << 22) * 2).sum()\n"  # torch starts its second thread, flushing
        "print(flush_denormals(False, 2)); print(denormals_flushed(1 << 22, anywhere=True))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "on"
    if out[2] == "True":  # a second thread started (a machine with one CPU may not start it)
        assert out[1] == "off on this thread only (torch's other threads were started while it was on, and flush)"
    else:
        assert out[1] == "off"


def test_the_command_line_sets_it_before_its_threads_start(tmp_path):
    """python -m disentangle.train on two threads: every thread flushes (not the first one only)."""
    run = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "disentangle.train", "--config", "quickstart", "train.steps=2",
                    "train.threads=2", "train.progress=false", "train.traversals=false", f"train.out_dir={run}",
                    "--quiet"], check=True, capture_output=True)
    (record,) = [json.loads(line) for line in (run / "execution.jsonl").read_text().splitlines()]
    assert record["flush_denormal"] == "on" and record["threads"] == 2


def test_it_is_not_part_of_a_run_id():
    base = load_config("quickstart", []).to_dict()
    other = load_config("quickstart", ["train.flush_denormal=false"]).to_dict()
    assert run_id(base) == run_id(other)


def test_it_may_change_on_resume(tmp_path, mode_restored):
    """An execution strategy, like channels_last: a run begun with it may go on without it (to
    compare speeds, or to keep a run begun before it existed as it was)."""
    from disentangle.config import Config
    from disentangle.training.trainer import fit

    run = tmp_path / "run"
    raw = load_config("quickstart", ["train.steps=2", "train.threads=1", "train.progress=false",
                                     "train.traversals=false", f"train.out_dir={run}"]).to_dict()
    fit(Config.from_dict(raw))
    raw["train"].update(steps=4, flush_denormal=False)
    fit(Config.from_dict(raw), resume=True)
    sessions = [json.loads(line) for line in (run / "execution.jsonl").read_text().splitlines()]
    assert [(s["step"], s["flush_denormal"]) for s in sessions] == [(0, "on"), (2, "off")]


def test_fit_gives_the_caller_its_mode_back(tmp_path, mode_restored):
    """A notebook that trains keeps its own arithmetic afterwards: fit flushes while it trains (the
    session's record says so) and restores the calling thread's mode when it returns, either way."""
    from disentangle.config import Config
    from disentangle.training.trainer import fit

    for before in (False, True):
        torch.set_flush_denormal(before)
        run = tmp_path / f"run-{before}"
        raw = load_config("quickstart", ["train.steps=2", "train.threads=1", "train.progress=false",
                                         "train.traversals=false", f"train.out_dir={run}"]).to_dict()
        fit(Config.from_dict(raw))
        (record,) = [json.loads(line) for line in (run / "execution.jsonl").read_text().splitlines()]
        assert record["flush_denormal"] == "on"
        assert denormals_flushed() is before
