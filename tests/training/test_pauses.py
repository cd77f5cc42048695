"""A run whose process is stopped (SIGSTOP, Ctrl-Z) and continued (SIGCONT): the time stopped is
recorded as ``paused_s`` and left out of ``wall_time_s`` and ``steps_per_s``, across a resume too."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

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
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, trainer, step, terms):
        if step == self.step:
            _stop_for(PAUSE_S)


def _records(run):
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def test_a_stopped_run_records_the_pause_and_leaves_it_out_of_its_wall_time_and_rate(tmp_path, tiny_overrides,
                                                                                       one_thread):
    run = tmp_path / "run"
    started = time.perf_counter()
    fit(load_config(None, tiny_overrides(run, steps=8)), callbacks=[StopAt(3)])
    elapsed = time.perf_counter() - started
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
    assert torch.load(run / "checkpoint.pt", weights_only=True)["paused_s"] == pytest.approx(records[-1]["paused_s"],
                                                                                           abs=1e-3)


def test_the_pause_is_carried_across_a_resume(tmp_path, tiny_overrides, one_thread):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)), callbacks=[StopAt(1)])
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
