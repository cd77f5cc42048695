"""A run whose process is stopped (SIGSTOP, Ctrl-Z) and continued (SIGCONT): the time stopped is
recorded as ``paused_s`` and left out of ``wall_time_s`` and ``steps_per_s``, across a resume too.

The runs that stop themselves train in a fresh interpreter (:func:`_fit_stopped`): stopping the test
process itself would stop a pytest-xdist worker, whose other threads and earlier tests are not the
trainer's concern (one such run, in a worker, once logged no pause at all)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from disentangle.config import load_config
from disentangle.training import Callback
from disentangle.training.interrupt import PauseClock
from disentangle.training.trainer import fit

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="SIGSTOP and SIGCONT are POSIX signals")

PAUSE_S = 2.0  # long against a step of the tiny run, even on a loaded machine (the margins below are half of it)


def _stop_for(seconds: float) -> None:
    """Stop this process; a helper process continues it ``seconds`` later (once it is seen stopped,
    where ``/proc`` shows it) and is waited for, so no SIGCONT of it reaches a later test."""
    pid = os.getpid()
    stopped = f"[ ! -r /proc/{pid}/stat ] || [ \"$(cut -d' ' -f3 /proc/{pid}/stat)\" = T ]"
    helper = subprocess.Popen(["sh", "-c", f"sleep {seconds}; until {stopped}; do sleep 0.05; done; kill -CONT {pid}"])
    os.kill(pid, signal.SIGSTOP)
    helper.wait()


class StopAt(Callback):
    """Stops the process at the end of training step ``step``: inside the loop's timing."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, trainer, step, terms):
        if step == self.step:
            _stop_for(PAUSE_S)


class StopAtCheckpoint(Callback):
    """Stops the process in the checkpoint of ``step``: outside the training loop's timing."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_checkpoint(self, trainer, step, path):
        if step == self.step:
            _stop_for(PAUSE_S)


_TESTS = Path(__file__).resolve().parents[1]
_CHILD = """
import sys
sys.path[:0] = [{root!r}, {tests!r}]
import conftest  # registers the tiny dataset (and trains in fp32, as the suite does)
from disentangle.config import load_config
from disentangle.training.trainer import fit
from tests.training.test_pauses import {callback}
fit(load_config(None, conftest._tiny_overrides({run!r}, steps={steps})), callbacks=[{callback}({step})])
"""


def _fit_stopped(run: Path, steps: int, callback: type[Callback], step: int) -> float:
    """Train the tiny run for ``steps`` steps in a fresh interpreter (one thread) that ``callback``
    stops at ``step``; the seconds the whole child took (its start included)."""
    code = _CHILD.format(root=str(_TESTS.parent), tests=str(_TESTS), callback=callback.__name__, run=str(run),
                         steps=steps, step=step)
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", code], env={**os.environ, "OMP_NUM_THREADS": "1"},
                           capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    assert child.returncode == 0, child.stderr
    return elapsed


def _records(run):
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def test_a_stopped_run_records_the_pause_and_leaves_it_out_of_its_wall_time_and_rate(tmp_path):
    run = tmp_path / "run"
    elapsed = _fit_stopped(run, 8, StopAt, 3)
    records = [r for r in _records(run) if "wall_time_s" in r]
    assert [r["step"] for r in records] == [2, 4, 6, 8]
    assert "paused_s" not in records[0]  # before the stop: nothing to record
    for record in records[1:]:  # from the stop on: the pause, to within the helper's reaction and a step
        assert PAUSE_S <= record["paused_s"] < 1.5 * PAUSE_S, record
    # the wall clock is the run's time less the pause
    assert records[-1]["wall_time_s"] < elapsed - PAUSE_S
    assert records[-1]["wall_time_s"] + records[-1]["paused_s"] <= elapsed
    # the interval of the stop (steps 2-4) is timed without the pause: 2 steps well under its length
    assert 2 / records[1]["steps_per_s"] < 0.5 * PAUSE_S, records[1]
    # and so is the wall clock from the first log to the last, which spans the stop (a process slow
    # to start, which the bound on elapsed above allows for, is no part of it)
    assert records[-1]["wall_time_s"] - records[0]["wall_time_s"] < PAUSE_S, records
    assert torch.load(run / "checkpoint.pt", weights_only=True)["paused_s"] == pytest.approx(records[-1]["paused_s"],
                                                                                           abs=1e-3)


def test_the_pause_is_carried_across_a_resume(tmp_path, tiny_overrides, one_thread):
    run = tmp_path / "run"
    _fit_stopped(run, 4, StopAt, 1)
    paused = torch.load(run / "checkpoint.pt", weights_only=True)["paused_s"]
    assert paused >= PAUSE_S
    fit(load_config(None, tiny_overrides(run, steps=8)), resume=True)  # not stopped again
    last = _records(run)[-1]
    assert last["step"] == 8 and last["paused_s"] == pytest.approx(paused, abs=1e-3)


def test_a_run_never_stopped_logs_no_pause(tmp_path, tiny_overrides, one_thread):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    assert all("paused_s" not in r for r in _records(run))
    assert torch.load(run / "checkpoint.pt", weights_only=True)["paused_s"] == 0.0


def test_the_clock_hands_sigcont_on_to_the_handler_before_it_and_gives_it_back():
    seen = []
    previous = signal.signal(signal.SIGCONT, lambda signum, frame: seen.append(signum))
    try:
        clock = PauseClock()
        clock.install()
        clock.mark()
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGCONT)  # a SIGCONT to a running process: counts the time since the mark
        assert 0.2 <= clock.seconds < 0.5
        assert seen == [signal.SIGCONT]
        clock.uninstall()
        handler = signal.getsignal(signal.SIGCONT)
        assert handler is not clock._on_continue and callable(handler)
        os.kill(os.getpid(), signal.SIGCONT)
        assert seen == [signal.SIGCONT] * 2 and clock.seconds < 0.5  # handed back: the clock no longer counts
    finally:
        signal.signal(signal.SIGCONT, previous)



def test_a_stop_during_a_checkpoint_is_left_out_of_the_rate_once(tmp_path):
    # the stop is both time outside the loop (the checkpoint) and a pause: taken out twice, the
    # interval's training time went negative and the rate was logged as 1e11 steps/s
    run = tmp_path / "run"
    elapsed = _fit_stopped(run, 8, StopAtCheckpoint, 4)
    records = [r for r in _records(run) if "wall_time_s" in r]
    assert [r["step"] for r in records] == [2, 4, 6, 8]
    assert "paused_s" not in records[1]  # the checkpoint of step 4 comes after its log record
    assert all(PAUSE_S <= r["paused_s"] < 1.5 * PAUSE_S for r in records[2:]), records
    rates = [r["steps_per_s"] for r in records]
    # the interval of the stop (steps 4-6) trains at the others' rate, not at an impossible one
    assert rates[2] < 10 * max(rates[:2] + rates[3:]), rates
    assert 2 / rates[2] < 0.5 * PAUSE_S, rates
    assert records[-1]["wall_time_s"] < elapsed - PAUSE_S
