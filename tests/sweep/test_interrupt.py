"""Ctrl-C stops a local sweep promptly: the runs in progress are checkpointed and no queued run is
started; a second Ctrl-C stops at once. Driven as a terminal does it (SIGINT to the process group)
and as ``kill`` or a process manager does it (SIGINT or SIGTERM to the sweep's process alone)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGINT")


def _sweep_file(tmp_path: Path) -> Path:
    # Not materialised: a 200,000-step session would otherwise render the whole grid first (2.8 GiB,
    # half a minute on a slow CPU) before its first step.
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "interrupt",
        "base": "quickstart",
        "set": {
            "data.name": "sprites", "data.materialize": False, "model.backbone": "mlp", "model.hidden_sizes": [64], "model.latent_dim": 4,
            "train.steps": 200000, "train.batch_size": 8, "train.checkpoint_every": 100000, "train.log_every": 10,
            "train.progress": False, "train.traversals": False,
        },
        "grid": {"objective.beta": [1.0, 2.0, 3.0, 4.0]},
        "seeds": [0],
        "metrics": ["mig"],
    }))
    return path


def _start(tmp_path: Path, sigint: object = signal.SIG_DFL) -> tuple[subprocess.Popen, Path]:
    """The sweep, started with ``sigint`` as its SIGINT disposition: the default (a terminal's
    foreground), whatever the tests were started under, or SIG_IGN (started with ``&`` from a script)."""
    out = tmp_path / "sweep"
    proc = subprocess.Popen(
        [sys.executable, "-m", "disentangle.sweep", "run", str(_sweep_file(tmp_path)), "--out", str(out),
         "--workers", "1", "--threads-per-run", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the first run has trained a few logged steps
        logs = list(out.glob("runs/*/log.jsonl"))
        if logs and logs[0].read_text().count("\n") >= 3:
            return proc, out
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended early: {proc.communicate()}")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("the first run did not start training within 120 s")


def _stopped(proc: subprocess.Popen, what: str) -> str:
    """Wait up to 60 s for the sweep to exit after ``what``; its stderr. It must exit 130."""
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the sweep did not stop within 60 s of {what}")
    assert proc.returncode == 130, err
    return err


def test_one_ctrl_c_checkpoints_the_run_in_progress_and_starts_no_other(tmp_path):
    proc, out = _start(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)
    _stopped(proc, "Ctrl-C")
    runs = sorted(p for p in (out / "runs").iterdir() if p.is_dir())
    checkpointed = [r for r in runs if (r / "checkpoint.pt").exists()]
    assert len(checkpointed) == 1, [list(r.iterdir()) for r in runs]  # the interrupted run, saved
    started = [r for r in runs if (r / "log.jsonl").exists()]
    assert started == checkpointed  # no queued run was started after Ctrl-C
    step = json.loads((checkpointed[0] / "log.jsonl").read_text().splitlines()[-1])["step"]
    assert 0 < step < 200000


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_sweep_process_alone_checkpoints_the_run_its_worker_is_training(tmp_path, signum):
    """The workers never see this signal: the sweep must pass it on, or they train on (this run has
    200,000 steps and no periodic checkpoint before 100,000) until someone kills them."""
    proc, out = _start(tmp_path)
    os.kill(proc.pid, signum)
    _stopped(proc, "a signal sent to its process")
    checkpointed = [r for r in (out / "runs").iterdir() if (r / "checkpoint.pt").exists()]
    assert len(checkpointed) == 1
    step = json.loads((checkpointed[0] / "log.jsonl").read_text().splitlines()[-1])["step"]
    assert 0 < step < 200000


def test_a_sweep_started_in_a_scripts_background_still_stops_on_sigint(tmp_path):
    """A shell ignores SIGINT in what a script starts with ``&`` and Python keeps it ignored: the
    sweep takes it anyway, as its trainer does, so ``kill -INT`` checkpoints the run and stops it."""
    proc, out = _start(tmp_path, sigint=signal.SIG_IGN)
    os.kill(proc.pid, signal.SIGINT)
    _stopped(proc, "SIGINT sent to a sweep that started with it ignored")
    checkpointed = [r for r in (out / "runs").iterdir() if (r / "checkpoint.pt").exists()]
    assert len(checkpointed) == 1


def test_a_second_ctrl_c_stops_at_once(tmp_path):
    proc, out = _start(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _stopped(proc, "a second Ctrl-C")
